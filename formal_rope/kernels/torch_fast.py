"""Fast CPU/GPU torch path for strict-causal rotary attention (impl="torch").

Same contract and numerics class as `reference.py` (the readable oracle the tests compare to), but
it lets PyTorch's fused `scaled_dot_product_attention` do the masked softmax: shifting queries by
one position turns the strict mask (j < i) into SDPA's ordinary causal mask — query i (i >= 1)
against keys 0..T-2 with is_causal=True sees exactly the keys j <= i-1. Rotations are one complex
multiplication per tensor instead of strided even/odd slices.
"""

from __future__ import annotations

import math

import torch
from torch.nn import functional as F

from formal_rope.kernels.reference import broadcast_tables, rotary_attention_reference


def rotate_complex(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor, inverse: bool = False) -> torch.Tensor:
    """Rotate interleaved pairs of x (B, H, T, d) in float32/float64 via complex multiplication."""
    work = x if x.dtype in (torch.float32, torch.float64) else x.float()
    cos_b, sin_b = broadcast_tables(cos.to(work.dtype), sin.to(work.dtype), inverse)
    pairs = torch.view_as_complex(work.reshape(*work.shape[:-1], -1, 2).contiguous())
    rotated = pairs * torch.complex(cos_b, sin_b)
    return torch.view_as_real(rotated).flatten(-2)


def rotary_attention_fast(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    cos: torch.Tensor,
    sin: torch.Tensor,
    *,
    rotate_values: bool = False,
    scale: float | None = None,
) -> torch.Tensor:
    """Strict-causal rotary attention via PyTorch's fused SDPA: same contract as `rotary_attention`.

    q, k, v: (batch, heads, T, d); cos, sin: (T, d/2) or (batch, T, d/2). Returns q's shape and dtype.
    """
    batch, heads, length, dim = q.shape
    if dim % 2:
        raise ValueError(f"head dimension must be even for rotary pairs, got {dim}")
    scale = 1.0 / math.sqrt(dim) if scale is None else scale
    # Tables are rounded to the input dtype first, as the reference (and the Triton kernel) do.
    cos = cos.to(q.dtype)
    sin = sin.to(q.dtype)
    q_rot = rotate_complex(q, cos, sin)
    k_rot = rotate_complex(k, cos, sin)
    v_in = rotate_complex(v, cos, sin) if rotate_values else v.float()
    if length <= 1:
        return rotary_attention_reference(q, k, v, cos, sin, rotate_values=rotate_values, scale=scale)
    rows = F.scaled_dot_product_attention(
        q_rot[..., 1:, :], k_rot[..., :-1, :], v_in[..., :-1, :], is_causal=True, scale=scale
    )
    out = torch.cat((rows.new_zeros((*rows.shape[:-2], 1, dim)), rows), dim=-2)
    if rotate_values:
        out = rotate_complex(out, cos.float(), sin.float(), inverse=True)
    return out.to(q.dtype)
