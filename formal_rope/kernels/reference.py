"""Readable torch reference for strict-causal rotary attention (the oracle for the Triton kernel)."""

from __future__ import annotations

import math

import torch

from formal_rope.kernels.masks import window_mask


def broadcast_tables(cos: torch.Tensor, sin: torch.Tensor, inverse: bool = False) -> tuple[torch.Tensor, torch.Tensor]:
    """cos/sin tables of shape (T, d/2) or (batch, T, d/2), viewed to broadcast over (batch, heads, T, d/2).

    inverse negates sin (R^T).
    """
    if cos.dim() == 2:
        cos_b, sin_b = cos[None, None], sin[None, None]
    else:
        cos_b, sin_b = cos[:, None], sin[:, None]
    return cos_b, (-sin_b if inverse else sin_b)


def apply_rotary(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor, inverse: bool = False) -> torch.Tensor:
    """Rotate interleaved pairs (2i, 2i+1) of x (batch, heads, T, d) by angles given as cos/sin.

    cos/sin are (T, d/2) (shared) or (batch, T, d/2) (per batch element). inverse applies R^T.
    """
    cos_b, sin_b = broadcast_tables(cos, sin, inverse)
    x_even, x_odd = x[..., 0::2], x[..., 1::2]
    rotated_even = x_even * cos_b - x_odd * sin_b
    rotated_odd = x_even * sin_b + x_odd * cos_b
    return torch.stack((rotated_even, rotated_odd), dim=-1).flatten(-2)


def rotary_attention_reference(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    cos: torch.Tensor,
    sin: torch.Tensor,
    *,
    rotate_values: bool = False,
    scale: float | None = None,
    window: int | None = None,
) -> torch.Tensor:
    """Strict-causal rotary attention written out (scores, mask, softmax): the oracle the fast paths are tested against.

    q, k, v: (batch, heads, T, d); cos, sin: (T, d/2) or (batch, T, d/2). Row 0 (bos) is zeros.
    window: a sliding window, query i attends to keys i - window <= j < i (None: every j < i).
    """
    batch, heads, length, dim = q.shape
    if dim % 2:
        raise ValueError(f"head dimension must be even for rotary pairs, got {dim}")
    scale = 1.0 / math.sqrt(dim) if scale is None else scale
    cos = cos.to(q.dtype)
    sin = sin.to(q.dtype)
    q_rot = apply_rotary(q, cos, sin)
    k_rot = apply_rotary(k, cos, sin)
    v_in = apply_rotary(v, cos, sin) if rotate_values else v
    scores = torch.matmul(q_rot.float(), k_rot.float().transpose(-1, -2)) * scale
    scores = scores.masked_fill(~window_mask(length, window, q.device), float("-inf"))
    # Row 0 (bos) sees no key: its softmax would be NaN, and the contract says it outputs zeros.
    weights = torch.softmax(scores[..., 1:, :], dim=-1)
    out_rows = torch.matmul(weights, v_in.float())
    bos_row = out_rows.new_zeros((*out_rows.shape[:-2], min(length, 1), out_rows.shape[-1]))
    out = torch.cat((bos_row, out_rows), dim=-2)
    if rotate_values:
        out = apply_rotary(out, cos.float(), sin.float(), inverse=True)
    return out.to(q.dtype)
