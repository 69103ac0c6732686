#include "architecture_descriptor.hpp"

#include <backplane/error.hpp>

#include <algorithm>
#include <cctype>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <unordered_map>

#include "activation.hpp"
#include "architecture_descriptors_data.hpp"  // generated: kArchitectureDescriptors
#include "config_loader.hpp"
#include "config_rules_data.hpp"  // generated: kConfigRulesJson
#include "descriptor_expression.hpp"
#include "json_input.hpp"
#include "rope.hpp"

namespace backplane::model_detail {

const nlohmann::json& config_rules() {
  static const nlohmann::json rules = nlohmann::json::parse(kConfigRulesJson);
  return rules;
}

namespace {

using Json = nlohmann::json;

std::vector<std::string> names_in(const std::string& text);

constexpr int64_t kMaxRepeat = int64_t{1} << 16;     // layers or experts of one container
constexpr size_t kMaxModules = size_t{1} << 20;      // of one model
constexpr int64_t kMaxDimension = int64_t{1} << 40;  // one tensor axis

std::string quoted(const std::string& name) {
  return "`" + name + "`";
}

// What a descriptor says a field's type is ("int", "bool", ...), as config.json must give it.
void check_kind(const std::string& what, const std::string& architecture, const std::string& key,
                const Json& spec, const Json& value) {
  if (value.is_null()) {
    if (spec.value("nullable", false) || spec.value("kind", "any") == "any") return;
    throw InvalidArgument(what + ": " + quoted(key) + " is null; " + architecture +
                          "'s config types it " + spec.value("kind", "any") +
                          " (give a value or leave the key out)");
  }
  const std::string kind = spec.value("kind", "any");
  bool ok = true;
  if (kind == "int") {
    ok = value.is_number_integer();
  } else if (kind == "bool") {
    ok = value.is_boolean();
  } else if (kind == "float") {
    ok = value.is_number() || model_detail::is_special_float(value);
  } else if (kind == "str") {
    ok = value.is_string();
  } else if (kind == "list") {
    ok = value.is_array();
  } else if (kind == "dict") {
    ok = value.is_object();
  }
  if (!ok) {
    static const std::map<std::string, std::string> kNames = {
        {"int", "an integer"}, {"bool", "true or false"}, {"float", "a number"},
        {"str", "a string"},   {"list", "a list"},        {"dict", "an object"}};
    throw InvalidArgument(what + ": " + quoted(key) + " must be " + kNames.at(kind) + " (" +
                          architecture + "'s config types it " + kind + "), got " + value.dump());
  }
}

// A descriptor's tree read once into structs: evaluation walks these, not JSON objects (whose
// key lookups cost more than the expressions). Expressions stay JSON strings of the cached
// descriptor; their addresses key the parsed forms.
// One expression of the tree: its text in the cached descriptor, and a number of its own under
// which an evaluation keeps its value when it does not read the layer index `i`.
struct Slot {
  const Json* text = nullptr;  // none: no condition
  size_t id = 0;
  bool reads_layer = false;
};

struct CompiledTensor {
  std::string name;
  std::vector<Slot> dims;
  Slot condition;
  std::optional<DType> dtype;  // none: the model's
  bool buffer = false;
  bool persistent = true;
};

struct CompiledNode {
  std::string name;
  std::string class_name;
  Slot activation;  // the activation name whose ACT2CLS class this is, instead of class_name
  Slot condition;
  std::vector<CompiledTensor> tensors;
  Slot repeat;  // the count of a repeat (decoder layers), `repeated` each
  std::unique_ptr<CompiledNode> repeated;
  std::vector<std::pair<Slot, CompiledNode>> alternatives;  // condition (or none), node
  std::vector<CompiledNode> children;
  bool reads_layer = false;  // some expression of this subtree reads `i` or `j`
};

// Whether anything under `node` reads a layer index: a repeat of a subtree that does not
// is expanded once and copied (a decoder layer the same at every depth).
bool reads_layer(const CompiledNode& node) {
  bool reads = node.condition.reads_layer || node.activation.reads_layer || node.repeat.reads_layer;
  for (const CompiledTensor& tensor : node.tensors) {
    reads = reads || tensor.condition.reads_layer;
    for (const Slot& dim : tensor.dims) reads = reads || dim.reads_layer;
  }
  if (node.repeated) reads = reads || node.repeated->reads_layer;
  for (const auto& [condition, alternative] : node.alternatives) {
    reads = reads || condition.reads_layer || alternative.reads_layer;
  }
  for (const CompiledNode& child : node.children) reads = reads || child.reads_layer;
  return reads;
}

const Json* condition_of(const Json& node) {
  const auto it = node.find("if");
  return it == node.end() ? nullptr : &*it;
}

Slot slot_of(const Json* text, size_t& slots) {
  if (text == nullptr) return {};
  const std::vector<std::string> names = names_in(text->get<std::string>());
  const bool reads_layer = std::find(names.begin(), names.end(), "i") != names.end() ||
                           std::find(names.begin(), names.end(), "j") != names.end();
  return {text, slots++, reads_layer};
}

CompiledNode compile_node(const Json& node, size_t& slots);

CompiledNode compile(const Json& node, size_t& slots) {
  CompiledNode out = compile_node(node, slots);
  out.reads_layer = reads_layer(out);
  return out;
}

CompiledNode compile_node(const Json& node, size_t& slots) {
  CompiledNode out;
  out.name = node.value("name", "");
  out.condition = slot_of(condition_of(node), slots);
  if (const auto alternatives = node.find("alternatives"); alternatives != node.end()) {
    for (const Json& alternative : *alternatives) {
      out.alternatives.emplace_back(slot_of(condition_of(alternative), slots),
                                    compile(alternative.at("node"), slots));
    }
    return out;
  }
  if (const auto activation = node.find("activation"); activation != node.end()) {
    out.activation = slot_of(&*activation, slots);
    return out;
  }
  out.class_name = node.at("class").get<std::string>();
  if (const auto tensors = node.find("tensors"); tensors != node.end()) {
    for (const Json& tensor : *tensors) {
      CompiledTensor t;
      t.name = tensor.at("name").get<std::string>();
      for (const Json& dim : tensor.at("shape")) t.dims.push_back(slot_of(&dim, slots));
      t.condition = slot_of(condition_of(tensor), slots);
      const std::string dtype = tensor.at("dtype").get<std::string>();
      if (dtype != "model") t.dtype = parse_dtype(dtype);
      const std::string kind = tensor.at("kind").get<std::string>();
      t.buffer = kind != "p";
      t.persistent = kind != "bn";
      out.tensors.push_back(std::move(t));
    }
  }
  if (const auto repeat = node.find("repeat"); repeat != node.end()) {
    out.repeat = slot_of(&*repeat, slots);
    out.repeated = std::make_unique<CompiledNode>(compile(node.at("node"), slots));
    return out;
  }
  if (const auto children = node.find("children"); children != node.end()) {
    for (const Json& child : *children) out.children.push_back(compile(child, slots));
  }
  return out;
}

// One of the config class's validators (`checks`): a condition under which the config is
// refused and transformers' message, its `{expression}` holes parsed; or one the C++ side
// implements (`standard`: PreTrainedConfig.validate_layer_type, validate_rope).
struct CompiledCheck {
  std::string by;        // "LlamaConfig.validate_architecture"
  std::string prefix;    // a sub-config's fields: "text_config__"; else empty
  std::string standard;  // "layer_types", "rope", or empty
  std::optional<Expression> condition;
  std::vector<std::pair<std::string, std::optional<Expression>>> message;  // text, or a hole
  std::optional<Expression> head_dim;  // rope: the config's head_dim where it is no field
};

// "The hidden size ({hidden_size}) is ..." -> its pieces; {{ and }} are braces.
std::vector<std::pair<std::string, std::optional<Expression>>> message_pieces(
    const std::string& text) {
  std::vector<std::pair<std::string, std::optional<Expression>>> pieces;
  std::string literal;
  for (size_t i = 0; i < text.size(); ++i) {
    if ((text[i] == '{' || text[i] == '}') && i + 1 < text.size() && text[i + 1] == text[i]) {
      literal += text[i++];
    } else if (text[i] == '{') {
      const size_t end = text.find('}', i);
      if (end == std::string::npos) throw InvalidArgument("a message hole does not end: " + text);
      pieces.emplace_back(std::move(literal), std::nullopt);
      literal.clear();
      pieces.emplace_back("", Expression::parse(text.substr(i + 1, end - i - 1)));
      i = end;
    } else {
      literal += text[i];
    }
  }
  pieces.emplace_back(std::move(literal), std::nullopt);
  return pieces;
}

std::vector<CompiledCheck> compile_checks(const Json& descriptor) {
  std::vector<CompiledCheck> checks;
  const auto entries = descriptor.find("checks");
  if (entries == descriptor.end()) return checks;
  for (const Json& entry : *entries) {
    CompiledCheck check;
    check.by = entry.at("by").get<std::string>();
    if (const auto of = entry.find("of"); of != entry.end()) {
      check.prefix = of->get<std::string>() + "__";
    }
    if (const auto standard = entry.find("standard"); standard != entry.end()) {
      check.standard = standard->get<std::string>();
      if (const auto head_dim = entry.find("head_dim"); head_dim != entry.end()) {
        check.head_dim = Expression::parse(head_dim->get<std::string>());
      }
      if (check.standard != "layer_types" && check.standard != "rope") {
        throw InvalidArgument("a check of " + check.by + " is the standard '" + check.standard +
                              "', which this backplane does not know");
      }
    } else {
      check.condition = Expression::parse(entry.at("if").get<std::string>());
      check.message = message_pieces(entry.at("error").get<std::string>());
    }
    checks.push_back(std::move(check));
  }
  return checks;
}

struct CompiledDescriptor {
  Json descriptor;
  CompiledNode tree;
  size_t slots = 0;
  std::map<const Json*, Expression> parsed;  // every expression, parsed once, by its text
  std::vector<std::string> fill_order;       // the derived rules, each after those it reads
  std::vector<CompiledCheck> checks;
  std::vector<std::string> unchecked;  // validators the descriptor could not write as checks
};

// The derived rules in an order where each comes after the rules filling in what it reads
// (Llama 4's layer_types reads no_rope_layers, itself filled in); nlohmann's objects are
// sorted by key, which is not that order. A cycle keeps key order.
std::vector<std::string> fill_order(const Json& derived) {
  std::map<std::string, std::set<std::string>> reads;
  for (const auto& [name, rule] : derived.items()) {
    std::set<std::string>& names = reads[name];
    for (const char* key : {"expr", "per_layer", "layers_where", "count"}) {
      if (const auto it = rule.find(key); it != rule.end() && it->is_string()) {
        for (const std::string& read : names_in(it->get<std::string>())) {
          if (read != name && derived.contains(read)) names.insert(read);
        }
      }
    }
  }
  std::vector<std::string> order;
  while (!reads.empty()) {
    auto ready = std::find_if(reads.begin(), reads.end(),
                              [](const auto& entry) { return entry.second.empty(); });
    if (ready == reads.end()) ready = reads.begin();
    const std::string name = ready->first;
    order.push_back(name);
    reads.erase(ready);
    for (auto& [other, names] : reads) names.erase(name);
  }
  return order;
}

void parse_into(const Json* text, std::map<const Json*, Expression>& parsed) {
  if (text != nullptr && parsed.count(text) == 0) {
    parsed.emplace(text, Expression::parse(text->get<std::string>()));
  }
}

// Parses every expression of `node` into `parsed`, keyed by its text in the descriptor.
void parse_all(const CompiledNode& node, std::map<const Json*, Expression>& parsed) {
  parse_into(node.condition.text, parsed);
  parse_into(node.activation.text, parsed);
  parse_into(node.repeat.text, parsed);
  for (const CompiledTensor& tensor : node.tensors) {
    parse_into(tensor.condition.text, parsed);
    for (const Slot& dim : tensor.dims) parse_into(dim.text, parsed);
  }
  if (node.repeated) parse_all(*node.repeated, parsed);
  for (const auto& [condition, alternative] : node.alternatives) {
    parse_into(condition.text, parsed);
    parse_all(alternative, parsed);
  }
  for (const CompiledNode& child : node.children) parse_all(child, parsed);
}

// And those outside the tree: the derived rules, the helpers, the hyperparameters and the
// conditions of listed entries (no-split classes, tied weights, tp plan, fp32 modules).
void parse_rest(const Json& descriptor, std::map<const Json*, Expression>& parsed) {
  for (const auto& [name, rule] : descriptor.at("derived").items()) {
    for (const char* key : {"expr", "per_layer", "layers_where", "count"}) {
      if (const auto it = rule.find(key); it != rule.end()) parse_into(&*it, parsed);
    }
  }
  for (const auto& [name, let] : descriptor.at("lets").items()) parse_into(&let, parsed);
  for (const auto& [key, expression] : descriptor.at("hyperparameters").items()) {
    parse_into(&expression, parsed);
  }
  for (const char* key :
       {"no_split_modules", "tied", "tied_weights_keys", "tp_plan", "keep_in_fp32_modules"}) {
    for (const Json& entry : descriptor.at(key)) parse_into(condition_of(entry), parsed);
  }
}

class Evaluation {
 public:
  Evaluation(const CompiledDescriptor& compiled, const std::string& what)
      : compiled_(compiled),
        descriptor_(compiled.descriptor),
        tree_(compiled.tree),
        what_(what),
        architecture_(compiled.descriptor.at("architecture").get<std::string>()),
        values_(compiled.slots),
        known_(compiled.slots, 0) {}

  // The config as the config class holds it: its defaults, config.json's keys (aliases
  // mapped), then what the class fills in for fields left null.
  void resolve(const Json& config) {
    // The defaults stay in the descriptor (value_of reads them there): only what config.json
    // sets and what the class fills in is written here.
    const auto subs = descriptor_.find("sub_configs");
    for (const auto& [key, value] : config.items()) {
      if (subs != descriptor_.end() && value.is_object() &&
          std::find(subs->begin(), subs->end(), key) != subs->end()) {
        // A composite config's sub-config (Gemma 3's text_config): its fields are named
        // text_config__hidden_size here.
        for (const auto& [sub_key, sub_value] : value.items()) {
          set(key + "__" + sub_key, sub_value, key + "." + sub_key);
        }
        continue;
      }
      set(key, value, key);
    }
    for (const std::string& name : compiled_.fill_order) {
      const Json& rule = descriptor_.at("derived").at(name);
      // "always": the class replaces whatever config.json says; else only a marker value
      // (null, "auto") is filled in.
      const bool always = rule.value("always", false);
      const Json* current = value_of(name);
      if (always ||
          (current == nullptr ? rule.at("when").is_null() : *current == rule.at("when"))) {
        if (rule.contains("count")) {
          space_[name] = per_layer_list(name, rule);
        } else {
          space_[name] = rule.contains("value") ? rule["value"] : evaluate(rule.at("expr"));
        }
      }
      index_.clear();  // a name read before this rule filled it in would keep its old place
    }
    rename_layer_types();
  }

  // PreTrainedConfig.__post_init__'s remap_legacy_layer_types: the old names of layer types
  // ("mamba", "attention") read as today's, in layer_types and mtp_layer_types.
  void rename_layer_types() {
    const Json& renames = config_rules().at("layer_type_renames");
    for (const Json& key : config_rules().at("renamed_layer_lists")) {
      const Json* list = value_of(key.get<std::string>());
      if (list == nullptr || !list->is_array()) continue;
      Json renamed = *list;
      for (Json& entry : renamed) {
        if (!entry.is_string()) continue;
        if (const auto to = renames.find(entry.get<std::string>()); to != renames.end())
          entry = *to;
      }
      if (renamed != *list) space_[key.get<std::string>()] = std::move(renamed);
    }
    index_.clear();
  }

  // The config class's validators (`checks`), over the config as resolve() made it: the first
  // that refuses it throws, in transformers' words.
  void check() {
    for (const CompiledCheck& check : compiled_.checks) {
      if (check.standard == "layer_types") {
        check_layer_types(check);
      } else if (check.standard == "rope") {
        check_rope(check);
      } else {
        check_own(check);
      }
    }
  }

  // config.json's `key` (`shown` in errors: text_config.hidden_size) set to `value`.
  void set(const std::string& key, const Json& value, const std::string& shown) {
    const std::string name = field_name(key);
    const Json& fields = descriptor_.at("fields");
    if (fields.contains(name)) check_kind(what_, architecture_, shown, fields[name], value);
    space_[name] = value;
  }

  // A list the class fills in per layer: an entry for each ("per_layer": layer_types from a
  // period), or the indices of the layers a condition holds for ("layers_where": Llama 4's
  // moe_layers).
  Json per_layer_list(const std::string& name, const Json& rule) {
    // range() of a negative count is empty in Python: the class's list is, and its validator
    // then names the mismatch.
    const Json& given = evaluate(rule.at("count"));
    const bool negative = given.is_number_integer() && given.get<int64_t>() < 0;
    const int64_t count =
        negative ? 0
                 : checked(given, rule.at("count"), "the layer count of ", name, "", kMaxRepeat);
    const Json* entry = rule.contains("per_layer") ? &rule.at("per_layer") : nullptr;
    const Json* where = entry == nullptr ? &rule.at("layers_where") : nullptr;
    Json list = Json::array();
    for (int64_t i = 0; i < count; ++i) {
      layer_ = i;
      if (entry != nullptr) {
        list.push_back(evaluate(*entry));
      } else if (truthy(evaluate(*where))) {
        list.push_back(i);
      }
    }
    layer_.reset();
    return list;
  }

  // What the config holds for `name`: config.json's value or the class's fill-in, else the
  // field's default; nullptr for a name the class does not have.
  const Json* value_of(const std::string& name) const {
    if (const auto it = space_.find(name); it != space_.end()) return &*it;
    const Json& fields = descriptor_.at("fields");
    if (const auto field = fields.find(name); field != fields.end()) return &field->at("default");
    return nullptr;
  }

  // The field a config.json key sets: itself, else through the class's attribute_map (GPT-2's
  // hidden_size is n_embd), either way round (Qwen3-MoE's field num_experts is attribute_map's
  // source, num_local_experts its target).
  std::string field_name(const std::string& key) const {
    const Json& fields = descriptor_.at("fields");
    const Json& aliases = descriptor_.at("aliases");
    if (fields.contains(key)) return key;
    if (aliases.contains(key)) return aliases[key].get<std::string>();
    for (const auto& [source, target] : aliases.items()) {
      if (target == key && fields.contains(source)) return source;
    }
    return key;
  }

  // The tree this config makes: the module tree with its tensors, then the model-wide
  // lists, each entry whose condition holds.
  ModelDescription describe(DType dtype) {
    dtype_ = dtype;
    ModelDescription out;
    out.architecture = architecture_;
    out.model_type = descriptor_.at("model_type").get<std::string>();
    out.dtype = dtype;
    expand(tree_, nullptr, "", out.root);
    for (const Json* value : chosen("no_split_modules")) {
      out.no_split_module_classes.push_back(value->get<std::string>());
    }
    for (const Json* group : chosen("tied")) {
      out.tied_parameters.push_back(group->get<std::vector<std::string>>());
    }
    for (const Json* pair : chosen("tied_weights_keys")) {
      out.tied_weights_keys[pair->at(0).get<std::string>()] = pair->at(1).get<std::string>();
    }
    for (const Json* value : chosen("keep_in_fp32_modules")) {
      out.keep_in_fp32_modules.push_back(value->get<std::string>());
    }
    for (const Json* entry : chosen("tp_plan")) {
      out.tp_plan.emplace_back(entry->at(0).get<std::string>(), entry->at(1).get<std::string>());
    }
    for (const auto& [key, expression] : descriptor_.at("hyperparameters").items()) {
      out.hyperparameters[key] = integer(expression, "hyperparameter ", key);
    }
    out.from_config = true;
    return out;
  }

 private:
  [[noreturn]] void refuse(const CompiledCheck& check, const std::string& message) const {
    throw InvalidArgument(what_ + " (" + architecture_ + "): " + message + " (" + check.by + ")");
  }

  // A validator's `if C: raise ValueError(message)`. A condition Python could not evaluate
  // (None % 2) raises in the validator too, which refuses the config as well.
  void check_own(const CompiledCheck& check) {
    bool refused = false;
    std::string message;
    try {
      refused = truthy(run(*check.condition));
      if (!refused) return;
      for (const auto& [text, hole] : check.message) {
        message += hole ? python_str(run(*hole)) : text;
      }
    } catch (const InvalidArgument& e) {
      refuse(check, "the config's values fail its check: " + std::string(e.what()));
    }
    refuse(check, message);
  }

  // PreTrainedConfig.validate_layer_type: each list's entries known, one per layer; a list the
  // config leaves None ends the check, as its `return` does.
  void check_layer_types(const CompiledCheck& check) {
    for (const Json& rule : config_rules().at("validated_layer_lists")) {
      const std::string name = rule.at(0).get<std::string>();
      const Json* layers = value_of(check.prefix + name);
      const Json* count = value_of(check.prefix + "num_hidden_layers");
      if (layers == nullptr || layers->is_null() || count == nullptr) return;
      const Json& allowed = rule.at(1);
      const bool known =
          layers->is_array() && std::all_of(layers->begin(), layers->end(), [&](const Json& entry) {
            return std::find(allowed.begin(), allowed.end(), entry) != allowed.end();
          });
      if (!known) {
        std::string tuple;
        for (const Json& entry : allowed) tuple += (tuple.empty() ? "" : ", ") + python_repr(entry);
        if (allowed.size() == 1) tuple += ",";
        refuse(check, "The `" + name + "` entries must be in (" + tuple + ") but got " +
                          python_repr(*layers));
      }
      if (!count->is_null() && *count != Json(layers->size())) {
        refuse(check, "`num_hidden_layers` (" + python_str(*count) +
                          ") must be equal to the number of `" + name + "` (" +
                          std::to_string(layers->size()) + ")");
      }
    }
  }

  // RotaryEmbeddingConfigMixin.validate_rope: each entry of the rope parameters (one per layer
  // type when they are given so), with the config's head_dim for the even-dimension rule.
  void check_rope(const CompiledCheck& check) {
    Json rope = rope_fields(check.prefix);
    // None or {} is standardized to the default rope type first (convert_rope_params_to_dict),
    // so the even-dimension rule holds for a config without rope parameters too.
    if (!rope.contains("rope_parameters") || !truthy(rope["rope_parameters"])) {
      rope["rope_parameters"] = Json{{"rope_type", "default"}};
    }
    const Json* parameters = &rope["rope_parameters"];
    std::optional<int64_t> head_dim;
    const Json* head = value_of(check.prefix + "head_dim");
    Json computed;
    if (head == nullptr && check.head_dim) {
      computed = run(*check.head_dim);
      head = &computed;
    }
    if (head != nullptr && head->is_number_integer()) head_dim = head->get<int64_t>();
    if (!parameters->is_object() ||
        !std::all_of(parameters->begin(), parameters->end(),
                     [](const Json& entry) { return entry.is_object() || entry.is_null(); })) {
      validate_rope(rope, what_ + " (" + architecture_ + ")", head_dim, "full_attention");
      return;
    }
    for (const auto& [type, entry] : parameters->items()) {
      if (entry.is_null()) continue;  // a layer type without rope
      Json one = rope;
      one["rope_parameters"] = entry;
      validate_rope(one, what_ + " (" + architecture_ + "): rope_parameters[\"" + type + "\"]",
                    head_dim, type);
    }
  }

  // The rope parameters as the config holds them, defaults included, as rope.hpp reads them;
  // `prefix` names a sub-config's ("text_config__").
  Json rope_fields(const std::string& prefix) const {
    Json rope = Json::object();
    for (const char* key : {"rope_parameters", "rope_scaling", "partial_rotary_factor"}) {
      if (const Json* value = value_of(prefix + key)) rope[key] = *value;
    }
    return rope;
  }

  // A name an expression reads: the layer indexes, the config's fields, else a helper (lets:
  // the head width, the key/value heads), computed when first read.
  const Json* lookup_name(const std::string& name) {
    if (layer_ && name == "i") return &*layer_;
    if (outer_layer_ && name == "j") return &*outer_layer_;
    if (const auto it = index_.find(name); it != index_.end()) return it->second;
    const Json* value = value_of(name);
    if (value == nullptr) {
      const Json& lets = descriptor_.at("lets");
      const auto let = lets.find(name);
      if (let == lets.end()) return nullptr;
      space_[name] = evaluate(*let);
      value = &space_[name];
    }
    // Addresses stay: space_ and the descriptor are nlohmann objects (std::maps), and
    // resolve() wrote everything before the first lookup that is kept.
    index_[name] = value;
    return value;
  }

  // An expression of a check, over the resolved config (no layer index).
  Json run(const Expression& expression) {
    const auto lookup = [this](const std::string& name) { return lookup_name(name); };
    const auto call = [&expression](const std::string& function, const Json&) -> Json {
      throw InvalidArgument("descriptor check '" + expression.text() + "' calls " + function +
                            "(), which checks do not call");
    };
    return expression.evaluate(lookup, call);
  }

  // Every expression of the descriptor was parsed when it was compiled (parse_all).
  const Expression& parsed(const Json& text) const { return compiled_.parsed.at(&text); }

  Json evaluate(const Json& text) {
    const Expression& expression = parsed(text);
    const auto lookup = [this](const std::string& name) { return lookup_name(name); };
    const auto call = [this, &expression](const std::string& function, const Json& argument) {
      if ((function != "rope" && function != "rotary") || !argument.is_number_integer()) {
        throw InvalidArgument("descriptor expression '" + expression.text() + "' calls " +
                              function + "(" + argument.dump() +
                              "); descriptors call rope(int) and rotary(int)");
      }
      Json rope = rope_fields("");
      const int64_t head = argument.get<int64_t>();
      const bool partial = function == "rotary";
      const Json* per_type = rope.contains("rope_parameters") ? &rope["rope_parameters"] : nullptr;
      if (per_type == nullptr || !per_type->is_object() || per_type->empty() ||
          !std::all_of(per_type->begin(), per_type->end(),
                       [](const Json& entry) { return entry.is_object(); })) {
        return Json(rope_inv_freq_length(rope, what_, head, partial));
      }
      // Given per layer type ({"full_attention": {...}, "sliding_attention": {...}}): each
      // type's rotary embedding reads its own entry. The descriptor's rope(dim) does not say
      // which type a buffer is of, so the entries must agree on its length.
      int64_t length = -1;
      std::string first;
      for (const auto& [type, entry] : per_type->items()) {
        Json one = rope;
        one["rope_parameters"] = entry;
        const int64_t here =
            rope_inv_freq_length(one, what_ + ": rope_parameters[\"" + type + "\"]", head, partial);
        if (length >= 0 && here != length) {
          throw InvalidArgument(what_ + " (" + architecture_ + "): the rope parameters of '" +
                                first + "' and '" + type + "' give rotary embeddings of " +
                                std::to_string(length) + " and " + std::to_string(here) +
                                " frequencies; the descriptor cannot tell which layers read "
                                "which: export the module tree (tools/export-module-tree)");
        }
        if (length < 0) first = type;
        length = here;
      }
      return Json(length);
    };
    try {
      return expression.evaluate(lookup, call);
    } catch (const InvalidArgument& e) {
      // A config whose values the shapes cannot be made of (a zero it divides by, a null it
      // multiplies): say which config and architecture.
      const std::string message = e.what();
      if (message.rfind(what_, 0) == 0) throw;
      // A field the shapes need that the config leaves null names itself.
      for (const std::string& name : names_in(expression.text())) {
        const Json* value = value_of(name);
        if (value != nullptr && value->is_null()) {
          throw InvalidArgument(what_ + ": " + architecture_ + " needs `" + name +
                                "`, which the config leaves null and its class does not fill "
                                "in (" +
                                message + ")");
        }
      }
      throw InvalidArgument(what_ + " (" + architecture_ + "): " + message);
    }
  }

  // `what` and `whose` name the value in the error ("the shape of", "model.norm.weight"); the
  // message is made only then.
  int64_t integer(const Json& text, const char* what, const std::string& whose,
                  const std::string& tensor = "", int64_t max = kMaxDimension) {
    return checked(evaluate(text), text, what, whose, tensor, max);
  }
  int64_t integer(const Slot& slot, const char* what, const std::string& whose,
                  const std::string& tensor = "", int64_t max = kMaxDimension) {
    return checked(evaluate(slot), *slot.text, what, whose, tensor, max);
  }
  int64_t checked(const Json& value, const Json& text, const char* what, const std::string& whose,
                  const std::string& tensor, int64_t max) {
    if (!value.is_number_integer() || value.get<int64_t>() < 0 || value.get<int64_t>() > max) {
      const std::string named = tensor.empty() ? whose : whose + "." + tensor;
      throw InvalidArgument(what_ + " (" + architecture_ + "): " + what + named + " = " +
                            text.get<std::string>() + " is " + value.dump() +
                            "; expected an integer from 0 to " + std::to_string(max) +
                            " (check the config's sizes)");
    }
    return value.get<int64_t>();
  }

  bool holds(const Json* condition) { return condition == nullptr || truthy(evaluate(*condition)); }
  bool holds(const Slot& condition) {
    return condition.text == nullptr || truthy(evaluate(condition));
  }

  // A tree expression's value, kept under its slot when it does not read `i`.
  const Json& evaluate(const Slot& slot) {
    if (slot.reads_layer) {
      scratch_ = evaluate(*slot.text);
      return scratch_;
    }
    if (!known_[slot.id]) {
      values_[slot.id] = evaluate(*slot.text);
      known_[slot.id] = 1;
    }
    return values_[slot.id];
  }

  // Appends `node` (its name replaced by `name` when given: a repeat's index, an
  // alternative's place) under `parent`, or makes it `root` when parent is null.
  void expand(const CompiledNode& node, Module* parent, const std::string& name, Module& root) {
    if (!holds(node.condition)) return;
    const std::string& local = name.empty() ? node.name : name;
    if (!node.alternatives.empty()) {
      // One place, several classes: the first whose condition holds (the last has none).
      for (const auto& [condition, alternative] : node.alternatives) {
        if (!holds(condition)) continue;
        expand(alternative, parent, local, root);
        return;
      }
      return;
    }
    // path_ is the qualified name, grown and cut back as the walk goes (errors name it).
    const size_t outer_path = path_.size();
    if (!local.empty()) {
      if (!path_.empty()) path_ += '.';
      path_ += local;
    }
    expand_module(node, parent, local, root);
    path_.resize(outer_path);
  }

  void expand_module(const CompiledNode& node, Module* parent, const std::string& local,
                     Module& root) {
    if (++modules_ > kMaxModules) too_many_modules();
    Module* module = &root;
    if (parent != nullptr) {
      parent->children.emplace_back();
      module = &parent->children.back();
    }
    if (node.activation.text != nullptr) {
      *module = activation(node.activation, local);
      return;
    }
    module->name = local;
    module->class_name = node.class_name;
    module->tensors.reserve(node.tensors.size());
    for (const CompiledTensor& tensor : node.tensors) {
      if (!holds(tensor.condition)) continue;
      TensorInfo info;
      info.name = tensor.name;
      info.shape.reserve(tensor.dims.size());
      for (const Slot& dim : tensor.dims) {
        info.shape.push_back(integer(dim, "the shape of ", path_, tensor.name));
      }
      info.dtype = tensor.dtype.value_or(dtype_);
      info.buffer = tensor.buffer;
      info.persistent = tensor.persistent;
      info.numel();  // refuses an overflowing shape, naming the tensor
      module->tensors.push_back(std::move(info));
    }
    if (node.repeat.text != nullptr) {
      const int64_t count = integer(node.repeat, "the number of ", path_, "", kMaxRepeat);
      // Inside, `i` is this repeat's index and `j` the enclosing one's (T5's sublayers of a
      // block).
      const std::optional<Json> outer = layer_;
      const std::optional<Json> outer_outer = outer_layer_;
      outer_layer_ = outer;
      module->children.reserve(static_cast<size_t>(count));
      size_t per_copy = 0;  // modules of one copy
      for (int64_t i = 0; i < count; ++i) {
        layer_ = i;
        if (i == 0 || node.repeated->reads_layer || module->children.empty()) {
          const size_t before = modules_;
          expand(*node.repeated, module, std::to_string(i), root);
          per_copy = modules_ - before;
          continue;
        }
        // The same subtree at every index: a copy of the first, renamed.
        modules_ += per_copy;
        if (modules_ > kMaxModules) too_many_modules();
        module->children.push_back(module->children.front());
        module->children.back().name = std::to_string(i);
      }
      layer_ = outer;
      outer_layer_ = outer_outer;
      return;
    }
    module->children.reserve(node.children.size());
    for (const CompiledNode& child : node.children) expand(child, module, "", root);
  }

  [[noreturn]] void too_many_modules() const {
    throw InvalidArgument(what_ + " (" + architecture_ + "): more than " +
                          std::to_string(kMaxModules) + " modules; check the config's sizes");
  }

  // The module an activation name builds (ACT2CLS), refused naming the accepted ones.
  Module activation(const Slot& slot, const std::string& local) {
    const Json& value = evaluate(slot);
    std::optional<Module> module;
    if (value.is_string()) module = activation_module(value.get<std::string>(), local, dtype_);
    if (!module) {
      // Not an ACT2CLS name: a config transformers refuses, or one whose class turns the field
      // into an activation in ways the descriptor does not know (T5's "gated-gelu").
      throw InvalidArgument(
          what_ + " (" + architecture_ + "): the activation of " + path_ + " (" +
          slot.text->get<std::string>() + ") is " + value.dump() +
          ", not an activation transformers knows; accepted: " + activation_names() +
          ". Where transformers builds this config all the same, tools/export-module-tree "
          "writes its module tree for `hwprobe plan --tree`");
    }
    return std::move(*module);
  }

  std::vector<const Json*> chosen(const char* key) {
    std::vector<const Json*> out;
    for (const Json& entry : descriptor_.at(key)) {
      if (holds(condition_of(entry))) out.push_back(&entry.at("value"));
    }
    return out;
  }

  const CompiledDescriptor& compiled_;
  const Json& descriptor_;
  const CompiledNode& tree_;
  const std::string& what_;
  const std::string architecture_;
  Json space_ = Json::object();
  std::unordered_map<std::string, const Json*> index_;  // space_'s values by name, as read
  std::optional<Json> layer_;        // `i`: the index of the innermost repeat being expanded
  std::optional<Json> outer_layer_;  // `j`: the index of the repeat around it
  DType dtype_ = DType::kFloat32;
  size_t modules_ = 0;
  std::string path_;
  std::vector<Json> values_;  // by slot, once known
  std::vector<char> known_;
  Json scratch_;
};

// The identifiers an expression reads, in order.
std::vector<std::string> names_in(const std::string& text) {
  std::vector<std::string> names;
  for (size_t i = 0; i < text.size();) {
    const auto c = static_cast<unsigned char>(text[i]);
    if (text[i] == '\'' || text[i] == '"') {
      const size_t end = text.find(text[i], i + 1);
      i = end == std::string::npos ? text.size() : end + 1;
    } else if (std::isalpha(c) || text[i] == '_') {
      size_t end = i;
      while (end < text.size() &&
             (std::isalnum(static_cast<unsigned char>(text[end])) || text[end] == '_')) {
        ++end;
      }
      names.push_back(text.substr(i, end - i));
      i = end;
    } else {
      ++i;
    }
  }
  return names;
}

size_t edit_distance(std::string_view a, std::string_view b) {
  std::vector<size_t> row(b.size() + 1);
  for (size_t j = 0; j <= b.size(); ++j) row[j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    size_t diagonal = row[0];
    row[0] = i;
    for (size_t j = 1; j <= b.size(); ++j) {
      const size_t above = row[j];
      const bool same = std::tolower(static_cast<unsigned char>(a[i - 1])) ==
                        std::tolower(static_cast<unsigned char>(b[j - 1]));
      row[j] = std::min({row[j] + 1, row[j - 1] + 1, diagonal + (same ? 0 : 1)});
      diagonal = above;
    }
  }
  return row[b.size()];
}

void collect_classes(const Module& module, std::set<std::string>& out) {
  out.insert(module.class_name);
  for (const Module& child : module.children) collect_classes(child, out);
}

// The descriptor's kernel layers, and the activation classes', for the classes this tree has.
KernelLayers present_kernel_layers(const Json& declared, const Module& root) {
  std::set<std::string> classes;
  collect_classes(root, classes);
  KernelLayers out;
  const Json& layers = declared.at("layers");
  const Json& functions = declared.at("functions");
  for (const std::string& name : classes) {
    if (const auto layer = layers.find(name); layer != layers.end()) {
      out.layers[name] = layer->get<std::string>();
    } else if (const std::string_view activation = activation_kernel_layer(name);
               !activation.empty()) {
      out.layers[name] = std::string(activation);
    }
    if (const auto called = functions.find(name); called != functions.end()) {
      out.functions[name] = called->get<std::vector<std::string>>();
    }
  }
  return out;
}

}  // namespace

const EmbeddedDescriptor* descriptor_for_model_type(std::string_view model_type) {
  for (const EmbeddedDescriptor& entry : kArchitectureDescriptors) {
    if (entry.model_type == model_type) return &entry;
  }
  return nullptr;
}

const EmbeddedDescriptor* descriptor_for_class(std::string_view architecture) {
  for (const EmbeddedDescriptor& entry : kArchitectureDescriptors) {
    if (entry.architecture == architecture) return &entry;
  }
  return nullptr;
}

std::vector<std::string> described_architectures() {
  std::vector<std::string> out;
  for (const EmbeddedDescriptor& entry : kArchitectureDescriptors)
    out.emplace_back(entry.architecture);
  return out;
}

std::vector<std::string> nearest_described(std::string_view name, size_t count) {
  std::vector<std::pair<size_t, std::string>> ranked;
  for (const EmbeddedDescriptor& entry : kArchitectureDescriptors) {
    ranked.emplace_back(edit_distance(name, entry.model_type), entry.model_type);
    ranked.emplace_back(edit_distance(name, entry.architecture), entry.architecture);
  }
  std::stable_sort(ranked.begin(), ranked.end(),
                   [](const auto& a, const auto& b) { return a.first < b.first; });
  std::vector<std::string> out;
  for (const auto& [distance, candidate] : ranked) {
    if (out.size() == count) break;
    if (std::find(out.begin(), out.end(), candidate) == out.end()) out.push_back(candidate);
  }
  return out;
}

// Each descriptor parsed and compiled once per process, on first use, and kept: its nodes'
// addresses key the parsed expressions.
const CompiledDescriptor& compiled_descriptor(const EmbeddedDescriptor& entry) {
  static std::mutex mutex;
  static std::map<const EmbeddedDescriptor*, std::unique_ptr<const CompiledDescriptor>> cache;
  const std::lock_guard<std::mutex> lock(mutex);
  auto& slot = cache[&entry];
  if (!slot) {
    auto compiled = std::make_unique<CompiledDescriptor>();
    compiled->descriptor =
        parse_json(entry.text, std::string("the descriptor of ") + entry.model_type, kUniqueKeys);
    compiled->tree = compile(compiled->descriptor.at("tree"), compiled->slots);
    parse_all(compiled->tree, compiled->parsed);
    parse_rest(compiled->descriptor, compiled->parsed);
    compiled->fill_order = fill_order(compiled->descriptor.at("derived"));
    compiled->checks = compile_checks(compiled->descriptor);
    if (const auto unchecked = compiled->descriptor.find("unchecked");
        unchecked != compiled->descriptor.end()) {
      for (const Json& skipped : *unchecked) compiled->unchecked.push_back(skipped.at("by"));
    }
    slot = std::move(compiled);
  }
  return *slot;
}

ModelDescription build_from_descriptor(const EmbeddedDescriptor& entry, const Json& config,
                                       const std::string& what, std::optional<DType> dtype) {
  const DType chosen = dtype.value_or(config_dtype(config, what).value_or(DType::kFloat32));
  try {
    const CompiledDescriptor& compiled = compiled_descriptor(entry);
    Evaluation evaluation(compiled, what);
    evaluation.resolve(config);
    evaluation.check();
    ModelDescription description = evaluation.describe(chosen);
    description.kernel_layers =
        present_kernel_layers(compiled.descriptor.at("kernel_layers"), description.root);
    for (const std::string& by : compiled.unchecked) {
      description.unchecked.push_back("transformers' " + by);
    }
    return description;
  } catch (const Json::exception& e) {
    // A descriptor lacking a key the format requires: the data is broken, not the config.
    throw InvalidArgument(std::string("the descriptor of ") + entry.model_type +
                          " (core/src/model/architectures/" + entry.model_type +
                          ".json) is malformed: " + e.what());
  }
}

}  // namespace backplane::model_detail
