// Mixed-precision advice (transformers: bf16 needs Ampere or newer) and the collective backend
// of a distributed run (accelerate state.py PartialState._prepare_backend).
#include <backplane/error.hpp>
#include <backplane/rules/selection.hpp>

namespace backplane {

namespace {

[[noreturn]] void refuse(const std::string& requested, const std::string& fitting) {
  throw InvalidArgument("Your assigned backend " + requested + " is not available, please use " +
                        fitting);
}

}  // namespace

std::optional<std::string> mixed_precision_advice(const DeviceInfo* info) {
  if (!info) return std::nullopt;
  const std::string& type = info->device.type();
  if (type == "cpu" || type == "meta") return std::nullopt;
  const bool ampere_or_newer =
      !info->compute_capability || !(*info->compute_capability < ComputeCapability{8, 0});
  if (info->has(kCapBf16) && ampere_or_newer) return "bf16";
  if (info->has(kCapFp16)) return "fp16";
  return std::nullopt;
}

std::optional<std::string> collective_backend_for(std::string_view type, const BackendInfo* backend,
                                                  const std::optional<std::string>& requested,
                                                  bool mpi_available, bool mpi_launched) {
  const bool asked = requested && !requested->empty();
  if (type == "cpu") {
    // Accelerate: mpi when asked for (or nothing was) and PyTorch has MPI; gloo otherwise. Here
    // the default is mpi only for an MPI-launched run.
    if (asked && *requested == "mpi" && mpi_available) return std::string("mpi");
    const std::string fallback = (mpi_available && mpi_launched) ? "mpi" : "gloo";
    if (!asked) return fallback;
    if (*requested == "gloo") return std::string("gloo");
    refuse(*requested, fallback);
  }
  const std::string own = backend ? backend->collective_backend : std::string();
  if (own.empty()) {
    if (asked) {
      throw InvalidArgument("Your assigned backend " + *requested +
                            " is not available: " + std::string(type) +
                            " has no collective backend, so it cannot run distributed");
    }
    return std::nullopt;
  }
  if (!asked || *requested == own) return own;
  if (type == "cuda" && *requested == "gloo") return std::string("gloo");
  if (own == "xccl" && *requested == "ccl") return std::string("ccl");
  refuse(*requested, own);
}

}  // namespace backplane
