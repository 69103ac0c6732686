// What every fuzz target shares: the input bytes as text or as several fields, and the rule that
// a parser refuses bad input only with its documented error. Any other exception escapes the
// target, and libFuzzer reports it as a crash (with the input that caused it).
#pragma once

#include <backplane/error.hpp>

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace backplane::fuzz {

inline std::string_view as_text(const uint8_t* data, size_t size) {
  return {reinterpret_cast<const char*>(data), size};
}

// The input split on '\n' into exactly `count` fields; a field past the last newline is absent
// (nullopt), and "\x01" alone marks an absent field too, so that seeds can leave one out in the
// middle. The last field keeps any further newlines.
inline std::vector<std::optional<std::string>> fields(std::string_view text, size_t count) {
  std::vector<std::optional<std::string>> out(count);
  for (size_t i = 0; i < count && text.data() != nullptr; ++i) {
    const size_t end = i + 1 == count ? std::string_view::npos : text.find('\n');
    const std::string_view field = text.substr(0, end);
    if (field != "\x01") out[i] = std::string(field);
    if (end == std::string_view::npos) break;
    text.remove_prefix(end + 1);
  }
  return out;
}

// Calls `parse`; its documented refusal (`Expected`, by default any backplane::Error) is fine.
template <class Expected = backplane::Error, class Parse>
void refusals_allowed(Parse&& parse) {
  try {
    parse();
  } catch (const Expected&) {
  }
}

// A broken invariant is a finding: abort so libFuzzer saves the input.
[[noreturn]] void fail(const char* what);

inline void check(bool condition, const char* what) {
  if (!condition) fail(what);
}

}  // namespace backplane::fuzz
