"""Exact arithmetic of a format on numpy arrays: the numpy counterpart of `arith.Emulated`.

* `make_rounder(fmt)`: a fast exact float64 → format rounding (values stay float64).
* `FormatOps(fmt)`: correctly rounded +, −, ×, ÷, exp and left-to-right sums in the format, the
  operations the emulated forward pass of a compiled model is made of.
* `ones_sum_overflow(fmt)`: where a left-to-right sum of ones (a softmax denominator of tied keys)
  overflows the format.

Everything here is cross-checked against `formats.round_to_format` in the tests.
"""

from __future__ import annotations

import math
from typing import Callable

import numpy as np

from formal_rope.precision.formats import FloatFormat, f_large, round_to_format
from formal_rope.precision.native import numpy_dtype


def quiet_cast(x, dtype) -> np.ndarray:
    """float64 → dtype with IEEE rounding; overflow to ±inf is the intended result, not a warning."""
    with np.errstate(over="ignore"):
        return np.asarray(x, dtype=np.float64).astype(dtype)


def make_rounder(fmt: FloatFormat) -> Callable[[np.ndarray], np.ndarray]:
    """A fast exact float64 → format rounding function (values stay float64).

    fp64 is the identity; formats with a numpy dtype (fp32/fp16) use numpy's correctly rounded
    casts; other formats round the float64 bit pattern to M stored bits (ties to even) and defer
    subnormal/overflow elements to `round_to_format`.
    """
    if fmt.is_binary64:
        return lambda x: np.asarray(x, dtype=np.float64)
    carrier = numpy_dtype(fmt)
    if carrier is not None:
        return lambda x: quiet_cast(x, carrier).astype(np.float64)

    drop = 52 - fmt.mantissa_bits
    low_mask = np.int64((1 << drop) - 1)
    half_minus_one = np.int64((1 << (drop - 1)) - 1)
    min_normal, max_finite = fmt.min_normal, fmt.max_finite

    def rounder(x: np.ndarray) -> np.ndarray:
        x = np.ascontiguousarray(x, dtype=np.float64)
        bits = x.view(np.int64)
        lsb = (bits >> drop) & 1
        rounded = ((bits + half_minus_one + lsb) & ~low_mask).view(np.float64)
        magnitude = np.abs(x)
        special = (magnitude < min_normal) & (magnitude != 0)
        if special.any():
            rounded = rounded.copy()
            rounded[special] = round_to_format(x[special], fmt)
        with np.errstate(invalid="ignore"):
            overflow = np.abs(rounded) > max_finite
        if overflow.any():
            rounded = np.where(overflow & np.isfinite(x) | np.isinf(x), np.copysign(np.inf, x), rounded)
        nan = np.isnan(x)
        if nan.any():
            rounded = np.where(nan, x, rounded)
        return rounded

    return rounder


def float32_bit_rounder(mantissa_bits: int) -> Callable[[np.ndarray], np.ndarray]:
    """Round float32 values to ``mantissa_bits`` stored bits, ties to even, on the bit pattern.

    Valid for formats with fp32's exponent range: subnormals share fp32's linear bit layout and a
    carry out of the largest binade produces the bit pattern of inf, as IEEE overflow requires.
    """
    drop = np.uint32(23 - mantissa_bits)
    half_minus_one = np.uint32((1 << (23 - mantissa_bits - 1)) - 1)
    keep = np.uint32(~((1 << (23 - mantissa_bits)) - 1) & 0xFFFFFFFF)
    one = np.uint32(1)

    def rounder(x: np.ndarray) -> np.ndarray:
        x = np.ascontiguousarray(x, dtype=np.float32)
        bits = x.view(np.uint32)
        rounded = ((bits + half_minus_one + ((bits >> drop) & one)) & keep).view(np.float32)
        return np.where(np.isnan(x), x, rounded)

    return rounder


class FormatOps:
    """Correctly rounded elementwise ops and left-to-right sums in a format.

    Formats with a numpy dtype (fp64/fp32/fp16) run directly in it: IEEE +, −, ×, ÷ in that dtype
    are correctly rounded (numpy's float16 ops go through float32, whose 24 bits make the double
    rounding innocuous: 24 ≥ 2·11 + 2), and ``np.cumsum`` accumulates strictly left to right with a
    rounding per addition. Other formats carry float64 values and round after every operation.
    """

    def __init__(self, fmt: FloatFormat) -> None:
        self.fmt = fmt
        self.dtype = numpy_dtype(fmt)
        self._round = make_rounder(fmt)
        # Formats with fp32's exponent range and M <= 10 (bf16) ride on float32: one IEEE float32
        # operation then a rounding of the float32 bit pattern is a correct rounding (24 >= 2(M+1)+2).
        self._carrier_round = None
        if self.dtype is None and fmt.exponent_bits == 8 and fmt.mantissa_bits <= 10:
            self._carrier_round = float32_bit_rounder(fmt.mantissa_bits)

    def cast(self, x) -> np.ndarray:
        if self.dtype is not None:
            return quiet_cast(x, self.dtype)
        rounded = self._round(np.asarray(x, dtype=np.float64))
        return rounded.astype(np.float32) if self._carrier_round is not None else rounded

    def _fix(self, x: np.ndarray) -> np.ndarray:
        if self.dtype is not None:
            return x
        if self._carrier_round is not None:
            return self._carrier_round(x)
        return self._round(x)

    def mul(self, a, b):
        return self._fix(a * b)

    def add(self, a, b):
        return self._fix(a + b)

    def sub(self, a, b):
        return self._fix(a - b)

    def div(self, a, b):
        return self._fix(a / b)

    def exp(self, x: np.ndarray) -> np.ndarray:
        # torch (and arith, which imports it) only here: the numpy evaluator must import without torch.
        import torch

        from formal_rope.precision.arith import correctly_rounded  # imports torch (see above)

        # exp(x) rounds to 0 exactly when x <= -f_large (f_large is the smallest format value with
        # that property), and those inputs are rounding-boundary cases that would need the slow
        # exact path: settle them (and ±inf) directly, run the correctly rounded exp on the rest.
        x = np.asarray(x)
        values = np.zeros(x.shape, dtype=np.float64)
        values[x == np.inf] = np.inf
        values[x == 0] = 1.0  # the row maxima: exp(0) = 1 exactly
        needed = np.isfinite(x) & (x > -f_large(self.fmt)) & (x != 0)
        if needed.any():
            distinct, inverse = np.unique(x[needed].astype(np.float64), return_inverse=True)
            exact = correctly_rounded("exp", torch.from_numpy(distinct), self.fmt).numpy()
            values[needed] = exact[inverse.reshape(-1)]
        return self.cast(values)

    def causal_key_sum(self, x: np.ndarray, first_row: int = 0) -> np.ndarray:
        """``Σ_j x[:, r, j, ...]`` left to right over keys j, for x that is exactly 0 where j >= i,
        the position of row r being i = first_row + r (a block of query rows, first_row..).

        Equals ``sequential_sum(x, axis=2)`` (adding the trailing exact zeros changes nothing);
        the loop path only touches the rows i > j that key j can reach.
        """
        if self.dtype is not None:
            return self.sequential_sum(x, axis=2)
        length = x.shape[2]
        total = x[:, :, 0].copy()
        for j in range(1, length - 1):
            reached = max(0, j + 1 - first_row)  # rows of positions i > j
            if reached < total.shape[1]:
                total[:, reached:] = self._fix(total[:, reached:] + x[:, reached:, j])
        return total

    def sequential_sum(self, x: np.ndarray, axis: int) -> np.ndarray:
        """Left-to-right sum along ``axis`` with a rounding after every addition."""
        if self.dtype is not None:
            return np.take(np.cumsum(x, axis=axis, dtype=self.dtype), -1, axis=axis)
        moved = np.moveaxis(x, axis, 0)
        total = moved[0].copy()
        for index in range(1, moved.shape[0]):
            total = self._fix(total + moved[index])
        return total


def ones_sum_overflow(fmt: FloatFormat) -> int | None:
    """The least n for which a left-to-right sum of n ones overflows to inf in ``fmt``, or None.

    Each key that ties at the row maximum contributes exp(0) = 1 to the softmax denominator. Where
    2^(M+1) <= max_finite the running sum stalls at 2^(M+1) (adding 1 is then a tie that rounds to
    even) and never overflows. Narrow formats (max_finite < 2^(M+1): e3m4, e4m10, e5m15, …) count
    exactly up to max_finite and the next integer rounds to inf, so 1/inf = 0 wipes the weights.
    """
    if 2.0 ** (fmt.mantissa_bits + 1) <= fmt.max_finite:
        return None
    n = math.floor(fmt.max_finite) + 1  # every integer below 2^(M+1) is exact, so the sum reaches n
    rounder = make_rounder(fmt)
    while not math.isinf(rounder(np.asarray([float(n)]))[0]):  # n rounds to inf: it is past max_finite
        n += 1
    return n
