// select_training_device: transformers training_args.py _setup_devices and accelerate state.py
// PartialState, over snapshots written as tables.
#include <backplane/error.hpp>
#include <backplane/rules/selection.hpp>

#include <gtest/gtest.h>

#include "expect_error.hpp"
#include "machine.hpp"

namespace {

using backplane::InvalidArgument;
using backplane::NotFound;
using backplane::select_training_device;
using backplane::Selection;
using backplane::TrainingOptions;
using backplane::Unavailable;
using selection_test::env;
using selection_test::error_of;
using selection_test::Machine;
using selection_test::strs;
using Vars = std::map<std::string, std::string>;
using Strings = std::vector<std::string>;

constexpr uint64_t kHalf = selection_test::kHalf;

Selection train(const Machine& m, const Vars& vars = {}, TrainingOptions options = {}) {
  return select_training_device(m.backends, m.devices, options, env(vars));
}

struct Row {
  const char* name;
  Machine machine;
  Vars vars;
  TrainingOptions options;
  const char* device;
  Strings devices;
  std::optional<std::string> collective;
  int rank, local_rank, world_size;
  std::optional<std::string> mixed_precision;
  const char* reason_fragment;
};

void PrintTo(const Row& row, std::ostream* os) {
  *os << row.name;
}

class Training : public ::testing::TestWithParam<Row> {};

TEST_P(Training, ChoosesTheDevice) {
  const Row& row = GetParam();
  const Selection s = train(row.machine, row.vars, row.options);
  EXPECT_EQ(s.device.str(), row.device);
  EXPECT_EQ(strs(s.devices), row.devices);
  EXPECT_EQ(s.collective_backend, row.collective);
  EXPECT_EQ(s.rank, row.rank);
  EXPECT_EQ(s.local_rank, row.local_rank);
  EXPECT_EQ(s.world_size, row.world_size);
  EXPECT_EQ(s.mixed_precision, row.mixed_precision);
  EXPECT_NE(s.reason.find(row.reason_fragment), std::string::npos) << s.reason;
}

TrainingOptions use_cpu() {
  TrainingOptions o;
  o.use_cpu = true;
  return o;
}
TrainingOptions device(const std::string& d) {
  TrainingOptions o;
  o.device = d;
  return o;
}
TrainingOptions backend(const std::string& b, bool mpi = false) {
  TrainingOptions o;
  o.backend = b;
  o.mpi_available = mpi;
  return o;
}
TrainingOptions mpi() {
  TrainingOptions o;
  o.mpi_available = true;
  return o;
}

const Vars kTorchrun2of4 = {{"LOCAL_RANK", "2"}, {"RANK", "2"}, {"WORLD_SIZE", "4"}};

INSTANTIATE_TEST_SUITE_P(
    Single, Training,
    ::testing::Values(
        Row{"cpu_only",
            selection_test::cpu_only(),
            {},
            {},
            "cpu",
            {"cpu"},
            {},
            0,
            0,
            1,
            {},
            "no accelerator is available"},
        Row{"no_plugins",
            Machine(),
            {},
            {},
            "cpu",
            {"cpu"},
            {},
            0,
            0,
            1,
            {},
            "no available backend"},
        // Trainer's n_gpu: every CUDA device in one process (DataParallel).
        Row{"h100x4",
            selection_test::h100(4),
            {},
            {},
            "cuda:0",
            {"cuda:0", "cuda:1", "cuda:2", "cuda:3"},
            {},
            0,
            0,
            1,
            "bf16",
            "n_gpu"},
        Row{"one_gpu",
            selection_test::h100(1),
            {},
            {},
            "cuda:0",
            {"cuda:0"},
            {},
            0,
            0,
            1,
            "bf16",
            "cuda is the first available backend"},
        Row{"v100",
            Machine().add("cuda", 2, backplane::kCapFp16, {{7, 0}}),
            {},
            {},
            "cuda:0",
            {"cuda:0", "cuda:1"},
            {},
            0,
            0,
            1,
            "fp16",
            "cuda"},
        // Trainer writes mps without an index.
        Row{"mps",
            Machine().add("mps", 1, kHalf).add("cpu", 1),
            {},
            {},
            "mps",
            {"mps"},
            {},
            0,
            0,
            1,
            "bf16",
            "mps is the first"},
        // Transformers' order: hpu before cuda.
        Row{"hpu_before_cuda",
            Machine().add("cuda", 2, kHalf, {{8, 0}}).add("hpu", 2, kHalf).add("cpu", 1),
            {},
            {},
            "hpu:0",
            {"hpu:0"},
            {},
            0,
            0,
            1,
            "bf16",
            "hpu is the first"},
        Row{"xpu_before_npu",
            Machine().add("npu", 1, kHalf).add("xpu", 1, kHalf).add("cpu", 1),
            {},
            {},
            "xpu:0",
            {"xpu:0"},
            {},
            0,
            0,
            1,
            "bf16",
            "xpu is the first"},
        Row{"neuron",
            Machine().add("neuron", 32, kHalf).add("cpu", 1),
            {},
            {},
            "neuron:0",
            {"neuron:0"},
            {},
            0,
            0,
            1,
            "bf16",
            "neuron is the first"},
        // training_priority 0: never chosen automatically.
        Row{"priority_zero",
            Machine().add("fpga", 2, kHalf).add("cpu", 1),
            {},
            {},
            "cpu",
            {"cpu"},
            {},
            0,
            0,
            1,
            {},
            "cpu"},
        Row{"unavailable_cuda",
            Machine().add("cuda", 0, kHalf, std::nullopt, false).add("cpu", 1),
            {},
            {},
            "cpu",
            {"cpu"},
            {},
            0,
            0,
            1,
            {},
            "no accelerator"},
        Row{"use_cpu",
            selection_test::h100(4),
            {},
            use_cpu(),
            "cpu",
            {"cpu"},
            {},
            0,
            0,
            1,
            {},
            "use_cpu=True"},
        Row{"accelerate_use_cpu",
            selection_test::h100(4),
            {{"ACCELERATE_USE_CPU", "TRUE"}},
            {},
            "cpu",
            {"cpu"},
            {},
            0,
            0,
            1,
            {},
            "ACCELERATE_USE_CPU='TRUE'"},
        Row{"accelerate_use_cpu_yes",
            selection_test::h100(1),
            {{"ACCELERATE_USE_CPU", "yes"}},
            {},
            "cpu",
            {"cpu"},
            {},
            0,
            0,
            1,
            {},
            "forces cpu"},
        Row{"accelerate_use_cpu_off",
            selection_test::h100(1),
            {{"ACCELERATE_USE_CPU", "off"}},
            {},
            "cuda:0",
            {"cuda:0"},
            {},
            0,
            0,
            1,
            "bf16",
            "cuda"},
        Row{"backplane_device",
            selection_test::h100(4),
            {{"BACKPLANE_DEVICE", "cuda:2"}},
            {},
            "cuda:2",
            {"cuda:2"},
            {},
            0,
            0,
            1,
            "bf16",
            "BACKPLANE_DEVICE='cuda:2'"},
        Row{"accelerate_torch_device",
            selection_test::h100(4),
            {{"ACCELERATE_TORCH_DEVICE", "cuda:3"}},
            {},
            "cuda:3",
            {"cuda:3"},
            {},
            0,
            0,
            1,
            "bf16",
            "ACCELERATE_TORCH_DEVICE='cuda:3'"},
        Row{"accelerate_torch_device_meta",
            selection_test::cpu_only(),
            {{"ACCELERATE_TORCH_DEVICE", "meta"}},
            {},
            "meta",
            {"meta"},
            {},
            0,
            0,
            1,
            {},
            "Accelerate's PartialState"},
        Row{"backplane_over_accelerate",
            selection_test::h100(4),
            {{"BACKPLANE_DEVICE", "cuda:1"}, {"ACCELERATE_TORCH_DEVICE", "cuda:3"}},
            {},
            "cuda:1",
            {"cuda:1"},
            {},
            0,
            0,
            1,
            "bf16",
            "BACKPLANE_DEVICE"},
        Row{"option_over_env",
            selection_test::h100(4),
            {{"BACKPLANE_DEVICE", "cuda:1"}},
            device("cpu"),
            "cpu",
            {"cpu"},
            {},
            0,
            0,
            1,
            {},
            "device='cpu'"},
        Row{"index_less_override",
            selection_test::h100(4),
            {{"BACKPLANE_DEVICE", "cuda"}},
            {},
            "cuda:0",
            {"cuda:0"},
            {},
            0,
            0,
            1,
            "bf16",
            "BACKPLANE_DEVICE='cuda'"},
        Row{"use_cpu_over_override",
            selection_test::h100(2),
            {{"ACCELERATE_USE_CPU", "1"}, {"BACKPLANE_DEVICE", "cuda:1"}},
            {},
            "cpu",
            {"cpu"},
            {},
            0,
            0,
            1,
            {},
            "ACCELERATE_USE_CPU"},
        // A backend asked for is checked even without a launch, then unused.
        Row{"backend_single",
            selection_test::h100(1),
            {},
            backend("nccl"),
            "cuda:0",
            {"cuda:0"},
            {},
            0,
            0,
            1,
            "bf16",
            "cuda"}),
    [](const ::testing::TestParamInfo<Row>& row) { return std::string(row.param.name); });

INSTANTIATE_TEST_SUITE_P(
    Distributed, Training,
    ::testing::Values(
        Row{"torchrun_cuda",
            selection_test::h100(8),
            {{"LOCAL_RANK", "5"}, {"RANK", "13"}, {"WORLD_SIZE", "16"}},
            {},
            "cuda:5",
            {"cuda:5"},
            "nccl",
            13,
            5,
            16,
            "bf16",
            "launched by torchrun (LOCAL_RANK=5, RANK=13, WORLD_SIZE=16)"},
        // local_rank % device count.
        Row{"wraps_around",
            selection_test::h100(4),
            {{"LOCAL_RANK", "6"}, {"RANK", "6"}, {"WORLD_SIZE", "8"}},
            {},
            "cuda:2",
            {"cuda:2"},
            "nccl",
            6,
            6,
            8,
            "bf16",
            "cuda:(local_rank 6 % 4 devices)"},
        Row{"open_mpi_cuda",
            selection_test::h100(8),
            {{"OMPI_COMM_WORLD_LOCAL_RANK", "3"},
             {"OMPI_COMM_WORLD_RANK", "11"},
             {"OMPI_COMM_WORLD_SIZE", "16"}},
            {},
            "cuda:3",
            {"cuda:3"},
            "nccl",
            11,
            3,
            16,
            "bf16",
            "Accelerate itself distributes accelerators only under torchrun"},
        Row{"slurm_cuda",
            selection_test::h100(2),
            {{"SLURM_LOCALID", "1"}, {"SLURM_PROCID", "1"}, {"SLURM_NTASKS", "2"}},
            {},
            "cuda:1",
            {"cuda:1"},
            "nccl",
            1,
            1,
            2,
            "bf16",
            "launched by slurm"},
        Row{"torchrun_xpu",
            Machine().add("xpu", 2, kHalf).add("cpu", 1),
            kTorchrun2of4,
            {},
            "xpu:0",
            {"xpu:0"},
            "xccl",
            2,
            2,
            4,
            "bf16",
            "collective backend xccl"},
        Row{"torchrun_npu",
            Machine().add("npu", 8, kHalf).add("cpu", 1),
            kTorchrun2of4,
            {},
            "npu:2",
            {"npu:2"},
            "hccl",
            2,
            2,
            4,
            "bf16",
            "hccl"},
        Row{"torchrun_hpu",
            Machine().add("hpu", 8, kHalf).add("cpu", 1),
            kTorchrun2of4,
            {},
            "hpu:2",
            {"hpu:2"},
            "hccl",
            2,
            2,
            4,
            "bf16",
            "hccl"},
        Row{"torchrun_mlu",
            Machine().add("mlu", 8, kHalf).add("cpu", 1),
            kTorchrun2of4,
            {},
            "mlu:2",
            {"mlu:2"},
            "cncl",
            2,
            2,
            4,
            "bf16",
            "cncl"},
        Row{"torchrun_musa",
            Machine().add("musa", 8, kHalf).add("cpu", 1),
            kTorchrun2of4,
            {},
            "musa:2",
            {"musa:2"},
            "mccl",
            2,
            2,
            4,
            "bf16",
            "mccl"},
        Row{"torchrun_neuron",
            Machine().add("neuron", 32, kHalf).add("cpu", 1),
            kTorchrun2of4,
            {},
            "neuron:2",
            {"neuron:2"},
            "neuron",
            2,
            2,
            4,
            "bf16",
            "neuron"},
        // Accelerate's MULTI_CPU: cpu:(local_rank % 1).
        Row{"torchrun_use_cpu",
            selection_test::h100(8),
            kTorchrun2of4,
            use_cpu(),
            "cpu:0",
            {"cpu:0"},
            "gloo",
            2,
            2,
            4,
            {},
            "collective backend gloo"},
        Row{"torchrun_cpu_only",
            selection_test::cpu_only(),
            kTorchrun2of4,
            {},
            "cpu:0",
            {"cpu:0"},
            "gloo",
            2,
            2,
            4,
            {},
            "Accelerate distributes a CPU run only with use_cpu=True"},
        Row{"mpi_cpu_with_mpi",
            selection_test::cpu_only(),
            {{"OMPI_COMM_WORLD_LOCAL_RANK", "1"},
             {"OMPI_COMM_WORLD_RANK", "1"},
             {"OMPI_COMM_WORLD_SIZE", "2"}},
            mpi(),
            "cpu:0",
            {"cpu:0"},
            "mpi",
            1,
            1,
            2,
            {},
            "collective backend mpi"},
        Row{"mpi_cpu_without_mpi",
            selection_test::cpu_only(),
            {{"PMI_RANK", "1"}, {"PMI_SIZE", "2"}},
            {},
            "cpu:0",
            {"cpu:0"},
            "gloo",
            1,
            0,
            2,
            {},
            "launched by mpi"},
        // torchrun is not an MPI launch: gloo even where MPI is available.
        Row{"torchrun_cpu_mpi_available",
            selection_test::cpu_only(),
            kTorchrun2of4,
            mpi(),
            "cpu:0",
            {"cpu:0"},
            "gloo",
            2,
            2,
            4,
            {},
            "gloo"},
        Row{"torchrun_cpu_asks_mpi",
            selection_test::cpu_only(),
            kTorchrun2of4,
            backend("mpi", true),
            "cpu:0",
            {"cpu:0"},
            "mpi",
            2,
            2,
            4,
            {},
            "mpi"},
        Row{"cuda_asks_gloo",
            selection_test::h100(4),
            kTorchrun2of4,
            backend("gloo"),
            "cuda:2",
            {"cuda:2"},
            "gloo",
            2,
            2,
            4,
            "bf16",
            "gloo"},
        // An explicit index is kept on every rank; an index-less type follows the local rank.
        Row{"named_index_kept",
            selection_test::h100(4),
            {{"BACKPLANE_DEVICE", "cuda:3"},
             {"LOCAL_RANK", "1"},
             {"RANK", "1"},
             {"WORLD_SIZE", "2"}},
            {},
            "cuda:3",
            {"cuda:3"},
            "nccl",
            1,
            1,
            2,
            "bf16",
            "the named index is kept"},
        Row{"named_type_follows_rank",
            selection_test::h100(4),
            {{"BACKPLANE_DEVICE", "cuda"}, {"LOCAL_RANK", "5"}, {"RANK", "5"}, {"WORLD_SIZE", "8"}},
            {},
            "cuda:1",
            {"cuda:1"},
            "nccl",
            5,
            5,
            8,
            "bf16",
            "cuda:(local_rank 5 % 4 devices)"},
        // mps has no collective backend: each process alone (DistributedType.NO).
        Row{"mps_launched",
            Machine().add("mps", 1, kHalf).add("cpu", 1),
            kTorchrun2of4,
            {},
            "mps",
            {"mps"},
            {},
            0,
            0,
            1,
            "bf16",
            "no collective backend"}),
    [](const ::testing::TestParamInfo<Row>& row) { return std::string(row.param.name); });

TEST(TrainingErrors, AccelerateUseCpuMustBeATruthValue) {
  EXPECT_EQ(error_of<InvalidArgument>([] {
              train(selection_test::h100(1), {{"ACCELERATE_USE_CPU", "maybe"}});
            }),
            "ACCELERATE_USE_CPU='maybe': invalid truth value 'maybe'; expected one of y, yes, t, "
            "true, on, 1 or n, no, f, false, off, 0");
  // use_cpu=True short-circuits, as `self.use_cpu or strtobool(...)` does.
  EXPECT_EQ(
      train(selection_test::h100(1), {{"ACCELERATE_USE_CPU", "maybe"}}, use_cpu()).device.str(),
      "cpu");
}

TEST(TrainingErrors, OverridesAreParsedWithTheSnapshotsTypes) {
  const Machine m = selection_test::h100(2);
  const std::string message = error_of<InvalidArgument>([&] {
    train(m, {{"BACKPLANE_DEVICE", "CUDA:0"}});
  });
  EXPECT_EQ(message.rfind("BACKPLANE_DEVICE='CUDA:0': Expected one of cpu, cuda, ", 0), 0u)
      << message;
  EXPECT_NE(error_of<InvalidArgument>([&] {
              train(m, {{"ACCELERATE_TORCH_DEVICE", "cuda:01"}});
            }).find("ACCELERATE_TORCH_DEVICE='cuda:01': Invalid device string: 'cuda:01'"),
            std::string::npos);
  // A type a plugin registered is known.
  Machine custom = selection_test::cpu_only();
  custom.add("gaudix", 2, kHalf);
  EXPECT_EQ(train(custom, {{"BACKPLANE_DEVICE", "gaudix:1"}}).device.str(), "gaudix:1");
}

TEST(TrainingErrors, OverrideMustExist) {
  const Machine m = selection_test::h100(2);
  EXPECT_EQ(error_of<NotFound>([&] {
              train(m, {{"BACKPLANE_DEVICE", "cuda:2"}});
            }),
            "BACKPLANE_DEVICE='cuda:2': 'cuda:2' does not exist; cuda has cuda:0, cuda:1");
  EXPECT_EQ(error_of<Unavailable>([&] {
              train(m, {{"BACKPLANE_DEVICE", "npu:0"}});
            }),
            "BACKPLANE_DEVICE='npu:0': 'npu:0': no loaded plugin provides npu devices");
  const Machine broken = Machine().add("cuda", 0, 0, std::nullopt, false);
  EXPECT_EQ(error_of<Unavailable>([&] {
              train(broken, {{"BACKPLANE_DEVICE", "cuda"}});
            }),
            "BACKPLANE_DEVICE='cuda': 'cuda': the cuda backend (plugin 'cuda') is unavailable: "
            "driver not found");
}

TEST(TrainingErrors, UseCpuContradictsANamedAccelerator) {
  TrainingOptions options = use_cpu();
  options.device = "cuda:0";
  EXPECT_EQ(error_of<InvalidArgument>([&] { train(selection_test::h100(1), {}, options); }),
            "use_cpu=True contradicts device='cuda:0'; drop one of them");
  options.device = "cpu";
  EXPECT_EQ(train(selection_test::h100(1), {}, options).device.str(), "cpu");
}

TEST(TrainingErrors, BackendThatDoesNotFit) {
  EXPECT_EQ(error_of<InvalidArgument>(
                [] { train(selection_test::h100(4), kTorchrun2of4, backend("hccl")); }),
            "Your assigned backend hccl is not available, please use nccl");
  EXPECT_EQ(error_of<InvalidArgument>(
                [] { train(selection_test::cpu_only(), kTorchrun2of4, backend("nccl")); }),
            "Your assigned backend nccl is not available, please use gloo");
  EXPECT_EQ(error_of<InvalidArgument>(
                [] { train(selection_test::cpu_only(), kTorchrun2of4, backend("mpi")); }),
            "Your assigned backend mpi is not available, please use gloo");
  // Not launched: still refused.
  EXPECT_EQ(error_of<InvalidArgument>([] { train(selection_test::h100(1), {}, backend("cncl")); }),
            "Your assigned backend cncl is not available, please use nccl");
}

TEST(TrainingErrors, MalformedRankVariable) {
  EXPECT_NE(error_of<InvalidArgument>([] {
              train(selection_test::h100(2), {{"LOCAL_RANK", "one"}});
            }).find("LOCAL_RANK='one'"),
            std::string::npos);
}

}  // namespace
