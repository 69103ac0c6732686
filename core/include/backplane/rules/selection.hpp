// Which device a program uses: the rules of Transformers and Accelerate for training, inference
// and pipeline() (docs/device-rules.md §2 and §3), and the device_map value of from_pretrained().
//
// Pure functions over plain data: the registry snapshot (backends and devices, as a Runtime
// returns them) and an environment lookup, so tables can test every rule. Each rule names the
// source it mirrors. The overloads that take a Runtime read the process environment with
// secure_getenv.
#pragma once

#include <backplane/export.hpp>
#include <backplane/rules/device.hpp>
#include <backplane/rules/visibility.hpp>
#include <backplane/runtime/device_info.hpp>

#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace backplane {

class Runtime;

// ---- device_map values (transformers modeling_utils.py / integrations/accelerate.py) -----------

enum class DeviceMapKind {
  kAuto,          // "auto"
  kBalanced,      // "balanced"
  kBalancedLow0,  // "balanced_low_0"
  kSequential,    // "sequential"
  kDevice,        // a device string: "cuda:3", "cpu", "neuron"
  kIndex,         // a non-negative int: an accelerator index
  kExplicit,      // a dict {module name: device}
};

// "auto", "balanced", "balanced_low_0", "sequential", "device", "index", "explicit".
BACKPLANE_API const char* to_string(DeviceMapKind kind);

// Where one module goes: what hf_device_map holds for it.
struct DeviceMapTarget {
  enum class Kind { kIndex, kDevice, kDisk };
  Kind kind = Kind::kIndex;
  int index = 0;         // kIndex: the accelerator with this index
  Device device{"cpu"};  // kDevice: as written ("cuda:1", "cpu", "mps")
  // "0", "cuda:1", "disk".
  BACKPLANE_API std::string str() const;
};

// A parsed device_map argument. The planner (device_map.hpp) takes one of these.
struct DeviceMapRequest {
  DeviceMapKind kind = DeviceMapKind::kAuto;
  // kDevice, kIndex and kExplicit: module name -> target, in the order given. A device string or
  // an int becomes {"": target}, as transformers turns them. Empty for the four strategies.
  std::vector<std::pair<std::string, DeviceMapTarget>> modules;

  bool is_strategy() const { return modules.empty() && kind != DeviceMapKind::kExplicit; }
  // The value in the form it was given: "auto", "cuda:3", "0", or a JSON object.
  BACKPLANE_API std::string str() const;
};

// Parses a device_map value written as text (a command line, a config file):
//   "auto" | "balanced" | "balanced_low_0" | "sequential"   a placement strategy
//   an integer ("0", "-1")                                 the int form (a text cannot tell
//                                                          "3" from 3, so digits mean the int)
//   a JSON object ({"model.layers.0": 0, "lm_head": "cpu", "model.norm": "disk"})  the dict form;
//     values are non-negative ints, "disk" or device strings
//   anything else                                          a device string, parsed with c10's
//                                                          grammar against `known_types`
// Throws InvalidArgument with transformers' messages:
//   "When passing device_map as a string, the value needs to be a device name (e.g. cpu,
//    cuda:0) or 'auto', 'balanced', 'balanced_low_0', 'sequential' but found <value>."
//   "You can't pass device_map as a negative int. If you want to put the model on the cpu, pass
//    device_map = 'cpu' "   (transformers' own trailing space included)
// and, for the dict form (where transformers fails later, inside Accelerate), messages that
// name the module and the value.
BACKPLANE_API DeviceMapRequest parse_device_map(std::string_view value,
                                                const std::vector<std::string>& known_types);
// Same, against builtin_device_types().
BACKPLANE_API DeviceMapRequest parse_device_map(std::string_view value);
// Same, against the runtime's device_types() (the builtin names and every registered type).
BACKPLANE_API DeviceMapRequest parse_device_map(std::string_view value, const Runtime& runtime);
// The int form: {"": index}; a negative index throws the negative-int message.
BACKPLANE_API DeviceMapRequest parse_device_map_index(long long index);

// ---- Launchers (accelerate utils/environment.py get_cpu_distributed_information) --------------

// Where this process stands in a launched run, read from the launchers' variables. Each value is
// the first variable of its list that is set and not negative, in Accelerate's order, with
// Slurm's last (Accelerate does not read Slurm's; srun without torchrun sets only these):
//   rank        RANK, PMI_RANK, OMPI_COMM_WORLD_RANK, MV2_COMM_WORLD_RANK, SLURM_PROCID
//   world size  WORLD_SIZE, PMI_SIZE, OMPI_COMM_WORLD_SIZE, MV2_COMM_WORLD_SIZE, SLURM_NTASKS
//   local rank  LOCAL_RANK, MPI_LOCALRANKID, OMPI_COMM_WORLD_LOCAL_RANK,
//               MV2_COMM_WORLD_LOCAL_RANK, SLURM_LOCALID
// Values are read as Python's int() reads them (surrounding whitespace, a sign, digits, single
// '_' between digits); a value that is not an integer throws InvalidArgument naming the variable,
// as int() would stop Accelerate. Caveat: inside an sbatch script (not under srun) Slurm sets
// SLURM_NTASKS for the whole allocation; a program started there directly looks launched.
struct Launch {
  // torchrun (and accelerate launch): LOCAL_RANK is set; or the launcher family of the variable
  // that gave the world size: "mpi" (PMI_*, OMPI_*, MV2_*), "slurm". Empty: not launched.
  std::string launcher;
  int rank = 0;
  int local_rank = 0;
  int world_size = 1;
  bool mpi = false;  // a value came from an MPI launcher's variable (PMI_*, OMPI_*, MV2_*, MPI_*)
  // "RANK=2", one per value that came from a variable, for reasons and messages.
  std::vector<std::string> sources;

  bool launched() const { return !launcher.empty(); }
};

// Launched when LOCAL_RANK is set and not negative (Accelerate tests `!= -1`; other negative
// values are skipped here, as get_int_from_env skips them) or the world size is above 1. Throws
// InvalidArgument for a malformed variable, and when the rank or the local rank is not below the
// world size ("RANK=4 is not below WORLD_SIZE=4").
BACKPLANE_API Launch detect_launch(const EnvLookup& env);

// ---- Advice ----------------------------------------------------------------------------------

// Mixed precision for a device: "bf16" when it has kCapBf16 and, where it reports a compute
// capability (NVIDIA), that capability is 8.0 (Ampere) or newer; else "fp16" when it has kCapFp16;
// nullopt on cpu and meta, for a device without either, and when `info` is null.
BACKPLANE_API std::optional<std::string> mixed_precision_advice(const DeviceInfo* info);

// The collective backend of a distributed run on `type` (accelerate state.py _prepare_backend):
// the backend's collective_backend (nccl, xccl, hccl, cncl, mccl, neuron, ...); for cpu gloo, or
// mpi when `mpi_available` and the run is MPI-launched (`mpi_launched`). A `requested` backend
// must fit the device: the default, for cpu also mpi when `mpi_available`, for cuda also gloo,
// for xpu also ccl (xccl's older name). Otherwise throws InvalidArgument with Accelerate's text:
//   "Your assigned backend X is not available, please use Y"
// Returns nullopt when the type has no collective backend (mps): it cannot run distributed.
// `backend` may be null (no plugin registered the type; cpu still gets gloo).
BACKPLANE_API std::optional<std::string> collective_backend_for(
    std::string_view type, const BackendInfo* backend, const std::optional<std::string>& requested,
    bool mpi_available, bool mpi_launched);

// ---- Selection -------------------------------------------------------------------------------

// What a rule chose, and why.
struct Selection {
  Device device{"cpu"};  // the device this process uses
  // Every device the choice spans: Trainer's data-parallel list (n_gpu CUDA devices) in one
  // process, the devices a device_map strategy covers (accelerators, then cpu or mps), or just
  // `device`.
  std::vector<Device> devices;
  std::optional<std::string> collective_backend;  // set only when the run is distributed
  int rank = 0;
  int local_rank = 0;
  int world_size = 1;
  std::optional<std::string> mixed_precision;  // "bf16" | "fp16"; nullopt on cpu
  std::string reason;                          // which rule decided, in words, with its source
  std::string launcher;                        // Launch::launcher when distributed, else empty
};

// ---- Training (transformers training_args.py _setup_devices; accelerate state.py) -------------

struct TrainingOptions {
  bool use_cpu = false;                // TrainingArguments(use_cpu=True)
  std::optional<std::string> device;   // an explicit device string; BACKPLANE_DEVICE when unset
  std::optional<std::string> backend;  // TrainingArguments(ddp_backend=...)
  // Whether the process can use MPI (PyTorch's is_mpi_available()). Unset: the Runtime overload
  // says yes when an MPI library (libmpi.so.40, .12) is already loaded into the process, which
  // an MPI program's is; the pure overload says no.
  std::optional<bool> mpi_available;
};

// The device a training process uses. Rules, first that applies:
//  1. options.use_cpu, or ACCELERATE_USE_CPU truthy (y, yes, t, true, on, 1; n, no, f, false,
//     off, 0 are false; anything else throws, as transformers' strtobool does): cpu.
//  2. options.device, else BACKPLANE_DEVICE, else ACCELERATE_TORCH_DEVICE (Accelerate's
//     PartialState takes it as the device): parsed with parse_device against the snapshot's
//     types; the device must exist (Unavailable / NotFound otherwise; cpu and meta always do).
//     Without an index the type is chosen and the index follows the rules below.
//  3. The first available backend by training_priority (lower first; 0 never automatic) that has
//     a device: transformers' order mps, xpu, mlu, musa, npu, hpu, neuron, tpu, cuda is the
//     plugins' priorities. Device index 0 ("mps" without one, as Trainer). Several cuda devices
//     in one process: `devices` lists them all (Trainer's n_gpu, DataParallel).
//  4. cpu.
// Launched (detect_launch) on a type with a collective backend: device type:(local_rank % count)
// (an explicit index is kept), rank/local_rank/world_size from the launch, collective_backend
// from collective_backend_for, devices = {device}. On cpu the device is "cpu:0", as Accelerate's
// MULTI_CPU. A type without a collective backend (mps) trains alone in each process, as
// Accelerate does (DistributedType.NO); the reason says so.
// Where this departs from transformers 5.24 (all in the reason text): Trainer distributes a CPU
// run only with use_cpu or ACCELERATE_USE_CPU, and accelerators only under torchrun (LOCAL_RANK);
// here any launcher distributes. Trainer's single-process branch honours use_cpu but not
// ACCELERATE_USE_CPU when an accelerator exists; here both force cpu.
// A `backend` that does not fit throws (collective_backend_for), distributed or not.
BACKPLANE_API Selection select_training_device(const std::vector<BackendInfo>& backends,
                                               const std::vector<DeviceInfo>& devices,
                                               const TrainingOptions& options,
                                               const EnvLookup& env);
// Over the runtime's snapshot and the process environment (secure_getenv).
BACKPLANE_API Selection select_training_device(const Runtime& runtime,
                                               const TrainingOptions& options = {});

// ---- Inference (transformers modeling_utils.py from_pretrained; accelerate get_max_memory) ----

// The device a model loaded with from_pretrained(device_map=...) starts on (its first module):
//   none: cpu (transformers loads on CPU without a device_map).
//   "auto", "balanced", "balanced_low_0", "sequential": the accelerators automatic placement
//     covers: available backends that declare automatic_placement, one accelerator type as
//     Accelerate's get_max_memory picks it (npu, mlu, musa, xpu, hpu, then cuda; other such
//     types after, by training priority), then cpu; mps takes cpu's place. `devices` lists them;
//     `device` is the first. No such accelerator (a neuron-only machine): cpu, and the reason
//     says to name the device ("neuron").
//   a device string: that device (it must exist; an index-less one means index 0). "cuda" itself
//     means cuda:LOCAL_RANK (transformers integrations/accelerate.py check_and_set_device_map;
//     LOCAL_RANK unset: 0; negative: the string error naming "cuda:-1", as transformers says it).
//   an int: that index of the accelerator type "auto" would use; none: Unavailable.
//   a dict: its first module's device; `devices` lists every device it names ("disk" is not one).
BACKPLANE_API Selection select_inference_device(const std::vector<BackendInfo>& backends,
                                                const std::vector<DeviceInfo>& devices,
                                                const std::optional<DeviceMapRequest>& device_map,
                                                const EnvLookup& env);
BACKPLANE_API Selection select_inference_device(const Runtime& runtime,
                                                const std::optional<DeviceMapRequest>& device_map);

// ---- pipeline() (transformers pipelines/base.py Pipeline.__init__) ----------------------------

struct PipelineOptions {
  // pipeline(device=...): an int written as text ("0", "-1") or a device string.
  std::optional<std::string> device;
  std::optional<DeviceMapRequest> device_map;  // pipeline(device_map=...)
};

// The device a pipeline runs on:
//   device_map given: the inference rule's device (the first of the model's device map).
//   device and device_map both: InvalidArgument with transformers' warning text.
//   neither: device 0, then as an int.
//   an int: negative is cpu; else the first available of mlu, musa, cuda, npu, hpu, xpu, then
//     mps, as "type:N" (it must exist), else cpu.
//   a string: that device; an xpu or hpu string without that backend available throws
//     "<device> is not available, you should use device=\"cpu\" instead".
BACKPLANE_API Selection select_pipeline_device(const std::vector<BackendInfo>& backends,
                                               const std::vector<DeviceInfo>& devices,
                                               const PipelineOptions& options,
                                               const EnvLookup& env);
BACKPLANE_API Selection select_pipeline_device(const Runtime& runtime,
                                               const PipelineOptions& options);

}  // namespace backplane
