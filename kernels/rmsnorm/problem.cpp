#include "rmsnorm/problem.hpp"

#include <cmath>
#include <string>

namespace backplane::rmsnorm {

using kernels::invalid;

Status make_problem(const Tensors& t, double epsilon, kernels::Memory memory, Problem* problem) {
  constexpr const char* kOp = "rms_norm";
  Problem p;
  kernels::DType other;
  Status s = kernels::check_tensor(kOp, t.input, "input", memory, &p.dtype);
  if (s.ok()) s = kernels::check_tensor(kOp, t.weight, "weight", memory, &other);
  if (s.ok()) s = kernels::check_tensor(kOp, t.output, "output", memory, &other);
  if (s.ok() && t.residual) s = kernels::check_tensor(kOp, t.residual, "residual", memory, &other);
  if (!s.ok()) return s;
  const DLTensor& in = *t.input;
  const DLTensor& w = *t.weight;
  const DLTensor& out = *t.output;
  s = kernels::check_same_device(kOp, w, "weight", in, "input");
  if (s.ok()) s = kernels::check_same_device(kOp, out, "output", in, "input");
  if (s.ok() && t.residual)
    s = kernels::check_same_device(kOp, *t.residual, "residual", in, "input");
  if (s.ok()) s = kernels::check_same_dtype(kOp, w, "weight", in, "input");
  if (s.ok()) s = kernels::check_same_dtype(kOp, out, "output", in, "input");
  if (s.ok()) s = kernels::check_same_shape(kOp, out, "output", in, "input");
  if (s.ok()) s = kernels::check_written(kOp, out, "output");
  if (!s.ok()) return s;
  p.hidden = in.shape[in.ndim - 1];
  if (w.ndim != 1 || w.shape[0] != p.hidden) {
    return invalid(kOp, "weight shape " + kernels::dims_string(w) + " must be [hidden] = [" +
                            std::to_string(p.hidden) + "] (input " + kernels::dims_string(in) +
                            ")");
  }
  if (!std::isfinite(epsilon) || epsilon < 0) {
    return invalid(kOp, "epsilon must be finite and >= 0, got " + std::to_string(epsilon));
  }
  if (kernels::overlaps(out, in) && !kernels::same_view(out, in)) {
    return invalid(kOp,
                   "output overlaps input without being the same view; write to input "
                   "itself (in place) or to a separate buffer");
  }
  if (kernels::overlaps(out, w)) return invalid(kOp, "output overlaps weight");
  if (t.residual) {
    const DLTensor& r = *t.residual;
    s = kernels::check_same_dtype(kOp, r, "residual", in, "input");
    if (s.ok()) s = kernels::check_same_shape(kOp, r, "residual", in, "input");
    if (s.ok()) s = kernels::check_written(kOp, r, "residual");
    if (!s.ok()) return s;
    const DLTensor* others[] = {&in, &w, &out};
    const char* names[] = {"input", "weight", "output"};
    for (int i = 0; i < 3; ++i) {
      if (kernels::overlaps(r, *others[i])) {
        return invalid(kOp, std::string("residual overlaps ") + names[i] +
                                "; the residual is updated in place and must be its own buffer");
      }
    }
    p.residual = kernels::rows_of(r);
  }
  p.input = kernels::rows_of(in);
  p.output = kernels::rows_of(out);
  p.rows = p.input.rows;
  p.weight = kernels::base_of(w);
  p.epsilon = static_cast<float>(epsilon);
  *problem = p;
  return Status::Ok();
}

Status make_backward_problem(const BackwardTensors& t, double epsilon, kernels::Memory memory,
                             BackwardProblem* problem) {
  constexpr const char* kOp = "rms_norm_backward";
  BackwardProblem p;
  struct Arg {
    const DLTensor* tensor;
    const char* name;
    bool written, optional;
  } args[] = {
      {t.grad_output, "grad_output", false, false}, {t.input, "input", false, false},
      {t.weight, "weight", false, false},           {t.grad_residual, "grad_residual", false, true},
      {t.grad_input, "grad_input", true, false},    {t.grad_weight, "grad_weight", true, false}};
  kernels::DType other;
  Status s = kernels::check_tensor(kOp, t.input, "input", memory, &p.dtype);
  for (const Arg& a : args) {
    if (!s.ok()) return s;
    if (&a == &args[1] || (a.optional && a.tensor == nullptr)) continue;  // input: checked first
    s = kernels::check_tensor(kOp, a.tensor, a.name, memory, &other);
    if (s.ok()) s = kernels::check_same_device(kOp, *a.tensor, a.name, *t.input, "input");
    if (s.ok()) s = kernels::check_same_dtype(kOp, *a.tensor, a.name, *t.input, "input");
    if (s.ok() && a.written) s = kernels::check_written(kOp, *a.tensor, a.name);
  }
  if (!s.ok()) return s;
  const DLTensor& in = *t.input;
  s = kernels::check_same_shape(kOp, *t.grad_output, "grad_output", in, "input");
  if (s.ok() && t.grad_residual)
    s = kernels::check_same_shape(kOp, *t.grad_residual, "grad_residual", in, "input");
  if (s.ok()) s = kernels::check_same_shape(kOp, *t.grad_input, "grad_input", in, "input");
  if (!s.ok()) return s;
  p.hidden = in.shape[in.ndim - 1];
  for (const DLTensor* w : {t.weight, t.grad_weight}) {
    if (w->ndim != 1 || w->shape[0] != p.hidden) {
      return invalid(kOp, std::string(w == t.weight ? "weight" : "grad_weight") + " shape " +
                              kernels::dims_string(*w) + " must be [hidden] = [" +
                              std::to_string(p.hidden) + "] (input " + kernels::dims_string(in) +
                              ")");
    }
  }
  if (!std::isfinite(epsilon) || epsilon < 0) {
    return invalid(kOp, "epsilon must be finite and >= 0, got " + std::to_string(epsilon));
  }
  // What is written must not overlap anything else (a gradient written over a row the kernel
  // still reads would be read back).
  for (const Arg& written : args) {
    if (!written.written) continue;
    for (const Arg& a : args) {
      if (a.tensor == nullptr || a.tensor == written.tensor) continue;
      if (kernels::overlaps(*written.tensor, *a.tensor)) {
        return invalid(kOp, std::string(written.name) + " overlaps " + a.name +
                                "; write each gradient to its own buffer");
      }
    }
  }
  p.grad_output = kernels::rows_of(*t.grad_output);
  p.input = kernels::rows_of(in);
  if (t.grad_residual) p.grad_residual = kernels::rows_of(*t.grad_residual);
  p.grad_input = kernels::rows_of(*t.grad_input);
  p.rows = p.input.rows;
  p.weight = kernels::base_of(*t.weight);
  p.grad_weight = kernels::base_of(*t.grad_weight);
  p.epsilon = static_cast<float>(epsilon);
  *problem = p;
  return Status::Ok();
}

}  // namespace backplane::rmsnorm
