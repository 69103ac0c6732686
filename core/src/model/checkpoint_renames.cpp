#include "checkpoint_renames.hpp"

#include <nlohmann/json.hpp>

#include <map>
#include <memory>
#include <optional>
#include <regex>
#include <tuple>

#include "checkpoint_renames_data.hpp"

namespace backplane::model_detail {

// One renaming of transformers' WeightRenaming, matched the way transformers matches it:
// confined to a sub-model's keys when it has a scope, the first match replaced once.
struct CheckpointRenames::Rule {
  std::regex pattern;
  std::string replacement;  // "$1" stands for the pattern's first group
  std::optional<std::string> scope;
  std::string base_model_prefix;

  // The prefix of `name` the rule leaves alone, or nullopt when the rule cannot apply.
  std::optional<std::string> kept_prefix(const std::string& name) const {
    if (!scope) return std::string();
    const std::string scoped = scope->empty() ? "" : *scope + ".";
    const std::string base = base_model_prefix.empty() ? "" : base_model_prefix + ".";
    if (name.compare(0, base.size() + scoped.size(), base + scoped) == 0) return base + scoped;
    if (name.compare(0, scoped.size(), scoped) == 0) return scoped;
    return std::nullopt;
  }

  bool apply(std::string& name) const {
    const std::optional<std::string> prefix = kept_prefix(name);
    if (!prefix) return false;
    std::string key = name.substr(prefix->size());
    std::smatch match;
    if (!std::regex_search(key, match, pattern)) return false;
    std::string target = replacement;
    const auto group = target.find("$1");
    if (group != std::string::npos) target.replace(group, 2, match.size() > 1 ? match.str(1) : "");
    key.replace(static_cast<std::size_t>(match.position(0)), match.str(0).size(), target);
    name = *prefix + key;
    return true;
  }
};

namespace {

struct Table {
  std::vector<std::unique_ptr<CheckpointRenames::Rule>> rules;  // owns every rule, shared
  std::vector<const CheckpointRenames::Rule*> every_model;
  std::map<std::string, CheckpointRenames> by_type;
  CheckpointRenames unknown;  // what transformers applies to any model: the legacy renames
};

using RuleKey = std::tuple<std::string, std::string, std::optional<std::string>, std::string>;

// Parsed once: the data is this build's own (compiled in), so a failure is a build defect.
const Table& table() {
  static const Table parsed = [] {
    Table t;
    std::map<RuleKey, const CheckpointRenames::Rule*> seen;
    const auto rules_of = [&](const nlohmann::json& list) {
      std::vector<const CheckpointRenames::Rule*> out;
      for (const auto& rule : list) {
        RuleKey key{rule.at(0).get<std::string>(), rule.at(1).get<std::string>(), std::nullopt, ""};
        if (rule.size() == 4) {
          std::get<2>(key) = rule.at(2).get<std::string>();
          std::get<3>(key) = rule.at(3).get<std::string>();
        }
        auto it = seen.find(key);
        if (it == seen.end()) {
          t.rules.push_back(std::make_unique<CheckpointRenames::Rule>(
              CheckpointRenames::Rule{std::regex(std::get<0>(key), std::regex::ECMAScript),
                                      std::get<1>(key), std::get<2>(key), std::get<3>(key)}));
          it = seen.emplace(key, t.rules.back().get()).first;
        }
        out.push_back(it->second);
      }
      return out;
    };
    const nlohmann::json data = nlohmann::json::parse(kCheckpointRenamesJson);
    t.every_model = rules_of(data.at("every_model"));
    t.unknown.rules = t.every_model;
    for (const auto& [model_type, entry] : data.at("models").items()) {
      CheckpointRenames renames;
      renames.known = true;
      renames.fuses = entry.at("fuses").get<bool>();
      // transformers appends the legacy renames after the model's own.
      renames.rules = rules_of(entry.at("renames"));
      renames.rules.insert(renames.rules.end(), t.every_model.begin(), t.every_model.end());
      t.by_type.emplace(model_type, std::move(renames));
    }
    return t;
  }();
  return parsed;
}

}  // namespace

std::string CheckpointRenames::apply(const std::string& name, bool& renamed) const {
  std::string out = name;
  for (const Rule* rule : rules) renamed = rule->apply(out) || renamed;
  return out;
}

const CheckpointRenames& checkpoint_renames(const std::string& model_type) {
  const Table& t = table();
  const auto it = t.by_type.find(model_type);
  return it == t.by_type.end() ? t.unknown : it->second;
}

}  // namespace backplane::model_detail
