// What each device type's backend registers, once: the in-tree plugins, the simulated backend
// and the selection tests all read this table, so that a real and a simulated cuda are chosen
// alike (c10's single list of device types is the model). tests/sim/sim_test.cpp checks that
// the plugins register what it says. Internal: not installed, no compatibility promise.
#pragma once

#include <string_view>

namespace backplane::internal {

struct DeviceTypeFacts {
  std::string_view name;
  std::string_view hub_key;  // the Kernel Hub's key for its builds; empty: the name
  // The backend a Kernel Hub build variant names for it (torch29-cxx11-<backend>...): the Hub
  // key, except Apple's metal and Ascend's cann.
  std::string_view build_backend;
  bool versioned_build;  // its build variants carry the backend's version (cu130, rocm72, xpu20260)
  std::string_view collective_backend;  // torch.distributed's backend; empty: none
  // Transformers' training order (TrainingArguments / Accelerate's device choice), lower first:
  // mps, xpu, mlu, musa, npu, hpu, neuron, tpu, cuda (and rocm, which answers to it); cpu last.
  int training_priority;
  bool accelerator;
  bool automatic_placement;  // device_map="auto" places models on it
};

// clang-format off
inline constexpr DeviceTypeFacts kDeviceTypeFacts[] = {
    // name    Hub key   build     versioned  collective  priority  accelerator  automatic placement
    {"cpu",    "cpu",    "cpu",    false,     "gloo",     1000,     false,       false},
    {"mps",    "mps",    "metal",  false,     "",         10,       true,        true},
    {"xpu",    "xpu",    "xpu",    true,      "xccl",     20,       true,        true},
    {"mlu",    "mlu",    "mlu",    false,     "cncl",     30,       true,        true},
    {"musa",   "musa",   "musa",   false,     "mccl",     40,       true,        true},
    {"npu",    "npu",    "cann",   true,      "hccl",     50,       true,        true},
    {"hpu",    "hpu",    "hpu",    false,     "hccl",     60,       true,        true},
    {"neuron", "neuron", "neuron", false,     "neuron",   70,       true,        false},
    {"tpu",    "tpu",    "tpu",    false,     "xla",      75,       true,        false},
    {"cuda",   "cuda",   "cuda",   true,      "nccl",     80,       true,        true},
    {"rocm",   "rocm",   "rocm",   true,      "nccl",     80,       true,        true},  // RCCL is NCCL's name
};

// Device types that only their vendor's plugins may register, and the simulated backend, which
// stands in for any backend. AMD's plugin answers to `cuda` as PyTorch's ROCm builds do.
struct ReservedDeviceType {
  std::string_view name;
  std::string_view owners[3];  // plugin names; unused slots empty
};

inline constexpr ReservedDeviceType kReservedDeviceTypes[] = {
    {"cpu",  {"cpu", "sim"}},
    {"cuda", {"cuda", "rocm", "sim"}},
    {"hip",  {"rocm", "sim"}},
    {"mps",  {"mps", "sim"}},
    {"xpu",  {"xpu", "sim"}},
    {"mtia", {"mtia", "sim"}},
};
// clang-format on

// The facts of `name`, or nullptr for a type this table does not know (a vendor's own).
constexpr const DeviceTypeFacts* device_type_facts(std::string_view name) {
  for (const DeviceTypeFacts& facts : kDeviceTypeFacts) {
    if (facts.name == name) return &facts;
  }
  return nullptr;
}

// The facts of the device type whose Kernel Hub builds name `build_backend` (cann: npu).
constexpr const DeviceTypeFacts* device_type_of_build_backend(std::string_view build_backend) {
  for (const DeviceTypeFacts& facts : kDeviceTypeFacts) {
    if (facts.build_backend == build_backend) return &facts;
  }
  return nullptr;
}

}  // namespace backplane::internal
