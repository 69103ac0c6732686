// The host side of bp_registrar, for every host that runs a library's init (the core's
// runtime, the hub's kernel packages): each descriptor is read into this host's layout (an
// older library's smaller struct reads as zeros past its end), the checks every host makes
// are made here, and the rest is the host's RegistrationHandler's. The first refusal is kept
// even when the library ignores the status it was given.
#pragma once

#include <backplane/plugin.h>
#include <backplane/runtime/kernels.hpp>

#include <string>
#include <vector>

namespace backplane::detail {

// A kernel as a library registered it: its description and where to call it.
struct RegisteredKernel {
  KernelInfo info;
  void (*function)(void) = nullptr;
  void* context = nullptr;
};

// What one host does with one init's registrations. Each returns the reason it refuses, or an
// empty string; what it throws is refused as BP_INTERNAL.
class RegistrationHandler {
 public:
  virtual ~RegistrationHandler() = default;
  virtual std::string add_device_type(const bp_device_type_desc& desc) = 0;
  virtual std::string add_device(const bp_device_desc& desc) = 0;
  // A kernel that passed the common checks on its names; the host's own conditions.
  virtual std::string check_kernel(const KernelInfo& kernel) = 0;
  virtual std::string add_layer_kernel(const bp_layer_kernel_desc& desc) = 0;
};

}  // namespace backplane::detail

// Behind bp_registrar.context while one init runs.
struct bp_registrar_context {
  std::string owner;  // KernelInfo::plugin of the kernels it registers
  backplane::detail::RegistrationHandler* handler = nullptr;
  std::vector<backplane::detail::RegisteredKernel> kernels;  // in registration order
  std::string first_error;
};

namespace backplane::detail {

bp_registrar make_registrar(bp_registrar_context* context);

}  // namespace backplane::detail
