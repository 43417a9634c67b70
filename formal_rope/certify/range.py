"""Certified range N_max^(k)(g, C, F) of the appendix-D k-offset head (paper eq. 10, SPEC §7).

N_max = the largest L such that at every query position k+1 <= i <= L+1 the score of the target key
i−k beats every other key j (0 <= j < i, j ≠ i−k) by at least f_large(F). Competitor offsets are
n = i−k−j ∈ {1−k, …, −1} ∪ {1, …, i−k}: the k−1 keys after the target compete at every query.

- ideal: exact scores C·cos(g·n). With n* = the first n >= 1 with cos(g·n) > 1 − f_large/C
  (continued fractions, see ideal.py): if n* >= k the first failure is the bos key at query
  i = n* + k, so N_max = n* + k − 2; if n* < k the later key at offset −n* already fails at i = k+1,
  so N_max = k − 1 (only the vacuous lengths L < k qualify).
- realized: brute force with the scores the model computes in F (realized.py), up to max_length.
- paper_sufficient_bound: the largest L with C·δ_L(g) >= f_large, δ_L(g) = 1 − max_{1<=n<=L} cos(g·n),
  which in exact arithmetic is n* − 1 (0 when even L = 1 fails).
"""

from __future__ import annotations

import math
import time
from dataclasses import asdict, dataclass, field
from typing import Any, Callable

import mpmath

from formal_rope.certify.ideal import first_violation
from formal_rope.errors import FormalRopeError
from formal_rope.precision.formats import FloatFormat, f_large, parse_format, round_to_format

MODES = ("ideal", "realized")


@dataclass(frozen=True)
class CertifiedRange:
    """N_max of one k-offset head (g = freq, C = scale) in one format, with the first failing query and key.

    `n_max_is_lower_bound` marks a realized scan that reached `max_length` without a failure.
    """

    offset: int
    freq: float
    scale: float
    format: str
    f_large: float
    mode: str
    n_max: int
    paper_sufficient_bound: int
    n_max_is_lower_bound: bool = False  # realized scan reached max_length without a failure
    max_length: int | None = None
    violation_offset: int | None = None  # signed competitor offset n = i − k − j of the first failure
    violation_query: int | None = None  # i of the first failure (= n_max + 2)
    violation_key: int | None = None  # j of the first failure
    violation_gap: float | None = None  # target score minus that competitor's score (< f_large)
    threshold_cosine: float = 0.0  # 1 − f_large / C
    first_ideal_violation: int = 0  # n* (ideal), also reported in realized mode for comparison
    convergent_denominators: tuple[int, ...] = field(default_factory=tuple)
    seconds: float = 0.0

    def to_dict(self) -> dict[str, Any]:
        """Plain JSON values (the `certify --json` object, headline fields first); a non-finite gap
        (overflowed realized scores) becomes None, since JSON has no inf and json.dumps would write
        the invalid token Infinity."""
        data = asdict(self)
        data["convergent_denominators"] = list(self.convergent_denominators)
        return {key: None if isinstance(value, float) and not math.isfinite(value) else value
                for key, value in data.items()}

    def explanation(self) -> str:
        """One line on the binding competitor."""
        if self.n_max_is_lower_bound and self.max_length is not None and self.offset > self.max_length:
            return (
                f"no query scanned: the first query position k+1 = {self.offset + 1} lies beyond --max-length "
                f"{self.max_length} + 1, and lengths L < k pass vacuously, so N_max >= k - 1 = {self.offset - 1}"
            )
        if self.n_max_is_lower_bound:
            return (
                f"no query up to position {self.max_length + 1} has a competitor within f_large of its target "
                f"(scan capped at --max-length {self.max_length})"
            )
        i, j, n = self.violation_query, self.violation_key, self.violation_offset
        if self.violation_gap is not None and not math.isfinite(self.violation_gap):
            return (
                f"first failure at query i={i}: the realized scores overflow {self.format} (target j={i - self.offset} "
                f"vs key j={j}: gap {self.violation_gap}), so the softmax there is NaN; use a smaller scale C"
            )
        where = "the bos key" if j == 0 else (f"the later key j={j}" if n is not None and n < 0 else f"key j={j}")
        return (
            f"first failure at query i={i}: {where} (competitor offset n={n}) trails the target j={i - self.offset} "
            f"by {self.violation_gap:.6g} < f_large = {self.f_large:.6g}"
        )


def scale_overflows(scale: float, fmt: FloatFormat) -> bool:
    """Whether a positive scale C rounds to inf in `fmt`: ideal mode takes C exactly, but no model of
    that format can store it (realized mode refuses such a C)."""
    return scale > 0 and not abs(float(round_to_format(float(scale), fmt))) < math.inf


def _validate(offset: int, freq: float, scale: float, mode: str) -> None:
    if mode not in MODES:
        raise FormalRopeError(f"unknown mode {mode!r}; use one of {', '.join(MODES)}")
    if isinstance(offset, bool) or int(offset) != offset or offset < 1:
        raise FormalRopeError(f"offset k must be an integer >= 1 (got {offset})")
    if not (math.isfinite(freq) and freq > 0):
        raise FormalRopeError(f"freq must be a positive finite angle in radians (got {freq})")
    if not (math.isfinite(scale) and scale > 0):
        raise FormalRopeError(f"scale must be a positive finite number (got {scale})")


def certified_range(
    offset: int,
    freq: float,
    scale: float,
    fmt: FloatFormat | str,
    mode: str = "ideal",
    max_length: int | None = None,
    progress: Callable[[int, int], None] | None = None,
) -> CertifiedRange:
    """N_max^(k)(g, C, F) in `mode` ("ideal": exact, any size; "realized": brute force up to max_length)."""
    _validate(offset, freq, scale, mode)
    offset, freq, scale = int(offset), float(freq), float(scale)
    fmt = parse_format(fmt)
    margin = f_large(fmt)
    if mode == "realized":
        # The realized scan imports torch: loaded only in this mode (ideal mode stays torch-free),
        # and before the clock starts.
        from formal_rope.certify.realized import DEFAULT_REALIZED_MAX_LENGTH, realized_first_violation
    started = time.perf_counter()
    ideal = first_violation(freq, scale, margin)
    paper_bound = ideal.n - 1
    common = dict(
        offset=offset,
        freq=freq,
        scale=scale,
        format=fmt.name,
        f_large=margin,
        mode=mode,
        paper_sufficient_bound=paper_bound,
        threshold_cosine=1.0 - margin / scale,
        first_ideal_violation=ideal.n,
        convergent_denominators=ideal.convergent_denominators,
    )
    if mode == "ideal":
        if ideal.n >= offset:
            n_max, query, key, competitor = ideal.n + offset - 2, ideal.n + offset, 0, ideal.n
        else:
            n_max, query, competitor = offset - 1, offset + 1, -ideal.n
            key = query - offset + ideal.n
        gap = _ideal_gap(freq, scale, competitor)
        return CertifiedRange(
            n_max=n_max,
            max_length=max_length,
            violation_offset=competitor,
            violation_query=query,
            violation_key=key,
            violation_gap=gap,
            seconds=time.perf_counter() - started,
            **common,
        )
    cap = DEFAULT_REALIZED_MAX_LENGTH if max_length is None else int(max_length)
    found = realized_first_violation(offset, freq, scale, fmt, cap, progress=progress)
    if found.query is None:
        return CertifiedRange(
            # Lengths L < k pass vacuously (no query k+1 <= i <= L+1), so N_max >= k − 1 even unscanned.
            n_max=max(cap, offset - 1),
            n_max_is_lower_bound=True,
            max_length=cap,
            seconds=time.perf_counter() - started,
            **common,
        )
    return CertifiedRange(
        n_max=found.query - 2,
        max_length=cap,
        violation_offset=found.query - offset - found.key,
        violation_query=found.query,
        violation_key=found.key,
        violation_gap=found.target_score - found.competitor_score,
        seconds=time.perf_counter() - started,
        **common,
    )


def _ideal_gap(freq: float, scale: float, competitor_offset: int) -> float:
    """C·(1 − cos(g·n)) evaluated accurately (mpmath) as a float."""
    bits = 128 + abs(competitor_offset).bit_length()
    with mpmath.workprec(bits):
        n = mpmath.mpf(competitor_offset)
        return float(mpmath.mpf(scale) * 2 * mpmath.sin(mpmath.mpf(freq) * n / 2) ** 2)
