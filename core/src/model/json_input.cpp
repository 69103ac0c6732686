#include "json_input.hpp"

#include <backplane/checked_json.hpp>
#include <backplane/error.hpp>

#include <fstream>

namespace backplane::model_detail {

nlohmann::json parse_json(std::string_view text, const std::string& what,
                          const JsonLimits& limits) {
  return parse_checked_json(text, what, {limits.max_depth, limits.reject_duplicate_keys});
}

std::string read_small_file(const std::filesystem::path& path, uint64_t max_bytes,
                            const std::string& what) {
  std::error_code ec;
  const auto status = std::filesystem::status(path, ec);
  if (ec || !std::filesystem::exists(status)) {
    throw InvalidArgument(what + " does not exist");
  }
  if (!std::filesystem::is_regular_file(status)) {
    throw InvalidArgument(what + " is not a regular file");
  }
  const uintmax_t size = std::filesystem::file_size(path, ec);
  if (ec) throw InvalidArgument(what + " cannot be read: " + ec.message());
  if (size > max_bytes) {
    throw InvalidArgument(what + " is " + std::to_string(size) + " bytes; at most " +
                          std::to_string(max_bytes) + " are accepted");
  }
  std::ifstream in(path, std::ios::binary);
  if (!in) throw InvalidArgument(what + " cannot be opened");
  std::string text(static_cast<size_t>(size), '\0');
  in.read(text.data(), static_cast<std::streamsize>(size));
  if (static_cast<uintmax_t>(in.gcount()) != size) {
    throw InvalidArgument(what + " could not be read completely");
  }
  return text;
}

std::string quote_name(std::string_view text) {
  return quote_for_message(text);
}

}  // namespace backplane::model_detail
