"""Positional schedules: RoPE's relative-position identity, periodic tables, phase precision."""

from __future__ import annotations

import json
import math

import mpmath
import numpy as np
import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st

from formal_rope.errors import FormalRopeError
from formal_rope.kernels import apply_rotary
from formal_rope.training.encodings.base import periodic_tables, phase_tables
from formal_rope.training.encodings.builders import PositionalSpec, build_positional
from formal_rope.training.encodings.periods import assign_periods
from formal_rope.training.encodings.phases import rope_frequencies, rotary_phases


def _rotated_scores(base: float, positions: np.ndarray, q: torch.Tensor, k: torch.Tensor) -> torch.Tensor:
    """(T, T) matrix of R_i q . R_j k for one fixed q, k placed at every position (float64)."""
    n_pairs = q.shape[-1] // 2
    cos, sin = phase_tables(rotary_phases(rope_frequencies(base, n_pairs), positions, "fp64"))
    cos, sin = cos.double(), sin.double()
    length = len(positions)
    q_rot = apply_rotary(q.expand(1, 1, length, -1), cos, sin)[0, 0]
    k_rot = apply_rotary(k.expand(1, 1, length, -1), cos, sin)[0, 0]
    return q_rot @ k_rot.T


@pytest.mark.parametrize("base", [1.0, 10.0, 1e4, 1e8, 1e12])
def test_rope_scores_depend_only_on_offset(base):
    generator = torch.Generator().manual_seed(int(math.log10(base) + 20))
    q = torch.randn(16, generator=generator, dtype=torch.float64)
    k = torch.randn(16, generator=generator, dtype=torch.float64)
    positions = np.arange(0, 300, 7)
    scores = _rotated_scores(base, positions, q, k)
    offsets = positions[:, None] - positions[None, :]
    for offset in (0, 7, 21, 70, -35):
        values = scores[torch.from_numpy(offsets == offset)]
        assert len(values) > 1
        # The tables are float32 (rounded at ~6e-8), so equal offsets agree to ~1e-6 relative.
        assert torch.allclose(values, values[0].expand_as(values), atol=1e-5 * float(q.norm() * k.norm()))
    # ...and different offsets do give different scores (the check is not vacuous).
    assert not torch.allclose(scores[0, 1], scores[0, 2])


def test_rope_frequencies_follow_the_formula():
    for base in (1e-12, 1e-4, 1.0, 1e4, 1e12):
        frequencies = rope_frequencies(base, 4)
        for d in range(1, 5):
            assert frequencies[d - 1] == pytest.approx(base ** (-2 * (d - 1) / 8), rel=1e-12)
    with pytest.raises(FormalRopeError):
        rope_frequencies(0.0, 4)
    with pytest.raises(FormalRopeError):
        rope_frequencies(-1.0, 4)


@given(st.lists(st.integers(1, 12), min_size=1, max_size=4), st.integers(0, 10**9))
def test_periodic_tables_repeat_bit_exactly_far_out(periods, offset):
    n_pairs = 6
    pair_periods, _ = assign_periods(periods, n_pairs)
    period = int(np.lcm.reduce(pair_periods))
    base_positions = np.arange(0, 2 * period)
    far = base_positions + period * (10**6 // period + 1 + offset)  # beyond 10^6, whole periods away
    cos_near, sin_near = periodic_tables(periods, n_pairs, base_positions)
    cos_far, sin_far = periodic_tables(periods, n_pairs, far)
    assert torch.equal(cos_near, cos_far) and torch.equal(sin_near, sin_far)
    # Each pair repeats with its own period, and no smaller one for numerator-1 pairs of period > 1.
    cos_shift, sin_shift = periodic_tables(periods, n_pairs, base_positions + pair_periods.max())
    for pair, pair_period in enumerate(pair_periods.tolist()):
        if pair_periods.max() % pair_period == 0:
            assert torch.equal(cos_shift[:, pair], cos_near[:, pair])


def test_periodic_table_values_are_the_rational_rotations():
    cos, sin = periodic_tables((3,), 2, np.arange(6))
    # Pair 0: numerator 1 (angle 2*pi/3); pair 1: numerator 1 as well (3 // 2 = 1 harmonic).
    expected = np.cos(2 * np.pi * np.arange(6) / 3)
    assert np.allclose(cos[:, 0].numpy(), expected, atol=1e-7)
    assert np.allclose(sin[:, 1].numpy(), np.sin(2 * np.pi * np.arange(6) / 3), atol=1e-7)
    # Period 2: R_i = (-1)^i I exactly (cos in {1, -1}, sin exactly 0 in float32).
    cos2, sin2 = periodic_tables((2,), 3, np.arange(10**6, 10**6 + 8))
    assert torch.equal(cos2[:, 0], torch.tensor([1.0, -1.0] * 4))
    assert torch.all(sin2.abs() < 1e-15)


def test_assign_periods_round_robin_and_harmonics():
    periods, numerators = assign_periods((2, 5), 6)
    assert periods.tolist() == [2, 5, 2, 5, 2, 5]
    assert numerators.tolist() == [1, 1, 1, 2, 1, 1]  # period 5 cycles through harmonics 1, 2
    periods, numerators = assign_periods((1,), 3)
    assert numerators.tolist() == [0, 0, 0]  # period 1 = unrotated
    for bad in [(0,), (-2,), (), (2.5,)]:
        with pytest.raises(FormalRopeError):
            assign_periods(bad, 4)


def _exact_reduced_phase(theta: float, position: int) -> float:
    """theta (a float64 value, taken exactly) times position, reduced mod 2*pi with 60 digits."""
    with mpmath.workdps(60):
        product = mpmath.mpf(theta) * position
        return float(product - 2 * mpmath.pi * mpmath.floor(product / (2 * mpmath.pi)))


def _wrapped_distance(a: float, b: float) -> float:
    difference = (a - b) % (2 * math.pi)
    return min(difference, 2 * math.pi - difference)


def test_tiny_base_fp64_phases_are_accurate_and_fp32_are_not():
    frequencies = rope_frequencies(1e-12, 4)  # up to ~1e9 rad per position
    positions = np.array([1, 41, 137, 499, 500])
    fp64 = rotary_phases(frequencies, positions, "fp64")
    fp32 = rotary_phases(frequencies, positions, "fp32")
    assert fp64.dtype == np.float64 and fp32.dtype == np.float32
    assert np.all((fp64 >= 0) & (fp64 < 2 * math.pi))
    fp64_errors, fp32_errors = [], []
    for row, position in enumerate(positions.tolist()):
        for pair, theta in enumerate(frequencies.tolist()):
            exact = _exact_reduced_phase(theta, position)
            fp64_errors.append(_wrapped_distance(fp64[row, pair], exact))
            with mpmath.workdps(60):
                fp32_errors.append(abs(float(mpmath.mpf(float(fp32[row, pair])) - mpmath.mpf(theta) * position)))
    # fp64: theta*i mod 2pi of the float64 value, from its exact turn limbs: ~1e-15 rad.
    assert max(fp64_errors) < 1e-12
    # float32: theta itself is rounded (rel 6e-8) and so is the product: ~1e4 rad off at i = 500.
    assert max(fp32_errors) > 1e3
    # The error bound is the float32 rounding of theta times i plus one ulp of the product.
    for row, position in enumerate(positions.tolist()):
        for pair, theta in enumerate(frequencies.tolist()):
            bound = abs(float(np.float32(theta)) - theta) * position + float(np.spacing(np.float32(theta * position)))
            with mpmath.workdps(60):
                error = abs(float(mpmath.mpf(float(fp32[row, pair])) - mpmath.mpf(theta) * position))
            assert error <= bound * 1.01 + 1e-9


def test_unrotated_pairs_of_partial_rope_and_identity_of_nope():
    spec = PositionalSpec(pe="partial_rope", d_model=16, heads=2, layers=1, rope_fraction=0.5)
    partial = build_positional(spec)
    hidden = torch.zeros(1, 1, 50, 16)  # (runs, batch, T, d_model)
    cos, sin = partial.rotation(0, 50, hidden)
    assert cos.shape == (1, 50, 4)  # (runs, T, pairs)
    cos, sin = cos[0], sin[0]
    assert torch.equal(cos[:, 2:], torch.ones(50, 2)) and torch.equal(sin[:, 2:], torch.zeros(50, 2))
    assert not torch.equal(cos[:, :2], torch.ones(50, 2))
    full = build_positional(PositionalSpec(pe="partial_rope", d_model=16, heads=2, layers=1, rope_fraction=1.0))
    rope = build_positional(PositionalSpec(pe="rope", d_model=16, heads=2, layers=1))
    assert torch.equal(full.rotation(0, 50, hidden)[0], rope.rotation(0, 50, hidden)[0])
    nope = build_positional(PositionalSpec(pe="nope", d_model=16, heads=2, layers=1))
    assert nope.rotation(0, 50, hidden) is None and nope.embedding(50, "cpu") is None


def test_sinusoidal_embeddings():
    sipe = build_positional(PositionalSpec(pe="sipe", d_model=8, heads=2, layers=1, base=1e4))
    table = sipe.embedding(600, torch.device("cpu"))
    assert table.shape == (1, 600, 8)  # (runs, T, d_model)
    table = table[0]
    i = 345
    theta = 1e4 ** (-2 * 1 / 8)
    assert float(table[i, 2]) == pytest.approx(math.sin(i * theta), abs=1e-6)
    assert float(table[i, 3]) == pytest.approx(math.cos(i * theta), abs=1e-6)
    # Longer requests after shorter ones rebuild the cache and keep the prefix identical.
    assert torch.equal(sipe.embedding(100, torch.device("cpu"))[0], table[:100])
    periodic = build_positional(PositionalSpec(pe="sipe_p", d_model=8, heads=2, layers=1, periods=(3,)))
    p_table = periodic.embedding(10**3, torch.device("cpu"))[0]
    assert torch.equal(p_table[3:], p_table[:-3])


def test_a_pack_keeps_each_runs_base_and_periods():
    """One module for a pack: run r's tables are exactly those of run r's spec built alone."""
    specs = [PositionalSpec(pe="rope", d_model=16, heads=2, layers=1, base=b) for b in (1e-4, 1.0, 1e4)]
    pack = build_positional(specs)
    hidden = torch.zeros(3, 1, 30, 16)
    for run, spec in enumerate(specs):
        alone = build_positional(spec)
        assert torch.equal(pack.rotation(0, 30, hidden)[0][run], alone.rotation(0, 30, hidden[:1])[0][0])
    periodic = [PositionalSpec(pe="rope_p", d_model=16, heads=2, layers=1, periods=p) for p in ((2,), (3, 4))]
    pack = build_positional(periodic)
    for run, spec in enumerate(periodic):
        assert torch.equal(
            pack.rotation(0, 30, hidden[:2])[1][run], build_positional(spec).rotation(0, 30, hidden[:1])[1][0]
        )
    assert pack.select([1]).periods == ((3, 4),)
    with pytest.raises(FormalRopeError, match="must share"):
        build_positional([specs[0], PositionalSpec(pe="rope", d_model=16, heads=4, layers=1)])


def test_build_positional_rejects_bad_specs():
    for spec in (
        PositionalSpec(pe="alibi", d_model=16, heads=2, layers=1),
        PositionalSpec(pe="rope_p", d_model=16, heads=2, layers=1, periods=(0,)),
        PositionalSpec(pe="rope", d_model=16, heads=2, layers=1, base=0.0),
        PositionalSpec(pe="rope", d_model=16, heads=2, layers=1, phase_precision="fp16"),
    ):
        with pytest.raises(FormalRopeError):
            build_positional(spec)
    with pytest.raises(FormalRopeError):
        build_positional(PositionalSpec(pe="rope", d_model=12, heads=4, layers=1))  # head dim 3 is odd


def _mp_phase(base: float, k: int, pairs: int, position: int) -> mpmath.mpf:
    """theta_k * i mod 2pi with theta_k = base^(-k/pairs) = base^(-2k/D), at 60 digits."""
    with mpmath.workdps(60):
        product = mpmath.mpf(base) ** (mpmath.mpf(-k) / pairs) * position
        return product - 2 * mpmath.pi * mpmath.floor(product / (2 * mpmath.pi))


@pytest.mark.parametrize("base", [1e-12, 1e12])
def test_exact_rope_phases_at_extreme_bases_match_mpmath(base):
    """The fp64 tables hold theta_k * i mod 2pi of the real theta_k = beta^(-2k/d) (d_model 512,
    positions to 1000) within 1e-9 rad (measured: ~1e-15); the float64 product of the rounded
    theta_k is ~0.1 rad off at beta = 1e-12."""
    from formal_rope.training.encodings.phases import rope_turns, turn_phases

    pairs = 256
    positions = np.array([0, 1, 2, 41, 137, 499, 500, 777, 999, 1000])
    phases = turn_phases(rope_turns(base, pairs), positions)
    assert phases.dtype == np.float64 and np.all((phases >= 0) & (phases < 2 * math.pi))
    worst = 0.0
    for row, position in enumerate(positions.tolist()):
        for k in range(pairs):
            exact = _mp_phase(base, k, pairs, position)
            difference = abs(mpmath.mpf(float(phases[row, k])) - exact)
            worst = max(worst, float(min(difference, 2 * mpmath.pi - difference)))
    assert worst <= 1e-9
    # The module's tables use those phases; a float64 model gets float64 tables, cos/sin of them.
    spec = PositionalSpec(pe="rope", d_model=512, heads=1, layers=1, base=base)
    rope = build_positional(spec)
    cos64, sin64 = rope.rotation(0, 1001, torch.zeros(1, 1, 1001, 512, dtype=torch.float64))
    cos32, _ = rope.rotation(0, 1001, torch.zeros(1, 1, 1001, 512))
    assert cos64.dtype == torch.float64 and cos32.dtype == torch.float32
    assert torch.equal(cos32, cos64.float())  # float32 tables: the float64 values rounded once
    for position in (1, 999, 1000):
        for k in (0, 128, 255):
            exact = _mp_phase(base, k, pairs, position)
            assert abs(float(cos64[0, position, k]) - float(mpmath.cos(exact))) < 1e-12
            assert abs(float(sin64[0, position, k]) - float(mpmath.sin(exact))) < 1e-12
    # Bit-deterministic: a second build gives the same tables.
    again, _ = build_positional(spec).rotation(0, 1001, torch.zeros(1, 1, 1001, 512, dtype=torch.float64))
    assert torch.equal(again, cos64)


@pytest.mark.parametrize("pe", ["sipe", "partial_rope", "jof_fixed", "jof_projected", "jof_learned"])
def test_every_rotary_and_sinusoidal_table_is_exact_and_in_the_models_dtype(pe):
    base, d_model = 1e-12, 32
    spec = PositionalSpec(pe=pe, d_model=d_model, heads=1, layers=1, base=base, rope_fraction=0.5)
    encoding = build_positional(spec)
    hidden = torch.zeros(1, 1, 600, d_model, dtype=torch.float64)
    if pe == "sipe":
        table = encoding.embedding(600, torch.device("cpu"), torch.float64)
        assert table.dtype == torch.float64
        pairs, sin, cos = d_model // 2, table[0, :, 0::2], table[0, :, 1::2]
    elif pe == "jof_projected":
        (phases,) = encoding._tables(600, torch.device("cpu"), torch.float64)
        assert phases.dtype == torch.float64
        pairs, cos, sin = d_model // 2, torch.cos(phases[0]), torch.sin(phases[0])
    else:
        cos, sin = (table.detach() for table in encoding.rotation(0, 600, hidden))
        assert cos.dtype == torch.float64
        cos, sin = cos.reshape(-1, 600, cos.shape[-1])[0], sin.reshape(-1, 600, sin.shape[-1])[0]
        pairs = cos.shape[-1] // 2 if pe == "partial_rope" else cos.shape[-1]
    for position in (1, 500, 599):
        for k in range(0, pairs, 5):
            exact = _mp_phase(base, k, pairs, position)
            if pe == "jof_learned":  # learned: the float64 theta itself, taken exactly
                with mpmath.workdps(60):
                    product = mpmath.mpf(float(rope_frequencies(base, pairs)[k])) * position
                    exact = product - 2 * mpmath.pi * mpmath.floor(product / (2 * mpmath.pi))
            assert abs(float(cos[position, k]) - float(mpmath.cos(exact))) < 1e-12, (position, k)
            assert abs(float(sin[position, k]) - float(mpmath.sin(exact))) < 1e-12, (position, k)


def test_learned_exact_phases_keep_the_gradient_of_theta_times_i():
    spec = PositionalSpec(pe="jof_learned", d_model=16, heads=2, layers=1, base=10.0)
    learned = build_positional(spec)
    phases = learned._phases(0, 7, torch.device("cpu"))  # (R, H, T, P)
    phases[0, 1, 5, 2].backward()
    gradient = learned.frequencies.grad[0, 0]  # (H, P)
    expected = torch.zeros_like(gradient)
    expected[1, 2] = 5.0  # d(theta * 5) / d theta
    assert torch.equal(gradient, expected)


def test_partial_rope_rounds_half_up_and_refuses_to_rotate_nothing(capsys):
    from formal_rope.run_config.config import RunConfig, check_config
    from formal_rope.run_config.rules import partial_rotated_pairs
    from formal_rope.training.context import run_warnings
    from tests.cli_support import run_main

    assert partial_rotated_pairs(0.5, 5) == 3  # 2.5 -> 3 (banker's rounding gave 2)
    assert partial_rotated_pairs(0.125, 4) == 1  # 0.5 -> 1 (banker's: 0, no pair)
    assert partial_rotated_pairs(0.3, 4) == 1 and partial_rotated_pairs(0.1, 4) == 0
    five = build_positional(PositionalSpec(pe="partial_rope", d_model=20, heads=2, layers=1, rope_fraction=0.5))
    assert np.count_nonzero(five.frequencies[0]) == 3
    with pytest.raises(FormalRopeError, match=r"rope_fraction 0.1 rotates no pair: 0.1 x 4 rotary pairs"):
        build_positional(PositionalSpec(pe="partial_rope", d_model=16, heads=2, layers=1, rope_fraction=0.1))
    with pytest.raises(FormalRopeError, match="rotates no pair"):
        check_config(RunConfig("(ab)*", pe="partial_rope", rope_fraction=0.1, d_model=16, heads=2))
    code, _, err = run_main(capsys, ["train", "--lang", "(ab)*", "--pe", "partial_rope", "--rope-fraction", "0.1",
                                     "--d-model", "16", "--heads", "2", "--steps", "1", "--no-save"])
    assert code == 2 and "rotates no pair" in err and "0.1 x 4" in err
    # Rotating every pair is allowed, with a note (it is RoPE).
    everything = RunConfig("(ab)*", pe="partial_rope", rope_fraction=0.9, d_model=16, heads=2)
    (note,) = run_warnings(everything)
    assert "rotates all 4 rotary pairs" in note
    assert run_warnings(everything.with_(rope_fraction=0.5)) == []


def test_fp32_phases_at_far_off_bases_are_warned_and_recorded():
    from formal_rope.run_config.config import RunConfig
    from formal_rope.runs import run_training
    from formal_rope.sweeps.results import run_row
    from formal_rope.training.context import context_notes, run_warnings
    from formal_rope.training.encodings.phases import fp32_phase_error_bound, rope_turns, turn_phases

    # The bound holds (it is an upper bound of the measured fp32 phase error) and separates the bases.
    for base in (1e-12, 1e-4, 1e4, 1e12):
        frequencies = rope_frequencies(base, 4)
        positions = np.arange(0, 502)
        fp32 = rotary_phases(frequencies, positions, "fp32").astype(np.float64)
        exact = turn_phases(rope_turns(base, 4), positions)
        with np.errstate(invalid="ignore"):
            measured = np.abs((fp32 - exact + np.pi) % (2 * np.pi) - np.pi).max()
        bound = fp32_phase_error_bound(frequencies, 501)
        assert measured <= bound + 1e-6 or bound > 1.0  # beyond ~1 rad the wrapped error saturates at pi
    assert fp32_phase_error_bound(rope_frequencies(1e-12, 4), 501) > 1e3
    assert fp32_phase_error_bound(rope_frequencies(1e4, 4), 501) < 1e-3
    tiny = RunConfig("(ab)*", pe="rope", base=1e-12, phase_precision="fp32", d_model=16, heads=2, layers=1,
                     steps=2, batch_size=4, test_min_length=41, test_max_length=42, n_per_length=2)
    (warning,) = run_warnings(tiny)
    assert "phase_precision fp32 at base 1e-12" in warning and "by position 43" in warning
    assert "use phase_precision=fp64" in warning  # recorded: the field, as RunConfig and sweep files spell it
    assert run_warnings(tiny, "train")[0] in context_notes(tiny, None, None)  # what train prints on stderr
    assert run_warnings(tiny.with_(phase_precision="fp64")) == []
    assert run_warnings(tiny.with_(base=1e4)) == []
    result, _ = run_training(tiny, progress=False)
    assert result.warnings == (warning,)
    assert json.loads(run_row(tiny, result, result.run_id)["warnings"]) == [warning]
    assert type(result).from_dict(result.to_dict()).warnings == (warning,)


def test_float_turns_are_the_exact_turn_fraction_of_any_float64():
    """Learned frequencies' turns (integer Payne-Hanek) equal floor(frac(theta / 2pi) * 2^78) at
    high precision, over every exponent range and for negative frequencies."""
    from formal_rope.training.encodings.phases import TURN_BITS, float_turns

    rng = np.random.default_rng(3)
    values = rng.random(60) * 10.0 ** rng.integers(-300, 300, 60)
    values = np.concatenate([values, -values[:10], [1e12, -1.5, 5e-324, 1.7e308, 0.0, np.inf, np.nan]])
    limbs = float_turns(values)
    for value, row in zip(values.tolist(), limbs.tolist()):
        got = (row[0] << 52) | (row[1] << 26) | row[2]
        if value == 0.0 or not math.isfinite(value):
            assert got == 0
            continue
        with mpmath.workprec(TURN_BITS + 200 + abs(math.frexp(value)[1])):  # 1 - tiny for tiny negatives
            turns = mpmath.mpf(value) / (2 * mpmath.pi)
            expected = int(mpmath.floor((turns - mpmath.floor(turns)) * mpmath.mpf(2) ** TURN_BITS))
        assert got == expected, value
