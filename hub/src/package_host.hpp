// The host side of the plugin ABI for kernel packages: statuses, logging, and a registrar that
// takes only kernels. Internal to libbackplane-hub.
#pragma once

#include <backplane/plugin.h>
#include <backplane/kernels.hpp>
#include <backplane/runtime.hpp>

#include <string>
#include <vector>

// The same definition as the core's (core/src/host_api.hpp), on purpose: a status that a
// package kernel returns may be freed by either side (`delete`).
struct bp_status {
  bp_status_code code;
  std::string message;
};

namespace backplane::hub::detail {

// Behind bp_host_api.context; lives as long as the loaded library.
struct PackageHostContext {
  std::string package;  // "org/repo@revision"
  LogLevel log_level = LogLevel::kWarn;
  LogSink log_sink;
};

bp_host_api make_package_host_api(PackageHostContext* context);
bp_status* make_package_status(bp_status_code code, const std::string& message);
// Frees a status made by make_package_status (NULL is ignored).
void free_package_status(bp_status* status);

struct RegisteredPackageKernel {
  KernelInfo info;
  void (*function)(void) = nullptr;
  void* context = nullptr;
};

// Behind bp_registrar.context during init.
struct PackageRegistrarContext {
  std::string package;
  std::vector<RegisteredPackageKernel> kernels;
  std::string first_error;  // the first registration refused
};

bp_registrar make_package_registrar(PackageRegistrarContext* context);

}  // namespace backplane::hub::detail
