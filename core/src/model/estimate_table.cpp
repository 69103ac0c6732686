// The text of `accelerate estimate-memory` (accelerate 1.15's convert_bytes and
// create_ascii_table), for estimate_memory's numbers: the same characters, widths and centring.
#include <backplane/model/memory_estimate.hpp>

#include <cmath>
#include <cstdio>
#include <string>
#include <vector>

namespace backplane {
namespace {

// Python's len(): code points of UTF-8 text.
size_t py_len(const std::string& s) {
  size_t n = 0;
  for (unsigned char c : s) n += (c & 0xC0) != 0x80;
  return n;
}

std::string repeat(const std::string& unit, size_t n) {
  std::string out;
  for (size_t i = 0; i < n; ++i) out += unit;
  return out;
}

// str.center: the odd space goes left only when the margin and the width are both odd.
std::string center(const std::string& s, size_t width) {
  const size_t len = py_len(s);
  if (width <= len) return s;
  const size_t marg = width - len;
  const size_t left = marg / 2 + (marg & width & 1);
  return std::string(left, ' ') + s + std::string(marg - left, ' ');
}

// "%Ns": right-justified to N code points.
std::string rjust(const std::string& s, size_t width) {
  const size_t len = py_len(s);
  return len >= width ? s : std::string(width - len, ' ') + s;
}

// repr(round(x, 2)) for 0 <= x < 1024: the correctly rounded two decimals, trailing zeros
// dropped down to one ("256.0", "95.37", "1.5").
std::string round2_repr(double x) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.2f", x);
  std::string s = buf;
  while (s.size() > 1 && s.back() == '0' && s[s.size() - 2] != '.') s.pop_back();
  return s;
}

}  // namespace

std::string format_estimate_bytes(double size, bool integral) {
  static const char* const units[] = {"bytes", "KB", "MB", "GB", "TB"};
  for (const char* unit : units) {
    if (size < 1024.0) {
      if (integral) return std::to_string(static_cast<uint64_t>(size)) + " " + unit;
      return round2_repr(size) + " " + unit;
    }
    size /= 1024.0;
    integral = false;
  }
  return round2_repr(size) + " PB";
}

std::string estimate_table(const MemoryEstimate& estimate, std::string_view model_name) {
  const std::vector<std::string> headers = {"dtype", "Largest Layer", "Total Size",
                                            "Training using Adam"};
  // The float32 row keeps Python's ints (when the sizes are whole); divided rows are floats.
  const bool whole = std::floor(estimate.total_bytes) == estimate.total_bytes &&
                     std::floor(estimate.largest_layer_bytes) == estimate.largest_layer_bytes;
  std::vector<std::vector<std::string>> rows;
  for (const EstimateRow& r : estimate.rows) {
    const bool integral = whole && r.dtype == EstimateDType::kFloat32;
    rows.push_back({to_string(r.dtype), format_estimate_bytes(r.largest_layer, integral),
                    format_estimate_bytes(r.total, integral),
                    r.training_adam ? format_estimate_bytes(*r.training_adam, whole) : "N/A"});
  }
  const std::string title = "Memory Usage for loading `" + std::string(model_name) + "`";
  std::vector<size_t> widths;
  for (size_t i = 0; i < headers.size(); ++i) {
    size_t w = py_len(headers[i]);
    for (const auto& row : rows) w = std::max(w, py_len(row[i]));
    widths.push_back(w);
  }
  const std::vector<size_t> formats = widths;  // "%Ns" fixed before the widths grow
  size_t diff = 0;
  const std::string line = "\u2500";
  auto make_row = [&](const std::string& left, const std::string& middle,
                      const std::string& right) {
    std::string out = left;
    for (size_t i = 0; i < widths.size(); ++i) out += (i ? middle : "") + repeat(line, widths[i]);
    return out + repeat(line, diff) + right;
  };
  auto pattern = [&](const std::vector<std::string>& cells) {
    std::string out = "\u2502";
    for (size_t i = 0; i < cells.size(); ++i) {
      out += (i ? "\u2502" : "") + rjust(center(cells[i], widths[i]), formats[i]);
    }
    return out + "\u2502";
  };
  size_t sum = 0;
  for (size_t w : widths) sum += w;
  std::string separator = make_row("\u251c", "\u253c", "\u2524");
  if (py_len(title) > sum) {
    const size_t a = py_len(title), b = py_len(separator);
    diff = a > b ? a - b : b - a;
    widths.back() += diff;
  }
  separator = make_row("\u251c", "\u253c", "\u2524");
  std::string table = make_row("\u250c", line, "\u2510") + "\n";
  table += "\u2502" + center(title, py_len(separator) - 2) + "\u2502\n";
  table += make_row("\u251c", "\u252c", "\u2524") + "\n";
  widths.back() += diff;
  table += pattern(headers) + "\n" + separator + "\n";
  for (const auto& row : rows) table += pattern(row) + "\n";
  table += "\u2514";
  for (size_t i = 0; i < widths.size(); ++i) table += (i ? "\u2534" : "") + repeat(line, widths[i]);
  return table + "\u2518";
}

}  // namespace backplane
