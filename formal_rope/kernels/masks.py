"""Which keys a query sees, for every attention implementation: strict-causal (key j < query i), and
with a sliding window of w also j >= i - w (the w positions before it; query 0, bos, sees none).

The reference oracle and the torch paths build their masks here; the Triton kernel applies the same
rule tile by tile inside the kernel (`visible = (i > j) & (j >= i - WINDOW)`) and takes its WINDOW
argument from `kernel_window`.
"""

from __future__ import annotations

import torch


def window_mask(length: int, window: int | None = None, device=None) -> torch.Tensor:
    """The (T, T) boolean mask of keys each query sees: [i, j] is True when j < i and, with a
    `window`, i - window <= j (None: every earlier key)."""
    query = torch.arange(length, device=device)[:, None]
    key = torch.arange(length, device=device)[None, :]
    visible = key < query
    if window is not None:
        visible = visible & (key >= query - window)
    return visible


def hidden_from_readout(positions: torch.Tensor, length: int, window: int | None = None, device=None) -> torch.Tensor:
    """(N, T, 1) boolean: True for the keys the single query of sequence n, at `positions[n]`, does
    not see (j >= positions[n], or j < positions[n] - window): what readout attention masks out."""
    key = torch.arange(length, device=device)[None, :, None]
    hidden = key >= positions[:, None, None]
    if window is not None:
        hidden = hidden | (key < positions[:, None, None] - window)
    return hidden


def kernel_window(length: int, window: int | None) -> int:
    """The Triton kernel's WINDOW argument: read only by its windowed variant, which masks
    j < i - WINDOW; a window of T or more hides nothing, so it is clamped to T (and T without one)."""
    return length if window is None else min(window, length)
