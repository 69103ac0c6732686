#include "activation/problem.hpp"

#include <string>

namespace backplane::activation {

using kernels::invalid;

const char* op_name(Activation activation) {
  switch (activation) {
    case Activation::kSilu:
      return "silu_and_mul";
    case Activation::kGelu:
      return "gelu_and_mul";
    case Activation::kGeluTanh:
      return "gelu_tanh_and_mul";
  }
  return "unknown_activation";
}

Status make_problem(Activation activation, const DLTensor* input, const DLTensor* output,
                    kernels::Memory memory, Problem* problem) {
  const char* op = op_name(activation);
  if (activation != Activation::kSilu && activation != Activation::kGelu &&
      activation != Activation::kGeluTanh) {
    return invalid(op, "activation must be kSilu, kGelu or kGeluTanh");
  }
  Problem p;
  p.activation = activation;
  kernels::DType other;
  Status s = kernels::check_tensor(op, input, "input", memory, &p.dtype);
  if (s.ok()) s = kernels::check_tensor(op, output, "output", memory, &other);
  if (s.ok()) s = kernels::check_same_device(op, *output, "output", *input, "input");
  if (s.ok()) s = kernels::check_same_dtype(op, *output, "output", *input, "input");
  if (s.ok()) s = kernels::check_written(op, *output, "output");
  if (!s.ok()) return s;
  const DLTensor& in = *input;
  const DLTensor& out = *output;
  const int64_t width = in.shape[in.ndim - 1];
  if (width % 2 != 0) {
    return invalid(op,
                   "input's last dim must be even (2 * d: the activated half, then the "
                   "multiplier), got " +
                       kernels::dims_string(in));
  }
  p.d = width / 2;
  bool shape_ok = out.ndim == in.ndim && out.shape[out.ndim - 1] == p.d;
  for (int i = 0; shape_ok && i < in.ndim - 1; ++i) shape_ok = out.shape[i] == in.shape[i];
  if (!shape_ok) {
    std::string want = "[";
    for (int i = 0; i < in.ndim - 1; ++i) want += std::to_string(in.shape[i]) + ", ";
    want += std::to_string(p.d) + "]";
    return invalid(op, "output shape " + kernels::dims_string(out) + " must be input's with the " +
                           "last dim halved: " + want + " (input " + kernels::dims_string(in) +
                           ")");
  }
  if (kernels::overlaps(out, in)) {
    return invalid(op, "output overlaps input; write the result to a separate buffer");
  }
  p.input = kernels::rows_of(in);
  p.output = kernels::rows_of(out);
  p.rows = p.input.rows;
  *problem = p;
  return Status::Ok();
}

}  // namespace backplane::activation
