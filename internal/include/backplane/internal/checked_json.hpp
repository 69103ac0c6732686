// JSON from files a user did not write (plugin manifests, kernel package metadata, lock files,
// topologies, model headers): nesting and duplicate keys are checked in a streaming pass before
// any document is built, so a hostile file is refused by name instead of exhausting the stack
// or silently keeping the last of two values (nlohmann's default). Internal (internal/): not
// installed, no compatibility promise.
#pragma once

#include <backplane/error.hpp>

#include <nlohmann/json.hpp>

#include <cstdio>
#include <set>
#include <string>
#include <string_view>
#include <vector>

namespace backplane {

struct JsonLimits {
  int max_depth = 64;                 // objects and arrays inside each other
  bool reject_duplicate_keys = true;  // false: the last one wins, as Python's json does
};

// The JSON document `text`; `what` names it in errors (empty: the caller names it, and the
// messages start at "not valid JSON", "nests" or "has"). Throws InvalidArgument:
//   "<what> is not valid JSON: [json.exception.parse_error.101] ..." (ill-formed UTF-8 included)
//   "<what> nests objects and arrays deeper than 64 levels"
//   "<what> has the key 'name' twice in one object; keys must be unique"
// Header-only, so that plugins and the hub library use it without linking the core's internals.
// Two uses: {64, true} for files programs write (manifests, headers, locks), {64, false} for
// config.json, which Python's json reads with the last of two keys winning.
inline nlohmann::json parse_checked_json(std::string_view text, const std::string& what,
                                         const JsonLimits& limits = {});

// `text` quoted for an error message, with bytes outside printable ASCII written as \xNN.
inline std::string quote_for_message(std::string_view text);

namespace checked_json_detail {

using Json = nlohmann::json;

// Refuses nesting and duplicate keys as they stream past; builds nothing.
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
      throw InvalidArgument(subject() + "has the key " + quote_for_message(name) +
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
    throw InvalidArgument(subject() + (what_.empty() ? "" : "is ") + "not valid JSON: " + e.what());
  }

 private:
  std::string subject() const { return what_.empty() ? "" : what_ + " "; }

  void enter() {
    if (++depth_ > limits_.max_depth) {
      throw InvalidArgument(subject() + "nests objects and arrays deeper than " +
                            std::to_string(limits_.max_depth) + " levels");
    }
  }

  const std::string& what_;
  const JsonLimits& limits_;
  int depth_ = 0;
  std::vector<std::set<std::string>> keys_;
};

}  // namespace checked_json_detail

inline nlohmann::json parse_checked_json(std::string_view text, const std::string& what,
                                         const JsonLimits& limits) {
  checked_json_detail::Checker checker(what, limits);
  nlohmann::json::sax_parse(text.begin(), text.end(), &checker);
  try {
    return nlohmann::json::parse(text.begin(), text.end());
  } catch (const nlohmann::json::exception& e) {
    throw InvalidArgument((what.empty() ? "" : what + " is ") + "not valid JSON: " + e.what());
  }
}

inline std::string quote_for_message(std::string_view text) {
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

}  // namespace backplane
