"""kernelize layers of the activation package, with kernels-community's names and forwards:
forward(self, x) with x [..., 2 * d] returns act(x[..., :d]) * x[..., d:], [..., d]. No
__init__ and no state: kernelize binds these forwards to the original modules.
"""

import torch
from torch import nn

from ._ops import ops


def _gated(op, x: torch.Tensor) -> torch.Tensor:
    """act(x[..., :d]) * x[..., d:] into a new [..., d] tensor through `op`(out, x)."""
    if x.stride(-1) != 1:
        x = x.contiguous()
    out = torch.empty(x.shape[:-1] + (x.shape[-1] // 2,), dtype=x.dtype, device=x.device)
    op(out, x)
    return out


class SiluAndMul(nn.Module):
    can_torch_compile = False
    has_backward = False

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return _gated(ops.silu_and_mul, x)


class GeluAndMul(nn.Module):
    can_torch_compile = False
    has_backward = False

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return _gated(ops.gelu_and_mul, x)


class GeluTanhAndMul(nn.Module):
    can_torch_compile = False
    has_backward = False

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return _gated(ops.gelu_tanh_and_mul, x)


__all__ = ["GeluAndMul", "GeluTanhAndMul", "SiluAndMul"]
