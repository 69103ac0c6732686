// Which devices a process sees, and in which order, under each runtime's visibility variables
// (docs/device-rules.md §5). Pure functions: variables come in as values or through a lookup
// function, so tables can test every rule and the core can pass secure_getenv.
//
// Each rule mirrors what the vendor runtime (or PyTorch, where PyTorch decides) does with the
// value, quirks included; where a runtime refuses a value, the rule throws InvalidArgument with a
// message that names the variable, the value and the accepted form. Sources are cited per rule.
#pragma once

#include <backplane/export.hpp>

#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace backplane {

// One device as its runtime enumerates it before any visibility variable applies. A rule reads
// only the fields it needs and ignores the rest.
struct PhysicalDevice {
  std::string uuid;        // "GPU-8932f937-d72c-4106-c12f-20bd9faed9f6" (NVIDIA),
                           // "GPU-4b2c1a9f8d3e6f7a" (ROCm), "33033011-2157-..." (Cambricon)
  std::string pci_bus_id;  // "0000:18:00.0", hexadecimal; CUDA and Level Zero order by it
  int compute_capability_major = 0;  // CUDA FASTEST_FIRST speed estimate
  int compute_capability_minor = 0;
  int multiprocessors = 0;
  int clock_mhz = 0;
  int sub_devices = 0;      // Level Zero tiles (stacks); 0 or 1 means a single-tile device
  bool integrated = false;  // Level Zero enumerates integrated GPUs after discrete ones
};

// The outcome of a rule.
struct Visibility {
  // physical[i] is the index, in the input list, of logical device i (`cuda:i`).
  std::vector<int> physical;
  // Level Zero only: the tile that logical device i is, or -1 for the whole device. Empty for
  // every other runtime.
  std::vector<int> sub_device;
  // The most specific variable that changed the result ("CUDA_VISIBLE_DEVICES"); empty when
  // none did and every device is visible in enumeration order.
  std::string variable;
  // The reasoning, one line per step, e.g. "CUDA_VISIBLE_DEVICES='1,gpu2': entry 'gpu2' does
  // not start with a number, so the list ends there".
  std::vector<std::string> notes;
};

// ---- NVIDIA CUDA ------------------------------------------------------------------------------

// CUDA cores per multiprocessor for a compute capability, as listed by the CUDA samples'
// helper_cuda.h: 1.x 8; 2.0 32, 2.1 48; 3.x 192; 5.x 128; 6.0 64, 6.x 128; 7.x 64; 8.0 64,
// 8.x 128; 9.0 and later 128. A major version the table does not know counts 128; 0 or below
// counts 0.
BACKPLANE_API int cuda_cores_per_multiprocessor(int major, int minor);

// The speed estimate CUDA_DEVICE_ORDER=FASTEST_FIRST sorts by, highest first:
//   multiprocessors x cuda_cores_per_multiprocessor(major, minor) x clock_mhz
// (peak FP32 lanes times clock). NVIDIA does not publish its heuristic; this one is ours and is
// stable. Equal estimates are ordered by ascending PCI bus id. Negative inputs count as 0.
BACKPLANE_API long long cuda_speed_estimate(const PhysicalDevice& device);

// CUDA's enumeration order under CUDA_DEVICE_ORDER (nullopt: unset). physical[i] is the input
// index of CUDA ordinal i.
//   FASTEST_FIRST (the default): by cuda_speed_estimate, ties by ascending PCI bus id.
//   PCI_BUS_ID: by ascending PCI bus id (domain, bus, device, function), the order nvidia-smi
//   shows.
//   Anything else (names are case-sensitive): ignored, FASTEST_FIRST applies, with a note.
// Every device needs a PCI bus id in one of CUDA's forms (cudaDeviceGetByPCIBusId):
// "domain:bus:device.function", "domain:bus:device" or "bus:device.function", hexadecimal.
// Throws InvalidArgument naming the device otherwise.
BACKPLANE_API Visibility cuda_order(const std::vector<PhysicalDevice>& devices,
                                    std::optional<std::string_view> cuda_device_order);

// Step 1 of CUDA_VISIBLE_DEVICES, PyTorch's torch.cuda._parse_visible_devices: the entries as
// written, before any device is consulted. Exactly one of ordinals and uuid_prefixes is filled.
struct CudaVisibleEntries {
  // Index form. Values too large for the type saturate (they are beyond any device count).
  std::vector<unsigned long long> ordinals;
  // UUID form: the value starts with "GPU-" or "MIG-".
  std::vector<std::string> uuid_prefixes;
  std::vector<std::string> notes;
};

// Index form: entries split on ',', each trimmed of whitespace and read like strtoul (optional
// sign, then leading digits; the rest is ignored, so "1gpu2" is 1 and "-0" is 0). The first
// entry that does not start with a number, or is negative, ends the list. A repeated index
// empties the whole list.
// UUID form (the value starts with "GPU-" or "MIG-"): entries are split on ',' and not trimmed;
// the first entry without that same prefix ends the list; a repeated entry empties the list.
BACKPLANE_API CudaVisibleEntries parse_cuda_visible_devices(std::string_view value);

// Step 2 for the UUID form, PyTorch's torch.cuda._transform_uuid_to_ordinals: each prefix names
// the one device whose UUID starts with it. A prefix that matches no device, or several, ends the
// list; a device named twice empties it. Returns indices into `uuids`.
BACKPLANE_API std::vector<int> cuda_uuids_to_ordinals(const std::vector<std::string>& prefixes,
                                                      const std::vector<std::string>& uuids);

// CUDA_VISIBLE_DEVICES (nullopt: unset) over the devices in CUDA's enumeration order, given by
// their UUIDs: unset shows all; empty shows none; otherwise steps 1 and 2, and in the index form
// the first index at or beyond the device count ends the list. The listed order is the logical
// order. physical holds indices into `uuids` (CUDA ordinals).
BACKPLANE_API Visibility cuda_visible(std::optional<std::string_view> cuda_visible_devices,
                                      const std::vector<std::string>& uuids);

// ---- AMD ROCm ---------------------------------------------------------------------------------

// The ROCm visibility variables; nullopt means unset.
struct RocmVariables {
  std::optional<std::string> rocr_visible_devices;
  std::optional<std::string> hip_visible_devices;
  std::optional<std::string> cuda_visible_devices;
  std::optional<std::string> gpu_device_ordinal;
};

// What a HIP process sees, in two layers, as the runtimes' sources do it:
// 1. ROCR_VISIBLE_DEVICES (ROCR-Runtime amd_filter_device.cpp), when set, even to "": empty shows
//    none. Entries split on ',', trimmed and upper-cased; only the first (device count) entries
//    are read. An entry starting with 'G' is a UUID prefix of 5 to 20 characters matched,
//    ignoring case, against each device's "GPU-<16 hex>" UUID; any other entry is a whole number
//    read like strtol with base 0 ("0x1" is 1, "010" is 8). The first entry that is malformed,
//    unknown, ambiguous, out of range or repeated ends the list. Listed order is kept.
// 2. HIP_VISIBLE_DEVICES if non-empty, else CUDA_VISIBLE_DEVICES if non-empty (CLR rocdevice.cpp;
//    set but empty counts as unset): indices into the devices left by step 1. Entries split on
//    ','; an entry containing "GPU-" names the first device whose UUID contains it. An entry must
//    be a plain decimal index ("1", not "01", " 1" or "+1") below the device count; the first one
//    that is not ends the list. Repeated indices are skipped. Listed order is kept.
// GPU_DEVICE_ORDINAL is read by ROCclr's OpenCL path only, so it never changes what HIP sees;
// a note says so when it is set (AMD's isolation page says it applies to HIP too).
// Throws InvalidArgument, as PyTorch's torch.cuda._parse_visible_devices does, when both
// ROCR_VISIBLE_DEVICES and HIP_VISIBLE_DEVICES are set and HIP_VISIBLE_DEVICES has more
// comma-separated entries than ROCR_VISIBLE_DEVICES.
// physical holds indices into `uuids`, the devices in ROCr's enumeration order.
BACKPLANE_API Visibility rocm_visible(const RocmVariables& variables,
                                      const std::vector<std::string>& uuids);

// ---- Intel Level Zero -------------------------------------------------------------------------

// The Level Zero variables; nullopt means unset.
struct LevelZeroVariables {
  std::optional<std::string> affinity_mask;               // ZE_AFFINITY_MASK
  std::optional<std::string> flat_device_hierarchy;       // ZE_FLAT_DEVICE_HIERARCHY
  std::optional<std::string> enable_pci_id_device_order;  // ZE_ENABLE_PCI_ID_DEVICE_ORDER
};

// One device an application gets from zeDeviceGet.
struct LevelZeroDevice {
  int root = 0;         // index of the root device in the input list
  int sub_device = -1;  // the tile this device is, or -1 for the whole root device
  // COMPOSITE only: the tiles reachable as sub-devices of this device.
  std::vector<int> sub_devices;
};

struct LevelZeroVisibility {
  std::vector<LevelZeroDevice> devices;
  std::string variable;
  std::vector<std::string> notes;
};

// What zeDeviceGet returns, as Intel's compute-runtime does it (execution_environment.cpp):
// - Root devices are sorted by PCI address (domain, bus, device, function); discrete before
//   integrated unless ZE_ENABLE_PCI_ID_DEVICE_ORDER is a non-zero number (read like atoll).
// - ZE_FLAT_DEVICE_HIERARCHY: FLAT (the default) and COMBINED make every tile a device, numbered
//   root by root; COMPOSITE makes each root a device with its tiles as sub-devices. Any other
//   value (names are case-sensitive) is ignored, with a note.
// - ZE_AFFINITY_MASK (unset, empty or "default": no mask): comma-separated entries, each read
//   like std::stoul with base 0. FLAT/COMBINED: "N" enables device N of the flat numbering;
//   "N.M" is ignored. COMPOSITE: "N" enables root N with all its tiles, "N.M" tile M of root N;
//   a root left with a single tile of several becomes that tile, without sub-devices. Entries
//   out of range or unreadable are ignored, each with a note; a mask that enables nothing shows
//   no device. The mask never reorders: devices come root by root, tiles in ascending order.
// Every root needs a PCI bus id as in cuda_order; throws InvalidArgument naming it otherwise,
// and for a COMPOSITE entry with more than three parts ("0.1.2.3"), which stops the driver.
BACKPLANE_API LevelZeroVisibility level_zero_visible(const LevelZeroVariables& variables,
                                                     const std::vector<PhysicalDevice>& roots);

// ---- Plain index lists ------------------------------------------------------------------------

// The strict comma-separated index form, for runtimes with no documented leniency:
// HABANA_VISIBLE_MODULES (hpu; Intel Gaudi docs: integers from 0 to N-1, each unique) and
// MUSA_VISIBLE_DEVICES (musa; no public statement of the runtime's parsing). Unset shows all;
// empty shows none; otherwise every entry must be a plain decimal index below `count`, listed
// once, and the listed order is the logical order. Throws InvalidArgument otherwise, e.g.
//   "HABANA_VISIBLE_MODULES='0,x': entry 'x' is not a device index; expected distinct indices
//    from 0 to 7 separated by commas, such as '0,1'"
BACKPLANE_API Visibility index_list_visible(std::string_view variable,
                                            std::optional<std::string_view> value, int count);

// ASCEND_RT_VISIBLE_DEVICES (npu), as Huawei's CANN reference documents it: comma-separated
// logical device IDs in ascending order, no other characters. The runtime does not refuse a bad
// value: it reads the IDs before the first entry that is not a plain number, not a device (at or
// beyond `count`) or not above the previous ID ("1, 2,3" reads 1; "1,3,8" on 8 devices reads 1
// and 3). Unset shows all; empty shows none.
BACKPLANE_API Visibility ascend_visible(std::optional<std::string_view> value, int count);

// CN_VISIBLE_DEVICES, else MLU_VISIBLE_DEVICES (mlu), as torch_mlu's _parse_visible_devices does
// it ("aligned with CNRT"): unset shows all. A value containing '-' and at least 36 characters
// long is a list of full UUIDs matched exactly against `uuids`; otherwise entries are trimmed and
// must be all digits ("+3" and "1gpu2" are not). The first entry that is not ends the list, a
// repeated one empties it, and an index at or beyond the device count ends it.
BACKPLANE_API Visibility mlu_visible(std::optional<std::string_view> cn_visible_devices,
                                     std::optional<std::string_view> mlu_visible_devices,
                                     const std::vector<std::string>& uuids);

// NEURON_RT_VISIBLE_CORES (neuron), AWS Neuron runtime: a core index ("1"), an inclusive range
// ("0-3"), or a comma-separated list of them ("1,3", "0-1,4"), cores from 0 to core_count - 1,
// each at most once. The runtime refuses cores it cannot reserve, so this throws
// InvalidArgument for anything else. The process gets the listed cores as a set: logical cores
// follow ascending physical order. Unset shows all; empty shows none.
BACKPLANE_API Visibility neuron_visible_cores(std::optional<std::string_view> value,
                                              int core_count);

// ---- Dispatch ---------------------------------------------------------------------------------

// Reads one environment variable: nullopt when unset.
using EnvLookup = std::function<std::optional<std::string>(const char* name)>;

// The rule for a device type and vendor, over `devices` in the runtime's enumeration order:
//   cuda + nvidia (or any vendor but amd/rocm): cuda_order, then cuda_visible;
//   cuda + amd or rocm, and the rocm and hip types: rocm_visible;
//   xpu: level_zero_visible (each device is a root; sub_device says which tile);
//   npu: ascend_visible; hpu: HABANA_VISIBLE_MODULES; musa: MUSA_VISIBLE_DEVICES
//   (index_list_visible); mlu: mlu_visible; neuron: neuron_visible_cores, one device per core;
//   cpu, mps, tpu, meta and unknown types: no variable, every device visible.
// Names are lower case, as device strings and plugin vendors are.
BACKPLANE_API Visibility visible_for(std::string_view type, std::string_view vendor,
                                     const EnvLookup& env,
                                     const std::vector<PhysicalDevice>& devices);

}  // namespace backplane
