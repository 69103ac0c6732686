#include "json_input.hpp"

#include <backplane/error.hpp>

#include <cstdio>
#include <fstream>
#include <set>
#include <vector>

namespace backplane::model_detail {
namespace {

using Json = nlohmann::json;

// A SAX pass before the DOM is built, so that nesting and duplicates are refused before any
// deep structure exists.
class Checker : public nlohmann::json_sax<Json> {
 public:
  Checker(const std::string& what, const JsonLimits& limits) : what_(what), limits_(limits) {}

  bool null() override { return true; }
  bool boolean(bool) override { return true; }
  bool number_integer(number_integer_t) override { return true; }
  bool number_unsigned(number_unsigned_t) override { return true; }
  bool number_float(number_float_t, const string_t&) override { return true; }
  bool string(string_t&) override { return true; }
  bool binary(binary_t&) override { return true; }
  bool start_object(std::size_t) override {
    enter();
    keys_.emplace_back();
    return true;
  }
  bool key(string_t& name) override {
    if (limits_.reject_duplicate_keys && !keys_.back().insert(name).second) {
      throw InvalidArgument(what_ + " has the key " + quote_name(name) +
                            " twice in one object; keys must be unique");
    }
    return true;
  }
  bool end_object() override {
    keys_.pop_back();
    --depth_;
    return true;
  }
  bool start_array(std::size_t) override {
    enter();
    return true;
  }
  bool end_array() override {
    --depth_;
    return true;
  }
  bool parse_error(std::size_t, const std::string&, const nlohmann::detail::exception& e) override {
    throw InvalidArgument(what_ + " is not valid JSON: " + e.what());
  }

 private:
  void enter() {
    if (++depth_ > limits_.max_depth) {
      throw InvalidArgument(what_ + " nests objects and arrays deeper than " +
                            std::to_string(limits_.max_depth) + " levels");
    }
  }

  const std::string& what_;
  const JsonLimits& limits_;
  int depth_ = 0;
  std::vector<std::set<std::string>> keys_;
};

}  // namespace

Json parse_json(std::string_view text, const std::string& what, const JsonLimits& limits) {
  Checker checker(what, limits);
  Json::sax_parse(text.begin(), text.end(), &checker);
  try {
    return Json::parse(text.begin(), text.end());
  } catch (const Json::exception& e) {
    throw InvalidArgument(what + " is not valid JSON: " + e.what());
  }
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
  std::string out = "'";
  for (const char c : text) {
    const auto byte = static_cast<unsigned char>(c);
    if (byte < 0x20 || byte >= 0x7f || c == '\'' || c == '\\') {
      char escaped[8];
      std::snprintf(escaped, sizeof escaped, "\\x%02x", byte);
      out += escaped;
    } else {
      out += c;
    }
  }
  return out + "'";
}

}  // namespace backplane::model_detail
