#include "json_input.hpp"

#include <backplane/checked_json.hpp>
#include <backplane/error.hpp>

#include <fstream>

namespace backplane::model_detail {
namespace {

// Python's json writes float("inf") and float("nan") as the bare words Infinity, -Infinity
// and NaN (config.json of transformers 4, Mamba-2's time_step_limit: [0.0, Infinity]), which
// JSON has not; transformers 5 writes and reads them as {"__float__": "Infinity"}. The bare
// words outside strings become that object, so that both parse alike.
std::string tag_special_floats(std::string_view text) {
  static constexpr std::string_view kWords[] = {"-Infinity", "Infinity", "NaN"};
  std::string out;
  out.reserve(text.size());
  bool in_string = false;
  for (size_t k = 0; k < text.size(); ++k) {
    const char c = text[k];
    if (in_string) {
      out += c;
      if (c == '\\' && k + 1 < text.size()) {
        out += text[++k];
      } else if (c == '"') {
        in_string = false;
      }
      continue;
    }
    if (c == '"') in_string = true;
    bool tagged = false;
    for (const std::string_view word : kWords) {
      if (text.compare(k, word.size(), word) == 0) {
        out += "{\"__float__\": \"" + std::string(word) + "\"}";
        k += word.size() - 1;
        tagged = true;
        break;
      }
    }
    if (!tagged) out += c;
  }
  return out;
}

}  // namespace

nlohmann::json parse_json(std::string_view text, const std::string& what,
                          const JsonLimits& limits) {
  const backplane::JsonLimits checked{limits.max_depth, limits.reject_duplicate_keys};
  if (text.find("Infinity") == std::string_view::npos &&
      text.find("NaN") == std::string_view::npos) {
    return parse_checked_json(text, what, checked);
  }
  return parse_checked_json(tag_special_floats(text), what, checked);
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
