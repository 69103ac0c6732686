// Bounded reading of the JSON files a model description comes from (config.json, safetensors
// headers, shard indexes): a size limit, a nesting limit, optionally no duplicate keys.
#pragma once

#include <nlohmann/json.hpp>

#include <cstdint>
#include <filesystem>
#include <string>
#include <string_view>

namespace backplane::model_detail {

struct JsonLimits {
  int max_depth = 64;
  bool reject_duplicate_keys = false;  // false: the last one wins, as Python's json does
};

// The JSON document `text`; `what` names it in errors ("config.json '/x/config.json'").
// Throws InvalidArgument for invalid JSON (ill-formed UTF-8 included), nesting deeper than
// limits.max_depth, and duplicate keys when refused.
nlohmann::json parse_json(std::string_view text, const std::string& what, const JsonLimits& limits);

// The whole file, at most max_bytes (InvalidArgument when larger, missing or unreadable).
std::string read_small_file(const std::filesystem::path& path, uint64_t max_bytes,
                            const std::string& what);

// "'a.b'" with control and non-ASCII bytes escaped, for error messages.
std::string quote_name(std::string_view text);

}  // namespace backplane::model_detail
