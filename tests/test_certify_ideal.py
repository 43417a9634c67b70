"""Ideal certified range: continued fractions vs brute force on eq. 10, huge bounds, edge cases."""

from __future__ import annotations

import math
import subprocess
import sys

import mpmath
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from formal_rope.certify import certified_range, first_violation
from formal_rope.errors import FormalRopeError
from formal_rope.precision import f_large

F32 = f_large("fp32")


def exact_violates(freq: float, scale: float, margin: float, n: int) -> bool:
    """C − C·cos(g·n) < f_large, decided with 400-bit arithmetic on the exact float inputs."""
    with mpmath.workprec(400 + n.bit_length()):
        gap = mpmath.mpf(scale) * (1 - mpmath.cos(mpmath.mpf(freq) * n))
        return bool(gap < mpmath.mpf(margin))


def brute_force_n_max(offset: int, freq: float, scale: float, margin: float, length_cap: int) -> int | None:
    """Eq. 10 directly: scan query positions i, all keys j, with the real-valued scores C·cos(g(i−k−j)).

    float64 scores, but cases whose gaps come within 1e-7·C of the margin are rejected (None) so that
    float64 error cannot decide the answer. Returns the largest L <= length_cap that passes.
    """
    positions = np.arange(length_cap + 2)
    for i in range(offset + 1, length_cap + 2):
        keys = positions[:i]
        scores = scale * np.cos(freq * (i - offset - keys).astype(np.float64))
        target = scores[i - offset]
        gaps = target - np.delete(scores, i - offset)
        if np.any(np.abs(gaps - margin) < 1e-7 * scale):
            return None
        if np.any(gaps < margin):
            return i - 2
    return length_cap


def test_matches_brute_force_on_random_heads():
    rng = np.random.default_rng(20)
    checked = 0
    while checked < 40:
        freq = float(rng.uniform(0.01, 6.2))
        offset = int(rng.integers(1, 6))
        # Pick C so the first violation is typically within a few hundred positions.
        width = float(np.exp(rng.uniform(np.log(2e-3), np.log(0.45))))
        scale = F32 / (1 - math.cos(2 * math.pi * width)) * float(rng.uniform(1.0, 1.5))
        expected = brute_force_n_max(offset, freq, scale, F32, length_cap=400)
        if expected is None:
            continue
        result = certified_range(offset, freq, scale, "fp32")
        if expected == 400:
            assert result.n_max >= 400
        else:
            assert result.n_max == expected, (offset, freq, scale)
        checked += 1


def test_first_violation_matches_exhaustive_scan_up_to_3000():
    rng = np.random.default_rng(7)
    for _ in range(25):
        freq = float(rng.uniform(0.001, 7.0))
        width = float(np.exp(rng.uniform(np.log(3e-4), np.log(0.3))))
        scale = F32 / (1 - math.cos(2 * math.pi * width))
        n = np.arange(1, 3001)
        cosines = np.cos(freq * n)
        threshold = 1 - F32 / scale
        near = np.abs(cosines - threshold) < 1e-9
        violating = (cosines > threshold) & ~near
        # Decide the near cases exactly.
        for index in np.nonzero(near)[0]:
            violating[index] = exact_violates(freq, scale, F32, int(n[index]))
        found = first_violation(freq, scale, F32)
        if violating.any():
            assert found.n == int(n[np.argmax(violating)])
        else:
            assert found.n > 3000
            assert exact_violates(freq, scale, F32, found.n)


def test_first_violation_is_a_convergent_denominator_with_record_distance():
    found = first_violation(0.37, 1e7, F32)
    assert found.n == found.convergent_denominators[-1]
    alpha = mpmath.mpf(0.37) / (2 * mpmath.pi)
    distances = [abs(q * alpha - mpmath.nint(q * alpha)) for q in found.convergent_denominators]
    assert all(later <= earlier for earlier, later in zip(distances, distances[1:]))


@pytest.mark.parametrize("scale,expected", [(1e30, 279510437053578), (1e36, None)])
def test_bounds_at_the_1e15_scale_and_beyond(scale, expected):
    result = certified_range(1, 1.0, scale, "fp32")
    n_star = result.first_ideal_violation
    if expected is not None:
        assert n_star == expected
        assert result.n_max == expected - 1
    assert n_star > 10**14
    assert exact_violates(1.0, scale, F32, n_star)
    # Every n below n* passes: spot-check random n and the previous convergent denominators.
    rng = np.random.default_rng(1)
    samples = [int(x) for x in rng.integers(1, n_star, 200)] + list(result.convergent_denominators[:-1])
    assert not any(exact_violates(1.0, scale, F32, n) for n in samples)


def test_offset_larger_than_first_violation_is_bound_by_later_keys():
    result = certified_range(30, 1.0, 1e4, "fp32")  # n* = 25 < k = 30
    assert result.first_ideal_violation == 25
    assert result.n_max == 29  # only the vacuous lengths L < k pass
    assert result.violation_offset == -25
    assert result.violation_query == 31 and result.violation_key == 31 - 30 + 25
    assert "later key" in result.explanation()
    assert brute_force_n_max(30, 1.0, 1e4, F32, length_cap=100) == 29


def test_offset_shifts_the_bound_when_first_violation_is_far():
    base = certified_range(1, 1.0, 1e4, "fp32")
    assert base.n_max == 24 and base.paper_sufficient_bound == 24
    for offset in (2, 5, 25):
        result = certified_range(offset, 1.0, 1e4, "fp32")
        assert result.n_max == 25 + offset - 2
        assert result.paper_sufficient_bound == 24 <= result.n_max
        assert result.violation_key == 0 and result.violation_query == result.n_max + 2


def test_near_rational_angle_with_huge_next_convergent():
    freq = 2 * math.pi / 3  # α = 1/3 + O(1e-17)
    moderate = certified_range(1, freq, 1e3, "fp32")
    assert moderate.first_ideal_violation == 3
    enormous = certified_range(1, freq, 1e40, "fp32")
    assert enormous.first_ideal_violation > 10**15
    assert exact_violates(freq, 1e40, F32, enormous.first_ideal_violation)
    assert not exact_violates(freq, 1e40, F32, 3)


def test_paper_sufficient_bound_definition():
    result = certified_range(3, 0.3, 5e3, "bf16")
    margin = f_large("bf16")
    bound = result.paper_sufficient_bound
    with mpmath.workprec(200):
        def delta(length: int) -> mpmath.mpf:
            return 1 - max(mpmath.cos(mpmath.mpf(0.3) * n) for n in range(1, length + 1))

        assert 5e3 * delta(bound) >= margin
        assert 5e3 * delta(bound + 1) < margin


@pytest.mark.parametrize(
    "kwargs,message",
    [
        (dict(offset=1, freq=1.0, scale=50.0), "scale too small"),
        (dict(offset=0, freq=1.0, scale=1e4), "offset"),
        (dict(offset=1, freq=0.0, scale=1e4), "freq"),
        (dict(offset=1, freq=-1.0, scale=1e4), "freq"),
        (dict(offset=1, freq=float("nan"), scale=1e4), "freq"),
        (dict(offset=1, freq=1.0, scale=float("inf")), "scale"),
        (dict(offset=1, freq=1.0, scale=1e4, mode="exact"), "mode"),
    ],
)
def test_user_errors(kwargs, message):
    with pytest.raises(FormalRopeError, match=message):
        certified_range(fmt="fp32", **kwargs)


def test_ideal_mode_does_not_import_torch():
    code = (
        "import sys; from formal_rope.certify import certified_range; "
        "r = certified_range(1, 1.0, 1e30, 'fp32'); "
        "assert 'torch' not in sys.modules, 'torch imported'; print(r.n_max)"
    )
    completed = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert completed.stdout.strip() == "279510437053577"


@settings(max_examples=40)
@given(
    freq=st.floats(min_value=1e-4, max_value=100.0, allow_nan=False),
    log_scale=st.floats(min_value=2.0, max_value=60.0),
    offset=st.integers(min_value=1, max_value=50),
)
def test_first_violation_properties(freq, log_scale, offset):
    """n* violates, every earlier convergent denominator does not, and N_max follows from n* and k."""
    scale = 10.0**log_scale
    result = certified_range(offset, freq, scale, "fp32")
    n_star = result.first_ideal_violation
    assert n_star == result.convergent_denominators[-1]
    assert exact_violates(freq, scale, F32, n_star)
    assert not any(exact_violates(freq, scale, F32, q) for q in result.convergent_denominators[:-1])
    assert result.n_max == (n_star + offset - 2 if n_star >= offset else offset - 1)
    assert result.paper_sufficient_bound == n_star - 1
