"""Realized certified range vs an independent MPFR evaluation; ideal vs realized; CLI."""

from __future__ import annotations

import json
import math
from fractions import Fraction

import gmpy2
import pytest
import torch
from typer.testing import CliRunner

from formal_rope.certify import certified_range
from formal_rope.certify.realized import exact_difference_at_least
from formal_rope.cli import app, main
from formal_rope.errors import FormalRopeError
from formal_rope.precision import f_large, offset_query_bias, parse_format

torch.set_num_threads(1)


def mpfr_context(fmt) -> gmpy2.context:
    return gmpy2.context(
        precision=fmt.precision, emin=fmt.emin - fmt.mantissa_bits + 1, emax=fmt.emax + 1, subnormalize=True
    )


def oracle_realized_n_max(offset: int, freq: float, scale: float, name: str, length_cap: int) -> int:
    """Eq. 10 with the appendix-D head evaluated step by step in MPFR, gaps compared exactly (Fractions)."""
    fmt = parse_format(name)
    margin = Fraction(f_large(fmt))
    bias = offset_query_bias(offset, freq, scale, fmt)
    with gmpy2.context(mpfr_context(fmt)):
        g = gmpy2.mpfr(freq)
        b0, b1 = gmpy2.mpfr(bias[0]), gmpy2.mpfr(bias[1])
        rotations = []
        for position in range(length_cap + 2):
            phase = g * gmpy2.mpfr(position)
            rotations.append((gmpy2.cos(phase), gmpy2.sin(phase)))
        for i in range(offset + 1, length_cap + 2):
            c_i, s_i = rotations[i]
            q0, q1 = c_i * b0 - s_i * b1, s_i * b0 + c_i * b1
            scores = [q0 * c_j + q1 * s_j for c_j, s_j in rotations[:i]]
            target = Fraction(float(scores[i - offset]))
            for j, score in enumerate(scores):
                if j != i - offset and target - Fraction(float(score)) < margin:
                    return i - 2
    return length_cap


@pytest.mark.parametrize(
    "offset,freq,scale,name",
    [
        (1, 1.0, 1e3, "bf16"),
        (2, 0.61, 4e3, "bf16"),
        (1, 2.399963, 800.0, "fp16"),
        (3, 0.2, 300.0, "fp16"),
        (1, 1.3, 2e4, "fp32"),
        (2, 0.9, 60.0, "fp8e4m3"),
    ],
)
def test_realized_matches_mpfr_oracle(offset, freq, scale, name):
    cap = 120
    expected = oracle_realized_n_max(offset, freq, scale, name, cap)
    result = certified_range(offset, freq, scale, name, mode="realized", max_length=cap)
    if expected == cap:
        assert result.n_max_is_lower_bound and result.n_max == cap
    else:
        assert not result.n_max_is_lower_bound
        assert result.n_max == expected
        assert result.violation_gap < result.f_large
        assert result.violation_query == expected + 2


def test_realized_versus_ideal_in_fp32():
    """Measured cases (docs/precision.md): rounding only costs range here, realized <= ideal."""
    golden = math.pi * (math.sqrt(5) - 1)
    cases = [(1, 1.0, 1e4), (3, 1.0, 1e6), (1, golden, 1e6), (1, golden, 1e8), (2, golden, 1e9), (1, 0.05, 1e7)]
    for offset, freq, scale in cases:
        ideal = certified_range(offset, freq, scale, "fp32")
        realized = certified_range(offset, freq, scale, "fp32", mode="realized", max_length=3000)
        assert realized.n_max <= ideal.n_max
        if ideal.n_max < 200:
            assert realized.n_max == ideal.n_max  # small scales: rounding error ≪ f_large
    large = certified_range(1, golden, 1e9, "fp32", mode="realized", max_length=3000)
    assert large.n_max < certified_range(1, golden, 1e9, "fp32").n_max - 3000


def test_realized_scan_reports_lower_bound_at_the_cap():
    result = certified_range(1, math.pi * (math.sqrt(5) - 1), 1e8, "fp32", mode="realized", max_length=500)
    assert result.n_max_is_lower_bound and result.n_max == 500
    assert "capped" in result.explanation()


def test_realized_scale_overflow_is_a_user_error():
    with pytest.raises(FormalRopeError, match="overflows"):
        certified_range(1, 1.0, 1e6, "fp16", mode="realized", max_length=10)


def test_exact_difference_at_least():
    a = torch.tensor([1e20, 1.0, 104.0, 1e-30 + 104.0], dtype=torch.float64)
    b = torch.tensor([1e20 - 65536.0, -103.0, 1e-300, 0.0], dtype=torch.float64)
    bound = 104.0
    # 1e20 - (1e20 - 65536) = 65536 ≥ 104; 1 - (-103) = 104 ≥ 104; 104 - 1e-300 < 104 although the
    # float64 difference rounds to 104; the last pair is exactly 104 (1e-30 is lost when forming a).
    assert exact_difference_at_least(a, b, bound).tolist() == [True, True, False, True]
    nan = torch.tensor([float("nan")], dtype=torch.float64)
    assert exact_difference_at_least(nan, torch.zeros(1, dtype=torch.float64), 1.0).tolist() == [False]


runner = CliRunner()


def test_cli_json_ideal():
    outcome = runner.invoke(
        app, ["certify", "--offset", "2", "--freq", "1.0", "--scale", "1e4", "--format", "fp32", "--json"]
    )
    assert outcome.exit_code == 0, outcome.output
    data = json.loads(outcome.stdout)
    assert list(data)[:8] == ["offset", "freq", "scale", "format", "f_large", "mode", "n_max", "paper_sufficient_bound"]
    assert data["n_max"] == 25 and data["paper_sufficient_bound"] == 24 and data["mode"] == "ideal"
    assert data["f_large"] == f_large("fp32")


def test_cli_json_realized_and_panel():
    outcome = runner.invoke(
        app,
        [
            "certify", "-k", "1", "-g", "1.0", "-C", "1000", "-F", "bf16", "--mode", "realized", "--max-length", "64",
            "--json",
        ],
    )
    assert outcome.exit_code == 0, outcome.output
    data = json.loads(outcome.stdout)
    assert data["mode"] == "realized" and data["n_max"] == 5 and data["max_length"] == 64
    panel = runner.invoke(app, ["certify", "-C", "1e4"])
    assert panel.exit_code == 0
    assert "N_max" in panel.stdout and "24" in panel.stdout and "bos key" in panel.stdout


def test_cli_user_errors_exit_2(capsys):
    with pytest.raises(SystemExit) as exit_:
        main(["certify", "--scale", "10"])
    assert exit_.value.code == 2
    assert "scale too small" in capsys.readouterr().err
    with pytest.raises(SystemExit) as exit_:
        main(["certify", "--scale", "1e4", "--format", "fp99"])
    assert exit_.value.code == 2
    assert "valid formats" in capsys.readouterr().err


def test_overflowing_realized_scores_give_valid_json_and_say_so():
    # Regression: in e3m4 (max 15.5) C = 15.5 makes rotated scores overflow; the gap was inf, printed
    # as the invalid JSON token Infinity and explained as "trails the target by inf < f_large".
    result = certified_range(1, 1.0, 15.5, "e3m4", mode="realized", max_length=40)
    assert result.n_max == 2 and math.isinf(result.violation_gap)
    assert "overflow e3m4" in result.explanation()
    text = json.dumps(result.to_dict(), allow_nan=False)  # raises on inf/NaN
    assert json.loads(text)["violation_gap"] is None


def test_offset_beyond_the_scan_reports_the_vacuous_bound():
    # k > max_length: no query is scanned; lengths L < k pass vacuously, so N_max >= k − 1 (it used
    # to report ">= max_length" and claim that no scanned query had a close competitor).
    result = certified_range(5000, 1.0, 1e4, "fp32", mode="realized", max_length=100)
    assert result.n_max_is_lower_bound and result.n_max == 4999
    assert "no query scanned" in result.explanation()
    assert certified_range(5000, 1.0, 1e4, "fp32").n_max == 4999  # ideal: n* = 25 < k, exactly k − 1
