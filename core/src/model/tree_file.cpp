// model_from_tree: the module tree file tools/export-module-tree writes from transformers' own
// build of a model (format "backplane-module-tree", version 1).
#include <backplane/error.hpp>
#include <backplane/model/model.hpp>

#include <map>
#include <memory>

#include "json_input.hpp"

namespace backplane {
namespace {

using Json = nlohmann::json;

constexpr const char* kFormat = "backplane-module-tree";
constexpr int kVersion = 1;

struct Node {
  std::string local;
  std::string class_name;
  std::vector<TensorInfo> tensors;
  std::vector<size_t> children;
};

class TreeReader {
 public:
  TreeReader(const Json& root, std::string source) : root_(root), source_(std::move(source)) {}

  ModelDescription read() {
    if (!root_.is_object()) fail("the top level", "must be an object");
    if (string_at(root_, "format", "format") != kFormat) {
      fail("format",
           "must be \"" + std::string(kFormat) + "\" (a file that tools/export-module-tree wrote)");
    }
    if (!root_.contains("version") || !root_["version"].is_number_integer() ||
        root_["version"].get<int64_t>() != kVersion) {
      fail("version", "must be " + std::to_string(kVersion) + "; this backplane reads version " +
                          std::to_string(kVersion) + " (write the file again with its tool)");
    }
    ModelDescription out;
    out.architecture = string_at(root_, "architecture", "architecture");
    out.model_type = string_at(root_, "model_type", "model_type");
    out.dtype = dtype_at(string_at(root_, "dtype", "dtype"), "dtype");
    read_modules();
    read_tensors("parameters", false);
    read_tensors("buffers", true);
    out.root = to_module(0);
    out.no_split_module_classes = strings_at("no_split_modules");
    for (const Json& group : array_at(root_, "tied", "tied")) {
      if (!group.is_array()) fail("tied", "must be an array of arrays of parameter names");
      std::vector<std::string> names;
      for (const Json& name : group) {
        if (!name.is_string()) fail("tied", "must hold parameter names (strings)");
        names.push_back(name.get<std::string>());
      }
      out.tied_parameters.push_back(std::move(names));
    }
    if (root_.contains("tied_weights_keys")) {
      if (!root_["tied_weights_keys"].is_object()) fail("tied_weights_keys", "must be an object");
      for (const auto& [target, source] : root_["tied_weights_keys"].items()) {
        if (!source.is_string()) fail("tied_weights_keys." + target, "must be a parameter name");
        out.tied_weights_keys[target] = source.get<std::string>();
      }
    }
    for (const Json& entry : array_at(root_, "tp_plan", "tp_plan")) {
      if (!entry.is_array() || entry.size() != 2 || !entry[0].is_string() ||
          !entry[1].is_string()) {
        fail("tp_plan", "must be an array of [module pattern, style] pairs");
      }
      out.tp_plan.emplace_back(entry[0].get<std::string>(), entry[1].get<std::string>());
    }
    if (root_.contains("hyperparameters")) {
      if (!root_["hyperparameters"].is_object()) fail("hyperparameters", "must be an object");
      for (const auto& [key, value] : root_["hyperparameters"].items()) {
        if (!value.is_number_integer()) fail("hyperparameters." + key, "must be an integer");
        out.hyperparameters[key] = value.get<int64_t>();
      }
    }
    if (root_.contains("kernel_layers")) out.kernel_layers = kernel_layers();
    out.from_config = true;  // transformers' own tree: exact
    return out;
  }

 private:
  [[noreturn]] void fail(const std::string& field, const std::string& what) const {
    throw InvalidArgument(source_ + ": " + field + ": " + what);
  }

  // {"layers": {class: Hub layer name}, "functions": {class: [Hub layer names]}}.
  KernelLayers kernel_layers() const {
    const Json& kernel = root_["kernel_layers"];
    if (!kernel.is_object() || !kernel.contains("layers") || !kernel["layers"].is_object() ||
        !kernel.contains("functions") || !kernel["functions"].is_object()) {
      fail("kernel_layers",
           "must be {\"layers\": {class: layer name}, \"functions\": {class: [layer names]}}");
    }
    KernelLayers out;
    for (const auto& [name, layer] : kernel["layers"].items()) {
      if (!layer.is_string()) fail("kernel_layers.layers." + name, "must be a layer name");
      out.layers[name] = layer.get<std::string>();
    }
    for (const auto& [name, layers] : kernel["functions"].items()) {
      if (!layers.is_array()) fail("kernel_layers.functions." + name, "must be a list of names");
      for (const Json& layer : layers) {
        if (!layer.is_string()) fail("kernel_layers.functions." + name, "must hold names");
        out.functions[name].push_back(layer.get<std::string>());
      }
    }
    return out;
  }

  std::string string_at(const Json& object, const char* key, const std::string& field) const {
    if (!object.contains(key) || !object[key].is_string()) fail(field, "must be a string");
    return object[key].get<std::string>();
  }

  DType dtype_at(const std::string& text, const std::string& field) const {
    try {
      return parse_dtype(text);
    } catch (const InvalidArgument& e) {
      fail(field, e.what());
    }
  }

  const Json& array_at(const Json& object, const char* key, const std::string& field) const {
    if (!object.contains(key) || !object[key].is_array()) fail(field, "must be an array");
    return object[key];
  }

  std::vector<std::string> strings_at(const char* key) const {
    std::vector<std::string> out;
    for (const Json& value : array_at(root_, key, key)) {
      if (!value.is_string()) fail(key, "must be an array of strings");
      out.push_back(value.get<std::string>());
    }
    return out;
  }

  // named_modules() order: every module after its parent, the root ("") first.
  void read_modules() {
    const Json& modules = array_at(root_, "modules", "modules");
    if (modules.empty()) fail("modules", "is empty; the root module \"\" comes first");
    for (size_t i = 0; i < modules.size(); ++i) {
      const std::string where = "modules[" + std::to_string(i) + "]";
      const Json& entry = modules[i];
      if (!entry.is_array() || entry.size() != 2 || !entry[0].is_string() ||
          !entry[1].is_string()) {
        fail(where, "must be [name, class]");
      }
      const std::string name = entry[0].get<std::string>();
      if ((i == 0) != name.empty()) fail(where, "the root module \"\" comes first, and only once");
      if (index_.count(name)) fail(where, "module " + model_detail::quote_name(name) + " twice");
      Node node;
      node.class_name = entry[1].get<std::string>();
      if (i > 0) {
        const size_t dot = name.rfind('.');
        const std::string parent = dot == std::string::npos ? "" : name.substr(0, dot);
        const auto it = index_.find(parent);
        if (it == index_.end()) {
          fail(where, "module " + model_detail::quote_name(name) + " comes before its parent " +
                          model_detail::quote_name(parent));
        }
        node.local = dot == std::string::npos ? name : name.substr(dot + 1);
        nodes_[it->second].children.push_back(nodes_.size());
      }
      index_[name] = nodes_.size();
      nodes_.push_back(std::move(node));
    }
  }

  // [name, shape, dtype] (parameters) or [name, shape, dtype, persistent] (buffers), each under
  // the module its name's prefix names.
  void read_tensors(const char* key, bool buffers) {
    const Json& tensors = array_at(root_, key, key);
    for (size_t i = 0; i < tensors.size(); ++i) {
      const std::string where = std::string(key) + "[" + std::to_string(i) + "]";
      const Json& entry = tensors[i];
      const size_t fields = buffers ? 4 : 3;
      if (!entry.is_array() || entry.size() != fields || !entry[0].is_string() ||
          !entry[1].is_array() || !entry[2].is_string() || (buffers && !entry[3].is_boolean())) {
        fail(where,
             buffers ? "must be [name, shape, dtype, persistent]" : "must be [name, shape, dtype]");
      }
      const std::string name = entry[0].get<std::string>();
      const size_t dot = name.rfind('.');
      const std::string owner = dot == std::string::npos ? "" : name.substr(0, dot);
      const auto it = index_.find(owner);
      if (it == index_.end()) {
        fail(where, model_detail::quote_name(name) + " belongs to no listed module");
      }
      TensorInfo tensor;
      tensor.name = dot == std::string::npos ? name : name.substr(dot + 1);
      for (const Json& dim : entry[1]) {
        if (!dim.is_number_integer() || dim.get<int64_t>() < 0) {
          fail(where, "the shape of " + model_detail::quote_name(name) +
                          " must hold non-negative integers");
        }
        tensor.shape.push_back(dim.get<int64_t>());
      }
      tensor.dtype = dtype_at(entry[2].get<std::string>(), where);
      tensor.buffer = buffers;
      tensor.persistent = buffers ? entry[3].get<bool>() : true;
      tensor.numel();  // refuses an overflowing shape, naming the tensor
      nodes_[it->second].tensors.push_back(std::move(tensor));
    }
  }

  Module to_module(size_t index) const {
    const Node& node = nodes_[index];
    Module module;
    module.name = node.local;
    module.class_name = node.class_name;
    module.tensors = node.tensors;
    for (size_t child : node.children) module.children.push_back(to_module(child));
    return module;
  }

  const Json& root_;
  std::string source_;
  std::vector<Node> nodes_;
  std::map<std::string, size_t> index_;
};

}  // namespace

ModelDescription model_from_tree_json(std::string_view text, std::string_view source) {
  const std::string name(source);
  const Json root = model_detail::parse_json(text, name, model_detail::kUniqueKeys);
  return TreeReader(root, name).read();
}

ModelDescription model_from_tree(const std::filesystem::path& file) {
  const std::string name = "module tree '" + file.string() + "'";
  // Trees of the largest models (thousands of experts) run to tens of MiB.
  return model_from_tree_json(internal::read_bounded_file(file, 256u << 20, name), name);
}

}  // namespace backplane
