// Parsing the JSON files a model description comes from (config.json, safetensors headers,
// shard indexes, tree files): a nesting limit, optionally no duplicate keys, Python's special
// floats. Files are read with internal::read_bounded_file.
#pragma once

#include <backplane/internal/checked_json.hpp>
#include <backplane/internal/files.hpp>

#include <nlohmann/json.hpp>

#include <cstdint>
#include <filesystem>
#include <string>
#include <string_view>

namespace backplane::model_detail {

// config.json as Python's json (and so transformers) reads it: the last of two keys wins.
inline constexpr JsonLimits kLastKeyWins{64, false};
// What programs write (safetensors headers, shard indexes, tree files): a key twice is refused.
inline constexpr JsonLimits kUniqueKeys{64, true};

// The JSON document `text`; `what` names it in errors ("config.json '/x/config.json'").
// Throws InvalidArgument for invalid JSON (ill-formed UTF-8 included), nesting deeper than
// limits.max_depth, and duplicate keys when refused.
nlohmann::json parse_json(std::string_view text, const std::string& what, const JsonLimits& limits);

// Whether `value` is one of Python's special floats as parse_json leaves them:
// {"__float__": "Infinity" | "-Infinity" | "NaN"}. A float to Python, so to a config's float
// field.
bool is_special_float(const nlohmann::json& value);

// "'a.b'" with control and non-ASCII bytes escaped, for error messages.
std::string quote_name(std::string_view text);

}  // namespace backplane::model_detail
