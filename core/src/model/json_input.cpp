#include "json_input.hpp"

#include <backplane/error.hpp>
#include <backplane/internal/checked_json.hpp>

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
  if (text.find("Infinity") == std::string_view::npos &&
      text.find("NaN") == std::string_view::npos) {
    return parse_checked_json(text, what, limits);
  }
  return parse_checked_json(tag_special_floats(text), what, limits);
}

bool is_special_float(const nlohmann::json& value) {
  if (!value.is_object() || value.size() != 1) return false;
  const auto it = value.find("__float__");
  return it != value.end() && it->is_string() &&
         (*it == "Infinity" || *it == "-Infinity" || *it == "NaN");
}

std::string quote_name(std::string_view text) {
  return quote_for_message(text);
}

}  // namespace backplane::model_detail
