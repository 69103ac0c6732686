// What a model needs in memory before any device is chosen: the numbers `accelerate
// estimate-memory` prints (accelerate 1.15: the largest layer, the total size and training with
// Adam, per dtype), the parts of training as transformers' "model memory anatomy" counts them,
// and whether that fits a machine's devices.
#pragma once

#include <backplane/export.hpp>
#include <backplane/model/device_map.hpp>
#include <backplane/model/model.hpp>

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace backplane {

// The dtypes `accelerate estimate-memory --dtypes` takes, in its default order.
enum class EstimateDType { kFloat32, kFloat16, kInt8, kInt4 };

// "float32", "float16", "int8", "int4"; throws InvalidArgument naming `text` and the four.
BACKPLANE_API EstimateDType parse_estimate_dtype(std::string_view text);
BACKPLANE_API const char* to_string(EstimateDType dtype);

// Training memory in the anatomy's parts, batch size 1, activations not counted (they depend on
// the batch and sequence): float32 keeps fp32 weights, fp32 gradients and Adam's two fp32
// states (16 bytes per parameter); float16 (mixed precision) adds a 16-bit copy of the weights
// to the fp32 master weights (18 bytes per parameter). int8 and int4 have no training estimate.
struct TrainingParts {
  double weights = 0;    // fp32 master weights, plus the 16-bit copy in mixed precision
  double gradients = 0;  // fp32
  double optimizer = 0;  // Adam's exp_avg and exp_avg_sq, fp32
  double total() const { return weights + gradients + optimizer; }
};

// Where something of a given size can go on a machine, comparing it with free memory (a plan
// with `hwprobe plan` places it module by module).
enum class Fit {
  kWhole,       // on one accelerator (or on cpu when the machine has none)
  kSplit,       // across the accelerators together
  kCpuOffload,  // only with host memory added to the accelerators
  kNone,        // not even with host memory
};
BACKPLANE_API const char* to_string(Fit fit);  // "whole", "split", "cpu offload", "no"

struct EstimateRow {
  EstimateDType dtype = EstimateDType::kFloat32;
  double largest_layer = 0;  // bytes; fractions as Python's true division leaves them
  double total = 0;
  // accelerate's "Training using Adam" (the peak of its model/gradients/optimizer/step
  // estimate): 4x the fp32 total in float32, 2x in float16; nullopt ("N/A") for int8 and int4.
  std::optional<double> training_adam;
  std::optional<TrainingParts> training;  // float32 and float16 only
  Fit inference_fit = Fit::kNone;
  std::optional<Fit> training_fit;
};

struct MemoryEstimate {
  // The model sized: what AutoModel.from_config builds from the config (the base model, as
  // accelerate estimate-memory loads it: "LlamaModel", without lm_head), or the whole tree when
  // the base model is not known (`base_model_known` false: a tree file, weights).
  std::string model_class;
  bool base_model_known = false;
  uint64_t parameters = 0;         // elements of the parameters sized
  double total_bytes = 0;          // float32, as accelerate builds the model
  double largest_layer_bytes = 0;  // get_max_layer_size, float32
  std::string largest_layer;       // its name ("layers.0"; relative to the model sized)
  std::vector<EstimateRow> rows;   // in the order of `dtypes`
};

// The estimate for `dtypes` (duplicates kept, as accelerate keeps them) on `hardware`'s devices.
// Sizes follow accelerate's compute_module_sizes on the float32 model: floating tensors 4 bytes
// per element, others their own size (bool 1/8 byte, as accelerate's dtype_byte_size counts it).
BACKPLANE_API MemoryEstimate estimate_memory(const ModelDescription& model,
                                             const std::vector<EstimateDType>& dtypes,
                                             const PlanHardware& hardware);

// accelerate's convert_bytes: "95.37 MB", "512 bytes", "256.0 bytes" (a size that was divided
// prints as Python prints a float).
BACKPLANE_API std::string format_estimate_bytes(double bytes, bool integral);

// The table `accelerate estimate-memory` prints for the estimate, line for line (its title:
// "Memory Usage for loading `MODEL_NAME`").
BACKPLANE_API std::string estimate_table(const MemoryEstimate& estimate,
                                         std::string_view model_name);

}  // namespace backplane
