"""kernelize layers of the rmsnorm package.

RMSNorm replaces the forward of transformers' RMSNorm classes (hub name "RMSNorm", e.g.
LlamaRMSNorm): it reads the module's own `weight` and `variance_epsilon`, as kernelize binds
this forward to the original module; it has no __init__ and no state of its own.
"""

import torch
from torch import nn

from ._ops import KERNEL_DTYPES, kernel_devices, ops

_DEVICES = kernel_devices("rms_norm")


class RMSNorm(nn.Module):
    """LlamaRMSNorm's forward through the kernel.

    LlamaRMSNorm normalizes in float32, rounds to the input's dtype, then multiplies by weight
    with torch's promotion: weight * normed.to(input_dtype). With weight in the input's dtype
    (a model in one dtype) the kernel does both in float32 and rounds once (within one or two
    ulps of the original's two roundings). With another weight dtype the kernel normalizes
    with a unit weight and torch multiplies, so the result has the original's dtype and
    rounding. Inputs the kernel does not take (float64, a device without the op) go the
    original way.
    """

    can_torch_compile = False
    has_backward = False

    def forward(self, hidden_states: torch.Tensor) -> torch.Tensor:
        weight = self.weight
        epsilon = float(self.variance_epsilon)
        x = hidden_states
        if (x.device.type not in _DEVICES or weight.device != x.device
                or x.dtype not in KERNEL_DTYPES
                or x.dim() == 0 or weight.dim() != 1 or weight.shape[0] != x.shape[-1]):
            input_dtype = x.dtype
            normed = x.to(torch.float32)
            normed = normed * torch.rsqrt(normed.pow(2).mean(-1, keepdim=True) + epsilon)
            return weight * normed.to(input_dtype)
        if x.stride(-1) != 1:
            x = x.contiguous()
        if weight.dtype == x.dtype:
            out = torch.empty(x.shape, dtype=x.dtype, device=x.device)
            ops.rms_norm(out, x, weight.contiguous(), epsilon)
            return out
        normed = torch.empty(x.shape, dtype=x.dtype, device=x.device)
        ops.rms_norm(normed, x, torch.ones(x.shape[-1], dtype=x.dtype, device=x.device), epsilon)
        return weight * normed


__all__ = ["RMSNorm"]
