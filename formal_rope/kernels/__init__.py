"""Rotary softmax attention with a strict causal mask: one entry point, several implementations."""

from __future__ import annotations

import os

import torch

from formal_rope.errors import FormalRopeError
from formal_rope.kernels.masks import window_mask
from formal_rope.kernels.reference import apply_rotary, rotary_attention_reference
from formal_rope.kernels.torch_fast import (
    causal_attention_torch,
    readout_attention,
    rotary_attention_fast,
    rotary_readout_attention,
    rotate_by,
    windowed_attention_torch,
)

ATTENTION_IMPLS = ("auto", "triton", "torch")


class AttentionImplError(FormalRopeError, ValueError):
    """An attention implementation was requested that this machine cannot run."""


def _triton_module():
    try:  # triton (and the GPU kernels) load only when asked for: importing kernels needs no triton
        from formal_rope.kernels import triton_attention
    except ImportError as error:  # triton is an optional (gpu) dependency
        raise AttentionImplError(
            f"attention impl 'triton' needs the triton package ({error}); install it or use impl='torch'"
        ) from error
    return triton_attention


def resolve_impl(impl: str, on_cuda: bool) -> str:
    """The implementation `rotary_attention` runs for `impl` on a CUDA (or CPU) tensor: 'triton' or 'torch'.

    'auto' picks Triton on CUDA and torch elsewhere. 'triton' on CPU needs the Triton interpreter
    (TRITON_INTERPRET=1 before the kernel module is imported); anything else is an error.
    """
    if impl not in ATTENTION_IMPLS:
        raise AttentionImplError(f"unknown attention impl {impl!r}; expected one of {', '.join(ATTENTION_IMPLS)}")
    if impl == "torch" or (impl == "auto" and not on_cuda):
        return "torch"
    kernel_module = _triton_module()
    if not on_cuda and not kernel_module.interpreter_active():
        hint = " (it was set after the kernel module was imported)" if os.environ.get("TRITON_INTERPRET") == "1" else ""
        raise AttentionImplError(
            "attention impl 'triton' on CPU tensors runs only in the Triton interpreter: set "
            f"TRITON_INTERPRET=1 before importing formal_rope{hint}, use a CUDA device, or choose impl='torch'"
        )
    return "triton"


def rotary_attention(q, k, v, cos, sin, *, rotate_values: bool = False, impl: str = "auto", scale: float | None = None):
    """Strict-causal softmax attention with interleaved rotary pairs fused in.

    q, k, v: (batch, heads, T, d); cos, sin: (T, d/2) or (batch, T, d/2), pair i = coords (2i, 2i+1).
    Query i attends to keys j < i; query 0 (bos) returns zeros. With rotate_values, values are
    rotated by R_j and the output by R_i^T (JoFormer transport). scale defaults to 1/sqrt(d).
    impl: auto (Triton on CUDA, torch elsewhere) | triton | torch. Differentiable w.r.t. q, k, v,
    cos and sin with every implementation. The output has q's dtype. "torch" runs the fused-SDPA path
    (`torch_fast.py`), tested against the readable oracle `rotary_attention_reference`.
    """
    if resolve_impl(impl, q.is_cuda) == "torch":
        return rotary_attention_fast(q, k, v, cos, sin, rotate_values=rotate_values, scale=scale)
    return _triton_module().rotary_attention_triton(q, k, v, cos, sin, rotate_values=rotate_values, scale=scale)


def causal_attention(q, k, v, *, impl: str = "auto", scale: float | None = None, window: int | None = None):
    """Strict-causal softmax attention without rotation (rotary models rotate q and k beforehand).

    q, k, v: (batch, heads, T, d), any strides with a contiguous last axis. Query i attends to keys
    j < i; query 0 (bos) returns zeros. impl as for `rotary_attention` ("triton" runs the Triton
    kernel with identity rotations). Returns (batch, heads, T, d) in q's dtype.

    window: a sliding window (query i attends to keys i - window <= j < i), with either impl: the
    torch path masks SDPA with `window_mask`, the Triton kernel skips the key blocks outside it.
    """
    if resolve_impl(impl, q.is_cuda) == "torch":
        if window is not None:
            return windowed_attention_torch(q, k, v, window, scale=scale)
        return causal_attention_torch(q, k, v, scale=scale)
    half = q.shape[-1] // 2
    cos = torch.ones(q.shape[-2], half, dtype=q.dtype, device=q.device)
    return _triton_module().rotary_attention_triton(q, k, v, cos, torch.zeros_like(cos), scale=scale, window=window)


__all__ = [
    "ATTENTION_IMPLS",
    "AttentionImplError",
    "apply_rotary",
    "causal_attention",
    "readout_attention",
    "resolve_impl",
    "rotary_attention",
    "rotary_attention_fast",
    "rotary_attention_reference",
    "rotary_readout_attention",
    "rotate_by",
    "window_mask",
    "windowed_attention_torch",
]
