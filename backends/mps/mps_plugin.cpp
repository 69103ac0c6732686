// The mps plugin: Apple's Metal Performance Shaders backend. A stub by design: it registers the
// `mps` device type and reports it unavailable with the reason, everywhere. It is also the
// smallest complete plugin, the one to copy when starting a new backend.
#include <backplane/plugin_sdk.hpp>

#include <sys/utsname.h>

#include <string>
#include "device_type.hpp"

namespace {

std::string this_platform() {
  struct utsname u {};
  if (uname(&u) != 0) return "an unknown platform";
  return std::string(u.sysname) + " " + u.machine;
}

std::string unavailable_reason() {
#if defined(__APPLE__) && defined(__aarch64__)
  return "the mps plugin is a stub: Metal device discovery is not implemented yet";
#else
  return "MPS needs Apple silicon running macOS; this machine is " + this_platform();
#endif
}

class MpsPlugin {
 public:
  explicit MpsPlugin(backplane::sdk::Host host) : host_(host) {}

  void register_all(backplane::sdk::Registrar& registrar) {
    backplane::sdk::DeviceTypeSpec mps = backplane::backends::device_type_spec("mps");
    mps.available = false;
    mps.unavailable_reason = unavailable_reason();
    registrar.add(mps);
    host_.debug("registered mps as unavailable: " + mps.unavailable_reason);
  }

 private:
  backplane::sdk::Host host_;
};

}  // namespace

BACKPLANE_PLUGIN(MpsPlugin, "mps", "0.1.0")
