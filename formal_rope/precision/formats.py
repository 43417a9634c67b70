"""Binary floating-point formats F = (E exponent bits, M mantissa bits) and exact rounding into them.

Every format is IEEE-754-style: bias 2^(E-1)-1, the all-ones exponent field reserved for ±inf/NaN,
subnormals, round-to-nearest-even, overflow to ±inf. This makes `fp8e4m3` differ from torch's
`float8_e4m3fn` (which has no inf and reuses that exponent for finite values up to 448): here the
largest finite fp8e4m3 value is 240 and 248 or more rounds to inf.

Values of a format are carried in float64 (every format with E <= 11 and M <= 52 embeds exactly in
binary64), so `round_to_format` maps float64 to float64.
"""

from __future__ import annotations

import math
import re
import sys
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

import mpmath
import numpy as np

from formal_rope.errors import FormalRopeError

_NAMED_FORMATS: dict[str, tuple[int, int]] = {
    "fp64": (11, 52),
    "fp32": (8, 23),
    "bf16": (8, 7),
    "fp16": (5, 10),
    "fp8e4m3": (4, 3),
    "fp8e5m2": (5, 2),
}
_EXMY = re.compile(r"^(?:fp\d*)?e(\d+)m(\d+)$")


@dataclass(frozen=True)
class FloatFormat:
    """A binary floating-point format with `exponent_bits` E and `mantissa_bits` M (stored bits).

    Precision (significand bits, hidden bit included) is M + 1.
    """

    name: str
    exponent_bits: int
    mantissa_bits: int

    def __post_init__(self) -> None:
        if not 2 <= self.exponent_bits <= 11:
            raise FormalRopeError(
                f"format {self.name!r}: exponent bits must be between 2 and 11 (got {self.exponent_bits}); "
                "values are carried in float64"
            )
        if not 1 <= self.mantissa_bits <= 52:
            raise FormalRopeError(
                f"format {self.name!r}: mantissa bits must be between 1 and 52 (got {self.mantissa_bits})"
            )

    @property
    def precision(self) -> int:
        return self.mantissa_bits + 1

    @property
    def bias(self) -> int:
        return 2 ** (self.exponent_bits - 1) - 1

    @property
    def emin(self) -> int:
        """Exponent of the smallest normal number (1 - bias)."""
        return 1 - self.bias

    @property
    def emax(self) -> int:
        """Exponent of the largest finite number (= bias; the all-ones field is inf/NaN)."""
        return self.bias

    @property
    def max_finite(self) -> float:
        return math.ldexp(2.0 - math.ldexp(1.0, -self.mantissa_bits), self.emax)

    @property
    def min_normal(self) -> float:
        return math.ldexp(1.0, self.emin)

    @property
    def min_subnormal(self) -> float:
        return math.ldexp(1.0, self.emin - self.mantissa_bits)

    @property
    def epsilon(self) -> float:
        """Distance from 1 to the next larger value of the format (2^-M)."""
        return math.ldexp(1.0, -self.mantissa_bits)

    @property
    def is_binary64(self) -> bool:
        return self.exponent_bits == 11 and self.mantissa_bits == 52

    def describe(self) -> str:
        return f"{self.name} (E={self.exponent_bits}, M={self.mantissa_bits})"

    def to_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "exponent_bits": self.exponent_bits,
            "mantissa_bits": self.mantissa_bits,
            "bias": self.bias,
            "max_finite": self.max_finite,
            "min_normal": self.min_normal,
            "min_subnormal": self.min_subnormal,
            "epsilon": self.epsilon,
        }


def valid_format_names() -> list[str]:
    """The format names `parse_format` accepts, for error messages: the named formats, then the eXmY pattern."""
    return list(_NAMED_FORMATS) + ["eXmY (e.g. e6m9)"]


def parse_format(name: str | FloatFormat) -> FloatFormat:
    """`fp32`, `bf16`, `fp16`, `fp8e4m3`, `fp8e5m2`, `fp64`, or `eXmY` with X exponent and Y mantissa bits."""
    if isinstance(name, FloatFormat):
        return name
    key = name.strip().lower()
    if key in _NAMED_FORMATS:
        exponent_bits, mantissa_bits = _NAMED_FORMATS[key]
        return FloatFormat(key, exponent_bits, mantissa_bits)
    match = _EXMY.match(key)
    if match:
        exponent_bits, mantissa_bits = int(match.group(1)), int(match.group(2))
        for known, bits in _NAMED_FORMATS.items():
            if bits == (exponent_bits, mantissa_bits):
                return FloatFormat(known, exponent_bits, mantissa_bits)
        return FloatFormat(key, exponent_bits, mantissa_bits)
    raise FormalRopeError(
        f"unknown floating-point format {name!r}; valid formats: {', '.join(valid_format_names())}"
    )


# ---------------------------------------------------------------------------------------------
# Exact rounding of float64 values into a format.
#
# For finite x = m * 2^e (1 <= |m| < 2) the quantum of the target format at x is 2^(max(e, emin) - M)
# (the max makes subnormals share the quantum of the smallest binade). Scaling x by the inverse quantum
# is exact (a power of two, split into two factors so neither over/underflows), rint rounds
# half-to-even, and scaling back is exact because the result is a value of the format. Values whose
# rounded magnitude exceeds max_finite overflow to ±inf, as IEEE prescribes (rounding is done as if
# the exponent range were unbounded, then overflow is detected).


def _is_torch(x: Any) -> bool:
    torch = sys.modules.get("torch")
    return torch is not None and isinstance(x, torch.Tensor)


def _pow2_numpy(n: np.ndarray) -> np.ndarray:
    # Build 2^n from its bit pattern: exact for -1022 <= n <= 1023, unlike a libm pow.
    n = np.clip(n.astype(np.int64), -1022, 1023)
    return ((n + 1023) << 52).view(np.float64)


def _pow2_torch(n):
    import torch

    n = n.to(torch.int64).clamp(-1022, 1023)
    return ((n + 1023) << 52).view(torch.float64)


def _uses_magic_constant(fmt: FloatFormat) -> bool:
    # The fast path needs K = 1.5·2^(e − M + 52) finite for every e up to emax + 1, and M <= 49
    # so that |x| < K/3 keeps x + K in K's binade. True for every format with E <= 10.
    return fmt.emax + 1 - fmt.mantissa_bits + 52 <= 1023 and fmt.mantissa_bits <= 49


def _round_numpy(x: np.ndarray, fmt: FloatFormat) -> np.ndarray:
    x = np.asarray(x, dtype=np.float64)
    if fmt.is_binary64:
        return x.copy()
    with np.errstate(invalid="ignore", over="ignore"):
        if _uses_magic_constant(fmt):
            biased = (x.view(np.int64) >> 52) & 0x7FF
            e = np.clip(biased - 1023, fmt.emin, fmt.emax + 1)
            magic = (((e + (52 - fmt.mantissa_bits + 1023)) << 52) | (1 << 51)).view(np.float64)
            rounded = np.copysign((x + magic) - magic, x)
        else:
            _, exponent = np.frexp(x)
            e = np.maximum(exponent.astype(np.int64) - 1, fmt.emin)
            shift = fmt.mantissa_bits - e
            first = shift // 2
            second = shift - first
            scaled = x * _pow2_numpy(first) * _pow2_numpy(second)
            rounded = np.rint(scaled) * _pow2_numpy(-second) * _pow2_numpy(-first)
        rounded = np.where(np.abs(rounded) > fmt.max_finite, np.copysign(np.inf, x), rounded)
        return np.where(np.isfinite(x), rounded, x)


def _round_torch(x, fmt: FloatFormat):
    import torch

    if x.dtype != torch.float64:
        x = x.to(torch.float64)
    if fmt.is_binary64:
        return x.clone()
    if _uses_magic_constant(fmt):
        # x + K rounds x to a multiple of K's ulp 2^(max(e, emin) − M), ties to even, in one float64
        # addition; subtracting K back is exact. Infinities and NaN pass through the same arithmetic.
        biased = torch.bitwise_and(torch.bitwise_right_shift(x.view(torch.int64), 52), 0x7FF)
        e = biased.sub_(1023).clamp_(fmt.emin, fmt.emax + 1)
        magic_bits = e.add_(52 - fmt.mantissa_bits + 1023).bitwise_left_shift_(52).bitwise_or_(1 << 51)
        magic = magic_bits.view(torch.float64)
        rounded = (x + magic).sub_(magic).copysign_(x)
        overflow = rounded.abs() > fmt.max_finite
        return rounded.masked_fill_(overflow, math.inf).copysign_(x)
    _, exponent = torch.frexp(x)
    e = torch.clamp(exponent.to(torch.int64) - 1, min=fmt.emin)
    shift = fmt.mantissa_bits - e
    first = torch.div(shift, 2, rounding_mode="floor")
    second = shift - first
    scaled = x * _pow2_torch(first) * _pow2_torch(second)
    rounded = torch.round(scaled) * _pow2_torch(-second) * _pow2_torch(-first)
    overflow = rounded.abs() > fmt.max_finite
    rounded = torch.where(overflow, torch.copysign(torch.full_like(x, math.inf), x), rounded)
    return torch.where(torch.isfinite(x), rounded, x)


def round_to_format(x: Any, fmt: FloatFormat | str):
    """Round float64 values to the nearest value of `fmt` (ties to even, subnormals, overflow to ±inf).

    Accepts a torch tensor (any float dtype; computed in float64 and returned as float64), a numpy
    array, or a Python float (returns a float). Exact: no double rounding, no per-element Python.
    """
    fmt = parse_format(fmt)
    if _is_torch(x):
        return _round_torch(x, fmt)
    if isinstance(x, (float, int)) and not isinstance(x, bool):
        return float(_round_numpy(np.array(float(x)), fmt))
    return _round_numpy(np.asarray(x, dtype=np.float64), fmt)


def is_representable(x: Any, fmt: FloatFormat | str):
    """Elementwise: does x belong to the format (rounding leaves it unchanged)? NaN counts as representable."""
    rounded = round_to_format(x, fmt)
    if _is_torch(x):
        import torch

        x64 = x.to(torch.float64)
        return (rounded == x64) | torch.isnan(x64)
    x64 = np.asarray(x, dtype=np.float64)
    return (rounded == x64) | np.isnan(x64)


# ---------------------------------------------------------------------------------------------
# High-precision helpers (mpmath), used for f_large, correctly rounded transcendental fallbacks and
# rotation tables.


def round_mpf_to_format(value, fmt: FloatFormat | str, direction: str = "nearest") -> float:
    """Round an mpmath number (or anything mpmath accepts, taken exactly) into the format.

    direction: "nearest" (ties to even), "up" (toward +inf) or "down" (toward -inf). Overflow goes to
    ±inf for "nearest" and in the rounding direction; the result is a Python float.
    """

    fmt = parse_format(fmt)
    value = mpmath.mpf(value) if not isinstance(value, mpmath.mpf) else value
    if mpmath.isnan(value):
        return math.nan
    if mpmath.isinf(value):
        return math.inf if value > 0 else -math.inf
    if value == 0:
        return 0.0
    _, exponent = mpmath.frexp(value)  # value = m * 2^exponent, 0.5 <= |m| < 1
    e = max(int(exponent) - 1, fmt.emin)
    quantum_exp = e - fmt.mantissa_bits
    scaled = mpmath.ldexp(value, -quantum_exp)  # exact: mpf scaling by a power of two
    low = int(mpmath.floor(scaled))
    # Comparisons of mpf values are exact whatever the working precision; subtraction is not.
    if direction == "up":
        n = low if scaled == low else low + 1
    elif direction == "down":
        n = low
    elif direction == "nearest":
        midpoint = mpmath.mpf(low) + mpmath.mpf(0.5)
        if scaled > midpoint or (scaled == midpoint and low % 2 == 1):
            n = low + 1
        else:
            n = low
    else:
        raise ValueError(f"unknown rounding direction {direction!r}")
    magnitude_limit = fmt.max_finite
    result_exp = quantum_exp
    # Keep the result exact: compare in integers before converting.
    if mpmath.ldexp(abs(n), result_exp) > magnitude_limit:
        if direction == "nearest":
            return math.inf if n > 0 else -math.inf
        if direction == "up":
            return math.inf if n > 0 else -magnitude_limit
        return magnitude_limit if n > 0 else -math.inf
    return math.ldexp(float(n), result_exp)


@lru_cache(maxsize=None)
def f_large(fmt: FloatFormat | str) -> float:
    """The smallest positive value f of the format with exp(-f) rounding to 0 (correctly rounded exp).

    exp(-f) rounds to 0 exactly when exp(-f) <= min_subnormal / 2 (at the midpoint ties-to-even
    picks 0), i.e. when f >= T = -ln(min_subnormal / 2) = (bias + M) * ln 2. T is irrational, so the
    answer is T rounded up into the format. Raises FormalRopeError when that exceeds max_finite.
    """

    fmt = parse_format(fmt)
    with mpmath.workprec(256):
        threshold = (fmt.bias + fmt.mantissa_bits) * mpmath.log(2)
        value = round_mpf_to_format(threshold, fmt, direction="up")
    if not math.isfinite(value):
        raise FormalRopeError(
            f"format {fmt.describe()} has no finite f_large: exp(-x) never rounds to 0 for finite x "
            f"(would need x >= {float(threshold):.6g} > max_finite {fmt.max_finite:.6g})"
        )
    return value


def f_large_threshold(fmt: FloatFormat | str) -> float:
    """(bias + M)·ln 2: exp(-x) rounds to 0 in the format iff x >= this real number (as a float64)."""
    fmt = parse_format(fmt)
    return (fmt.bias + fmt.mantissa_bits) * math.log(2)
