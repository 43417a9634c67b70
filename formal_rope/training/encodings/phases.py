"""The exact phase arithmetic of the rotary and sinusoidal encodings: numpy and mpmath, no torch.

Conventional schedules form theta_d * i. With phase_precision="fp64" that product is formed and
reduced modulo 2*pi exactly (turn limbs below) and only then turned into cos/sin tables;
phase_precision="fp32" forms the naive float32 product theta_d * i (what an fp32 implementation
does): at beta=1e-12 the frequencies are ~1e9 and the product is off by ~1e4 rad at position 500.
Positions follow SPEC §1: bos is position 0, symbol i is position i, eos is N+1.

Torch-free so that the CLI's notes and warnings (`training.context`) and the sweeps' planning can
compute a run's schedule without importing torch; the modules that turn these phases into tables
live beside it (`encodings.base` and the family modules).
"""

from __future__ import annotations

import math
from functools import lru_cache

import mpmath
import numpy as np

from formal_rope.errors import FormalRopeError
from formal_rope.run_config.rules import partial_rotated_pairs

TWO_PI = 2.0 * math.pi
PHASE_PRECISIONS = ("fp64", "fp32")


def rope_frequencies(base: float, n_pairs: int) -> np.ndarray:
    """theta_d = base^(-2(d-1)/D) for d = 1..D/2 with D = 2*n_pairs (float64)."""
    if not base > 0 or not math.isfinite(base):
        raise FormalRopeError(f"the RoPE/SiPE base must be a positive finite number, got {base!r}")
    exponents = -2.0 * np.arange(n_pairs, dtype=np.float64) / (2 * n_pairs)
    return np.power(np.float64(base), exponents)


# Exact phases. A frequency theta is held as its fractional number of turns f = frac(theta / 2pi),
# a 78-bit binary fraction F / 2^78 (three 26-bit integer limbs, computed once per table with mpmath
# from theta's exact definition: beta^(-2k/D) for RoPE/SiPE, the float64 value itself for learned
# frequencies). The phase at integer position i is then 2pi * frac(i * F / 2^78): the product and its
# reduction are exact int64 arithmetic (i < 2^36), and only the final turn fraction (relative error
# 2^-53) and its product by 2pi are rounded, so every phase is within ~1e-15 rad of theta*i mod 2pi
# for any base (tested 1e-12 ... 1e12) and position; the 78-bit truncation adds i * 2pi * 2^-78.
TURN_LIMB_BITS = 26
TURN_BITS = 3 * TURN_LIMB_BITS
_LIMB_MASK = (1 << TURN_LIMB_BITS) - 1
MAX_EXACT_POSITION = 2**36  # i * limb < 2^62: the int64 products stay exact


def _turn_limbs(turns: int) -> tuple[int, int, int]:
    return (turns >> (2 * TURN_LIMB_BITS)) & _LIMB_MASK, (turns >> TURN_LIMB_BITS) & _LIMB_MASK, turns & _LIMB_MASK


def _mp_turns(theta) -> int:
    """floor(frac(theta / 2pi) * 2^78) for an mpmath number theta computed at enough precision."""

    turns = theta / (2 * mpmath.pi)
    return int(mpmath.floor((turns - mpmath.floor(turns)) * mpmath.mpf(2) ** TURN_BITS))


@lru_cache(maxsize=512)
def _rope_turns(base: float, n_pairs: int) -> np.ndarray:

    rope_frequencies(base, n_pairs)  # the base's validation
    limbs = np.zeros((n_pairs, 3), dtype=np.int64)
    # theta <= max(base, 1/base): its integer turns need up to |log2 base| bits above the 78 kept.
    with mpmath.workprec(TURN_BITS + 96 + int(abs(math.log2(base)))):
        beta = mpmath.mpf(base)  # the float64 base, exactly
        for k in range(n_pairs):
            limbs[k] = _turn_limbs(_mp_turns(beta ** (mpmath.mpf(-k) / n_pairs)))
    limbs.setflags(write=False)
    return limbs


def rope_turns(base: float, n_pairs: int) -> np.ndarray:
    """Exact turn limbs (P, 3) of RoPE's theta_k = base^(-2k/D) = base^(-k/P), from the real value
    (not its float64 rounding: at base 1e-12, theta ~ 1e12 and one float64 ulp is ~1e-4 rad per position)."""
    return _rope_turns(float(base), int(n_pairs))


# 1/(2pi) as a K-bit fixed-point integer (Payne-Hanek): floor(2^K / 2pi), K covering every float64
# exponent (theta = m * 2^e with e <= 971) plus the 78 kept bits and 64 guard bits.
_INV_TWO_PI_BITS = 1024 + TURN_BITS + 64 + 53


@lru_cache(maxsize=1)
def _inv_two_pi() -> int:

    with mpmath.workprec(_INV_TWO_PI_BITS + 64):
        return int(mpmath.floor(mpmath.mpf(2) ** _INV_TWO_PI_BITS / (2 * mpmath.pi)))


def float_turns(frequencies) -> np.ndarray:
    """Exact turn limbs (..., 3) of float64 frequencies taken at their exact binary value (learned
    frequencies, or frequencies without a closed form): theta = m * 2^e exactly, so
    floor(frac(theta / 2pi) * 2^78) is (m * floor(2^K / 2pi)) >> (K - e - 78) mod 2^78 in Python
    integers (off by at most one unit of 2^-78 from the real value). Non-finite values give limbs 0."""
    values = np.asarray(frequencies, dtype=np.float64)
    flat = values.reshape(-1)
    limbs = np.zeros((flat.size, 3), dtype=np.int64)
    inverse = _inv_two_pi()
    modulus = (1 << TURN_BITS) - 1
    for index, value in enumerate(flat.tolist()):
        if value == 0.0 or not math.isfinite(value):
            continue
        mantissa, exponent = math.frexp(value)  # value = mantissa * 2^exponent, 0.5 <= |mantissa| < 1
        m, e = int(mantissa * 2.0**53), exponent - 53  # value = m * 2^e exactly
        shift = _INV_TWO_PI_BITS - e - TURN_BITS
        product = m * inverse  # floor division rounds towards -inf: negative thetas reduce correctly
        turns = (product >> shift if shift >= 0 else product << -shift) & modulus
        limbs[index] = _turn_limbs(turns)
    return limbs.reshape(values.shape + (3,))


def turn_phases(limbs: np.ndarray, positions: np.ndarray) -> np.ndarray:
    """Phases theta * i mod 2pi in [0, 2pi), float64, shape (T, ...) for positions (T,) and turn limbs (..., 3)."""
    limbs = np.asarray(limbs, dtype=np.int64)
    positions = np.asarray(positions, dtype=np.int64)
    if positions.size and (positions.min() < 0 or positions.max() >= MAX_EXACT_POSITION):
        raise FormalRopeError(f"exact rotary phases take positions 0 .. 2^36 - 1, got up to {int(positions.max()):,}")
    i = positions.reshape(positions.shape + (1,) * (limbs.ndim - 1))
    low = i * limbs[..., 2]
    middle = i * limbs[..., 1] + (low >> TURN_LIMB_BITS)
    high = (i * limbs[..., 0] + (middle >> TURN_LIMB_BITS)) & _LIMB_MASK
    # high + middle / 2^26 is exact in float64 (52 bits); the low limb is rounded once.
    fraction = (high + (middle & _LIMB_MASK) * 2.0**-TURN_LIMB_BITS + (low & _LIMB_MASK) * 2.0**-52) * 2.0**-26
    return np.minimum(fraction * TWO_PI, np.nextafter(TWO_PI, 0.0))


def rotary_phases(frequencies: np.ndarray, positions: np.ndarray, precision: str = "fp64", turns=None) -> np.ndarray:
    """Phases theta_d * i for positions (T,) and frequencies (P,) -> (T, P).

    fp64: theta*i mod 2pi from the exact turn limbs `turns` (P, 3) (`rope_turns`; default: the
    float64 frequencies' own exact value, `float_turns`), within ~1e-15 rad, result in [0, 2pi).
    fp32: the naive float32 product, unreduced (what a float32 implementation computes).
    """
    if precision == "fp64":
        return turn_phases(float_turns(frequencies) if turns is None else turns, positions)
    if precision == "fp32":
        return np.asarray(positions, dtype=np.float32)[:, None] * np.asarray(frequencies, dtype=np.float32)[None, :]
    raise FormalRopeError(f"unknown phase precision {precision!r}; expected one of {', '.join(PHASE_PRECISIONS)}")



# The base is a float64 (`--base 1e-12` is the double nearest 10^-12) and the phases are exact for
# that double: a run's numbers do not depend on how its base was written. `decimal_base_deviation`
# says how far that is from the phases of the decimal itself; train and sweep note it above this.
DECIMAL_BASE_NOTE_RAD = 1e-6


def decimal_base_deviation(base: float, n_pairs: int, longest_position: int, decimal: str | None = None) -> float:
    """max over k < n_pairs of |theta_k(decimal) - theta_k(base)| * longest_position (rad), theta_k =
    beta^(-k/n_pairs) (RoPE's ladder), where `base` is the float64 the run uses and `decimal` the
    number as written (default: repr(base), the shortest decimal that reads back as it). The phase gap
    grows linearly with the position, so this is its largest over offsets 0..longest_position;
    computed with mpmath at a precision well above the gap."""

    rope_frequencies(base, max(int(n_pairs), 1))  # the base's validation
    written = repr(float(base)) if decimal is None else decimal
    with mpmath.workprec(128 + int(abs(math.log2(base)))):
        exact, double = mpmath.mpf(written), mpmath.mpf(float(base))
        gap = max((abs(exact ** (mpmath.mpf(-k) / n_pairs) - double ** (mpmath.mpf(-k) / n_pairs))
                   for k in range(int(n_pairs))), default=mpmath.mpf(0))
        return float(gap * max(int(longest_position), 0))


# fp32 phases (phase_precision="fp32", the naive float32 product theta*i) are called far off when
# their error bound over the tested positions exceeds this (`fp32_phase_error_bound`).
FP32_PHASE_WARNING_RAD = 1e-3


def fp32_phase_error_bound(frequencies, longest_position: int) -> float:
    """An upper bound (rad) on |fl32(fl32(theta) * i) - theta * i| over positions 0..longest_position
    and the nonzero `frequencies`: the float32 rounding of theta times i plus half an ulp of the
    float32 product (both grow with i, so the bound is taken at the longest position)."""
    frequencies = np.asarray(frequencies, dtype=np.float64).reshape(-1)
    frequencies = frequencies[frequencies != 0]
    if frequencies.size == 0 or longest_position <= 0:
        return 0.0
    single = frequencies.astype(np.float32)
    position = float(longest_position)
    product = np.float32(position) * single
    rounding = np.abs(single.astype(np.float64) - frequencies) * position
    error = rounding + 0.5 * np.spacing(np.abs(product)).astype(np.float64)
    return float(error.max())


def partial_frequencies(base: float, n_pairs: int, fraction: float) -> tuple[np.ndarray, np.ndarray]:
    """(frequencies (P,), exact turn limbs (P, 3)); unrotated pairs have frequency 0 (limbs 0)."""
    rotated = partial_rotated_pairs(fraction, n_pairs)
    # The rotated pairs keep RoPE's geometric spacing over the rotated sub-dimension.
    partial = np.zeros(n_pairs, dtype=np.float64)
    turns = np.zeros((n_pairs, 3), dtype=np.int64)
    if rotated:
        partial[:rotated] = rope_frequencies(base, rotated)
        turns[:rotated] = rope_turns(base, rotated)
    return partial, turns


