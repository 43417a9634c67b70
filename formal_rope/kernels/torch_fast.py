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

from formal_rope.kernels.masks import hidden_from_readout, window_mask
from formal_rope.kernels.reference import broadcast_tables, rotary_attention_reference


def rotate_by(x: torch.Tensor, turn: torch.Tensor) -> torch.Tensor:
    """Interleaved rotary pairs of x (..., d) multiplied by unit complex numbers `turn` that
    broadcast against x's pairs (..., d/2): one complex product per pair, in x's dtype (float32 or
    float64)."""
    pairs = x.reshape(*x.shape[:-1], -1, 2)
    # A complex view needs the pair axis contiguous and every other stride (and the offset) even;
    # strided views of a fused qkv projection already are, so they are not copied.
    if pairs.stride(-1) != 1 or pairs.storage_offset() % 2 or any(stride % 2 for stride in pairs.stride()[:-1]):
        pairs = pairs.contiguous()
    return torch.view_as_real(torch.view_as_complex(pairs) * turn).flatten(-2)


def rotate_complex(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor, inverse: bool = False) -> torch.Tensor:
    """Rotate interleaved pairs of x (B, H, T, d) in float32/float64 via complex multiplication."""
    work = x if x.dtype in (torch.float32, torch.float64) else x.float()
    cos_b, sin_b = broadcast_tables(cos.to(work.dtype), sin.to(work.dtype), inverse)
    return rotate_by(work, torch.complex(cos_b, sin_b))


def causal_attention_torch(
    q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, scale: float | None = None
) -> torch.Tensor:
    """Strict-causal softmax attention (no rotation) through PyTorch's fused SDPA: query i attends to
    keys j < i, query 0 (bos) returns zeros. q, k, v: (batch, heads, T, d), any strides with a
    contiguous last axis; returns (batch, heads, T, d) in q's dtype.

    On CPU, SDPA with the strict mask gives exact zeros (and zero gradients) for the fully-masked
    row 0 (tested), so the whole square is one call. Elsewhere fully-masked rows are not promised to
    be zeros, so queries 1.. attend to keys ..T-2 with SDPA's own causal mask (query i, key j <= i-1)
    and the zero row is put in front.
    """
    length, dim = q.shape[-2], q.shape[-1]
    scale = 1.0 / math.sqrt(dim) if scale is None else scale
    if length <= 1:
        return q.new_zeros(q.shape)
    if q.device.type == "cpu":
        return F.scaled_dot_product_attention(q, k, v, attn_mask=window_mask(length, device=q.device), scale=scale)
    rows = F.scaled_dot_product_attention(q[..., 1:, :], k[..., :-1, :], v[..., :-1, :], is_causal=True, scale=scale)
    return torch.cat((rows.new_zeros((*rows.shape[:-2], 1, dim)), rows), dim=-2)


def windowed_attention_torch(
    q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, window: int, scale: float | None = None
) -> torch.Tensor:
    """`causal_attention_torch` with a sliding window: query i attends to keys i - window <= j < i;
    query 0 (bos) returns zeros. Same shapes and dtype contract."""
    length, dim = q.shape[-2], q.shape[-1]
    scale = 1.0 / math.sqrt(dim) if scale is None else scale
    if length <= 1:
        return q.new_zeros(q.shape)
    # Queries 1.. against keys ..T-2: every such row sees at least key i-1, so no row is fully masked.
    band = window_mask(length, window, q.device)[1:, :-1]
    rows = F.scaled_dot_product_attention(q[..., 1:, :], k[..., :-1, :], v[..., :-1, :], attn_mask=band, scale=scale)
    return torch.cat((rows.new_zeros((*rows.shape[:-2], 1, dim)), rows), dim=-2)


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
    if length <= 1:
        return rotary_attention_reference(q, k, v, cos, sin, rotate_values=rotate_values, scale=scale)
    # Tables are rounded to the input dtype first, as the reference (and the Triton kernel) do.
    cos = cos.to(q.dtype)
    sin = sin.to(q.dtype)
    q_rot = rotate_complex(q, cos, sin)
    k_rot = rotate_complex(k, cos, sin)
    v_in = rotate_complex(v, cos, sin) if rotate_values else v.float()
    out = causal_attention_torch(q_rot, k_rot, v_in, scale=scale)
    if rotate_values:
        out = rotate_complex(out, cos.float(), sin.float(), inverse=True)
    return out.to(q.dtype)


def _rotate_pairs(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor, inverse: bool = False) -> torch.Tensor:
    """Rotate interleaved pairs of x (..., d) by tables (..., d/2) that broadcast against x's pairs."""
    work = x if x.dtype in (torch.float32, torch.float64) else x.float()
    return rotate_by(work, torch.complex(cos.to(work.dtype), (-sin if inverse else sin).to(work.dtype)))


def readout_attention(
    q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, positions: torch.Tensor, *, scale: float | None = None,
    window: int | None = None,
) -> torch.Tensor:
    """Strict-causal softmax attention of ONE query per sequence (no rotation): the query of
    sequence n sits at positions[n] and attends to its keys j < positions[n].

    q: (N, H, d); k, v: (N, T, H, d) (the token-major layout of a model's pooled tokens). Returns
    (N, H, d) in float32 (q's dtype if wider). A classifier reads its last layer at eos only, so
    this costs O(T) per sequence instead of O(T^2). Position 0 (bos) sees no key: zeros. With a
    `window`, only the keys positions[n] - window <= j < positions[n] (`window_mask`).
    """
    count, length, heads, dim = k.shape
    scale = 1.0 / math.sqrt(dim) if scale is None else scale
    scores = (k.float() * q.float()[:, None]).sum(-1) * scale  # (N, T, H)
    hidden = hidden_from_readout(positions, length, window, k.device)
    weights = torch.softmax(scores.masked_fill(hidden, float("-inf")), dim=1).nan_to_num(0.0)
    return (weights[..., None] * v.float()).sum(1)


def rotary_readout_attention(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    cos: torch.Tensor,
    sin: torch.Tensor,
    positions: torch.Tensor,
    *,
    rotate_values: bool = False,
    scale: float | None = None,
) -> torch.Tensor:
    """Strict-causal rotary attention of ONE query per sequence: row `positions[n]` of `rotary_attention`.

    q: (N, H, d), the query at position positions[n] of sequence n; k, v: (N, H, T, d) at positions
    0..T-1, of which only j < positions[n] are attended. cos, sin: (T, d/2) shared, (N, T, d/2) per
    sequence, or (N, H, T, d/2) per sequence and head. Returns (N, H, d) in q's dtype.
    """
    count, heads, length, dim = k.shape
    cos, sin = cos.to(q.dtype), sin.to(q.dtype)
    sequences = torch.arange(count, device=k.device)
    if cos.dim() == 2:
        table_k = (cos[None, None], sin[None, None])
        table_q = (cos[positions][:, None], sin[positions][:, None])
    elif cos.dim() == 3:
        table_k = (cos[:, None], sin[:, None])
        table_q = (cos[sequences, positions][:, None], sin[sequences, positions][:, None])
    else:
        table_k = (cos, sin)
        table_q = (cos[sequences, :, positions], sin[sequences, :, positions])
    q_rot = _rotate_pairs(q, *table_q)
    k_rot = _rotate_pairs(k, *table_k)
    v_in = _rotate_pairs(v, *table_k) if rotate_values else v.float()
    out = readout_attention(q_rot, k_rot.transpose(1, 2), v_in.transpose(1, 2), positions, scale=scale)
    if rotate_values:
        out = _rotate_pairs(out, table_q[0].float(), table_q[1].float(), inverse=True)
    return out.to(q.dtype)
