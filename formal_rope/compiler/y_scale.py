"""Stage ``choose_y_scale``: the score scale C of the Y heads (appendix D), picked for the format.

Runs between the schedule and the weights: the scale decides the stored query bias of every Y head
and, with the frequency g and the format, its certified range N_max^(k)(g, C, F) (formal_rope.certify).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Sequence

from formal_rope.certify import certified_range
from formal_rope.errors import FormalRopeError
from formal_rope.precision import FloatFormat, f_large, parse_format


@dataclass(frozen=True)
class YScaleChoice:
    """The score scale C of the Y heads: picked for the longest certified length, or given by the caller."""

    scale: float
    chosen: bool  # True: picked by the compiler, False: given by --scale
    candidates: tuple[tuple[float, int], ...]  # (C, ideal N_max) scanned


def choose_y_scale(offsets: Sequence[int], freq: float, fmt: FloatFormat | str, max_length: int) -> YScaleChoice:
    """A scale C for the Y heads: among powers of two from 2·f_large up to 2^(M+9) (and below
    max_finite/4), the one with the largest *realized* certified range for the smallest offset.
    Formats too narrow for that range (2·f_large > max_finite/4) scan the powers of two and their
    1.5 multiples in (f_large/2, max_finite] instead.

    Ideal ranges (cheap) are computed for every candidate; realized ranges (brute force) are
    computed in order of decreasing ideal range (smaller C first among ties), at most six times,
    stopping at the first candidate whose realized range reaches its ideal one.
    """
    fmt_obj = parse_format(fmt)
    large = f_large(fmt_obj)
    k = min(offsets)
    low = math.ceil(math.log2(2 * large))
    high = min(fmt_obj.mantissa_bits + 9, math.floor(math.log2(fmt_obj.max_finite)) - 2)
    candidates = [float(2**exponent) for exponent in range(low, high + 1)]
    if not candidates:
        # Narrow exponent ranges (e3m4, e4m20, …): 2·f_large does not fit under max_finite/4. Fall
        # back to the powers of two and their 1.5 multiples that can still win (C > f_large/2) and
        # are finite in F: with so few finite values the coarser grid often misses every good C.
        top = math.floor(math.log2(fmt_obj.max_finite))
        candidates = sorted(
            scale
            for exponent in range(math.floor(math.log2(large / 2)), top + 1)
            for scale in (float(2**exponent), 1.5 * 2**exponent)
            if large / 2 < scale <= fmt_obj.max_finite
        )
        if not candidates:
            raise FormalRopeError(
                f"no Y scale C with f_large/2 < C <= max_finite fits {fmt_obj.describe()}; pass one (--scale / scale=)"
            )
    scanned = [(scale, certified_range(k, freq, scale, fmt_obj, "ideal").n_max) for scale in candidates]
    best_scale, best_realized = scanned[0][0], -1
    for evaluated, (scale, ideal) in enumerate(sorted(scanned, key=lambda item: (-item[1], item[0]))):
        if evaluated >= 6 or ideal <= best_realized:
            break
        cap = min(max_length, max(ideal, k) + 2)
        realized = certified_range(k, freq, scale, fmt_obj, "realized", max_length=cap).n_max
        if realized > best_realized:
            best_scale, best_realized = scale, realized
        if realized >= ideal:
            break
    return YScaleChoice(scale=best_scale, chosen=True, candidates=tuple(scanned))
