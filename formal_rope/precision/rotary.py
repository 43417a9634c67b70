"""Realized rotary rotations, shared by the compiled-model evaluator and `certify --mode realized`.

Both must compute rotations and offset-head scores with these functions, so that a certified range
speaks about exactly the numbers the compiled model produces.

- RoPE_NP (non-periodic, appendix D): at integer position i the realized block is built from
      phase_i = round(round(g) * round(i)),   cos_i = round(cos(phase_i)),   sin_i = round(sin(phase_i))
  with every round into F and cos/sin correctly rounded (Emulated) or torch's (Native).
- Periodic (appendix C.3, eq. 7): T_m(r) = round(Rot_{2π a/m, r}) for 0 <= r < m, entries correctly
  rounded from the exact values (mpmath), looked up at i mod m. The product θ·i is never formed.
"""

from __future__ import annotations

from functools import lru_cache

import mpmath
import numpy as np
import torch

from formal_rope.errors import FormalRopeError
from formal_rope.precision.arith import Emulated, Native
from formal_rope.precision.formats import FloatFormat, parse_format, round_mpf_to_format

_MPMATH_BITS = 256


def _positions_tensor(positions, device) -> torch.Tensor:
    tensor = torch.as_tensor(positions, device=device)
    if tensor.dtype.is_floating_point:
        if not bool(torch.all(tensor == torch.round(tensor))):
            raise ValueError("rotary positions must be integers")
        tensor = tensor.to(torch.int64)
    return tensor.to(torch.int64)


def realized_angle_rotation(freq, positions, arith: Emulated | Native) -> tuple[torch.Tensor, torch.Tensor]:
    """(cos, sin) of the realized RoPE_NP rotation at integer `positions`, shape positions.shape + freq.shape.

    phase = round(round(freq) * round(i)); cos/sin of the rounded phase, rounded (see module docstring).
    """
    position_ints = _positions_tensor(positions, arith.device)
    if bool((position_ints.abs() > 2**53).any()):
        raise ValueError("positions beyond 2^53 are not exactly representable in float64")
    frequencies = arith.asarray(freq)
    realized_positions = arith.asarray(position_ints.to(torch.float64))
    realized_positions = realized_positions.reshape(realized_positions.shape + (1,) * frequencies.dim())
    phase = arith.mul(realized_positions, frequencies)
    return arith.cos(phase), arith.sin(phase)


@lru_cache(maxsize=256)
def _periodic_table(period: int, numerator: int, fmt: FloatFormat) -> tuple[np.ndarray, np.ndarray]:
    cos_table = np.empty(period, dtype=np.float64)
    sin_table = np.empty(period, dtype=np.float64)
    with mpmath.workprec(_MPMATH_BITS):
        for residue in range(period):
            # Reduce the angle exactly with integers: 2π·((a·r) mod m)/m.
            turns = mpmath.mpf((numerator * residue) % period) / period
            cos_table[residue] = round_mpf_to_format(mpmath.cospi(2 * turns), fmt)
            sin_table[residue] = round_mpf_to_format(mpmath.sinpi(2 * turns), fmt)
    cos_table.setflags(write=False)
    sin_table.setflags(write=False)
    return cos_table, sin_table


def periodic_rotation_entries(period: int, fmt: FloatFormat | str, numerator: int = 1) -> tuple[np.ndarray, np.ndarray]:
    """The table T_m: (cos, sin) of 2π·a·r/m for r = 0..m-1, each correctly rounded into `fmt`."""
    if period < 1:
        raise FormalRopeError(f"a rotation period must be a positive integer (got {period})")
    return _periodic_table(int(period), int(numerator), parse_format(fmt))


def periodic_rotation_table(
    period: int, positions, arith: Emulated | Native, numerator: int = 1
) -> tuple[torch.Tensor, torch.Tensor]:
    """(cos, sin) of the periodic rotation T_m(i mod m) at integer `positions` (shape = positions.shape)."""
    cos_table, sin_table = periodic_rotation_entries(period, arith.format, numerator)
    residues = torch.remainder(_positions_tensor(positions, arith.device), period)
    cos_values = arith.asarray(torch.from_numpy(cos_table.copy()))
    sin_values = arith.asarray(torch.from_numpy(sin_table.copy()))
    return cos_values[residues], sin_values[residues]


def offset_query_bias(offset: int, freq: float, scale: float, fmt: FloatFormat | str) -> tuple[float, float]:
    """The appendix-D query bias C·(cos(k·ĝ), −sin(k·ĝ)) as stored parameters in F.

    ĝ = round(freq) and Ĉ = round(scale) are the stored frequency and scale; each coordinate is the
    exact real value correctly rounded once into F. The key bias is (1, 0).
    """
    fmt = parse_format(fmt)
    stored_freq = round_mpf_to_format(mpmath.mpf(freq), fmt)
    stored_scale = round_mpf_to_format(mpmath.mpf(scale), fmt)
    with mpmath.workprec(_MPMATH_BITS + 64 + max(0, int(abs(offset * stored_freq)).bit_length())):
        angle = offset * mpmath.mpf(stored_freq)
        first = round_mpf_to_format(stored_scale * mpmath.cos(angle), fmt)
        second = round_mpf_to_format(-stored_scale * mpmath.sin(angle), fmt)
    return first, second


def rotate_pair(x_even: torch.Tensor, x_odd: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor, arith):
    """Rotate the pair (x_even, x_odd) by the realized (cos, sin), as apply_rotary does:
    (x_even·cos − x_odd·sin, x_even·sin + x_odd·cos), each product and sum rounded."""
    first = arith.sub(arith.mul(x_even, cos), arith.mul(x_odd, sin))
    second = arith.add(arith.mul(x_even, sin), arith.mul(x_odd, cos))
    return first, second


def realized_offset_scores(
    offset: int,
    freq: float,
    scale: float,
    query_positions,
    key_positions,
    arith: Emulated | Native,
) -> torch.Tensor:
    """Scores S[i, j] of the appendix-D k-offset head, computed in `arith` (no 1/sqrt(d) factor).

    query_i = R̂_i · b_q with b_q = offset_query_bias(...), key_j = R̂_j · (1, 0), score = the
    two-term dot product q_i[0]·k_j[0] + q_i[1]·k_j[1] (products rounded, then one rounded add).
    Shape (len(query_positions), len(key_positions)).
    """
    bias_first, bias_second = offset_query_bias(offset, freq, scale, arith.format)
    cos_q, sin_q = realized_angle_rotation(freq, query_positions, arith)
    cos_k, sin_k = realized_angle_rotation(freq, key_positions, arith)
    query_first, query_second = rotate_pair(
        arith.asarray(bias_first).expand_as(cos_q), arith.asarray(bias_second).expand_as(cos_q), cos_q, sin_q, arith
    )
    one = arith.asarray(1.0).expand_as(cos_k)
    zero = arith.asarray(0.0).expand_as(cos_k)
    key_first, key_second = rotate_pair(one, zero, cos_k, sin_k, arith)
    first_products = arith.mul(query_first[:, None], key_first[None, :])
    second_products = arith.mul(query_second[:, None], key_second[None, :])
    return arith.add(first_products, second_products)
