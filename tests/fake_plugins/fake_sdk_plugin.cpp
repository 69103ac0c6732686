// A fake plugin written with the C++ SDK (plugin_sdk.hpp), where the SDK's trampolines are what
// is under test: exceptions thrown by the plugin class must become statuses, never cross the
// ABI. Compiled once per variant:
//   FAKE_SDK_THROW_IN_REGISTER  register_all registers its type, then throws
//                               std::runtime_error("boom from register_all")
//   FAKE_SDK_THROW_IN_MEMORY    loads with one device; memory_info throws
//                               std::runtime_error("boom from memory_info")
//   FAKE_SDK_LAYER_KERNELS=0    registers two default layer kernels (ABI 1.4) on fakeaccel:
//                               RMSNorm inference fake/norm:Fast, training fake/norm@v2:Slow
//   FAKE_SDK_LAYER_KERNELS=1|2|3  then one the host refuses: on a device key it did not
//                               register ("cuda"), with modes inference|training (6), or a
//                               capability range on a key other than cuda and rocm
#include <backplane/plugin_sdk.hpp>

#include <optional>
#include <stdexcept>
#include <string_view>

#ifndef FAKE_NAME
#error "FAKE_NAME must be defined"
#endif

namespace {

class FakeSdkPlugin {
 public:
  explicit FakeSdkPlugin(backplane::sdk::Host host) : host_(host) {}

  void register_all(backplane::sdk::Registrar& registrar) {
    host_.info("init");
    backplane::sdk::DeviceTypeSpec type;
    type.name = "fakeaccel";
    type.flags = BP_TYPE_ACCELERATOR;
    type.available = true;
    registrar.add(type);

    backplane::sdk::DeviceSpec device;
    device.type = "fakeaccel";
    device.index = 0;
    device.name = "Fake SDK Accelerator 0";
    device.memory_total = uint64_t{1} << 30;
    device.properties = {{"driver", std::string("fakesdk")}, {"cores", int64_t{8}}};
    registrar.add(device);
#ifdef FAKE_SDK_LAYER_KERNELS
    register_layer_kernels(registrar);
#endif
#ifdef FAKE_SDK_THROW_IN_REGISTER
    throw std::runtime_error("boom from register_all");
#endif
  }

#ifdef FAKE_SDK_THROW_IN_MEMORY
  std::optional<backplane::sdk::MemoryInfo> memory_info(std::string_view, int) const {
    throw std::runtime_error("boom from memory_info");
  }
#endif

#ifdef FAKE_SDK_LAYER_KERNELS
  static void register_layer_kernels(backplane::sdk::Registrar& registrar) {
    backplane::sdk::LayerKernelSpec fast;
    fast.layer = "RMSNorm";
    fast.device_key = "fakeaccel";
    fast.mode = BP_KERNEL_MODE_INFERENCE;
    fast.repo = "fake/norm";
    fast.kernel_layer = "Fast";
    fast.version = 1;
    registrar.add(fast);
    backplane::sdk::LayerKernelSpec slow = fast;
    slow.mode = BP_KERNEL_MODE_TRAINING;
    slow.kernel_layer = "Slow";
    slow.revision = "v2";
    slow.version = 0;
    registrar.add(slow);
    backplane::sdk::LayerKernelSpec bad = fast;
    switch (FAKE_SDK_LAYER_KERNELS) {
      case 1:
        bad.device_key = "cuda";
        break;
      case 2:
        bad.mode = BP_KERNEL_MODE_INFERENCE | BP_KERNEL_MODE_TRAINING;
        break;
      case 3:
        bad.min_capability = 80;
        break;
      default:
        return;
    }
    registrar.add(bad);
  }
#endif

 private:
  backplane::sdk::Host host_;
};

}  // namespace

BACKPLANE_PLUGIN(FakeSdkPlugin, FAKE_NAME, "0.0.1-fake")
