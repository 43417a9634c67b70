"""Exact first violation of the k-offset head margin, via continued fractions of α = g / 2π.

With exact scores S_ij = C·cos(g·n), n = i − k − j, the target (n = 0) beats a competitor by at
least f exactly when cos(g·n) <= t := 1 − f/C. Writing ‖x‖ for the distance to the nearest integer
and β := arccos(t) / 2π ∈ (0, 1/2), this is ‖n·α‖ >= β. The first n >= 1 that violates it,

    n* = min { n >= 1 : ‖n·α‖ < β },

is a record minimum of n ↦ ‖n·α‖, hence a continued-fraction convergent denominator q_j of α (best
approximation of the second kind; see docs/precision.md for the proof). So walking the convergents
finds n* in O(log n*) steps.

Every comparison is certified: α is enclosed in an interval of rationals [α_lo, α_hi] (from a
correctly rounded π at P bits), the continued-fraction digits are only used while both ends agree,
‖q·α‖ is linear in α on the interval, and β is enclosed likewise. When an enclosure is too wide to
decide, P doubles and the walk restarts.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from fractions import Fraction

import mpmath

from formal_rope.errors import FormalRopeError


@dataclass(frozen=True)
class FirstViolation:
    """n* = the smallest n >= 1 with cos(g·n) > 1 − f/C, and the convergent walk that found it."""

    n: int
    convergent_denominators: tuple[int, ...]
    distances: tuple[float, ...]  # ‖q_j·α‖ for each examined denominator (as floats, for display)
    beta: float  # arccos(1 − f/C) / 2π
    precision_bits: int


class _NeedMorePrecision(Exception):
    pass


def _fraction(value) -> Fraction:
    mantissa, exponent = mpmath.mpf(value).man_exp
    return Fraction(int(mantissa)) * (Fraction(2) ** int(exponent))


def _alpha_bounds(freq: float, bits: int) -> tuple[Fraction, Fraction]:
    with mpmath.workprec(bits):
        pi_low = _fraction(mpmath.mpf(mpmath.pi)) - Fraction(1, 2 ** (bits - 4))
        pi_high = pi_low + Fraction(2, 2 ** (bits - 4))
    g = Fraction(freq)
    return g / (2 * pi_high), g / (2 * pi_low)


def _beta_bounds(fraction_of_scale: Fraction, bits: int) -> tuple[Fraction, Fraction]:
    """Enclose β = arccos(1 − u)/2π for u = f/C ∈ (0, 2), in forms that stay well conditioned.

    arccos(1 − u) = 2·asin(sqrt(u/2)) for u <= 1 and π − 2·asin(sqrt((2 − u)/2)) for u > 1: the asin
    argument stays <= sqrt(1/2) and u, 2 − u are exact rationals, so a few ulps of relative error
    remain (whereas rounding 1 − u first would lose everything when C ≫ f).
    """
    u = fraction_of_scale
    with mpmath.workprec(bits):
        if u <= 1:
            half = mpmath.mpf(u.numerator) / (2 * u.denominator)
            angle = 2 * mpmath.asin(mpmath.sqrt(half))
        else:
            rest = 2 - u
            half = mpmath.mpf(rest.numerator) / (2 * rest.denominator)
            angle = mpmath.pi - 2 * mpmath.asin(mpmath.sqrt(half))
        value = _fraction(angle / (2 * mpmath.pi))
    slack = abs(value) / (2 ** (bits - 8))
    return value - slack, value + slack


def _distance_bounds(q: int, p: int, alpha_low: Fraction, alpha_high: Fraction) -> tuple[Fraction, Fraction]:
    # q·α − p is linear in α, so its range over the interval is attained at the ends.
    low, high = q * alpha_low - p, q * alpha_high - p
    if low > 0 or high < 0:
        return min(abs(low), abs(high)), max(abs(low), abs(high))
    return Fraction(0), max(abs(low), abs(high))


def _walk(freq: float, fraction_of_scale: Fraction, bits: int) -> FirstViolation:
    alpha_low, alpha_high = _alpha_bounds(freq, bits)
    beta_low, beta_high = _beta_bounds(fraction_of_scale, bits)
    # Convergents of α with the usual seeds p_{-2}/q_{-2} = 0/1, p_{-1}/q_{-1} = 1/0 and
    # p_j = a_j p_{j-1} + p_{j-2} (likewise q), so p_0/q_0 = a_0/1.
    low_rest, high_rest = alpha_low, alpha_high
    p_previous, q_previous = 0, 1
    p_current, q_current = 1, 0
    denominators: list[int] = []
    distances: list[float] = []
    while True:
        digit_low, digit_high = math.floor(low_rest), math.floor(high_rest)
        if digit_low != digit_high:
            raise _NeedMorePrecision
        digit = digit_low
        p_previous, q_previous, p_current, q_current = (
            p_current,
            q_current,
            digit * p_current + p_previous,
            digit * q_current + q_previous,
        )
        # ‖q·α‖ is |q·α − p| for the convergent p/q once q >= 1 and the fractional parts are taken
        # into account; for q_0 = 1 the nearest integer may be a_0 + 1, so take the true minimum.
        distance_low, distance_high = _distance_bounds(q_current, p_current, alpha_low, alpha_high)
        other_low, other_high = _distance_bounds(q_current, p_current + 1, alpha_low, alpha_high)
        if other_high < distance_low:
            distance_low, distance_high = other_low, other_high
        elif not other_low > distance_high:
            distance_low, distance_high = min(distance_low, other_low), min(distance_high, other_high)
        denominators.append(q_current)
        distances.append(float(distance_low + distance_high) / 2)
        if distance_high < beta_low:
            return FirstViolation(q_current, tuple(denominators), tuple(distances), float(beta_low), bits)
        if not distance_low >= beta_high:
            raise _NeedMorePrecision
        fraction_low, fraction_high = low_rest - digit, high_rest - digit
        if fraction_low <= 0 or fraction_high <= 0:
            raise _NeedMorePrecision
        # x ↦ 1/x reverses the order of the interval ends.
        low_rest, high_rest = 1 / fraction_high, 1 / fraction_low


def first_violation(freq: float, scale: float, f_large: float) -> FirstViolation:
    """The smallest n >= 1 with C·cos(g·n) > C − f_large (exact arithmetic on the given floats)."""
    if not (math.isfinite(freq) and freq > 0):
        raise FormalRopeError(f"freq must be a positive finite angle in radians (got {freq})")
    if not (math.isfinite(scale) and scale > 0):
        raise FormalRopeError(f"scale must be a positive finite number (got {scale})")
    if not scale > f_large / 2:
        raise FormalRopeError(
            f"scale too small: C must exceed f_large/2 = {f_large / 2:g} (got C = {scale:g}); the target score C "
            f"can beat a competitor by at most 2C, which must reach f_large = {f_large:g}"
        )
    fraction_of_scale = Fraction(f_large) / Fraction(scale)
    # β ≈ sqrt(2 f/C)/2π for large C; n* <= ~1/β, and deciding needs ~2·log2(n*) bits plus slack.
    beta_estimate = 2 * math.asin(math.sqrt(min(1.0, f_large / scale / 2))) / (2 * math.pi)
    if beta_estimate <= 0:
        beta_estimate = 2.0**-1100
    bits = 96 + 3 * max(1, int(-math.log2(beta_estimate)) + 1)
    for _ in range(24):
        try:
            return _walk(freq, fraction_of_scale, bits)
        except _NeedMorePrecision:
            bits *= 2
    raise FormalRopeError("could not certify the range: the angle is too close to a rational multiple of 2π")
