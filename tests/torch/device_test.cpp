// Device names between backplane, LibTorch and DLPack: the tables of device.hpp, both ways, and
// the errors for what one side cannot name.
#include <backplane/error.hpp>
#include <backplane/torch/device.hpp>

#include <gtest/gtest.h>

#include <string>

namespace {

using backplane::Device;
using backplane::InvalidArgument;
using namespace backplane::torch;

struct TorchCase {
  Device backplane;
  c10::Device torch;
  Device back;  // backplane_device(torch)
};

TEST(TorchDevice, BackplaneToLibTorchAndBack) {
  const c10::DeviceType cpu = c10::DeviceType::CPU, cuda = c10::DeviceType::CUDA;
  const TorchCase cases[] = {
      {Device("cpu"), c10::Device(cpu), Device("cpu")},
      {Device("cpu", 0), c10::Device(cpu, 0), Device("cpu", 0)},
      {Device("cuda"), c10::Device(cuda), Device("cuda")},
      {Device("cuda", 1), c10::Device(cuda, 1), Device("cuda", 1)},
      // LibTorch's ROCm builds call AMD GPUs cuda; the way back cannot tell them apart.
      {Device("rocm", 0), c10::Device(cuda, 0), Device("cuda", 0)},
      {Device("rocm"), c10::Device(cuda), Device("cuda")},
      {Device("xpu", 0), c10::Device(c10::DeviceType::XPU, 0), Device("xpu", 0)},
      {Device("mps"), c10::Device(c10::DeviceType::MPS), Device("mps")},
      {Device("hpu", 2), c10::Device(c10::DeviceType::HPU, 2), Device("hpu", 2)},
      {Device("meta"), c10::Device(c10::DeviceType::Meta), Device("meta")},
  };
  for (const TorchCase& c : cases) {
    SCOPED_TRACE(c.backplane.str());
    EXPECT_EQ(torch_device(c.backplane), c.torch);
    EXPECT_EQ(backplane_device(c.torch), c.back);
  }
}

TEST(TorchDevice, LibTorchsHipIsRocm) {
  EXPECT_EQ(backplane_device(c10::Device(c10::DeviceType::HIP, 1)), Device("rocm", 1));
}

TEST(TorchDevice, ATypeLibTorchDoesNotKnowIsAnError) {
  for (const char* type : {"npu", "tpu", "neuron", "sim"}) {
    const Device device(type, 0);
    try {
      torch_device(device);
      ADD_FAILURE() << type << " mapped to a LibTorch device";
    } catch (const InvalidArgument& e) {
      const std::string what = e.what();
      EXPECT_NE(what.find("device '" + device.str() + "' has no LibTorch"), std::string::npos)
          << what;
      EXPECT_NE(what.find("cuda"), std::string::npos) << "LibTorch's list is missing: " << what;
    }
  }
}

struct DLPackCase {
  Device backplane;
  DLDevice dlpack;
  Device back;  // backplane_device(dlpack)
};

TEST(DLPackDevice, BackplaneToDLPackAndBack) {
  const auto one_api = static_cast<DLDeviceType>(14);
  const DLPackCase cases[] = {
      {Device("cpu"), {kDLCPU, 0}, Device("cpu")},
      {Device("cpu", 0), {kDLCPU, 0}, Device("cpu")},
      {Device("cuda"), {kDLCUDA, 0}, Device("cuda", 0)},
      {Device("cuda", 3), {kDLCUDA, 3}, Device("cuda", 3)},
      {Device("rocm", 1), {kDLROCM, 1}, Device("rocm", 1)},
      {Device("xpu", 0), {one_api, 0}, Device("xpu", 0)},
      {Device("mps"), {kDLMetal, 0}, Device("mps", 0)},
  };
  for (const DLPackCase& c : cases) {
    SCOPED_TRACE(c.backplane.str());
    const DLDevice dl = dlpack_device(c.backplane);
    EXPECT_EQ(dl.device_type, c.dlpack.device_type);
    EXPECT_EQ(dl.device_id, c.dlpack.device_id);
    EXPECT_EQ(backplane_device(c.dlpack), c.back);
  }
}

TEST(DLPackDevice, ErrorsNameTheDeviceAndTheAcceptedOnes) {
  struct Case {
    std::string what;
    std::function<void()> call;
    std::string message;
  };
  const Case cases[] = {
      {"hpu to DLPack", [] { dlpack_device(Device("hpu", 0)); },
       "device 'hpu:0' has no DLPack device type; DLPack names cpu, cuda, rocm, xpu, mps"},
      {"meta to DLPack", [] { dlpack_device(Device("meta")); },
       "device 'meta' has no DLPack device type; DLPack names cpu, cuda, rocm, xpu, mps"},
      {"pinned host memory",
       [] {
         backplane_device(DLDevice{kDLCUDAHost, 0});
       },
       "DLPack device kDLCUDAHost:0 has no backplane device; accepted: kDLCPU (cpu), kDLCUDA "
       "(cuda), kDLROCM (rocm), kDLOneAPI (xpu), kDLMetal (mps)"},
      {"vulkan",
       [] {
         backplane_device(DLDevice{kDLVulkan, 2});
       },
       "DLPack device kDLVulkan:2 has no backplane device; accepted: kDLCPU (cpu), kDLCUDA "
       "(cuda), kDLROCM (rocm), kDLOneAPI (xpu), kDLMetal (mps)"},
      {"newer than this DLPack",
       [] {
         backplane_device(DLDevice{static_cast<DLDeviceType>(15), 0});
       },
       "DLPack device kDLWebGPU:0 has no backplane device; accepted: kDLCPU (cpu), kDLCUDA "
       "(cuda), kDLROCM (rocm), kDLOneAPI (xpu), kDLMetal (mps)"},
      {"negative id",
       [] {
         backplane_device(DLDevice{kDLCUDA, -1});
       },
       "DLPack device kDLCUDA:-1 has a negative device_id"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.what);
    try {
      c.call();
      ADD_FAILURE() << "no error";
    } catch (const InvalidArgument& e) {
      EXPECT_EQ(std::string(e.what()), c.message);
    }
  }
}

}  // namespace
