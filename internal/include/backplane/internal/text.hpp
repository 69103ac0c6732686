// Small text helpers for messages. Internal: not installed, no compatibility promise.
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace backplane::internal {

// "a, b, c" (or joined by `separator`); "" for none.
inline std::string join(const std::vector<std::string>& items, std::string_view separator = ", ") {
  std::string out;
  for (const std::string& item : items) {
    if (!out.empty()) out += separator;
    out += item;
  }
  return out;
}

}  // namespace backplane::internal
