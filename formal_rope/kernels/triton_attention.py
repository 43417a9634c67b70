"""Fused strict-causal rotary softmax attention in Triton (forward + backward), optionally windowed.

Layout: q, k, v, out are (batch, heads, T, d) with any strides; the rotary pair i is the coordinate
pair (2i, 2i+1). Every kernel therefore works on two "half" tiles per operand, the even and the odd
coordinates, loaded with stride 2 along the head dim and zero-padded to HALF_PAD = max(16, pow2(d/2))
columns so that every tl.dot has all dimensions >= 16 (a GPU rule the interpreter does not enforce).
The small-head path (USE_DOT=False, autotuned for exact fp32 with d <= 16) skips tl.dot and the pad
to 16: HALF_PAD = pow2(d/2) rank-1 updates on CUDA cores.

Forward (one program per (batch*head, query block)): rotate the query tile once, stream key/value
blocks left to right, rotate each key (and value) tile in registers, online softmax in base 2 with
fp32 running max/sum/accumulators, skip the causal mask on blocks that lie wholly left of the query
block. With a sliding window (i - w <= j < i; the HAS_WINDOW variant, compiled apart so that global
attention keeps its unmasked loop) the key loop starts at the block holding the first key of the
query block's first row's window and masks every block. A row whose
running sum stays 0 (query 0, which sees no key) outputs zeros. The log-sum-exp (base 2, in units
of the pre-scaled scores) is saved per row for the backward.

Backward (FlashAttention-2 recomputation, two deterministic kernels, no atomics):
  * dk/dv kernel, one program per key block, loops over the query blocks i > j (i <= j + w);
  * dq kernel, one program per query block, loops over the key blocks j < i (j >= i - w).
Both recompute the rotations. With value rotation the upstream gradient is first moved into the
rotated frame (do' = R_i dout) and dv is moved back (dv = R_j^T dv'). Row terms
delta_i = <dout_i, out_i> are computed in torch (rotations preserve the inner product).
Gradients w.r.t. cos/sin are derived in torch from the fp32 dq/dk/dv (see `_table_gradients`).
"""

from __future__ import annotations

import functools
import math
import warnings
from dataclasses import dataclass

import torch
import triton
import triton.language as tl
from torch.autograd.function import once_differentiable

from formal_rope.kernels.masks import kernel_window
from formal_rope.kernels.reference import apply_rotary

_SUPPORTED_DTYPES = (torch.float32, torch.float16, torch.bfloat16)
_MAX_HEAD_DIM = 256


@triton.jit
def _rotate_back(x_even, x_odd, cos, sin):
    """R^T x for one pair-split tile (R x is inlined in the loaders below)."""
    return x_even * cos + x_odd * sin, x_odd * cos - x_even * sin


# TRITON_INTERPRET is read when a kernel is decorated, so the mode is fixed at import time.
_INTERPRETED = type(_rotate_back).__name__ == "InterpretedFunction"


@triton.jit
def _dot_operand(x, dot_ty: tl.constexpr, UPCAST_DOT: tl.constexpr):
    """Round x to the input precision for tl.dot (tensor cores for fp16/bf16 on a GPU).

    UPCAST_DOT (interpreter + bf16 only) widens the rounded values back to fp32: the interpreter
    stores bf16 as raw uint16 and its tl.dot would multiply bit patterns (triton issue #11584).
    Products of bf16-rounded values are exact in fp32, so the result matches a bf16 GPU dot.
    """
    if UPCAST_DOT:
        y = _round_to_bf16_rtne(x)
    else:
        y = x.to(dot_ty)
    return y


@triton.jit
def _round_to_bf16_rtne(x):
    """fp32 -> nearest bf16 (ties to even), kept in fp32. Interpreter only: its own fp32->bf16 cast
    truncates, which would double the rounding error relative to a GPU (finite inputs assumed)."""
    bits = x.to(tl.uint32, bitcast=True)
    bits = (bits + 0x7FFF + ((bits >> 16) & 1)) & 0xFFFF0000
    return bits.to(tl.float32, bitcast=True)


@triton.jit
def _dot_pair(even, odd, dot_ty: tl.constexpr, UPCAST_DOT: tl.constexpr):
    """_dot_operand for an (even, odd) pair of tiles, in one call."""
    if UPCAST_DOT:
        even = _round_to_bf16_rtne(even)
        odd = _round_to_bf16_rtne(odd)
    else:
        even = even.to(dot_ty)
        odd = odd.to(dot_ty)
    return even, odd


@triton.jit
def _pair_scores(a_even, a_odd, b_even, b_odd, acc, USE_DOT: tl.constexpr, PRECISION: tl.constexpr):
    """acc + a_even @ b_even^T + a_odd @ b_odd^T: (M, N) from (M, HALF_PAD) and (N, HALF_PAD) tiles.

    USE_DOT=False is the small-head path: HALF_PAD (a power of two, possibly < 16) rank-1 updates
    on CUDA cores, in fp32 from the already rounded operands, like a tensor-core dot. Columns are
    pulled out of the register tiles with a masked row sum (O((M + N) HALF_PAD) per column, small
    next to the M N update), which keeps every intermediate 2-D: a 3-D broadcast product spilled
    registers heavily when compiled for sm_90.
    """
    if USE_DOT:
        acc = tl.dot(a_even, tl.trans(b_even), acc=acc, input_precision=PRECISION)
        acc = tl.dot(a_odd, tl.trans(b_odd), acc=acc, input_precision=PRECISION)
    else:
        HALF_PAD: tl.constexpr = a_even.shape[1]
        offs_p = tl.arange(0, HALF_PAD)
        for p in tl.static_range(HALF_PAD):
            column = (offs_p == p)[None, :]
            a_e = tl.sum(tl.where(column, a_even.to(tl.float32), 0.0), axis=1)
            a_o = tl.sum(tl.where(column, a_odd.to(tl.float32), 0.0), axis=1)
            b_e = tl.sum(tl.where(column, b_even.to(tl.float32), 0.0), axis=1)
            b_o = tl.sum(tl.where(column, b_odd.to(tl.float32), 0.0), axis=1)
            acc += a_e[:, None] * b_e[None, :] + a_o[:, None] * b_o[None, :]
    return acc


@triton.jit
def _pair_accumulate(weights, b_even, b_odd, acc_even, acc_odd, USE_DOT: tl.constexpr, PRECISION: tl.constexpr):
    """(acc_even + weights @ b_even, acc_odd + weights @ b_odd) for weights (M, N), b (N, HALF_PAD)."""
    if USE_DOT:
        acc_even = tl.dot(weights, b_even, acc=acc_even, input_precision=PRECISION)
        acc_odd = tl.dot(weights, b_odd, acc=acc_odd, input_precision=PRECISION)
    else:
        HALF_PAD: tl.constexpr = b_even.shape[1]
        offs_p = tl.arange(0, HALF_PAD)
        w = weights.to(tl.float32)
        for p in tl.static_range(HALF_PAD):
            column = (offs_p == p)[None, :]
            b_e = tl.sum(tl.where(column, b_even.to(tl.float32), 0.0), axis=1)
            b_o = tl.sum(tl.where(column, b_odd.to(tl.float32), 0.0), axis=1)
            acc_even += tl.where(column, tl.sum(w * b_e[None, :], axis=1)[:, None], 0.0)
            acc_odd += tl.where(column, tl.sum(w * b_o[None, :], axis=1)[:, None], 0.0)
    return acc_even, acc_odd


@triton.jit
def _load_pair_tile(base, offs_t, offs_p, stride_t, stride_d, mask, cos, sin, ROTATE: tl.constexpr):
    """Even and odd coordinates of rows offs_t as two (rows, HALF_PAD) fp32 tiles, rotated by
    (cos, sin) when ROTATE."""
    ptr = base + offs_t[:, None] * stride_t + (2 * offs_p)[None, :] * stride_d
    even = tl.load(ptr, mask=mask, other=0.0).to(tl.float32)
    odd = tl.load(ptr + stride_d, mask=mask, other=0.0).to(tl.float32)
    if ROTATE:
        even, odd = even * cos - odd * sin, even * sin + odd * cos
    return even, odd


@triton.jit
def _load_rotated(base, offs_t, offs_p, stride_t, stride_d, cos_base, sin_base, stride_ct, stride_cp, mask):
    """(R x_even, R x_odd, cos, sin) for rows offs_t, all fp32 (rows, HALF_PAD) tiles.

    Padded pairs load cos = sin = 0, so padded coordinates stay exactly zero after rotation.
    (Few, fat helpers on purpose: every nested jit call costs ~2 ms in the interpreter.)
    """
    angle_off = offs_t[:, None] * stride_ct + offs_p[None, :] * stride_cp
    cos = tl.load(cos_base + angle_off, mask=mask, other=0.0).to(tl.float32)
    sin = tl.load(sin_base + angle_off, mask=mask, other=0.0).to(tl.float32)
    ptr = base + offs_t[:, None] * stride_t + (2 * offs_p)[None, :] * stride_d
    even = tl.load(ptr, mask=mask, other=0.0).to(tl.float32)
    odd = tl.load(ptr + stride_d, mask=mask, other=0.0).to(tl.float32)
    return even * cos - odd * sin, even * sin + odd * cos, cos, sin


@triton.jit
def _store_pair_tile(base, offs_t, offs_p, stride_t, stride_d, mask, even, odd):
    ptr = base + offs_t[:, None] * stride_t + (2 * offs_p)[None, :] * stride_d
    tl.store(ptr, even.to(base.dtype.element_ty), mask=mask)
    tl.store(ptr + stride_d, odd.to(base.dtype.element_ty), mask=mask)


@triton.jit
def _fwd_key_block(
    acc_even, acc_odd, l_i, m_i, qr_even, qr_odd, offs_m, start_n,
    k_base, v_base, cos_base, sin_base,
    stride_kt, stride_kd, stride_vt, stride_vd, stride_ct, stride_cp,
    T, HALF, WINDOW,
    BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, HALF_PAD: tl.constexpr, ROTATE_V: tl.constexpr, MASKED: tl.constexpr,
    PRECISION: tl.constexpr, UPCAST_DOT: tl.constexpr, USE_DOT: tl.constexpr, HAS_WINDOW: tl.constexpr,
):
    offs_n = start_n + tl.arange(0, BLOCK_N)
    offs_p = tl.arange(0, HALF_PAD)
    tile_mask = (offs_n < T)[:, None] & (offs_p < HALF)[None, :]
    dot_ty = k_base.dtype.element_ty
    kr_even, kr_odd, cos_k, sin_k = _load_rotated(
        k_base, offs_n, offs_p, stride_kt, stride_kd, cos_base, sin_base, stride_ct, stride_cp, tile_mask
    )
    kr_even, kr_odd = _dot_pair(kr_even, kr_odd, dot_ty, UPCAST_DOT)
    scores = _pair_scores(
        qr_even, qr_odd, kr_even, kr_odd, tl.zeros([BLOCK_M, BLOCK_N], dtype=tl.float32), USE_DOT, PRECISION
    )
    if MASKED:
        visible = (offs_m[:, None] > offs_n[None, :]) & (offs_n < T)[None, :]
        if HAS_WINDOW:
            visible = visible & (offs_n[None, :] >= offs_m[:, None] - WINDOW)
        scores = tl.where(visible, scores, float("-inf"))
    m_new = tl.maximum(m_i, tl.max(scores, axis=1))
    # A row with no visible key yet has m_new = -inf; shifting by 0 keeps exp2 at 0 instead of NaN.
    m_shift = tl.where(m_new == float("-inf"), 0.0, m_new)
    p = tl.math.exp2(scores - m_shift[:, None])
    alpha = tl.math.exp2(m_i - m_shift)
    l_i = l_i * alpha + tl.sum(p, axis=1)
    v_even, v_odd = _load_pair_tile(v_base, offs_n, offs_p, stride_vt, stride_vd, tile_mask, cos_k, sin_k, ROTATE_V)
    v_even, v_odd = _dot_pair(v_even, v_odd, dot_ty, UPCAST_DOT)
    acc_even, acc_odd = _pair_accumulate(
        _dot_operand(p, dot_ty, UPCAST_DOT), v_even, v_odd, acc_even * alpha[:, None], acc_odd * alpha[:, None],
        USE_DOT, PRECISION,
    )
    return acc_even, acc_odd, l_i, m_new


@triton.jit
def _attention_fwd_kernel(
    Q, K, V, COS, SIN, OUT, LSE,
    stride_qb, stride_qh, stride_qt, stride_qd,
    stride_kb, stride_kh, stride_kt, stride_kd,
    stride_vb, stride_vh, stride_vt, stride_vd,
    stride_ob, stride_oh, stride_ot, stride_od,
    stride_cb, stride_ct, stride_cp,
    H, T, HALF, qk_scale, T_BUCKET, WINDOW,
    BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, HALF_PAD: tl.constexpr,
    ROTATE_V: tl.constexpr, PRECISION: tl.constexpr, UPCAST_DOT: tl.constexpr, USE_DOT: tl.constexpr,
    HAS_WINDOW: tl.constexpr,
):
    num_m = tl.cdiv(T, BLOCK_M)
    pid = tl.program_id(0)
    # Heaviest (last) query blocks first: they have the most key blocks to stream.
    pid_m = num_m - 1 - pid % num_m
    pid_bh = pid // num_m
    b = pid_bh // H
    h = pid_bh % H
    start_m = pid_m * BLOCK_M
    offs_m = start_m + tl.arange(0, BLOCK_M)
    offs_p = tl.arange(0, HALF_PAD)
    q_mask = (offs_m < T)[:, None] & (offs_p < HALF)[None, :]

    cos_base = COS + b * stride_cb
    sin_base = SIN + b * stride_cb
    qr_even, qr_odd, cos_q, sin_q = _load_rotated(
        Q + b * stride_qb + h * stride_qh, offs_m, offs_p, stride_qt, stride_qd,
        cos_base, sin_base, stride_ct, stride_cp, q_mask,
    )
    # Fold the softmax scale and log2(e) into q once, so the inner loop can use exp2 directly.
    qr_even, qr_odd = _dot_pair(qr_even * qk_scale, qr_odd * qk_scale, Q.dtype.element_ty, UPCAST_DOT)

    m_i = tl.full([BLOCK_M], float("-inf"), dtype=tl.float32)
    l_i = tl.zeros([BLOCK_M], dtype=tl.float32)
    acc_even = tl.zeros([BLOCK_M, HALF_PAD], dtype=tl.float32)
    acc_odd = tl.zeros([BLOCK_M, HALF_PAD], dtype=tl.float32)
    k_base = K + b * stride_kb + h * stride_kh
    v_base = V + b * stride_vb + h * stride_vh

    full_hi = (start_m // BLOCK_N) * BLOCK_N
    # Keys j < start_m are visible to every row of the block (j < start_m <= i): no mask needed,
    # unless a sliding window (i - WINDOW <= j < i) cuts them. Then the loop starts at the block holding
    # the first key of row start_m's window and masks every block (the window's edge cuts blocks that
    # global attention sees whole). HAS_WINDOW is a constexpr: the global variant compiles to the
    # unmasked loop from 0 alone.
    lo = 0
    if HAS_WINDOW:
        lo = (tl.maximum(start_m - WINDOW, 0) // BLOCK_N) * BLOCK_N
    for start_n in range(lo, full_hi, BLOCK_N):
        acc_even, acc_odd, l_i, m_i = _fwd_key_block(
            acc_even, acc_odd, l_i, m_i, qr_even, qr_odd, offs_m, start_n,
            k_base, v_base, cos_base, sin_base,
            stride_kt, stride_kd, stride_vt, stride_vd, stride_ct, stride_cp,
            T, HALF, WINDOW, BLOCK_M, BLOCK_N, HALF_PAD, ROTATE_V, HAS_WINDOW, PRECISION, UPCAST_DOT, USE_DOT,
            HAS_WINDOW,
        )
    # Diagonal blocks: strict mask j < i; the largest visible key is start_m + BLOCK_M - 2.
    diag_hi = tl.minimum(start_m + BLOCK_M - 1, T)
    for start_n in range(full_hi, diag_hi, BLOCK_N):
        acc_even, acc_odd, l_i, m_i = _fwd_key_block(
            acc_even, acc_odd, l_i, m_i, qr_even, qr_odd, offs_m, start_n,
            k_base, v_base, cos_base, sin_base,
            stride_kt, stride_kd, stride_vt, stride_vd, stride_ct, stride_cp,
            T, HALF, WINDOW, BLOCK_M, BLOCK_N, HALF_PAD, ROTATE_V, True, PRECISION, UPCAST_DOT, USE_DOT, HAS_WINDOW,
        )

    # Query 0 (and padding rows) saw no key: l_i = 0, acc = 0, so the output is exactly zero.
    l_safe = tl.where(l_i == 0.0, 1.0, l_i)
    out_even = acc_even / l_safe[:, None]
    out_odd = acc_odd / l_safe[:, None]
    if ROTATE_V:
        out_even, out_odd = _rotate_back(out_even, out_odd, cos_q, sin_q)
    if UPCAST_DOT:  # round like a GPU before the interpreter's truncating bf16 store
        out_even, out_odd = _dot_pair(out_even, out_odd, tl.bfloat16, UPCAST_DOT)
    _store_pair_tile(
        OUT + b * stride_ob + h * stride_oh, offs_m, offs_p, stride_ot, stride_od, q_mask, out_even, out_odd
    )
    lse = tl.where(l_i == 0.0, 0.0, m_i + tl.math.log2(l_safe))
    tl.store(LSE + pid_bh * T + offs_m, lse, mask=offs_m < T)


@triton.jit
def _attention_bwd_dkdv_kernel(
    Q, K, V, COS, SIN, DO, LSE, DELTA, DK, DV,
    stride_qb, stride_qh, stride_qt, stride_qd,
    stride_kb, stride_kh, stride_kt, stride_kd,
    stride_vb, stride_vh, stride_vt, stride_vd,
    stride_dob, stride_doh, stride_dot, stride_dod,
    stride_cb, stride_ct, stride_cp,
    H, T, HALF, qk_scale, sm_scale, T_BUCKET, WINDOW,
    BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, HALF_PAD: tl.constexpr,
    ROTATE_V: tl.constexpr, PRECISION: tl.constexpr, UPCAST_DOT: tl.constexpr, USE_DOT: tl.constexpr,
    HAS_WINDOW: tl.constexpr,
):
    num_n = tl.cdiv(T, BLOCK_N)
    pid = tl.program_id(0)
    # Key blocks near the start see the most queries: schedule them first.
    pid_n = pid % num_n
    pid_bh = pid // num_n
    b = pid_bh // H
    h = pid_bh % H
    start_n = pid_n * BLOCK_N
    offs_n = start_n + tl.arange(0, BLOCK_N)
    offs_p = tl.arange(0, HALF_PAD)
    pad_mask = (offs_p < HALF)[None, :]
    kv_mask = (offs_n < T)[:, None] & pad_mask
    cos_base = COS + b * stride_cb
    sin_base = SIN + b * stride_cb
    dot_ty = Q.dtype.element_ty

    kr_even, kr_odd, cos_k, sin_k = _load_rotated(
        K + b * stride_kb + h * stride_kh, offs_n, offs_p, stride_kt, stride_kd,
        cos_base, sin_base, stride_ct, stride_cp, kv_mask,
    )
    kr_even, kr_odd = _dot_pair(kr_even, kr_odd, dot_ty, UPCAST_DOT)
    v_even, v_odd = _load_pair_tile(
        V + b * stride_vb + h * stride_vh, offs_n, offs_p, stride_vt, stride_vd, kv_mask, cos_k, sin_k, ROTATE_V
    )
    v_even, v_odd = _dot_pair(v_even, v_odd, dot_ty, UPCAST_DOT)

    dk_even = tl.zeros([BLOCK_N, HALF_PAD], dtype=tl.float32)
    dk_odd = tl.zeros([BLOCK_N, HALF_PAD], dtype=tl.float32)
    dv_even = tl.zeros([BLOCK_N, HALF_PAD], dtype=tl.float32)
    dv_odd = tl.zeros([BLOCK_N, HALF_PAD], dtype=tl.float32)
    q_base = Q + b * stride_qb + h * stride_qh
    do_base = DO + b * stride_dob + h * stride_doh
    # Only queries i > start_n see a key of this block (windowed: also i <= start_n + BLOCK_N - 1 + WINDOW).
    lo = ((start_n + 1) // BLOCK_M) * BLOCK_M
    if HAS_WINDOW:
        hi = tl.minimum(start_n + BLOCK_N + WINDOW, T)
    else:
        hi = T
    for start_m in range(lo, hi, BLOCK_M):
        offs_m = start_m + tl.arange(0, BLOCK_M)
        row_ok = offs_m < T
        q_mask = row_ok[:, None] & pad_mask
        qr_even, qr_odd, cos_q, sin_q = _load_rotated(
            q_base, offs_m, offs_p, stride_qt, stride_qd, cos_base, sin_base, stride_ct, stride_cp, q_mask
        )
        qr_even, qr_odd = _dot_pair(qr_even, qr_odd, dot_ty, UPCAST_DOT)
        # With value rotation the upstream gradient lives in the rotated frame: do' = R_i dout.
        do_even, do_odd = _load_pair_tile(
            do_base, offs_m, offs_p, stride_dot, stride_dod, q_mask, cos_q, sin_q, ROTATE_V
        )
        do_even, do_odd = _dot_pair(do_even, do_odd, dot_ty, UPCAST_DOT)
        lse = tl.load(LSE + pid_bh * T + offs_m, mask=row_ok, other=0.0)
        delta = tl.load(DELTA + pid_bh * T + offs_m, mask=row_ok, other=0.0)

        # Transposed tiles (keys x queries) so the key-side accumulations need no transposes.
        zeros_t = tl.zeros([BLOCK_N, BLOCK_M], dtype=tl.float32)
        scores_t = _pair_scores(kr_even, kr_odd, qr_even, qr_odd, zeros_t, USE_DOT, PRECISION)
        visible = (offs_m[None, :] > offs_n[:, None]) & row_ok[None, :]
        if HAS_WINDOW:
            visible = visible & (offs_n[:, None] >= offs_m[None, :] - WINDOW)
        p_t = tl.where(visible, tl.math.exp2(scores_t * qk_scale - lse[None, :]), 0.0)
        dv_even, dv_odd = _pair_accumulate(
            _dot_operand(p_t, dot_ty, UPCAST_DOT), do_even, do_odd, dv_even, dv_odd, USE_DOT, PRECISION
        )
        dp_t = _pair_scores(v_even, v_odd, do_even, do_odd, zeros_t, USE_DOT, PRECISION)
        ds_t = _dot_operand(p_t * (dp_t - delta[None, :]), dot_ty, UPCAST_DOT)
        dk_even, dk_odd = _pair_accumulate(ds_t, qr_even, qr_odd, dk_even, dk_odd, USE_DOT, PRECISION)

    dk_even, dk_odd = _rotate_back(dk_even * sm_scale, dk_odd * sm_scale, cos_k, sin_k)
    if ROTATE_V:
        dv_even, dv_odd = _rotate_back(dv_even, dv_odd, cos_k, sin_k)
    # DK/DV are contiguous fp32 (B, H, T, d) buffers.
    d_model = 2 * HALF
    out_off = pid_bh * T * d_model
    _store_pair_tile(DK + out_off, offs_n, offs_p, d_model, 1, kv_mask, dk_even, dk_odd)
    _store_pair_tile(DV + out_off, offs_n, offs_p, d_model, 1, kv_mask, dv_even, dv_odd)


@triton.jit
def _attention_bwd_dq_kernel(
    Q, K, V, COS, SIN, DO, LSE, DELTA, DQ,
    stride_qb, stride_qh, stride_qt, stride_qd,
    stride_kb, stride_kh, stride_kt, stride_kd,
    stride_vb, stride_vh, stride_vt, stride_vd,
    stride_dob, stride_doh, stride_dot, stride_dod,
    stride_cb, stride_ct, stride_cp,
    H, T, HALF, qk_scale, sm_scale, T_BUCKET, WINDOW,
    BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, HALF_PAD: tl.constexpr,
    ROTATE_V: tl.constexpr, PRECISION: tl.constexpr, UPCAST_DOT: tl.constexpr, USE_DOT: tl.constexpr,
    HAS_WINDOW: tl.constexpr,
):
    num_m = tl.cdiv(T, BLOCK_M)
    pid = tl.program_id(0)
    pid_m = num_m - 1 - pid % num_m
    pid_bh = pid // num_m
    b = pid_bh // H
    h = pid_bh % H
    start_m = pid_m * BLOCK_M
    offs_m = start_m + tl.arange(0, BLOCK_M)
    offs_p = tl.arange(0, HALF_PAD)
    pad_mask = (offs_p < HALF)[None, :]
    row_ok = offs_m < T
    q_mask = row_ok[:, None] & pad_mask
    cos_base = COS + b * stride_cb
    sin_base = SIN + b * stride_cb
    dot_ty = Q.dtype.element_ty

    qr_even, qr_odd, cos_q, sin_q = _load_rotated(
        Q + b * stride_qb + h * stride_qh, offs_m, offs_p, stride_qt, stride_qd,
        cos_base, sin_base, stride_ct, stride_cp, q_mask,
    )
    qr_even, qr_odd = _dot_pair(qr_even, qr_odd, dot_ty, UPCAST_DOT)
    do_even, do_odd = _load_pair_tile(
        DO + b * stride_dob + h * stride_doh, offs_m, offs_p, stride_dot, stride_dod, q_mask, cos_q, sin_q, ROTATE_V
    )
    do_even, do_odd = _dot_pair(do_even, do_odd, dot_ty, UPCAST_DOT)
    lse = tl.load(LSE + pid_bh * T + offs_m, mask=row_ok, other=0.0)
    delta = tl.load(DELTA + pid_bh * T + offs_m, mask=row_ok, other=0.0)

    dq_even = tl.zeros([BLOCK_M, HALF_PAD], dtype=tl.float32)
    dq_odd = tl.zeros([BLOCK_M, HALF_PAD], dtype=tl.float32)
    k_base = K + b * stride_kb + h * stride_kh
    v_base = V + b * stride_vb + h * stride_vh
    hi = tl.minimum(start_m + BLOCK_M - 1, T)
    if HAS_WINDOW:
        lo = (tl.maximum(start_m - WINDOW, 0) // BLOCK_N) * BLOCK_N  # the first key of row start_m's window
    else:
        lo = 0
    for start_n in range(lo, hi, BLOCK_N):
        offs_n = start_n + tl.arange(0, BLOCK_N)
        kv_mask = (offs_n < T)[:, None] & pad_mask
        kr_even, kr_odd, cos_k, sin_k = _load_rotated(
            k_base, offs_n, offs_p, stride_kt, stride_kd, cos_base, sin_base, stride_ct, stride_cp, kv_mask
        )
        kr_even, kr_odd = _dot_pair(kr_even, kr_odd, dot_ty, UPCAST_DOT)
        v_even, v_odd = _load_pair_tile(v_base, offs_n, offs_p, stride_vt, stride_vd, kv_mask, cos_k, sin_k, ROTATE_V)
        v_even, v_odd = _dot_pair(v_even, v_odd, dot_ty, UPCAST_DOT)

        zeros = tl.zeros([BLOCK_M, BLOCK_N], dtype=tl.float32)
        scores = _pair_scores(qr_even, qr_odd, kr_even, kr_odd, zeros, USE_DOT, PRECISION)
        visible = (offs_m[:, None] > offs_n[None, :]) & (offs_n < T)[None, :] & row_ok[:, None]
        if HAS_WINDOW:
            visible = visible & (offs_n[None, :] >= offs_m[:, None] - WINDOW)
        p = tl.where(visible, tl.math.exp2(scores * qk_scale - lse[:, None]), 0.0)
        dp = _pair_scores(do_even, do_odd, v_even, v_odd, zeros, USE_DOT, PRECISION)
        ds = _dot_operand(p * (dp - delta[:, None]), dot_ty, UPCAST_DOT)
        dq_even, dq_odd = _pair_accumulate(ds, kr_even, kr_odd, dq_even, dq_odd, USE_DOT, PRECISION)

    dq_even, dq_odd = _rotate_back(dq_even * sm_scale, dq_odd * sm_scale, cos_q, sin_q)
    d_model = 2 * HALF
    _store_pair_tile(DQ + pid_bh * T * d_model, offs_m, offs_p, d_model, 1, q_mask, dq_even, dq_odd)


# ---------------------------------------------------------------------------------------------
# Launch configuration
# ---------------------------------------------------------------------------------------------

# (BLOCK_M, BLOCK_N, num_warps, num_stages) candidates for the GPU autotuner. Compiled for sm_90
# (bench/sm90_compile.py), 64x64 and 128x64 tiles spill registers with 4 warps (forward: bf16 32-48 B,
# exact fp32 136 B per thread) and do not with 8, so those two tiles get 8 warps.
_DOT_TILES = ((32, 32, 4, 2), (64, 32, 4, 3), (64, 64, 8, 2), (128, 64, 8, 2), (128, 128, 8, 2))
# The small-head CUDA-core path holds (BLOCK_M, BLOCK_N, HALF_PAD) products in registers: smaller tiles.
_FMA_TILES = ((32, 32, 4, 2), (64, 32, 4, 2), (64, 64, 8, 2))
# Half head dims up to this skip the pad to 16 on the fp32-exact path (d = 8 pads 4 -> 16 otherwise,
# quadrupling CUDA-core work, since IEEE fp32 products cannot use tensor cores).
_FMA_MAX_HALF = 8
# Exact fp32 tl.dot is lowered to CUDA-core FMAs that hold whole tiles in registers: compiled for
# sm_90, tiles above this BLOCK_M * BLOCK_N * HALF_PAD volume spill kilobytes per thread (and take
# 15-55 s to compile), so the autotuner does not try them.
_IEEE_DOT_MAX_VOLUME = 64 * 64 * 16
# Set to False (with a warning) if the small-head path ever fails to build on a GPU; see _launch.
_FMA_AUTOTUNE = {"enabled": True}


@dataclass(frozen=True)
class LaunchPlan:
    """How the kernels are launched: fixed tiles (blocks, use_dot) or GPU autotuning (blocks=None)."""

    precision: str  # tl.dot input_precision: "ieee" (exact fp32) or "tf32"
    blocks: tuple[int, int] | None = None
    use_dot: bool = True  # False: the small-head broadcast-and-sum path (explicit blocks only)


def _pow2_at_least(n: int, floor: int = 16) -> int:
    return max(floor, 1 << max(0, (n - 1).bit_length()))


def _half_pad(half: int, use_dot: bool) -> int:
    # tl.dot needs every dimension >= 16; the broadcast path only needs a power of two.
    return _pow2_at_least(half, 16 if use_dot else 1)


def _autotune_candidates(
    configs, named_args, ieee_max_volume: int = _IEEE_DOT_MAX_VOLUME, **kwargs
) -> list[triton.Config]:
    """The configs worth timing for this call (triton's early_config_prune hook).

    Tiles longer than the power-of-two length bucket are dropped (T <= 42 training times 3 tilings,
    not 5), exact-fp32 tl.dot tiles that spill are dropped, and the small-head path joins for
    exact-fp32 calls with d/2 <= 8. HALF_PAD and USE_DOT travel inside the config because they must
    agree with each other.
    """
    bucket, half = named_args["T_BUCKET"], named_args["HALF"]
    exact_fp32 = kwargs.get("PRECISION") == "ieee"
    dot_pad = _half_pad(half, True)
    candidates = [
        (tile, True) for tile in _DOT_TILES if not exact_fp32 or tile[0] * tile[1] * dot_pad <= ieee_max_volume
    ]
    if exact_fp32 and half <= _FMA_MAX_HALF and _FMA_AUTOTUNE["enabled"]:
        candidates += [(tile, False) for tile in _FMA_TILES]
    fitting = [(tile, use_dot) for tile, use_dot in candidates if max(tile[:2]) <= bucket] or candidates[:1]
    return [
        triton.Config(
            {"BLOCK_M": bm, "BLOCK_N": bn, "USE_DOT": use_dot, "HALF_PAD": _half_pad(half, use_dot)},
            num_warps=warps,
            num_stages=stages,
        )
        for (bm, bn, warps, stages), use_dot in fitting
    ]


# On a GPU the launch is autotuned per (length bucket, half dim, value rotation, precision, dtypes);
# bucketing T by powers of two keeps the evaluation sweep (lengths 41..500) to a handful of tunings.
_AUTOTUNE_KEY = ["T_BUCKET", "HALF", "ROTATE_V", "PRECISION", "HAS_WINDOW"]


def _tuned(kernel, ieee_max_volume: int = _IEEE_DOT_MAX_VOLUME):
    placeholders = [triton.Config({"BLOCK_M": bm, "BLOCK_N": bn}) for bm, bn, _, _ in _DOT_TILES]
    prune = functools.partial(_autotune_candidates, ieee_max_volume=ieee_max_volume)
    return triton.autotune(configs=placeholders, key=_AUTOTUNE_KEY, prune_configs_by={"early_config_prune": prune})(
        kernel
    )


_fwd_tuned = _tuned(_attention_fwd_kernel)
# dk/dv keeps four (BLOCK_N, HALF_PAD) tiles live: exact-fp32 tl.dot spills from 64x32 up (944 B).
_dkdv_tuned = _tuned(_attention_bwd_dkdv_kernel, ieee_max_volume=32 * 32 * 16)
_dq_tuned = _tuned(_attention_bwd_dq_kernel)


def _launch(
    kernel, tuned, grid_rows: int, bh: int, args: tuple, meta: dict, plan: LaunchPlan, half: int, row_block: str
):
    """Run `kernel` with the plan's fixed tiles, or its autotuned twin when plan.blocks is None."""
    block_key = "BLOCK_M" if row_block == "M" else "BLOCK_N"
    if plan.blocks is not None:
        tiles = {"BLOCK_M": plan.blocks[0], "BLOCK_N": plan.blocks[1]}
        grid = (triton.cdiv(grid_rows, tiles[block_key]) * bh,)
        kernel[grid](*args, **tiles, USE_DOT=plan.use_dot, HALF_PAD=_half_pad(half, plan.use_dot), **meta)
        return

    def grid(config):
        return (triton.cdiv(grid_rows, config[block_key]) * bh,)

    try:
        tuned[grid](*args, **meta)
    except Exception as error:  # noqa: BLE001 - only the optional small-head path is retried
        if not _FMA_AUTOTUNE["enabled"] or half > _FMA_MAX_HALF or meta["PRECISION"] != "ieee":
            raise
        warnings.warn(f"small-head Triton path failed ({error!r}); autotuning the tl.dot path only", stacklevel=3)
        _FMA_AUTOTUNE["enabled"] = False
        tuned[grid](*args, **meta)


def _plan(length: int, precision: str, block_m: int | None, block_n: int | None, matmul: str | None) -> LaunchPlan:
    if matmul not in (None, "dot", "fma"):
        raise ValueError(f"matmul must be 'dot', 'fma' or None (autotune/default), got {matmul!r}")
    if block_m is None and block_n is None:
        if not _INTERPRETED and matmul is None:
            return LaunchPlan(precision)
        # The interpreter runs each program with numpy: larger tiles mean fewer Python-level steps.
        block_m = block_n = min(64, _pow2_at_least(length))
    block_m = block_m or block_n
    block_n = block_n or block_m
    for name, value in (("block_m", block_m), ("block_n", block_n)):
        if value < 16 or value & (value - 1):
            raise ValueError(f"{name} must be a power of two >= 16 (a tl.dot rule), got {value}")
    return LaunchPlan(precision, (block_m, block_n), use_dot=matmul != "fma")


# ---------------------------------------------------------------------------------------------
# Python-side wrappers
# ---------------------------------------------------------------------------------------------


def _check_inputs(q, k, v, cos, sin) -> None:
    if q.dim() != 4 or k.shape != q.shape or v.shape != q.shape:
        raise ValueError(
            f"q, k, v must all be (batch, heads, T, d); got {tuple(q.shape)}, {tuple(k.shape)}, {tuple(v.shape)}"
        )
    batch, _, length, dim = q.shape
    if dim % 2 or not 2 <= dim <= _MAX_HEAD_DIM:
        raise ValueError(f"head dimension must be even and in [2, {_MAX_HEAD_DIM}], got {dim}")
    if q.dtype not in _SUPPORTED_DTYPES or k.dtype != q.dtype or v.dtype != q.dtype:
        raise ValueError(
            f"q, k, v must share one dtype among float32/float16/bfloat16; got {q.dtype}, {k.dtype}, {v.dtype}"
        )
    valid_tables = ((length, dim // 2), (batch, length, dim // 2))
    if tuple(cos.shape) not in valid_tables or sin.shape != cos.shape:
        raise ValueError(
            f"cos/sin must be (T, d/2) = {valid_tables[0]} or (batch, T, d/2) = {valid_tables[1]}; "
            f"got {tuple(cos.shape)} and {tuple(sin.shape)}"
        )
    devices = {t.device for t in (q, k, v, cos, sin)}
    if len(devices) != 1:
        raise ValueError(f"q, k, v, cos, sin must be on one device; got {sorted(map(str, devices))}")
    if not q.is_cuda and not _INTERPRETED:
        raise RuntimeError(
            "impl='triton' needs a CUDA tensor, or the Triton interpreter for CPU tensors: set "
            "TRITON_INTERPRET=1 in the environment before formal_rope.kernels.triton_attention is imported "
            "(or use impl='torch')"
        )


def _table_strides(table: torch.Tensor) -> tuple[int, int, int]:
    if table.dim() == 2:
        return 0, table.stride(0), table.stride(1)
    return table.stride(0), table.stride(1), table.stride(2)


def _precision(dtype: torch.dtype, allow_tf32: bool) -> str:
    # fp32 inputs get exact fp32 products by default (the 1e-5 contract); tf32 is an opt-in speedup.
    # For fp16/bf16 operands the setting is moot; they keep Triton's default.
    return "ieee" if (dtype == torch.float32 and not allow_tf32) else "tf32"


def _kernel_meta(dtype: torch.dtype, rotate_values: bool, precision: str, window: int | None = None) -> dict:
    # HAS_WINDOW compiles the sliding-window variant; global attention keeps its own (unmasked loop).
    return dict(ROTATE_V=rotate_values, PRECISION=precision, UPCAST_DOT=_INTERPRETED and dtype == torch.bfloat16,
                HAS_WINDOW=window is not None)


def _forward(q, k, v, cos, sin, rotate_values: bool, scale: float, plan: LaunchPlan, window: int | None = None):
    batch, heads, length, dim = q.shape
    out = torch.empty_like(q, memory_format=torch.contiguous_format)
    lse = torch.empty((batch * heads, length), device=q.device, dtype=torch.float32)
    args = (
        q, k, v, cos, sin, out, lse,
        *q.stride(), *k.stride(), *v.stride(), *out.stride(), *_table_strides(cos),
        heads, length, dim // 2, scale * math.log2(math.e), _pow2_at_least(length), kernel_window(length, window),
    )
    meta = _kernel_meta(q.dtype, rotate_values, plan.precision, window)
    _launch(_attention_fwd_kernel, _fwd_tuned, length, batch * heads, args, meta, plan, dim // 2, "M")
    return out, lse


def _backward(
    q, k, v, cos, sin, out, lse, grad_out, rotate_values: bool, scale: float, plan: LaunchPlan,
    window: int | None = None,
):
    batch, heads, length, dim = q.shape
    # delta_i = <dout_i, out_i> = <R_i dout_i, R_i out_i>: the rotated-frame row term, rotation-free.
    delta = (grad_out.float() * out.float()).sum(-1).reshape(batch * heads, length).contiguous()
    dq = torch.empty((batch, heads, length, dim), device=q.device, dtype=torch.float32)
    dk = torch.empty_like(dq)
    dv = torch.empty_like(dq)
    common = (
        *q.stride(), *k.stride(), *v.stride(), *grad_out.stride(), *_table_strides(cos),
        heads, length, dim // 2, scale * math.log2(math.e), scale, _pow2_at_least(length),
        kernel_window(length, window),
    )
    meta = _kernel_meta(q.dtype, rotate_values, plan.precision, window)
    _launch(
        _attention_bwd_dkdv_kernel, _dkdv_tuned, length, batch * heads,
        (q, k, v, cos, sin, grad_out, lse, delta, dk, dv, *common), meta, plan, dim // 2, "N",
    )
    _launch(
        _attention_bwd_dq_kernel, _dq_tuned, length, batch * heads,
        (q, k, v, cos, sin, grad_out, lse, delta, dq, *common), meta, plan, dim // 2, "M",
    )
    return dq, dk, dv


def _rotation_table_grads(x: torch.Tensor, grad_rotated: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """d(loss)/d(cos), d(loss)/d(sin) per (batch, T, pair) for x_rot = R x, given g = d(loss)/d(x_rot).

    x_rot_even = x_e cos - x_o sin, x_rot_odd = x_e sin + x_o cos, summed over heads.
    """
    x_even, x_odd = x[..., 0::2], x[..., 1::2]
    g_even, g_odd = grad_rotated[..., 0::2], grad_rotated[..., 1::2]
    d_cos = (g_even * x_even + g_odd * x_odd).sum(1)
    d_sin = (g_odd * x_even - g_even * x_odd).sum(1)
    return d_cos, d_sin


def _rotate_torch(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    return apply_rotary(x, cos, sin)


def _table_gradients(q, k, v, cos, sin, out, grad_out, dq, dk, dv, rotate_values):
    """Gradients w.r.t. cos/sin from the kernel's fp32 dq/dk/dv (O(B*H*T*d) torch work).

    Every use of the tables is a rotation x -> R x, so with g = dL/d(Rx) = R dL/dx (the kernel
    returns dL/dx = R^T g) the table gradients are cheap elementwise sums; no score-sized work.
    """
    cos32, sin32 = cos.float(), sin.float()
    d_cos = torch.zeros((q.shape[0], q.shape[2], q.shape[3] // 2), device=q.device, dtype=torch.float32)
    d_sin = torch.zeros_like(d_cos)
    pairs = [(q, dq), (k, dk)] + ([(v, dv)] if rotate_values else [])
    for x, grad_x in pairs:
        dc, ds = _rotation_table_grads(x.float(), _rotate_torch(grad_x, cos32, sin32))
        d_cos += dc
        d_sin += ds
    if rotate_values:
        # out = R^T o' with o' = R out: out_e = o'_e cos + o'_o sin, out_o = o'_o cos - o'_e sin.
        rotated_out = _rotate_torch(out.float(), cos32, sin32)
        o_even, o_odd = rotated_out[..., 0::2], rotated_out[..., 1::2]
        g_even, g_odd = grad_out.float()[..., 0::2], grad_out.float()[..., 1::2]
        d_cos += (g_even * o_even + g_odd * o_odd).sum(1)
        d_sin += (g_even * o_odd - g_odd * o_even).sum(1)
    if cos.dim() == 2:
        d_cos, d_sin = d_cos.sum(0), d_sin.sum(0)
    return d_cos.to(cos.dtype), d_sin.to(sin.dtype)


class _RotaryAttention(torch.autograd.Function):
    @staticmethod
    def forward(ctx, q, k, v, cos, sin, rotate_values, scale, plan, window):
        out, lse = _forward(q, k, v, cos, sin, rotate_values, scale, plan, window)
        ctx.save_for_backward(q, k, v, cos, sin, out, lse)
        ctx.config = (rotate_values, scale, plan, window)
        return out

    @staticmethod
    @once_differentiable  # the backward kernels are not themselves differentiable
    def backward(ctx, grad_out):
        q, k, v, cos, sin, out, lse = ctx.saved_tensors
        rotate_values, scale, plan, window = ctx.config
        dq, dk, dv = _backward(q, k, v, cos, sin, out, lse, grad_out, rotate_values, scale, plan, window)
        d_cos = d_sin = None
        if ctx.needs_input_grad[3] or ctx.needs_input_grad[4]:
            d_cos, d_sin = _table_gradients(q, k, v, cos, sin, out, grad_out, dq, dk, dv, rotate_values)
        return dq.to(q.dtype), dk.to(k.dtype), dv.to(v.dtype), d_cos, d_sin, None, None, None, None


def rotary_attention_triton(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    cos: torch.Tensor,
    sin: torch.Tensor,
    *,
    rotate_values: bool = False,
    scale: float | None = None,
    block_m: int | None = None,
    block_n: int | None = None,
    matmul: str | None = None,
    allow_tf32: bool = False,
    window: int | None = None,
) -> torch.Tensor:
    """Fused Triton strict-causal rotary attention; same contract as `rotary_attention`.

    By default a GPU autotunes tiles (and, for fp32 with d <= 16, the small-head path); the
    interpreter uses 64-wide tiles (fewer for short T). block_m/block_n fix the tiles (powers of two
    >= 16); matmul fixes the tile products: 'dot' (tl.dot, head dim padded to >= 16) or 'fma'
    (broadcast-and-sum on CUDA cores, no pad beyond a power of two). allow_tf32 lets fp32 inputs
    use TF32 tensor-core products (faster, ~1e-3 relative error instead of ~1e-7). window: a
    sliding window, query i attends to keys i - window <= j < i (None: every j < i); the kernels
    skip the key blocks wholly outside it and mask the ones it cuts.
    """
    _check_inputs(q, k, v, cos, sin)
    if window is not None and (isinstance(window, bool) or not isinstance(window, int) or window < 1):
        raise ValueError(f"window must be a positive integer (keys each query sees) or None, got {window!r}")
    scale = 1.0 / math.sqrt(q.shape[-1]) if scale is None else float(scale)
    if q.shape[2] == 0 or q.numel() == 0:
        return (q + k + v) * 0
    plan = _plan(q.shape[2], _precision(q.dtype, allow_tf32), block_m, block_n, matmul)
    if cos.stride() != sin.stride():  # the kernels index both tables with one set of strides
        cos, sin = cos.contiguous(), sin.contiguous()
    return _RotaryAttention.apply(q, k, v, cos, sin, bool(rotate_values), scale, plan, window)


def interpreter_active() -> bool:
    """True when this module's kernels run in the Triton CPU interpreter (TRITON_INTERPRET=1 at import)."""
    return _INTERPRETED


__all__ = ["LaunchPlan", "interpreter_active", "rotary_attention_triton"]
