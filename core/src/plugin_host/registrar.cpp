#include "plugin_host/registrar.hpp"

#include <algorithm>

#include "plugin_host/abi_struct.hpp"
#include "plugin_host/status.hpp"

namespace backplane::detail {
namespace {

std::string copy(const char* s) {
  return s != nullptr ? std::string(s) : std::string();
}

bp_status* refuse(bp_registrar_context* context, bp_status_code code, const std::string& reason) {
  if (context->first_error.empty()) context->first_error = reason;
  return make_status(code, reason);
}

bp_status* reply(bp_registrar_context* context, const std::string& refusal) {
  return refusal.empty() ? nullptr : refuse(context, BP_INVALID_ARGUMENT, refusal);
}

std::string too_small(const char* entry, size_t min_size, const char* abi) {
  return std::string(entry) + ": descriptor is NULL or smaller than ABI " + abi + "'s (" +
         std::to_string(min_size) + " bytes)";
}

bool is_kernel_name(const std::string& name) {
  return !name.empty() && name.size() <= 64 && std::all_of(name.begin(), name.end(), [](char c) {
    return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_';
  });
}

// The checks every host makes of a kernel; an empty string when it may be kept.
std::string read_kernel(const bp_registrar_context& context, const bp_kernel_desc& d,
                        RegisteredKernel& kernel) {
  kernel.info.op = copy(d.op);
  kernel.info.implementation = copy(d.implementation);
  kernel.info.device_type = copy(d.device_type);
  kernel.info.plugin = context.owner;
  const std::string label = "kernel " + kernel.info.op + "/" + kernel.info.implementation;
  if (!is_kernel_name(kernel.info.op) || !is_kernel_name(kernel.info.implementation)) {
    return label + ": op and implementation must be 1-64 characters of a-z, 0-9 and '_'";
  }
  if (std::string refusal = context.handler->check_kernel(kernel.info); !refusal.empty()) {
    return refusal;
  }
  if (d.function == nullptr) return label + ": function is NULL";
  if (d.dtype_count > 0 && d.dtypes == nullptr) return label + ": dtypes is NULL";
  if (d.min_compute_capability_major >= 0) {
    kernel.info.min_compute_capability = ComputeCapability{
        d.min_compute_capability_major, std::max(0, d.min_compute_capability_minor)};
  }
  for (size_t i = 0; i < d.dtype_count; ++i) kernel.info.dtypes.push_back(copy(d.dtypes[i]));
  kernel.info.max_head_dim = std::max(0, d.max_head_dim);
  for (const RegisteredKernel& k : context.kernels) {
    if (k.info.op == kernel.info.op && k.info.implementation == kernel.info.implementation &&
        k.info.device_type == kernel.info.device_type) {
      return label + " registered twice for " + kernel.info.device_type;
    }
  }
  kernel.function = d.function;
  kernel.context = d.context;
  return {};
}

bp_status* add_device_type(bp_registrar_context* context, const bp_device_type_desc* desc) try {
  bp_device_type_desc d;
  if (!read_abi_struct(desc, BP_DEVICE_TYPE_DESC_SIZE_1_0, d)) {
    return refuse(context, BP_INVALID_ARGUMENT,
                  too_small("add_device_type", BP_DEVICE_TYPE_DESC_SIZE_1_0, "1.0"));
  }
  return reply(context, context->handler->add_device_type(d));
} catch (const std::exception& e) {
  return refuse(context, BP_INTERNAL, std::string("add_device_type: ") + e.what());
}

bp_status* add_device(bp_registrar_context* context, const bp_device_desc* desc) try {
  bp_device_desc d;
  if (!read_abi_struct(desc, BP_DEVICE_DESC_SIZE_1_0, d)) {
    return refuse(context, BP_INVALID_ARGUMENT,
                  too_small("add_device", BP_DEVICE_DESC_SIZE_1_0, "1.0"));
  }
  return reply(context, context->handler->add_device(d));
} catch (const std::exception& e) {
  return refuse(context, BP_INTERNAL, std::string("add_device: ") + e.what());
}

bp_status* add_kernel(bp_registrar_context* context, const bp_kernel_desc* desc) try {
  bp_kernel_desc d;
  if (!read_abi_struct(desc, BP_KERNEL_DESC_SIZE_1_3, d)) {
    return refuse(context, BP_INVALID_ARGUMENT,
                  too_small("add_kernel", BP_KERNEL_DESC_SIZE_1_3, "1.3"));
  }
  RegisteredKernel kernel;
  if (std::string refusal = read_kernel(*context, d, kernel); !refusal.empty()) {
    return reply(context, refusal);
  }
  context->kernels.push_back(std::move(kernel));
  return nullptr;
} catch (const std::exception& e) {
  return refuse(context, BP_INTERNAL, std::string("add_kernel: ") + e.what());
}

bp_status* add_layer_kernel(bp_registrar_context* context, const bp_layer_kernel_desc* desc) try {
  bp_layer_kernel_desc d;
  if (!read_abi_struct(desc, BP_LAYER_KERNEL_DESC_SIZE_1_4, d)) {
    return refuse(context, BP_INVALID_ARGUMENT,
                  too_small("add_layer_kernel", BP_LAYER_KERNEL_DESC_SIZE_1_4, "1.4"));
  }
  return reply(context, context->handler->add_layer_kernel(d));
} catch (const std::exception& e) {
  return refuse(context, BP_INTERNAL, std::string("add_layer_kernel: ") + e.what());
}

}  // namespace

bp_registrar make_registrar(bp_registrar_context* context) {
  bp_registrar registrar{};
  registrar.struct_size = sizeof registrar;
  registrar.context = context;
  registrar.add_device_type = &add_device_type;
  registrar.add_device = &add_device;
  registrar.add_kernel = &add_kernel;
  registrar.add_layer_kernel = &add_layer_kernel;
  return registrar;
}

}  // namespace backplane::detail
