#include <backplane/error.hpp>
#include <backplane/internal/text.hpp>
#include <backplane/model/model.hpp>

#include <limits>

namespace backplane {

using internal::shape_text;
namespace {

constexpr int64_t kMax = std::numeric_limits<int64_t>::max();

void collect(const Module& module, const std::string& name, std::vector<NamedModule>& out) {
  out.push_back({name, &module});
  for (const Module& child : module.children) {
    collect(child, name.empty() ? child.name : name + "." + child.name, out);
  }
}

}  // namespace

int64_t TensorInfo::numel() const {
  int64_t count = 1;
  for (int64_t dim : shape) {
    if (dim < 0) {
      throw InvalidArgument("Tensor '" + name + "' has a negative dimension in shape " +
                            shape_text(shape) + "; dimensions must be >= 0");
    }
    if (dim != 0 && count > kMax / dim) {
      throw InvalidArgument("Tensor '" + name + "' of shape " + shape_text(shape) +
                            " has more elements than fit in a signed 64-bit integer");
    }
    count *= dim;
  }
  return count;
}

int64_t TensorInfo::nbytes() const {
  const int64_t count = numel();
  const int64_t bytes_per_element = dtype_bits(dtype) / 8;
  if (count > kMax / bytes_per_element) {
    throw InvalidArgument("Tensor '" + name + "' of shape " + shape_text(shape) + " and dtype " +
                          to_string(dtype) + " has more bytes than fit in a signed 64-bit integer");
  }
  return count * bytes_per_element;
}

std::vector<NamedModule> named_modules(const Module& root) {
  std::vector<NamedModule> out;
  collect(root, "", out);
  return out;
}

const Module* find_module(const Module& root, std::string_view qualified_name) {
  const Module* module = &root;
  while (!qualified_name.empty()) {
    const size_t dot = qualified_name.find('.');
    const std::string_view part = qualified_name.substr(0, dot);
    const Module* next = nullptr;
    for (const Module& child : module->children) {
      if (child.name == part) {
        next = &child;
        break;
      }
    }
    if (next == nullptr) return nullptr;
    module = next;
    if (dot == std::string_view::npos) break;
    qualified_name.remove_prefix(dot + 1);
    if (qualified_name.empty()) return nullptr;  // a trailing dot names nothing
  }
  return module;
}

}  // namespace backplane
