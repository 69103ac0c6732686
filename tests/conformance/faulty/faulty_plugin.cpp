// Plugins the conformance suite must fail, one fault each (FAULT_LEAKS_A_FILE or
// FAULT_LAX_KERNEL): proof that its checks catch what they look for.
#include <backplane/plugin_sdk.hpp>

#include <fcntl.h>

#include <string>

namespace {

class FaultyPlugin {
 public:
  explicit FaultyPlugin(backplane::sdk::Host host) : host_(host) {}

  void register_all(backplane::sdk::Registrar& registrar) {
#ifdef FAULT_LEAKS_A_FILE
    // Opened on every init and never closed: 50 opens leave 50 descriptors.
    if (::open("/proc/self/maps", O_RDONLY | O_CLOEXEC) < 0) host_.debug("open failed");
#endif
    backplane::sdk::DeviceTypeSpec type;
    type.name = "faulty";
    type.flags = BP_TYPE_ACCELERATOR;
    type.available = true;
    registrar.add(type);
    backplane::sdk::DeviceSpec device;
    device.type = "faulty";
    device.name = "Faulty device";
    device.memory_total = uint64_t{1} << 30;
    device.capabilities = BP_CAP_UNIFIED_MEMORY;
    registrar.add(device);
#ifdef FAULT_LAX_KERNEL
    backplane::sdk::KernelSpec kernel;
    kernel.op = "attention_forward";
    kernel.implementation = "eager";
    kernel.device_type = "faulty";
    kernel.dtypes = {"float32"};
    kernel.function = reinterpret_cast<void (*)(void)>(&accept_anything);
    registrar.add(kernel);
#endif
  }

 private:
#ifdef FAULT_LAX_KERNEL
  // Checks nothing and computes nothing: the suite must see both.
  static bp_status* accept_anything(void*, const bp_attention_args*) noexcept {
    return nullptr;
  }
#endif
  backplane::sdk::Host host_;
};

}  // namespace

BACKPLANE_PLUGIN(FaultyPlugin, FAULTY_PLUGIN_NAME, "0.0.1")
