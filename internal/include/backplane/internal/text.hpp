// Small text helpers for messages. Internal: not installed, no compatibility promise.
#pragma once

#include <cstdint>
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

// "[4096, 11008]": a tensor shape as Python prints it.
inline std::string shape_text(const std::vector<int64_t>& shape) {
  std::string text = "[";
  for (size_t i = 0; i < shape.size(); ++i) {
    if (i > 0) text += ", ";
    text += std::to_string(shape[i]);
  }
  return text + "]";
}

}  // namespace backplane::internal
