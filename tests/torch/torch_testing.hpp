// Shared by the bridge's tests: a runtime over the plugins of this build, and tensor comparison.
#pragma once

#include <backplane/backplane.hpp>

#include <ATen/TensorOperators.h>
#include <ATen/core/Tensor.h>

#include <filesystem>
#include <string>
#include <vector>

namespace backplane::torch::testing {

// The plugins of this build tree (PLUGIN_BUILD_DIR), only those named, logging nothing.
inline Runtime open_runtime(std::vector<std::string> plugins = {"cpu"}) {
  RuntimeOptions options;
  options.plugin_path = std::vector<std::filesystem::path>{PLUGIN_BUILD_DIR};
  options.only_plugins = std::move(plugins);
  options.log_sink = [](LogLevel, const std::string&) {};
  return Runtime::open(options);
}

// max |a - b| over max |b|, in float64; 0 when b is all zeros and a equals it.
inline double relative_error(const at::Tensor& a, const at::Tensor& b) {
  const at::Tensor ad = a.to(at::kDouble), bd = b.to(at::kDouble);
  const double diff = (ad - bd).abs().max().item<double>();
  const double scale = bd.abs().max().item<double>();
  return scale > 0 ? diff / scale : diff;
}

}  // namespace backplane::torch::testing
