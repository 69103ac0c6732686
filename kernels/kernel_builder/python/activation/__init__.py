"""backplane's gated activations (kernels/activation) as a kernel-builder package.

    silu_and_mul(out, x)        out = silu(x[..., :d]) * x[..., d:]
    gelu_and_mul(out, x)        out = gelu(x[..., :d]) * x[..., d:]        (erf)
    gelu_tanh_and_mul(out, x)   out = gelu_tanh(x[..., :d]) * x[..., d:]   (tanh approximation)

x [..., 2 * d], out [..., d] (leading dims with any strides, the last contiguous); one dtype:
float32, bfloat16 or float16; cpu tensors (cuda ones too in a cuda variant); float32
arithmetic, one rounding. A bad argument raises RuntimeError "<op>: <argument> ...". layers:
SiluAndMul, GeluAndMul, GeluTanhAndMul.
"""

import torch

from . import layers
from ._ops import add_op_namespace_prefix, ops


def silu_and_mul(out: torch.Tensor, x: torch.Tensor) -> torch.Tensor:
    ops.silu_and_mul(out, x)
    return out


def gelu_and_mul(out: torch.Tensor, x: torch.Tensor) -> torch.Tensor:
    ops.gelu_and_mul(out, x)
    return out


def gelu_tanh_and_mul(out: torch.Tensor, x: torch.Tensor) -> torch.Tensor:
    ops.gelu_tanh_and_mul(out, x)
    return out


def cpu_target() -> str:
    """The SIMD target (Highway) the kernel runs on here: "AVX3", "AVX2", ..."""
    return ops.cpu_target()


__all__ = ["add_op_namespace_prefix", "cpu_target", "gelu_and_mul", "gelu_tanh_and_mul",
           "layers", "ops", "silu_and_mul"]
