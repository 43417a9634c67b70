"""Realized certified range: brute force over all (query, key) pairs with the scores the model computes.

The scores come from `formal_rope.precision.rotary.realized_offset_scores` in `Emulated(fmt)`, the
same function the compiled-model evaluator uses, so "realized" means exactly the compiled numbers.
Work is vectorized over blocks of query rows; memory is O(block · max_length).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import torch

from formal_rope.errors import FormalRopeError
from formal_rope.precision.arith import Emulated
from formal_rope.precision.formats import FloatFormat, f_large, round_to_format
from formal_rope.precision.rotary import offset_query_bias, realized_offset_scores

DEFAULT_REALIZED_MAX_LENGTH = 4096


@dataclass(frozen=True)
class RealizedViolation:
    """The first query position whose target fails to lead by f_large (None fields: no failure)."""

    query: int | None
    key: int | None
    target_score: float | None
    competitor_score: float | None
    checked_up_to: int  # largest L fully checked (all queries k+1..L+1)


def exact_difference_at_least(a: torch.Tensor, b: torch.Tensor, bound: float) -> torch.Tensor:
    """Elementwise a − b >= bound for float64 a, b, decided exactly.

    a − b is rounded to d = fl(a − b) with the exact error e from TwoSum (a − b = d + e). Rounding is
    monotone, so d > bound ⇒ a − b >= bound, d < bound ⇒ a − b < bound, and d == bound leaves e's sign.
    """
    negated = -b
    difference = a + negated
    virtual = difference - a
    error = (a - (difference - virtual)) + (negated - virtual)
    decided = (difference > bound) | ((difference == bound) & (error >= 0))
    return decided & torch.isfinite(a) & torch.isfinite(b)


def realized_first_violation(
    offset: int,
    freq: float,
    scale: float,
    fmt: FloatFormat,
    max_length: int,
    block_rows: int = 256,
    progress: Callable[[int, int], None] | None = None,
) -> RealizedViolation:
    """Scan query positions i = k+1 .. max_length+1 in order and return the first margin failure."""
    if max_length < 1:
        raise FormalRopeError(f"max_length (--max-length) must be at least 1 (got {max_length})")
    if max_length > 2**24:
        raise FormalRopeError(
            f"max_length (--max-length) {max_length} is too large for the O(L²) realized scan (cap 2^24)"
        )
    stored_scale = round_to_format(float(scale), fmt)
    if stored_scale == float("inf"):
        raise FormalRopeError(f"scale {scale:g} overflows {fmt.describe()} (max {fmt.max_finite:g})")
    bias = offset_query_bias(offset, freq, scale, fmt)
    if not all(abs(value) < float("inf") for value in bias):
        raise FormalRopeError(f"the query bias C·(cos kg, −sin kg) overflows {fmt.describe()}")
    arith = Emulated(fmt)
    margin = f_large(fmt)
    first_query = offset + 1
    last_query = max_length + 1
    for block_start in range(first_query, last_query + 1, block_rows):
        block_stop = min(block_start + block_rows, last_query + 1)
        queries = torch.arange(block_start, block_stop, dtype=torch.int64)
        keys = torch.arange(0, block_stop - 1, dtype=torch.int64)
        scores = realized_offset_scores(offset, freq, scale, queries, keys, arith)
        rows = torch.arange(len(queries))
        targets = queries - offset
        target_scores = scores[rows, targets]
        competitor_mask = (keys[None, :] < queries[:, None]) & (keys[None, :] != targets[:, None])
        competitors = torch.where(competitor_mask, scores, torch.full_like(scores, -torch.inf))
        best_competitor, best_key = competitors.max(dim=1)
        ok = exact_difference_at_least(target_scores, best_competitor, margin)
        if progress is not None:
            progress(block_stop - first_query, last_query + 1 - first_query)
        if not bool(ok.all()):
            failing_row = int(torch.nonzero(~ok)[0])
            return RealizedViolation(
                query=int(queries[failing_row]),
                key=int(best_key[failing_row]),
                target_score=float(target_scores[failing_row]),
                competitor_score=float(best_competitor[failing_row]),
                checked_up_to=int(queries[failing_row]) - 2,
            )
    return RealizedViolation(None, None, None, None, checked_up_to=max_length)
