"""backplane's RMSNorm (kernels/rmsnorm) as a kernel-builder package.

    rms_norm(out, input, weight, epsilon)
        out = input * rsqrt(mean(input^2, -1) + epsilon) * weight, float32 arithmetic
    fused_add_rms_norm(out, input, residual, weight, epsilon)
        residual += input (in place, rounded to the dtype), then out = rms_norm(residual)

input [..., hidden] (leading dims with any strides, the last contiguous), weight [hidden], out
and residual input's shape; one dtype for all: float32, bfloat16 or float16; cpu tensors (cuda
ones too in a cuda variant).
A bad argument raises RuntimeError "<op>: <argument> ...". layers.RMSNorm is the kernelize
layer for transformers' "RMSNorm" (LlamaRMSNorm and its copies).
"""

import torch

from . import layers
from ._ops import add_op_namespace_prefix, ops


def rms_norm(out: torch.Tensor, input: torch.Tensor, weight: torch.Tensor,
             epsilon: float) -> torch.Tensor:
    ops.rms_norm(out, input, weight, epsilon)
    return out


def fused_add_rms_norm(out: torch.Tensor, input: torch.Tensor, residual: torch.Tensor,
                       weight: torch.Tensor, epsilon: float) -> torch.Tensor:
    ops.fused_add_rms_norm(out, input, residual, weight, epsilon)
    return out


def cpu_target() -> str:
    """The SIMD target (Highway) the kernel runs on here: "AVX3", "AVX2", ..."""
    return ops.cpu_target()


__all__ = ["add_op_namespace_prefix", "cpu_target", "fused_add_rms_norm", "layers", "ops",
           "rms_norm"]
