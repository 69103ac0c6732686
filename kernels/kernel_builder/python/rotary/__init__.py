"""backplane's rotary position embedding (kernels/rotary) as a kernel-builder package.

    rotary_embedding(query, key, cos, sin, interleaved=False)
        query [batch, heads_q, seq, head_dim] and key [batch, heads_k, seq, head_dim] rotated
        in place; cos, sin [seq, rotary_dim / 2] or [batch or 1, seq, rotary_dim / 2]; each
        pair (x1, x2): x1' = x1 cos - x2 sin, x2' = x2 cos + x1 sin. Pairs are
        (x[i], x[i + rotary_dim / 2]) (neox: transformers' rotate_half) or, interleaved,
        (x[2i], x[2i + 1]). Dims from rotary_dim on stay as they are.
    apply_rotary_transformers(q, k, cos, sin, unsqueeze_dim=1) -> (q_embed, k_embed)
        transformers' apply_rotary_pos_emb through the kernel, on copies.

query and key share a dtype (float32, bfloat16, float16); cos and sin are float32 or that
dtype; last dims contiguous, the others any strides; cpu tensors (cuda ones too in a cuda
variant). A bad argument raises RuntimeError "rotary_embedding: <argument> ...".
layers.apply_rotary_transformers is the kernelize layer for transformers' "rotary_pos_emb".
"""

import torch

from . import layers
from ._ops import add_op_namespace_prefix, ops


def rotary_embedding(query: torch.Tensor, key: torch.Tensor, cos: torch.Tensor,
                     sin: torch.Tensor, interleaved: bool = False) -> None:
    ops.rotary_embedding(query, key, cos, sin, interleaved)


def apply_rotary_transformers(q: torch.Tensor, k: torch.Tensor, cos: torch.Tensor,
                              sin: torch.Tensor, unsqueeze_dim: int = 1):
    return layers._apply_rotary_transformers(q, k, cos, sin, unsqueeze_dim)


def cpu_target() -> str:
    """The SIMD target (Highway) the kernel runs on here: "AVX3", "AVX2", ..."""
    return ops.cpu_target()


__all__ = ["add_op_namespace_prefix", "apply_rotary_transformers", "cpu_target", "layers",
           "ops", "rotary_embedding"]
