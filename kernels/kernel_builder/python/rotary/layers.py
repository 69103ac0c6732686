"""kernelize layers of the rotary package.

apply_rotary_transformers replaces transformers' apply_rotary_pos_emb (hub name
"rotary_pos_emb", a function made a layer by use_kernel_forward_from_hub and attached to the
attention modules by use_kernelized_func). Named as kernels-community/rotary names it; its
forward has the function's signature after self.
"""

import torch
from torch import nn

from ._ops import KERNEL_DTYPES, kernel_devices, ops

_DEVICES = kernel_devices("rotary_embedding")


def _rotate_half(x: torch.Tensor) -> torch.Tensor:
    half = x.shape[-1] // 2
    return torch.cat((-x[..., half:], x[..., :half]), dim=-1)


def _composite(q, k, cos, sin, unsqueeze_dim):
    cos = cos.unsqueeze(unsqueeze_dim)
    sin = sin.unsqueeze(unsqueeze_dim)
    return (q * cos) + (_rotate_half(q) * sin), (k * cos) + (_rotate_half(k) * sin)


def _kernel_layout(q, k, cos, sin, unsqueeze_dim):
    """The dtype the result has (torch's promotion, as the original computes it) when the
    kernel can compute it, else None. The kernel takes q and k [batch, heads, seq, head_dim]
    (unsqueeze_dim 1) or [batch, seq, heads, head_dim] (2), cos and sin [batch or 1, seq,
    head_dim] with halves repeated (transformers' cat((freqs, freqs), -1)), all on one device
    the ops run on."""
    if q.dim() != 4 or k.dim() != 4 or cos.dim() != 3 or cos.shape != sin.shape:
        return None
    if unsqueeze_dim not in (1, 2, -3, -2):
        return None
    if q.device.type not in _DEVICES or any(t.device != q.device for t in (k, cos, sin)):
        return None
    dtype = torch.promote_types(torch.promote_types(q.dtype, cos.dtype), sin.dtype)
    if torch.promote_types(torch.promote_types(k.dtype, cos.dtype), sin.dtype) != dtype:
        return None
    if dtype not in KERNEL_DTYPES:
        return None
    seq_dim = 2 if unsqueeze_dim in (1, -3) else 1
    head_dim = q.shape[-1]
    if head_dim % 2 != 0 or cos.shape[-1] != head_dim or k.shape[-1] != head_dim:
        return None
    if cos.shape[1] != q.shape[seq_dim] or k.shape[seq_dim] != q.shape[seq_dim]:
        return None
    if cos.shape[0] not in (1, q.shape[0]) or k.shape[0] != q.shape[0]:
        return None
    return dtype


def _own_copy(x: torch.Tensor, dtype: torch.dtype) -> torch.Tensor:
    out = x.to(dtype=dtype, copy=True)
    return out if out.stride(-1) == 1 else out.contiguous()


def _apply_rotary_transformers(q, k, cos, sin, unsqueeze_dim=1):
    dtype = _kernel_layout(q, k, cos, sin, unsqueeze_dim)
    if dtype is None:
        return _composite(q, k, cos, sin, unsqueeze_dim)
    q_embed = _own_copy(q, dtype)
    k_embed = _own_copy(k, dtype)
    half = q.shape[-1] // 2
    # The kernel's tables are float32 or q's dtype: the promoted dtype is one of them.
    cos_half = cos[..., :half].to(dtype)
    sin_half = sin[..., :half].to(dtype)
    if unsqueeze_dim in (1, -3):
        ops.rotary_embedding(q_embed, k_embed, cos_half, sin_half, False)
    else:  # [batch, seq, heads, head_dim]: the kernel's layout as a transposed view
        ops.rotary_embedding(q_embed.transpose(1, 2), k_embed.transpose(1, 2), cos_half,
                             sin_half, False)
    return q_embed, k_embed


class apply_rotary_transformers(nn.Module):  # noqa: N801 (the hub layer name)
    """transformers' apply_rotary_pos_emb(q, k, cos, sin, unsqueeze_dim=1) through the
    kernel: new tensors q_embed, k_embed (q and k are left as they are) of the dtype torch's
    promotion gives, float32 arithmetic and one rounding per element (the original rounds
    after each product and sum in low precision). cos and sin must have their halves repeated,
    as every transformers rotary embedding makes them; the kernel reads the first half. Shapes
    or dtypes the kernel does not take go the original way."""

    can_torch_compile = False
    has_backward = False

    def forward(self, q, k, cos, sin, unsqueeze_dim=1):
        return _apply_rotary_transformers(q, k, cos, sin, unsqueeze_dim)


__all__ = ["apply_rotary_transformers"]
