"""Statistics over seeds (formal_rope.sweeps.statistics) against hand-computed small samples, and
`report`'s intervals, success counts and `--compare`."""

from __future__ import annotations

import itertools
import json
import math
import subprocess
import sys
from dataclasses import replace
from fractions import Fraction

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from formal_rope.run_config.config import RunConfig
from formal_rope.sweeps.report import aggregate, compare_cells
from formal_rope.sweeps.results import read_results
from formal_rope.sweeps.runner import run_sweep
from formal_rope.sweeps.statistics import (
    binomial_cdf_half,
    bootstrap_interval,
    cliffs_delta,
    compare,
    mann_whitney_u,
    mean_interval,
    order_statistic_interval,
    permutation_test,
)
from formal_rope.training.run_result import LengthResult, RunResult
from sweeps_support import cli

# ----------------------------------------------------------------------------------------------
# Brute-force references: the hand-written implementations the module used before it called
# scipy.stats, kept here so the library's answers are checked against them on every sample.


def reference_permutation_p(a, b) -> float:
    """Every split of the pooled values enumerated; |mean difference| within 1e-9 (relative to the
    largest |value|) of the observed one counts as at least as extreme."""
    x, y = np.asarray(a, float), np.asarray(b, float)
    pooled = np.concatenate([x, y])
    n, k = len(pooled), len(x)
    observed = abs(x.mean() - y.mean())
    tolerance = 1e-9 * max(1.0, float(np.abs(pooled).max()))
    splits = np.array(list(itertools.combinations(range(n), k)), dtype=np.int64)
    sums = pooled[splits].sum(axis=1)
    differences = np.abs(sums / k - (pooled.sum() - sums) / (n - k))
    return float(np.mean(differences >= observed - tolerance))


def reference_mann_whitney(a, b) -> tuple[float, float]:
    """U from mid-ranks; two-sided p from the normal approximation, tie and continuity corrected."""
    x, y = np.asarray(a, float), np.asarray(b, float)
    n1, n2 = len(x), len(y)
    pooled = np.concatenate([x, y])
    ranks = np.array([np.sum(pooled < v) + (np.sum(pooled == v) + 1) / 2 for v in pooled])
    u = float(ranks[:n1].sum() - n1 * (n1 + 1) / 2)
    n = n1 + n2
    _, counts = np.unique(pooled, return_counts=True)
    variance = n1 * n2 / 12 * ((n + 1) - float((counts**3 - counts).sum()) / (n * (n - 1)))
    if variance <= 0:
        return u, 1.0
    z = (abs(u - n1 * n2 / 2) - 0.5) / math.sqrt(variance)
    return u, float(min(1.0, math.erfc(max(z, 0.0) / math.sqrt(2))))


def reference_bootstrap(values, level, resamples, seed) -> tuple[float, float]:
    """Means of `resamples` resamples drawn as rows of indices from default_rng(seed); their quantiles."""
    data = np.asarray(values, float)
    means = data[np.random.default_rng(seed).integers(0, len(data), size=(resamples, len(data)))].mean(axis=1)
    low, high = np.quantile(means, [(1 - level) / 2, (1 + level) / 2])
    return float(low), float(high)


small_samples = st.one_of(
    st.lists(st.integers(0, 6).map(float), min_size=1, max_size=6),  # N*-like: many ties
    st.lists(st.integers(0, 100).map(lambda v: v / 100), min_size=1, max_size=6),  # accuracies, 2 decimals
    st.lists(st.floats(-1e3, 1e3, allow_nan=False), min_size=1, max_size=6),
)


@settings(max_examples=150, deadline=None)
@given(small_samples, small_samples)
def test_permutation_p_values_equal_the_brute_force_enumeration_exactly(a, b):
    p, splits = permutation_test(a, b)
    assert splits == math.comb(len(a) + len(b), len(a))
    assert p == reference_permutation_p(a, b)  # bit for bit, ties between float means included


def test_permutation_p_values_on_fixed_samples_equal_the_old_implementation():
    """Values the hand-written implementation (before scipy) printed, as literals: a cell's N* and
    accuracies over five seeds, one of them alone, and samples whose means differ by less than
    their rounding (the ties scipy's own tolerance would tell apart)."""
    assert permutation_test([500, 500, 500, 41, 43], [41, 45, 43, 41, 47]) == (0.14285714285714285, 252)
    assert permutation_test([0.43, 0.44, 0.36, 0.61, 0.63], [0.3, 0.6, 0.51, 0.1, 0.86, 0.61]) == (
        0.9891774891774892, 462)
    assert permutation_test([0.9, 0.8, 0.7], [0.8, 0.7, 0.9, 0.8]) == (1.0, 35)
    assert permutation_test([600], [500, 500, 43, 41]) == (0.6, 5)


@settings(max_examples=150, deadline=None)
@given(small_samples, small_samples)
def test_mann_whitney_equals_the_normal_approximation_by_hand(a, b):
    u, p = mann_whitney_u(a, b)
    expected_u, expected_p = reference_mann_whitney(a, b)
    # scipy's 2·Φ(−z) and the reference's erfc(z/√2) round differently in the last bits.
    assert u == expected_u and p == pytest.approx(expected_p, rel=1e-13, abs=0)


def test_binomial_cdf_against_exact_fractions():
    for n in range(1, 41):
        for k in range(-1, n + 1):
            exact = sum(Fraction(math.comb(n, i), 2**n) for i in range(max(k + 1, 0)))
            value = binomial_cdf_half(n, k)
            if n <= 14:
                assert value == float(exact), (n, k)
            else:  # scipy's incomplete beta function: a few ulp off the exact fraction
                assert value == pytest.approx(float(exact), rel=1e-14, abs=1e-300), (n, k)


@settings(max_examples=40, deadline=None)
@given(st.lists(st.floats(-1e3, 1e3, allow_nan=False), min_size=2, max_size=12), st.sampled_from([0.5, 0.9, 0.95]))
def test_bootstrap_draws_the_same_resamples_as_by_hand(values, level):
    """scipy's bootstrap draws its resamples like the reference (one (resamples, n) block of indices
    from the seeded generator), so the interval moves only by the rounding of its quantiles."""
    interval = bootstrap_interval(values, level, resamples=2000, seed=3)
    low, high = reference_bootstrap(values, level, 2000, 3)
    scale = max(1.0, max(abs(v) for v in values))
    assert interval.low == pytest.approx(low, abs=1e-12 * scale)
    assert interval.high == pytest.approx(high, abs=1e-12 * scale)


def test_scipy_stats_loads_only_when_a_statistic_is_computed():
    """The report module (imported by the sweep commands for their labels) does not import
    scipy.stats; an interval does."""
    script = ("import sys\nimport formal_rope.sweeps.report\nassert 'scipy.stats' not in sys.modules\n"
              "from formal_rope.sweeps.statistics import mean_interval\nmean_interval([1, 2, 3, 4, 5])\n"
              "assert 'scipy.stats' in sys.modules\nprint('ok')\n")
    result = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120)
    assert result.returncode == 0 and result.stdout.strip() == "ok", result.stderr


def test_permutation_p_values_by_hand():
    # {1,2,3} vs {4,5,6}: of the C(6,3) = 20 splits only the two extreme ones have |mean difference| >= 3.
    assert permutation_test([1, 2, 3], [4, 5, 6]) == (0.1, 20)
    # {1,2} vs {3,4}: 6 splits, mean differences ±2 (2 splits), ±1 (2), 0 (2): p = 2/6.
    assert permutation_test([1, 2], [3, 4])[0] == pytest.approx(1 / 3)
    # Ties: 500,500 vs 41,41: the observed split and its mirror reach |diff| = 459 (2 of 6).
    assert permutation_test([500, 500], [41, 41])[0] == pytest.approx(1 / 3)
    # Identical samples: every split is at least as extreme as a zero difference.
    assert permutation_test([7, 7, 7], [7, 7])[0] == 1.0
    # 500 ×5 vs 500, 500, 401, 41, 41: the pooled sum is 3983 and the first group's 2500, so a split is as
    # extreme when its first group sums to >= 2500 (five 500s: C(7,5) = 21 splits) or <= 1483 (401, 41,
    # 41 and two 500s: C(7,2) = 21): p = 42/252.
    p, splits = permutation_test([500] * 5, [500, 500, 401, 41, 41])
    assert splits == 252 and p == pytest.approx(42 / 252)


def test_mann_whitney_on_the_textbook_race():
    """Six tortoises (T) and six hares (H) finish in the order T H H H H H T T T T T H (positions
    1..12). U of the tortoises = pairs where a tortoise's position is larger = 5 tortoises × 5 hares
    = 25, U of the hares 36 − 25 = 11; mean 18, variance 6·6·13/12 = 39, so with the continuity
    correction z = (25 − 18 − 0.5)/√39 = 1.0408 and the two-sided p = 0.298."""
    tortoises, hares = [1, 7, 8, 9, 10, 11], [2, 3, 4, 5, 6, 12]
    u, p = mann_whitney_u(tortoises, hares)
    assert u == 25 and mann_whitney_u(hares, tortoises)[0] == 11
    assert p == pytest.approx(math.erfc(6.5 / math.sqrt(39) / math.sqrt(2)), rel=1e-12)
    assert p == pytest.approx(0.298, abs=1e-3)
    # with ties, mid-ranks and the tie-corrected variance: values cross-checked with scipy 1.17
    # (mannwhitneyu(method="asymptotic", use_continuity=True)).
    assert mann_whitney_u([1, 2, 2, 3, 5, 7], [2, 4, 4, 6, 8, 9, 9]) == pytest.approx((9.0, 0.0976070694733524))
    assert cliffs_delta(tortoises, hares) == pytest.approx((25 - 11) / 36)


def test_compare_picks_the_exact_test_for_small_samples_and_mann_whitney_for_large():
    small = compare([500, 500, 401, 41, 41], [41, 41, 43])
    assert small.method == "exact permutation" and small.n_a == 5 and small.n_b == 3
    assert small.statistic == pytest.approx(296.6 - 125 / 3) and small.cliffs_delta == pytest.approx(7 / 15)
    rng = np.random.default_rng(0)
    large = compare(rng.normal(1.5, 1, 40), rng.normal(0, 1, 40))
    assert large.method == "Mann-Whitney U" and large.p_value < 0.01 and large.cliffs_delta > 0.3
    assert "p = " in small.text() and "5 vs 3 runs" in small.text()
    assert math.isnan(compare([], [1.0]).p_value)


def test_order_statistic_intervals_and_their_exact_coverage():
    assert binomial_cdf_half(10, 1) == 11 / 1024
    # n = 10 at 95%: j = 2 covers 1 − 2·11/1024 = 0.9785; j = 3 only 0.891.
    interval = order_statistic_interval(range(1, 11), 0.95)
    assert (interval.low, interval.high, interval.method) == (2, 9, "order")
    assert interval.coverage == pytest.approx(1 - 22 / 1024)
    # Below 6 values no order interval reaches 95 %: [min, max] with its coverage 1 − 2^(1−n).
    two = mean_interval([85, 43])
    assert (two.low, two.high, two.coverage, two.method) == (43, 85, 0.5, "order") and two.text() == "43–85 (50%)"
    assert mean_interval([1, 2, 3, 4]).coverage == 0.875
    assert mean_interval([41]).method == "none" and mean_interval([41]).text() == "–"
    assert mean_interval([float("nan"), 3.0, None, 5.0]).n == 2


def test_bootstrap_intervals_cover_a_known_mean():
    """Normal samples of 20 with mean 3: the 90% percentile bootstrap interval of the mean covers 3
    in about 90% of 300 samples (a percentile bootstrap runs a little narrow at n = 20)."""
    rng = np.random.default_rng(11)
    covered = [bootstrap_interval(rng.normal(3, 2, 20), 0.9, resamples=2000, seed=1) for _ in range(300)]
    share = np.mean([interval.low <= 3 <= interval.high for interval in covered])
    assert 0.82 <= share <= 0.96
    first = mean_interval([500, 500, 401, 41, 41])
    assert first.method == "bootstrap" and first == mean_interval([500, 500, 401, 41, 41])  # seeded
    assert 41 <= first.low < first.high <= 500
    with pytest.raises(ValueError):
        mean_interval([1, 2], level=1.5)


def _runner(config: RunConfig) -> RunResult:
    """N* by (language, pe, seed): rope_p reaches 500 on 3 of 5 seeds of (ab)*; worst-case N*
    recorded for rope_p only (one seed's worst case falls short of its N*)."""
    table = {"rope_p": [500, 500, 500, 41, 43], "nope": [41, 45, 43, 41, 47]}
    n_star = table[config.pe][config.seed]
    per_length = tuple(LengthResult(length, 1.0 if length <= n_star else 0.5, 4) for length in (41, 100, 500))
    result = RunResult(run_id=config.run_id(), config=config, status="ok", n_star=n_star,
                       accuracy=float(np.mean([r.accuracy for r in per_length])), per_length=per_length,
                       eval_complete=True)
    if config.pe == "rope_p":
        result = replace(result, n_star_worst=n_star if config.seed else 311, worst_strings_tried=1000,
                         worst_failure=None if config.seed else "ab" * 156)
    return result


@pytest.fixture()
def folder(tmp_path):
    configs = [RunConfig(language="(ab)*", pe=pe, seed=seed, steps=1, layers=1, d_model=8, heads=2)
               for pe in ("nope", "rope_p") for seed in range(5)]
    run_sweep(configs, tmp_path, runner=_runner)
    return tmp_path


def test_report_rows_carry_intervals_successes_and_worst_case_counts(folder):
    rows = {row.pe: row for row in aggregate(read_results(folder).runs)}
    rope_p = rows["rope_p"]
    assert rope_p.successes == 3 and rope_p.successes_worst == 2 and rope_p.runs_searched == 5
    assert rope_p.n_star_pairs == ((500, 500), (500, 500), (500, 311), (43, 43), (41, 41))
    assert rope_p.n_star_worst_max == 500 and rope_p.n_star_worst_mean == pytest.approx((1000 + 311 + 84) / 5)
    interval = rope_p.n_star_interval
    assert interval.method == "bootstrap" and interval.low < 316.8 < interval.high
    nope = rows["nope"]
    assert nope.successes == 0 and nope.successes_worst is None and nope.runs_searched == 0


def test_findings_tables_give_success_rates_and_worst_case_n_star(folder):
    from formal_rope.sweeps.report import markdown_table

    lines = markdown_table(aggregate(read_results(folder).runs), ("language", "pe")).splitlines()
    assert lines[0].endswith("| N* of each run | reached max | worst-case N* of each run | reached max, worst case |")
    rope_p = next(line for line in lines if "RoPE_P" in line)
    nope = next(line for line in lines if "NoPE" in line)
    assert rope_p.endswith("| 500, 500, 500, 43, 41 | 3/5 | 500, 500, 311, 43, 41 | 2/5 |")
    assert nope.endswith("| 47, 45, 43, 41, 41 | 0/5 | – | – |")  # never searched


def test_report_cli_shows_intervals_successes_and_compares_cells(folder, capsys):
    code, out, _ = cli(capsys, ["report", str(folder)])
    assert code == 0 and "N* 95% CI" in out and "reached 500" in out and "3/5" in out and "worst reached 500" in out
    assert "bootstrap of the mean" in out
    code, out, _ = cli(capsys, ["report", str(folder), "--compare", "pe=rope_p", "pe=nope", "--json"])
    payload = json.loads(out)
    (entry,) = payload["comparisons"]
    assert code == 0 and entry["language"] == "(ab)*" and entry["method"] == "exact permutation"
    assert entry["p_value"] == pytest.approx(compare([500, 500, 500, 41, 43], [41, 45, 43, 41, 47]).p_value)
    assert payload["rows"][1]["n_star_interval"]["method"] == "bootstrap" and payload["level"] == 0.95
    code, out, _ = cli(capsys, ["report", str(folder), "--compare", "pe=RoPE_P", "pe=NoPE", "--metric", "success"])
    assert code == 0 and "Cliff's δ" in out
    rows = compare_cells(read_results(folder).runs, "pe=rope_p", "pe=nope", metric="success")
    assert rows[0]["mean_a"] == 0.6 and rows[0]["mean_b"] == 0.0
    code, out, _ = cli(capsys, ["report", str(folder), "--confidence", "0.5", "--json"])
    assert json.loads(out)["rows"][0]["n_star_interval"]["level"] == 0.5
    for argv, message in [
        (["--compare", "pe=rope_p", "pe=alibi"], "no run matches 'pe=alibi' (pe takes nope, rope_p)"),
        (["--compare", "pe", "pe=nope"], "COLUMN=VALUE"),
        (["--compare", "colour=red", "pe=nope"], "cannot group by colour"),
        (["--compare", "pe=rope_p", "pe=nope", "--metric", "speed"], "unknown metric"),
        (["--confidence", "1"], "strictly between 0 and 1"),
    ]:
        code, _, err = cli(capsys, ["report", str(folder), *argv])
        assert code == 2 and message in err, (argv, err)
