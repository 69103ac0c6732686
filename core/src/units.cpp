#include <backplane/error.hpp>
#include <backplane/units.hpp>

#include <cctype>
#include <cmath>
#include <cstdlib>
#include <string>

namespace backplane {
namespace {

[[noreturn]] void invalid_size(std::string_view text) {
  throw InvalidArgument("`size` " + std::string(text) +
                        " is not in a valid format. Use an integer for bytes, or a string with an "
                        "unit (like '5.0GB').");
}

bool ends_with_ci(std::string_view text, std::string_view suffix) {
  if (text.size() < suffix.size()) return false;
  for (size_t i = 0; i < suffix.size(); ++i) {
    const char c = text[text.size() - suffix.size() + i];
    if (std::toupper(static_cast<unsigned char>(c)) != suffix[i]) return false;
  }
  return true;
}

std::string_view trim(std::string_view s) {
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.front()))) s.remove_prefix(1);
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.back()))) s.remove_suffix(1);
  return s;
}

// A decimal number as Python's float() reads it: surrounding spaces, a sign, a fraction, an
// exponent, '_' between digits; no hex, inf or nan. Doubles, so the products round as there.
bool parse_number(std::string_view text, double& out) {
  const std::string_view trimmed = trim(text);
  std::string number;
  for (size_t i = 0; i < trimmed.size(); ++i) {
    const char c = trimmed[i];
    if (c == '_') {
      const bool between_digits = i > 0 && i + 1 < trimmed.size() &&
                                  std::isdigit(static_cast<unsigned char>(trimmed[i - 1])) &&
                                  std::isdigit(static_cast<unsigned char>(trimmed[i + 1]));
      if (!between_digits) return false;
      continue;
    }
    if (!(std::isdigit(static_cast<unsigned char>(c)) || c == '.' || c == 'e' || c == 'E' ||
          c == '+' || c == '-')) {
      return false;
    }
    number += c;
  }
  if (number.empty()) return false;
  char* end = nullptr;
  out = std::strtod(number.c_str(), &end);
  return end == number.c_str() + number.size() && std::isfinite(out);
}

bool all_digits(std::string_view s) {
  if (s.empty()) return false;
  for (char c : s) {
    if (!std::isdigit(static_cast<unsigned char>(c))) return false;
  }
  return true;
}

}  // namespace

uint64_t parse_memory_size(std::string_view text) {
  const std::string_view size = trim(text);
  if (all_digits(size)) {
    if (size.size() > 19) invalid_size(text);
    return std::stoull(std::string(size));
  }
  struct Unit {
    std::string_view suffix;
    double scale;
    bool bits_when_lowercase_b;
  };
  static constexpr Unit units[] = {
      {"GIB", 1073741824.0, false},
      {"MIB", 1048576.0, false},
      {"KIB", 1024.0, false},
      {"GB", 1e9, true},
      {"MB", 1e6, true},
      {"KB", 1e3, true},
  };
  for (const Unit& unit : units) {
    if (!ends_with_ci(size, unit.suffix)) continue;
    double number = 0;
    if (!parse_number(size.substr(0, size.size() - unit.suffix.size()), number)) {
      invalid_size(text);
    }
    const double bytes = std::trunc(number * unit.scale);
    if (bytes < 0 || bytes >= 18446744073709551616.0) invalid_size(text);
    auto value = static_cast<uint64_t>(bytes);
    if (unit.bits_when_lowercase_b && size.back() == 'b') value /= 8;
    return value;
  }
  invalid_size(text);
}

}  // namespace backplane
