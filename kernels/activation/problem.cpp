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

namespace {

bool valid(Activation activation) {
  return activation == Activation::kSilu || activation == Activation::kGelu ||
         activation == Activation::kGeluTanh;
}

// `half` (named `half_name`) is `in` with the last dim halved; in's last dim is even. Sets *d.
Status check_halved(const char* op, const DLTensor& in, const char* in_name, const DLTensor& half,
                    const char* half_name, int64_t* d) {
  const int64_t width = in.shape[in.ndim - 1];
  if (width % 2 != 0) {
    return invalid(op, std::string(in_name) +
                           "'s last dim must be even (2 * d: the activated half, then the "
                           "multiplier), got " +
                           kernels::dims_string(in));
  }
  *d = width / 2;
  bool shape_ok = half.ndim == in.ndim && half.shape[half.ndim - 1] == *d;
  for (int i = 0; shape_ok && i < in.ndim - 1; ++i) shape_ok = half.shape[i] == in.shape[i];
  if (shape_ok) return Status::Ok();
  std::string want = "[";
  for (int i = 0; i < in.ndim - 1; ++i) want += std::to_string(in.shape[i]) + ", ";
  want += std::to_string(*d) + "]";
  return invalid(op, std::string(half_name) + " shape " + kernels::dims_string(half) + " must be " +
                         in_name + "'s with the last dim halved: " + want + " (" + in_name + " " +
                         kernels::dims_string(in) + ")");
}

}  // namespace

const char* backward_op_name(Activation activation) {
  switch (activation) {
    case Activation::kSilu:
      return "silu_and_mul_backward";
    case Activation::kGelu:
      return "gelu_and_mul_backward";
    case Activation::kGeluTanh:
      return "gelu_tanh_and_mul_backward";
  }
  return "unknown_activation_backward";
}

Status make_problem(Activation activation, const DLTensor* input, const DLTensor* output,
                    kernels::Memory memory, Problem* problem) {
  const char* op = op_name(activation);
  if (!valid(activation)) return invalid(op, "activation must be kSilu, kGelu or kGeluTanh");
  Problem p;
  p.activation = activation;
  kernels::DType other;
  Status s = kernels::check_tensor(op, input, "input", memory, &p.dtype);
  if (s.ok()) s = kernels::check_tensor(op, output, "output", memory, &other);
  if (s.ok()) s = kernels::check_same_device(op, *output, "output", *input, "input");
  if (s.ok()) s = kernels::check_same_dtype(op, *output, "output", *input, "input");
  if (s.ok()) s = kernels::check_written(op, *output, "output");
  if (s.ok()) s = check_halved(op, *input, "input", *output, "output", &p.d);
  if (!s.ok()) return s;
  if (kernels::overlaps(*output, *input)) {
    return invalid(op, "output overlaps input; write the result to a separate buffer");
  }
  p.input = kernels::rows_of(*input);
  p.output = kernels::rows_of(*output);
  p.rows = p.input.rows;
  *problem = p;
  return Status::Ok();
}

Status make_backward_problem(Activation activation, const DLTensor* grad_output,
                             const DLTensor* input, const DLTensor* grad_input,
                             kernels::Memory memory, BackwardProblem* problem) {
  const char* op = backward_op_name(activation);
  if (!valid(activation)) return invalid(op, "activation must be kSilu, kGelu or kGeluTanh");
  BackwardProblem p;
  p.activation = activation;
  kernels::DType other;
  Status s = kernels::check_tensor(op, input, "input", memory, &p.dtype);
  if (s.ok()) s = kernels::check_tensor(op, grad_output, "grad_output", memory, &other);
  if (s.ok()) s = kernels::check_tensor(op, grad_input, "grad_input", memory, &other);
  if (s.ok()) s = kernels::check_same_device(op, *grad_output, "grad_output", *input, "input");
  if (s.ok()) s = kernels::check_same_device(op, *grad_input, "grad_input", *input, "input");
  if (s.ok()) s = kernels::check_same_dtype(op, *grad_output, "grad_output", *input, "input");
  if (s.ok()) s = kernels::check_same_dtype(op, *grad_input, "grad_input", *input, "input");
  if (s.ok()) s = kernels::check_written(op, *grad_input, "grad_input");
  if (s.ok()) s = check_halved(op, *input, "input", *grad_output, "grad_output", &p.d);
  if (s.ok()) s = kernels::check_same_shape(op, *grad_input, "grad_input", *input, "input");
  if (!s.ok()) return s;
  if (kernels::overlaps(*grad_input, *input) || kernels::overlaps(*grad_input, *grad_output)) {
    return invalid(op, std::string("grad_input overlaps ") +
                           (kernels::overlaps(*grad_input, *input) ? "input" : "grad_output") +
                           "; write the gradient to a separate buffer");
  }
  p.grad_output = kernels::rows_of(*grad_output);
  p.input = kernels::rows_of(*input);
  p.grad_input = kernels::rows_of(*grad_input);
  p.rows = p.input.rows;
  *problem = p;
  return Status::Ok();
}

}  // namespace backplane::activation
