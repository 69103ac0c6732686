#include <backplane/error.hpp>
#include <backplane/runtime/kernels.hpp>

#include "plugin_host/status.hpp"

namespace backplane {

std::string kernel_mismatch(const KernelInfo& kernel, const DeviceInfo& device) {
  if (kernel.device_type != device.device.type()) {
    return kernel.op + "/" + kernel.implementation + " runs on " + kernel.device_type +
           ", not on " + device.device.type();
  }
  if (kernel.min_compute_capability) {
    const ComputeCapability& min = *kernel.min_compute_capability;
    if (!device.compute_capability || *device.compute_capability < min) {
      return kernel.op + "/" + kernel.implementation +
             " requires compute capability >= " + min.str() + ", but " + device.device.str() +
             " has " + (device.compute_capability ? device.compute_capability->str() : "none");
    }
  }
  return {};
}

AttentionKernel::AttentionKernel(KernelInfo info, bp_attention_forward_fn function, void* context,
                                 std::shared_ptr<const void> owner,
                                 bp_attention_backward_fn backward_function, void* backward_context)
    : info_(std::move(info)),
      function_(function),
      context_(context),
      backward_(backward_function),
      backward_context_(backward_context),
      owner_(std::move(owner)) {}

void AttentionKernel::operator()(const AttentionArguments& arguments) const {
  bp_attention_args args{};
  args.struct_size = sizeof args;
  args.query = arguments.query;
  args.key = arguments.key;
  args.value = arguments.value;
  args.mask = arguments.mask;
  args.output = arguments.output;
  args.causal = arguments.causal ? 1 : 0;
  args.scale = arguments.scale.value_or(0.0);
  args.stream = arguments.stream;
  if (arguments.logsumexp != nullptr) {
    // A plugin without the backward may predate ABI 1.6 and never write it: refuse, do not
    // leave it unwritten.
    if (!has_backward()) {
      throw InvalidArgument(info_.op + "/" + info_.implementation + " on " + info_.device_type +
                            " has no attention_backward, so it does not write a logsumexp; "
                            "pass none");
    }
    args.logsumexp = arguments.logsumexp;
  }
  (*this)(args);
}

void AttentionKernel::backward(const AttentionBackwardArguments& arguments) const {
  if (!has_backward()) {
    throw Unavailable(info_.op + "/" + info_.implementation + " on " + info_.device_type +
                      ": its plugin registered no " + kAttentionBackward);
  }
  bp_attention_backward_args args{};
  args.struct_size = sizeof args;
  args.query = arguments.query;
  args.key = arguments.key;
  args.value = arguments.value;
  args.mask = arguments.mask;
  args.output = arguments.output;
  args.logsumexp = arguments.logsumexp;
  args.grad_output = arguments.grad_output;
  args.grad_query = arguments.grad_query;
  args.grad_key = arguments.grad_key;
  args.grad_value = arguments.grad_value;
  args.causal = arguments.causal ? 1 : 0;
  args.scale = arguments.scale.value_or(0.0);
  args.stream = arguments.stream;
  detail::StatusPtr status = detail::adopt(backward_(backward_context_, &args));
  if (status) {
    throw InvalidArgument(std::string(kAttentionBackward) + "/" + info_.implementation + " on " +
                          info_.device_type + ": " + status->message);
  }
}

void AttentionKernel::operator()(const bp_attention_args& args) const {
  detail::StatusPtr status = detail::adopt(function_(context_, &args));
  if (status) {
    throw InvalidArgument(info_.op + "/" + info_.implementation + " on " + info_.device_type +
                          ": " + status->message);
  }
}

}  // namespace backplane
