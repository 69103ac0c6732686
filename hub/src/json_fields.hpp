// Reading one JSON object's fields with errors that name the file and the field path
// ("build/x/metadata.json: functions[0].op: is missing"). Internal to libbackplane-hub.
#pragma once

#include <backplane/error.hpp>

#include <nlohmann/json.hpp>

#include <filesystem>
#include <string>
#include <vector>

namespace backplane::hub::detail {

// Reads fields of one JSON object, naming the file and the field path in every error.
class Fields {
 public:
  using json = nlohmann::json;

  Fields(const json& object, std::string path, const std::filesystem::path& file)
      : object_(object), path_(std::move(path)), file_(file) {
    if (!object_.is_object()) fail(path_.empty() ? "the top level" : path_, "must be an object");
  }

  [[noreturn]] void fail(const std::string& field, const std::string& what) const {
    throw InvalidArgument(file_.string() + ": " + field + ": " + what);
  }
  std::string field(const char* key) const { return path_.empty() ? key : path_ + "." + key; }

  const json* find(const char* key) const {
    auto it = object_.find(key);
    return it == object_.end() || it->is_null() ? nullptr : &*it;
  }
  const json& required(const char* key) const {
    const json* value = find(key);
    if (value == nullptr) fail(field(key), "is missing");
    return *value;
  }
  std::string string(const char* key, bool required_field = true) const {
    const json* value = required_field ? &required(key) : find(key);
    if (value == nullptr) return {};
    if (!value->is_string()) fail(field(key), "must be a string");
    const std::string s = value->get<std::string>();
    if (s.empty()) fail(field(key), "must not be empty");
    return s;
  }
  std::vector<std::string> strings(const char* key, bool required_field) const {
    const json* value = required_field ? &required(key) : find(key);
    std::vector<std::string> out;
    if (value == nullptr) return out;
    if (!value->is_array()) fail(field(key), "must be an array of strings");
    for (const json& item : *value) {
      if (!item.is_string() || item.get<std::string>().empty()) {
        fail(field(key), "must be an array of non-empty strings");
      }
      out.push_back(item.get<std::string>());
    }
    return out;
  }
  const json& array(const char* key, bool required_field) const {
    static const json empty = json::array();
    const json* value = required_field ? &required(key) : find(key);
    if (value == nullptr) return empty;
    if (!value->is_array()) fail(field(key), "must be an array");
    return *value;
  }

 private:
  const json& object_;
  std::string path_;
  const std::filesystem::path& file_;
};

}  // namespace backplane::hub::detail
