// A Hub attention package for the tests: registers attention_forward "sdpa_tiled" on the cpu,
// served by the CPU sdpa kernel, so that a Hub resolution can be loaded and run.
#include <attention/attention.hpp>
#include <backplane/plugin_sdk.hpp>
#include <common/abi_status.hpp>

namespace {

bp_status* sdpa_tiled(void* context, const bp_attention_args* args) noexcept {
  const auto* host = static_cast<const backplane::sdk::Host*>(context);
  if (std::string why = backplane::sdk::args_size_error(
          "sdpa_tiled", args, BP_ATTENTION_ARGS_SIZE_1_3, "1.3", "bp_attention_args");
      !why.empty()) {
    return host->status(BP_INVALID_ARGUMENT, why);
  }
  backplane::attention::Tensors tensors;
  tensors.query = args->query;
  tensors.key = args->key;
  tensors.value = args->value;
  tensors.mask = args->mask;
  tensors.output = args->output;
  backplane::attention::Options options;
  options.causal = args->causal != 0;
  if (args->scale > 0) options.scale = args->scale;
  const backplane::attention::Status status = backplane::attention::forward(tensors, options);
  return backplane::kernels::to_bp_status(host, status);
}

class Package {
 public:
  explicit Package(backplane::sdk::Host host) : host_(host) {}
  void register_all(backplane::sdk::Registrar& registrar) {
    backplane::sdk::KernelSpec k;
    k.op = "attention_forward";
    k.implementation = "sdpa_tiled";
    k.device_type = "cpu";
    k.dtypes = {"float32", "bfloat16", "float16"};
    k.function = reinterpret_cast<void (*)(void)>(&sdpa_tiled);
    k.context = &host_;
    registrar.add(k);
  }

 private:
  backplane::sdk::Host host_;
};

}  // namespace

BACKPLANE_PLUGIN(Package, "cpu-attention", "0.1.0")
