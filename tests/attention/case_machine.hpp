// One row of tests/attention/cases.json as resolve_attention's inputs: the machine that
// tests/python/attention_oracle.py describes to transformers, in backplane's terms.
#pragma once

#include <backplane/rules/attention.hpp>

#include <nlohmann/json.hpp>

#include <string>
#include <vector>

namespace attention_test {

struct CaseMachine {
  backplane::DeviceInfo device;
  std::vector<backplane::KernelInfo> kernels;
  backplane::AttentionEnvironment env;
};

// The device is index 0 of its type; accelerators come from plugin "gpu", which registers sdpa
// and eager (as PyTorch has them everywhere) and, for each installed FlashAttention "package",
// flash_attention_N on cuda with the requirements of docs/device-rules.md §6 (8.0, 8.0, 9.0).
CaseMachine case_machine(const nlohmann::json& row);

}  // namespace attention_test
