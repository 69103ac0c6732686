// Test helper: the rotary embedding as the models write it, in float64 ATen ops (so that
// autograd differentiates it too).
#pragma once

#include <ATen/ATen.h>

#include "rotary/rotary.hpp"

namespace backplane::testing {

// transformers' rotate_half (neox) and GPT-J's rotate_every_two (interleaved), in float64,
// with cos and sin expanded to the rotated width as those models build them.
inline at::Tensor rotary_composite(const at::Tensor& x, const at::Tensor& cos,
                                   const at::Tensor& sin, rotary::Style style) {
  const int64_t rot = 2 * cos.size(-1);
  at::Tensor c = cos.to(at::kDouble), s = sin.to(at::kDouble);
  if (c.dim() == 2) {
    c = c.unsqueeze(0);
    s = s.unsqueeze(0);
  }
  c = c.unsqueeze(1);  // [batch, 1, seq, half]
  s = s.unsqueeze(1);
  const at::Tensor xf = x.to(at::kDouble);
  const at::Tensor xr = xf.narrow(-1, 0, rot);
  at::Tensor rotated;
  if (style == rotary::Style::kNeox) {
    const at::Tensor c2 = at::cat({c, c}, -1), s2 = at::cat({s, s}, -1);
    const at::Tensor x1 = xr.narrow(-1, 0, rot / 2), x2 = xr.narrow(-1, rot / 2, rot / 2);
    rotated = xr * c2 + at::cat({-x2, x1}, -1) * s2;
  } else {
    const at::Tensor c2 = c.repeat_interleave(2, -1), s2 = s.repeat_interleave(2, -1);
    const at::Tensor pairs = xr.unflatten(-1, {rot / 2, 2});
    const at::Tensor swapped =
        at::stack({-pairs.select(-1, 1), pairs.select(-1, 0)}, -1).flatten(-2);
    rotated = xr * c2 + swapped * s2;
  }
  return at::cat({rotated, xf.narrow(-1, rot, xf.size(-1) - rot)}, -1);
}

}  // namespace backplane::testing
