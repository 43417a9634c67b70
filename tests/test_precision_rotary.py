"""Realized rotations (RoPE_NP phases, periodic tables) and the appendix-D offset-head scores."""

from __future__ import annotations

import math

import gmpy2
import pytest
import torch

from formal_rope.precision import (
    Emulated,
    Native,
    offset_query_bias,
    parse_format,
    periodic_rotation_entries,
    periodic_rotation_table,
    realized_angle_rotation,
    realized_offset_scores,
    round_to_format,
)

torch.set_num_threads(1)


def mpfr_context(fmt) -> gmpy2.context:
    return gmpy2.context(
        precision=fmt.precision, emin=fmt.emin - fmt.mantissa_bits + 1, emax=fmt.emax + 1, subnormalize=True
    )


@pytest.mark.parametrize("name", ["fp32", "bf16", "fp16"])
def test_realized_angle_rotation_is_round_of_cos_of_rounded_phase(name):
    fmt = parse_format(name)
    freq = 0.7853981633974483  # not representable in bf16/fp16: it is rounded first
    positions = torch.tensor([0, 1, 2, 3, 17, 255, 1000, 4097, 70001])
    cos, sin = realized_angle_rotation(freq, positions, Emulated(fmt))
    with gmpy2.context(mpfr_context(fmt)):
        stored_freq = gmpy2.mpfr(freq)  # rounding into F
        for index, position in enumerate(positions.tolist()):
            phase = stored_freq * gmpy2.mpfr(position)  # round(i) then a rounded product
            for ours, expected in ((cos[index].item(), gmpy2.cos(phase)), (sin[index].item(), gmpy2.sin(phase))):
                # fp16 cannot hold position 70001: it overflows to inf and the rotation is NaN.
                assert ours == float(expected) or (math.isnan(ours) and gmpy2.is_nan(expected))
    if name == "fp16":
        assert math.isnan(cos[-1].item())


def test_realized_rotation_shapes_and_identity_at_bos():
    arith = Emulated("fp32")
    cos, sin = realized_angle_rotation(torch.tensor([1.0, 0.01, 1e-4]), torch.arange(5), arith)
    assert cos.shape == (5, 3)
    assert cos[0].tolist() == [1.0, 1.0, 1.0] and sin[0].tolist() == [0.0, 0.0, 0.0]


def test_fp16_phases_lose_positions():
    """In fp16 positions above 2048 are rounded: neighbouring positions get the same rotation."""
    cos, sin = realized_angle_rotation(1.0, torch.tensor([4097, 4098]), Emulated("fp16"))
    assert cos[0] == cos[1] and sin[0] == sin[1]


def test_native_rotation_matches_emulated_in_fp32_for_small_positions():
    positions = torch.arange(0, 300)
    emulated = realized_angle_rotation(0.5, positions, Emulated("fp32"))
    native = realized_angle_rotation(0.5, positions, Native(torch.float32))
    for ours, theirs in zip(emulated, native):
        assert native[0].dtype is torch.float32
        # Native cos/sin are not guaranteed correctly rounded; they agree to an ulp.
        assert torch.allclose(ours, theirs.to(torch.float64), atol=2.0**-23, rtol=0)


@pytest.mark.parametrize("name", ["fp32", "bf16", "fp8e4m3"])
@pytest.mark.parametrize("period,numerator", [(2, 1), (3, 1), (5, 2), (7, 3), (12, 5)])
def test_periodic_table_entries_are_correctly_rounded(name, period, numerator):
    fmt = parse_format(name)
    cos_table, sin_table = periodic_rotation_entries(period, fmt, numerator)
    with gmpy2.context(gmpy2.context(precision=300)):
        exact = [(2 * gmpy2.const_pi() * ((numerator * r) % period)) / period for r in range(period)]
        exact_cos = [float(gmpy2.cos(a)) for a in exact]
        exact_sin = [float(gmpy2.sin(a)) for a in exact]
    # 300-bit values rounded to float64 then to F: safe here since none of them is near an F midpoint
    # by less than 2^-50 relative (checked by the assertion on agreement with the direct rounding).
    assert cos_table.tolist() == round_to_format(torch.tensor(exact_cos, dtype=torch.float64), fmt).tolist()
    assert sin_table.tolist() == round_to_format(torch.tensor(exact_sin, dtype=torch.float64), fmt).tolist()


def test_periodic_table_is_periodic_at_huge_positions():
    arith = Emulated("fp32")
    positions = torch.tensor([0, 1, 2, 10**12, 10**12 + 1, 10**15 + 2])
    cos, sin = periodic_rotation_table(3, positions, arith)
    residues = [p % 3 for p in positions.tolist()]
    table_cos, table_sin = periodic_rotation_entries(3, "fp32")
    assert cos.tolist() == [table_cos[r] for r in residues]
    assert sin.tolist() == [table_sin[r] for r in residues]
    assert cos[0].item() == 1.0 and sin[0].item() == 0.0
    assert cos[1].item() == -0.5


def test_offset_query_bias_is_rounded_exact_value():
    first, second = offset_query_bias(2, 1.0, 1000.0, "fp16")
    with gmpy2.context(gmpy2.context(precision=200)):
        exact_first = 1000 * gmpy2.cos(gmpy2.mpfr(2))
        exact_second = -1000 * gmpy2.sin(gmpy2.mpfr(2))
    assert first == round_to_format(float(exact_first), "fp16")
    assert second == round_to_format(float(exact_second), "fp16")


def test_offset_scores_follow_the_rotation_formula():
    """Check realized_offset_scores against an independent gmpy2 step-by-step computation."""
    fmt = parse_format("bf16")
    freq, scale, offset = 0.9, 300.0, 2
    scores = realized_offset_scores(offset, freq, scale, torch.arange(3, 12), torch.arange(0, 11), Emulated(fmt))
    bias = offset_query_bias(offset, freq, scale, fmt)
    with gmpy2.context(mpfr_context(fmt)):
        g = gmpy2.mpfr(freq)
        b0, b1 = gmpy2.mpfr(bias[0]), gmpy2.mpfr(bias[1])

        def rotation(position):
            phase = g * gmpy2.mpfr(position)
            return gmpy2.cos(phase), gmpy2.sin(phase)

        for row, i in enumerate(range(3, 12)):
            c_i, s_i = rotation(i)
            q0 = c_i * b0 - s_i * b1
            q1 = s_i * b0 + c_i * b1
            for j in range(0, 11):
                c_j, s_j = rotation(j)
                expected = q0 * c_j + q1 * s_j
                assert scores[row, j].item() == float(expected), (i, j)
    # The target key i-k gets (close to) the full scale C.
    assert scores[0, 1].item() == pytest.approx(scale, rel=2**-6)
