#include <backplane/plugin.h>
#include <backplane/error.hpp>
#include <backplane/rules/kernel_mapping.hpp>

#include <algorithm>
#include <cctype>

namespace backplane {
namespace {

std::string lower(std::string_view text) {
  std::string out(text);
  std::transform(out.begin(), out.end(), out.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return out;
}

std::string trim(std::string_view text) {
  size_t begin = 0, end = text.size();
  while (begin < end && std::isspace(static_cast<unsigned char>(text[begin]))) ++begin;
  while (end > begin && std::isspace(static_cast<unsigned char>(text[end - 1]))) --end;
  return std::string(text.substr(begin, end - begin));
}

constexpr const char* kAccepted =
    "inference, training, fallback, inference|torch_compile or training|torch_compile";

}  // namespace

KernelMode KernelMode::with_torch_compile() const {
  if (is_fallback()) {
    throw InvalidArgument("kernel mode fallback cannot be combined with torch_compile");
  }
  return KernelMode(static_cast<uint8_t>(bits_ | kTorchCompile));
}

KernelMode KernelMode::parse(std::string_view text) {
  uint8_t bits = 0;
  size_t start = 0;
  const std::string whole = lower(text);
  while (start <= whole.size()) {
    const size_t bar = whole.find('|', start);
    const std::string word =
        trim(std::string_view(whole).substr(start, bar == std::string::npos ? bar : bar - start));
    uint8_t bit = 0;
    if (word == "inference") bit = kInference;
    if (word == "training") bit = kTraining;
    if (word == "fallback") bit = kFallback;
    if (word == "torch_compile") bit = kTorchCompile;
    if (bit == 0 || (bits & bit) != 0) {
      throw InvalidArgument("kernel mode \"" + std::string(text) + "\": \"" + word +
                            "\" is not a mode word or is repeated; accepted: " + kAccepted);
    }
    bits = static_cast<uint8_t>(bits | bit);
    if (bar == std::string::npos) break;
    start = bar + 1;
  }
  const bool one_of_inference_training = ((bits & kInference) != 0) != ((bits & kTraining) != 0);
  const bool valid = bits == kFallback || (one_of_inference_training && (bits & kFallback) == 0);
  if (!valid) {
    throw InvalidArgument("kernel mode \"" + std::string(text) +
                          "\": inference and training exclude each other, fallback stands "
                          "alone, and torch_compile needs one of them; accepted: " +
                          kAccepted);
  }
  return KernelMode(bits);
}

KernelMode KernelMode::from_bits(uint32_t bits) {
  // The ABI's bp_kernel_mode bits, which plugins register with, are these.
  static_assert(uint32_t{kFallback} == uint32_t{BP_KERNEL_MODE_FALLBACK} &&
                    uint32_t{kTraining} == uint32_t{BP_KERNEL_MODE_TRAINING} &&
                    uint32_t{kInference} == uint32_t{BP_KERNEL_MODE_INFERENCE} &&
                    uint32_t{kTorchCompile} == uint32_t{BP_KERNEL_MODE_TORCH_COMPILE},
                "KernelMode's bits mirror bp_kernel_mode");
  std::string text;
  for (const auto& [bit, word] : {std::pair<uint32_t, const char*>{kFallback, "fallback"},
                                  {kTraining, "training"},
                                  {kInference, "inference"},
                                  {kTorchCompile, "torch_compile"}}) {
    if ((bits & bit) != 0) text += (text.empty() ? "" : "|") + std::string(word);
  }
  if (bits == 0 || (bits & ~uint32_t{0xF}) != 0) {
    throw InvalidArgument("kernel mode bits " + std::to_string(bits) +
                          ": not a combination of fallback (1), training (2), inference (4) "
                          "and torch_compile (8)");
  }
  return parse(text);
}

std::string KernelMode::str() const {
  if (is_fallback()) return "fallback";
  std::string out = is_training() ? "training" : "inference";
  if (has_torch_compile()) out += "|torch_compile";
  return out;
}

std::vector<KernelMode> KernelMode::lookup_order() const {
  const KernelMode inference_compile(static_cast<uint8_t>(kInference | kTorchCompile));
  const KernelMode training_compile(static_cast<uint8_t>(kTraining | kTorchCompile));
  if (is_fallback()) {
    throw InvalidArgument(
        "kernel mode fallback is for mappings only; look up inference or "
        "training, optionally with torch_compile");
  }
  if (is_training()) {
    if (has_torch_compile()) return {training_compile, fallback()};
    return {training(), training_compile, fallback()};
  }
  if (has_torch_compile()) return {inference_compile, training_compile, fallback()};
  return {inference(), inference_compile, training(), training_compile, fallback()};
}

}  // namespace backplane
