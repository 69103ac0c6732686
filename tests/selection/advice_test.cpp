// Mixed-precision advice and the collective backend per device type (accelerate state.py
// _prepare_backend; the seed's "bf16 on Ampere or newer").
#include <backplane/error.hpp>
#include <backplane/rules/selection.hpp>

#include <gtest/gtest.h>

#include "expect_error.hpp"

namespace {

using backplane::collective_backend_for;
using backplane::ComputeCapability;
using backplane::DeviceInfo;
using backplane::InvalidArgument;
using backplane::mixed_precision_advice;
using selection_test::error_of;

DeviceInfo device(const std::string& type, uint64_t caps,
                  std::optional<ComputeCapability> cc = std::nullopt) {
  DeviceInfo info;
  info.device = backplane::Device(type, 0);
  info.capabilities = caps;
  info.compute_capability = cc;
  return info;
}

constexpr uint64_t kBoth = backplane::kCapFp16 | backplane::kCapBf16;

TEST(MixedPrecision, Bf16FromAmpere) {
  const DeviceInfo a100 = device("cuda", kBoth, ComputeCapability{8, 0});
  EXPECT_EQ(mixed_precision_advice(&a100), "bf16");
  const DeviceInfo h100 = device("cuda", kBoth, ComputeCapability{9, 0});
  EXPECT_EQ(mixed_precision_advice(&h100), "bf16");
  const DeviceInfo a4000 = device("cuda", kBoth, ComputeCapability{8, 6});
  EXPECT_EQ(mixed_precision_advice(&a4000), "bf16");
}

TEST(MixedPrecision, Fp16BeforeAmpere) {
  const DeviceInfo v100 = device("cuda", backplane::kCapFp16, ComputeCapability{7, 0});
  EXPECT_EQ(mixed_precision_advice(&v100), "fp16");
  // A bf16 bit below 8.0 (emulated bf16 on Turing) does not make bf16 advisable.
  const DeviceInfo t4 = device("cuda", kBoth, ComputeCapability{7, 5});
  EXPECT_EQ(mixed_precision_advice(&t4), "fp16");
}

TEST(MixedPrecision, VendorBitsDecideWithoutComputeCapability) {
  const DeviceInfo mi300 = device("cuda", kBoth);
  EXPECT_EQ(mixed_precision_advice(&mi300), "bf16");
  const DeviceInfo mi100 = device("rocm", backplane::kCapFp16);
  EXPECT_EQ(mixed_precision_advice(&mi100), "fp16");
  const DeviceInfo gaudi = device("hpu", kBoth);
  EXPECT_EQ(mixed_precision_advice(&gaudi), "bf16");
  const DeviceInfo bare = device("fpga", 0);
  EXPECT_EQ(mixed_precision_advice(&bare), std::nullopt);
}

TEST(MixedPrecision, NoneOnCpu) {
  const DeviceInfo cpu = device("cpu", kBoth);
  EXPECT_EQ(mixed_precision_advice(&cpu), std::nullopt);
  EXPECT_EQ(mixed_precision_advice(nullptr), std::nullopt);
}

backplane::BackendInfo backend(const std::string& type, const std::string& collective) {
  backplane::BackendInfo info;
  info.type = type;
  info.collective_backend = collective;
  return info;
}

struct Row {
  const char* type;
  const char* own;  // the plugin's collective_backend
  std::optional<std::string> requested;
  bool mpi_available, mpi_launched;
  std::optional<std::string> expected;  // nullopt: no collective backend
};

void PrintTo(const Row& row, std::ostream* os) {
  *os << row.type << " asks " << row.requested.value_or("nothing") << " mpi " << row.mpi_available
      << row.mpi_launched;
}

class Collective : public ::testing::TestWithParam<Row> {};

TEST_P(Collective, FitsTheDevice) {
  const Row& row = GetParam();
  const backplane::BackendInfo info = backend(row.type, row.own);
  EXPECT_EQ(
      collective_backend_for(row.type, &info, row.requested, row.mpi_available, row.mpi_launched),
      row.expected);
}

INSTANTIATE_TEST_SUITE_P(Table, Collective,
                         ::testing::Values(Row{"cuda", "nccl", {}, false, false, "nccl"},
                                           Row{"rocm", "nccl", {}, false, false, "nccl"},
                                           Row{"xpu", "xccl", {}, false, false, "xccl"},
                                           Row{"npu", "hccl", {}, false, false, "hccl"},
                                           Row{"hpu", "hccl", {}, false, false, "hccl"},
                                           Row{"mlu", "cncl", {}, false, false, "cncl"},
                                           Row{"musa", "mccl", {}, false, false, "mccl"},
                                           Row{"neuron", "neuron", {}, false, false, "neuron"},
                                           Row{"mps", "", {}, false, false, std::nullopt},
                                           Row{"cpu", "gloo", {}, false, false, "gloo"},
                                           Row{"cpu", "gloo", {}, true, false, "gloo"},
                                           Row{"cpu", "gloo", {}, false, true, "gloo"},
                                           Row{"cpu", "gloo", {}, true, true, "mpi"},
                                           Row{"cpu", "gloo", "mpi", true, false, "mpi"},
                                           Row{"cpu", "gloo", "gloo", true, true, "gloo"},
                                           Row{"cuda", "nccl", "nccl", false, false, "nccl"},
                                           Row{"cuda", "nccl", "gloo", false, false, "gloo"},
                                           Row{"xpu", "xccl", "ccl", false, false, "ccl"},
                                           Row{"cuda", "nccl", "", false, false, "nccl"}));

struct Refusal {
  const char* type;
  const char* own;
  const char* requested;
  bool mpi_available, mpi_launched;
  const char* message;
};

void PrintTo(const Refusal& row, std::ostream* os) {
  *os << row.type << " asks " << row.requested;
}

class CollectiveRefusal : public ::testing::TestWithParam<Refusal> {};

TEST_P(CollectiveRefusal, HasAcceleratesMessage) {
  const Refusal& row = GetParam();
  const backplane::BackendInfo info = backend(row.type, row.own);
  EXPECT_EQ(error_of<InvalidArgument>([&] {
              collective_backend_for(row.type, &info, std::string(row.requested), row.mpi_available,
                                     row.mpi_launched);
            }),
            row.message);
}

INSTANTIATE_TEST_SUITE_P(
    Table, CollectiveRefusal,
    ::testing::Values(
        Refusal{"cpu", "gloo", "nccl", false, false,
                "Your assigned backend nccl is not available, please use gloo"},
        Refusal{"cpu", "gloo", "mpi", false, true,
                "Your assigned backend mpi is not available, please use gloo"},
        Refusal{"cpu", "gloo", "nccl", true, true,
                "Your assigned backend nccl is not available, please use mpi"},
        Refusal{"cuda", "nccl", "hccl", false, false,
                "Your assigned backend hccl is not available, please use nccl"},
        Refusal{"npu", "hccl", "nccl", false, false,
                "Your assigned backend nccl is not available, please use hccl"},
        Refusal{"mlu", "cncl", "gloo", false, false,
                "Your assigned backend gloo is not available, please use cncl"},
        Refusal{"neuron", "neuron", "nccl", false, false,
                "Your assigned backend nccl is not available, please use neuron"},
        Refusal{"mps", "", "gloo", false, false,
                "Your assigned backend gloo is not available: mps has no collective backend, so "
                "it cannot run distributed"}));

TEST(Collective, CpuWithoutAPluginIsGloo) {
  EXPECT_EQ(collective_backend_for("cpu", nullptr, std::nullopt, false, false), "gloo");
  EXPECT_EQ(collective_backend_for("meta", nullptr, std::nullopt, false, false), std::nullopt);
}

}  // namespace
