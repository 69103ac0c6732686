#include "package_host.hpp"

#include <algorithm>
#include <cstring>
#include <iostream>

namespace backplane::hub::detail {
namespace {

// Returned when a status cannot be allocated. Never freed by this library; see take_status.
bp_status out_of_memory_status{BP_OUT_OF_MEMORY, std::string()};

PackageHostContext* host(bp_host_context* context) {
  return reinterpret_cast<PackageHostContext*>(context);
}
PackageRegistrarContext* registrar(bp_registrar_context* context) {
  return reinterpret_cast<PackageRegistrarContext*>(context);
}

bp_status* status_new(bp_host_context*, bp_status_code code, const char* message) {
  if (code == BP_OK) return nullptr;
  return make_package_status(code, message != nullptr ? message : "");
}

void log(bp_host_context* context, bp_log_level level, const char* message) {
  PackageHostContext* h = host(context);
  const auto core_level = static_cast<LogLevel>(level > BP_LOG_DEBUG ? BP_LOG_DEBUG : level);
  if (h == nullptr || static_cast<int>(core_level) > static_cast<int>(h->log_level)) return;
  try {
    const std::string line =
        "kernel package '" + h->package + "': " + (message != nullptr ? message : "");
    if (h->log_sink) {
      h->log_sink(core_level, line);
    } else {
      std::cerr << "backplane: " << to_string(core_level) << ": " << line << "\n";
    }
  } catch (...) {  // logging must never throw into a package
  }
}

void status_free(bp_host_context*, bp_status* status) {
  free_package_status(status);
}

const char* status_message(bp_host_context*, const bp_status* status) {
  return status != nullptr ? status->message.c_str() : "";
}

bp_status* refuse(PackageRegistrarContext* context, bp_status_code code, const std::string& what) {
  if (context->first_error.empty()) context->first_error = what;
  return make_package_status(code, what);
}

bp_status* add_device_type(bp_registrar_context* context, const bp_device_type_desc*) {
  return refuse(registrar(context), BP_INVALID_ARGUMENT,
                "add_device_type: a kernel package registers kernels only (add_kernel); device "
                "types come from backend plugins");
}

bp_status* add_device(bp_registrar_context* context, const bp_device_desc*) {
  return refuse(registrar(context), BP_INVALID_ARGUMENT,
                "add_device: a kernel package registers kernels only (add_kernel); devices come "
                "from backend plugins");
}

std::string copy(const char* s) {
  return s != nullptr ? s : "";
}

bool is_kernel_name(const std::string& name) {
  return !name.empty() && name.size() <= 64 && std::all_of(name.begin(), name.end(), [](char c) {
    return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_';
  });
}

bp_status* add_kernel(bp_registrar_context* opaque, const bp_kernel_desc* desc) try {
  PackageRegistrarContext* context = registrar(opaque);
  // Read the fields both sides know (a newer package's struct may be larger).
  bp_kernel_desc d{};
  if (desc == nullptr || desc->struct_size < BP_KERNEL_DESC_SIZE_1_3) {
    return refuse(context, BP_INVALID_ARGUMENT,
                  "add_kernel: descriptor is NULL or smaller than ABI 1.3's (" +
                      std::to_string(BP_KERNEL_DESC_SIZE_1_3) + " bytes)");
  }
  std::memcpy(static_cast<void*>(&d), desc, std::min(desc->struct_size, sizeof d));
  RegisteredPackageKernel kernel;
  kernel.info.op = copy(d.op);
  kernel.info.implementation = copy(d.implementation);
  kernel.info.device_type = copy(d.device_type);
  kernel.info.plugin = context->package;
  const std::string label = "kernel " + kernel.info.op + "/" + kernel.info.implementation;
  if (!is_kernel_name(kernel.info.op) || !is_kernel_name(kernel.info.implementation)) {
    return refuse(context, BP_INVALID_ARGUMENT,
                  label + ": op and implementation must be 1-64 characters of a-z, 0-9 and '_'");
  }
  if (kernel.info.device_type.empty()) {
    return refuse(context, BP_INVALID_ARGUMENT, label + ": device_type is empty");
  }
  if (d.function == nullptr) {
    return refuse(context, BP_INVALID_ARGUMENT, label + ": function is NULL");
  }
  if (d.dtype_count > 0 && d.dtypes == nullptr) {
    return refuse(context, BP_INVALID_ARGUMENT, label + ": dtypes is NULL");
  }
  if (d.min_compute_capability_major >= 0) {
    kernel.info.min_compute_capability = ComputeCapability{
        d.min_compute_capability_major, std::max(0, d.min_compute_capability_minor)};
  }
  for (size_t i = 0; i < d.dtype_count; ++i) kernel.info.dtypes.push_back(copy(d.dtypes[i]));
  kernel.info.max_head_dim = std::max(0, d.max_head_dim);
  for (const RegisteredPackageKernel& k : context->kernels) {
    if (k.info.op == kernel.info.op && k.info.implementation == kernel.info.implementation &&
        k.info.device_type == kernel.info.device_type) {
      return refuse(context, BP_INVALID_ARGUMENT,
                    label + " registered twice for " + kernel.info.device_type);
    }
  }
  kernel.function = d.function;
  kernel.context = d.context;
  context->kernels.push_back(std::move(kernel));
  return nullptr;
} catch (const std::exception& e) {
  return refuse(registrar(opaque), BP_INTERNAL, std::string("add_kernel: ") + e.what());
}

}  // namespace

bp_status* make_package_status(bp_status_code code, const std::string& message) {
  try {
    return new bp_status{code, message};
  } catch (...) {
    return &out_of_memory_status;
  }
}

void free_package_status(bp_status* status) {
  if (status != &out_of_memory_status) delete status;
}

bp_host_api make_package_host_api(PackageHostContext* context) {
  bp_host_api api{};
  api.struct_size = sizeof api;
  api.abi_major = BP_ABI_VERSION_MAJOR;
  api.abi_minor = BP_ABI_VERSION_MINOR;
  api.context = reinterpret_cast<bp_host_context*>(context);
  api.status_new = &status_new;
  api.log = &log;
  api.status_free = &status_free;
  api.status_message = &status_message;
  return api;
}

bp_registrar make_package_registrar(PackageRegistrarContext* context) {
  bp_registrar r{};
  r.struct_size = sizeof r;
  r.context = reinterpret_cast<bp_registrar_context*>(context);
  r.add_device_type = &add_device_type;
  r.add_device = &add_device;
  r.add_kernel = &add_kernel;
  return r;
}

}  // namespace backplane::hub::detail
