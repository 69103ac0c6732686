// A tiny kernel package library for the hub tests, written with the plugin SDK as a real
// package would be. It registers one kernel, op "scale" (data[i] *= factor over float32),
// and is compiled once per misbehaviour (CMakeLists.txt) like the fake plugins:
//   HUB_TEST_ADDS_DEVICE_TYPE   also registers a device type (packages may not)
//   HUB_TEST_INIT_FAILS         init returns an error
//   HUB_TEST_UNDECLARED_KERNEL  also registers a kernel its metadata does not declare
//   HUB_TEST_SQUARES            scales by factor * factor: another build of the same package,
//                               told apart by what it computes
#include <backplane/plugin_sdk.hpp>

#include <cstddef>

#include "test_package_op.h"

namespace {

class ScalePackage {
 public:
  explicit ScalePackage(backplane::sdk::Host host) : host_(host) {}

  void register_all(backplane::sdk::Registrar& registrar) {
#ifdef HUB_TEST_INIT_FAILS
    throw backplane::sdk::Error(BP_UNAVAILABLE, "this package refuses to start");
#endif
#ifdef HUB_TEST_ADDS_DEVICE_TYPE
    backplane::sdk::DeviceTypeSpec type;
    type.name = "cpu";
    type.available = true;
    registrar.add(type);
#endif
    host_.debug("registering scale_f32");
    backplane::sdk::KernelSpec kernel;
    kernel.op = "scale";
    kernel.implementation = "scale_f32";
    kernel.device_type = "cpu";
    kernel.dtypes = {"float32"};
    kernel.function = reinterpret_cast<void (*)(void)>(&ScalePackage::scale);
    kernel.context = this;
    registrar.add(kernel);
#ifdef HUB_TEST_UNDECLARED_KERNEL
    kernel.implementation = "scale_undeclared";
    registrar.add(kernel);
#endif
  }

 private:
  static bp_status* scale(void* context, float* data, size_t count, float factor) noexcept {
    const auto* self = static_cast<const ScalePackage*>(context);
    if (data == nullptr && count > 0) {
      return self->host_.status(BP_INVALID_ARGUMENT, "scale: data is NULL");
    }
#ifdef HUB_TEST_SQUARES
    factor *= factor;
#endif
    for (size_t i = 0; i < count; ++i) data[i] *= factor;
    return nullptr;
  }

  backplane::sdk::Host host_;
};

}  // namespace

BACKPLANE_PLUGIN(ScalePackage, "scale", "1.0.0")
