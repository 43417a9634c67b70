"""Statistics over seeds: an interval for a cell's mean, and a test between two cells.

Pure functions of plain sequences of numbers (no pandas), shared by `formalrope report` and
docs/make_findings.py. Sample sizes here are small (2-5 seeds per cell at quick scale), so:

* **Intervals** (`mean_interval`): with at least `SMALL_SAMPLE` values, the percentile bootstrap
  of the mean (`BOOTSTRAP_RESAMPLES` resamples drawn with a fixed seed, so a table is
  reproducible); with fewer, the exact distribution-free interval of the *median* from order
  statistics, [x_(j), x_(n+1-j)], whose coverage 1 - 2·P(Bin(n, ½) < j) is exact for any
  continuous distribution and is reported: below 6 values no such interval reaches 95 %
  ([min, max] covers 1 - 2^(1-n): 50 % for 2 values, 75 % for 3, 87.5 % for 4).
* **Rates of counts** (`proportion_interval`): k successes of n trials (runs learned, languages)
  get the exact Clopper–Pearson interval from beta quantiles, never a bootstrap: a bootstrap of n
  equal outcomes is the zero-width interval [0, 0] or [1, 1], where 0 of 40 is still consistent
  with a rate up to 8.8 % at 95 %.
* **Tests** (`compare`): the exact two-sided permutation test of the difference in means
  (every split of the pooled values into groups of the two sizes, while there are at most
  `EXACT_SPLITS`), else the Mann-Whitney U test (normal approximation with tie and continuity
  correction); the effect size is Cliff's δ = P(a > b) − P(a < b) (for Mann-Whitney: the
  rank-biserial correlation), in [−1, 1].

The bootstrap, the permutation test, Mann-Whitney U and the binomial CDF are scipy.stats's
(`bootstrap` with method "percentile", `permutation_test`, `mannwhitneyu`, `binom`); Cliff's δ
and the order-statistic interval, which scipy lacks, are computed here. scipy.stats is imported
inside the functions that use it: this module loads with `sweeps.report`, which the sweep
commands import for their labels before any statistic is computed, and importing scipy.stats
takes longer than the rest of a command's start-up.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass
from typing import Sequence

import numpy as np

SMALL_SAMPLE = 5  # fewer values: order-statistic interval of the median; at least: bootstrap of the mean
BOOTSTRAP_RESAMPLES = 10_000
BOOTSTRAP_SEED = 0
EXACT_SPLITS = 200_000  # largest number of splits the permutation test enumerates
DEFAULT_LEVEL = 0.95
CLOPPER_PEARSON = "clopper-pearson"


@dataclass(frozen=True)
class Interval:
    """An interval [low, high] for a cell's centre: `method` "bootstrap" (of the mean, at `level`),
    "order" (exact order-statistic interval of the median, with its exact `coverage`, which may
    fall short of `level` for few values), "clopper-pearson" (exact interval of a binomial rate,
    coverage at least `level`) or "none" (no value, or one)."""

    low: float
    high: float
    level: float
    coverage: float
    method: str
    n: int

    def text(self, digits: int = 0) -> str:
        """'297–500' (bootstrap), '41–85 (50%)' (order: its coverage), '–' (none)."""
        if self.method == "none":
            return "–"
        span = f"{self.low:.{digits}f}–{self.high:.{digits}f}"
        return span if self.method in ("bootstrap", CLOPPER_PEARSON) else f"{span} ({self.coverage:.0%})"

    def to_dict(self) -> dict:
        return {key: (None if isinstance(value, float) and math.isnan(value) else value)
                for key, value in asdict(self).items()}


def _clean(values: Sequence[float]) -> np.ndarray:
    """The finite values (NaN/None: runs without a measurement, left out)."""
    array = np.asarray([float(v) for v in values if v is not None], dtype=np.float64)
    return array[np.isfinite(array)]


def binomial_cdf_half(n: int, k: int) -> float:
    """P(Bin(n, ½) ≤ k) (scipy.stats.binom: exact for n ≤ 14, within a few ulp beyond)."""
    from scipy.stats import binom  # function-local: scipy.stats, off the start-up path (module docstring)

    return float(binom.cdf(k, n, 0.5))


def order_statistic_interval(values: Sequence[float], level: float = DEFAULT_LEVEL) -> Interval:
    """Distribution-free interval of the median: [x_(j), x_(n+1-j)] for the largest j whose coverage
    1 − 2·P(Bin(n, ½) ≤ j − 1) is at least `level`; [min, max] (j = 1) with its smaller coverage when
    even that falls short (few values)."""
    data = np.sort(_clean(values))
    n = len(data)
    if n < 2:
        return Interval(math.nan if n == 0 else data[0], math.nan if n == 0 else data[0], level, 0.0, "none", n)
    best = 1
    for j in range(1, n // 2 + 1):
        if 1 - 2 * binomial_cdf_half(n, j - 1) >= level:
            best = j
    coverage = 1 - 2 * binomial_cdf_half(n, best - 1)
    return Interval(float(data[best - 1]), float(data[n - best]), level, coverage, "order", n)


def bootstrap_interval(values: Sequence[float], level: float = DEFAULT_LEVEL, *,
                       resamples: int = BOOTSTRAP_RESAMPLES, seed: int = BOOTSTRAP_SEED) -> Interval:
    """Percentile bootstrap interval of the mean: the (1 − level)/2 and (1 + level)/2 quantiles of
    the means of `resamples` resamples with replacement, drawn from a generator seeded by `seed`
    (scipy.stats.bootstrap, method "percentile")."""
    from scipy.stats import bootstrap  # function-local: scipy.stats, off the start-up path (module docstring)

    data = _clean(values)
    n = len(data)
    if n < 2:
        return Interval(math.nan if n == 0 else data[0], math.nan if n == 0 else data[0], level, 0.0, "none", n)
    result = bootstrap((data,), np.mean, n_resamples=resamples, confidence_level=level, method="percentile",
                       vectorized=True, rng=np.random.default_rng(seed))
    low, high = result.confidence_interval
    return Interval(float(low), float(high), level, level, "bootstrap", n)


def proportion_interval(successes: float, trials: int, level: float = DEFAULT_LEVEL) -> Interval:
    """The exact (Clopper–Pearson) interval of a rate: [B((1−level)/2; k, n−k+1), B((1+level)/2;
    k+1, n−k)] with B the beta quantile, 0 for k = 0 and 1 for k = n (equal to
    scipy.stats.binomtest(k, n).proportion_ci(level, "exact") for whole k). Its coverage is at
    least `level` for every true rate. `successes` may be fractional: the sum of n per-unit rates in
    [0, 1] (a language's share of seeds that learned) is read as k; a variable in [0, 1] with mean p
    has variance at most p(1−p), a Bernoulli's, so the interval stays conservative."""
    from scipy.stats import beta  # function-local: scipy.stats, off the start-up path (module docstring)

    if not 0 < level < 1:
        raise ValueError(f"the confidence level must lie strictly between 0 and 1, got {level}")
    trials = int(trials)
    if trials <= 0:
        return Interval(math.nan, math.nan, level, 0.0, "none", 0)
    k = float(successes)
    if not 0 <= k <= trials:
        raise ValueError(f"successes must lie in [0, {trials}], got {successes}")
    alpha = 1 - level
    low = 0.0 if k <= 0 else float(beta.ppf(alpha / 2, k, trials - k + 1))
    high = 1.0 if k >= trials else float(beta.ppf(1 - alpha / 2, k + 1, trials - k))
    return Interval(low, high, level, level, CLOPPER_PEARSON, trials)


def mean_interval(values: Sequence[float], level: float = DEFAULT_LEVEL, *, small: int = SMALL_SAMPLE,
                  resamples: int = BOOTSTRAP_RESAMPLES, seed: int = BOOTSTRAP_SEED) -> Interval:
    """A cell's interval: the bootstrap of the mean from `small` values on, the order-statistic
    interval of the median below (see the module docstring)."""
    if not 0 < level < 1:
        raise ValueError(f"the confidence level must lie strictly between 0 and 1, got {level}")
    if len(_clean(values)) >= small:
        return bootstrap_interval(values, level, resamples=resamples, seed=seed)
    return order_statistic_interval(values, level)


# ----------------------------------------------------------------------------------------------
# Tests between two samples


def cliffs_delta(a: Sequence[float], b: Sequence[float]) -> float:
    """P(a > b) − P(a < b) over all pairs (Cliff's δ; NaN when a sample is empty)."""
    x, y = _clean(a), _clean(b)
    if not len(x) or not len(y):
        return math.nan
    difference = np.sign(x[:, None] - y[None, :])
    return float(difference.mean())


def _mean_distance(x, y, axis=-1):
    """|mean(x) − mean(y)| along `axis`: the permutation test's statistic."""
    return np.abs(np.mean(x, axis=axis) - np.mean(y, axis=axis))


def permutation_test(a: Sequence[float], b: Sequence[float]) -> tuple[float, int]:
    """Exact two-sided permutation test of the difference in means: (p, splits), p the share of
    the C(n, len(a)) splits of the pooled values whose |mean difference| is at least the observed
    one (scipy.stats.permutation_test over every split). Differences within 1e-9 of the observed
    one (relative to the largest |value|) count as ties, hence as at least: means of equal values
    summed in another order differ in their last bits, which scipy's much tighter tolerance
    (relative to the difference itself, which may be small beside the values) would tell apart."""
    from scipy.stats import permutation_test as scipy_permutation_test  # function-local: see the module docstring

    x, y = _clean(a), _clean(b)
    k, n = len(x), len(x) + len(y)
    if not k or k == n:
        return math.nan, 0
    pooled = np.concatenate([x, y])
    observed = float(_mean_distance(x, y))
    tolerance = 1e-9 * max(1.0, float(np.abs(pooled).max()))
    splits = math.comb(n, k)
    if min(k, n - k) == 1:
        # scipy's test wants two values per sample; with one, the n splits are "which value stands alone".
        distances = np.abs(pooled - (pooled.sum() - pooled) / (n - 1))
        return float(np.mean(distances >= observed - tolerance)), splits

    def statistic(first, second, axis=-1):
        distance = _mean_distance(first, second, axis)
        return np.where(np.abs(distance - observed) <= tolerance, observed, distance)  # ties: exactly the observed

    result = scipy_permutation_test((x, y), statistic, permutation_type="independent", vectorized=True,
                                    n_resamples=np.inf, alternative="greater")
    return float(result.pvalue), splits


def mann_whitney_u(a: Sequence[float], b: Sequence[float]) -> tuple[float, float]:
    """(U of the first sample, two-sided p) by the normal approximation with tie correction and
    continuity correction (scipy.stats.mannwhitneyu, method "asymptotic"); U = number of pairs with
    a > b plus half the ties."""
    from scipy.stats import mannwhitneyu  # function-local: scipy.stats, off the start-up path (module docstring)

    x, y = _clean(a), _clean(b)
    if not len(x) or not len(y):
        return math.nan, math.nan
    if np.all(np.concatenate([x, y]) == x[0]):  # every value tied: no variance, nothing to tell apart
        return len(x) * len(y) / 2, 1.0
    result = mannwhitneyu(x, y, alternative="two-sided", method="asymptotic", use_continuity=True)
    return float(result.statistic), float(result.pvalue)


@dataclass(frozen=True)
class Comparison:
    """Two samples over seeds compared: sizes, means and medians, the two-sided `p_value` of
    `method` ("exact permutation" or "Mann-Whitney U"), its `statistic` (the difference in means,
    a − b, or U), and Cliff's δ (> 0: a tends to be larger)."""

    n_a: int
    n_b: int
    mean_a: float
    mean_b: float
    median_a: float
    median_b: float
    method: str
    statistic: float
    p_value: float
    cliffs_delta: float

    def to_dict(self) -> dict:
        return {key: (None if isinstance(value, float) and math.isnan(value) else value)
                for key, value in asdict(self).items()}

    def text(self, metric: str = "N*") -> str:
        """'exact permutation test of N* over seeds (5 vs 5 runs): p = 0.17, Cliff's δ = +0.60'."""
        p = "–" if math.isnan(self.p_value) else f"{self.p_value:.2g}" if self.p_value < 0.01 else f"{self.p_value:.2f}"
        delta = "–" if math.isnan(self.cliffs_delta) else f"{self.cliffs_delta:+.2f}"
        test = "exact permutation test" if self.method == "exact permutation" else "Mann-Whitney U test"
        return f"{test} of {metric} over seeds ({self.n_a} vs {self.n_b} runs): p = {p}, Cliff's δ = {delta}"


def compare(a: Sequence[float], b: Sequence[float], *, exact_splits: int = EXACT_SPLITS) -> Comparison:
    """Sample a against sample b (values per seed; NaN/None left out): the exact permutation test
    while C(n_a + n_b, n_a) ≤ exact_splits, else Mann-Whitney U; Cliff's δ as the effect size."""
    x, y = _clean(a), _clean(b)
    n1, n2 = len(x), len(y)

    def centre(values, function):
        return float(function(values)) if len(values) else math.nan

    if n1 and n2 and math.comb(n1 + n2, n1) <= exact_splits:
        p, _ = permutation_test(x, y)
        method, statistic = "exact permutation", float(x.mean() - y.mean())
    else:
        statistic, p = mann_whitney_u(x, y)
        method = "Mann-Whitney U"
    return Comparison(n_a=n1, n_b=n2, mean_a=centre(x, np.mean), mean_b=centre(y, np.mean),
                      median_a=centre(x, np.median), median_b=centre(y, np.median), method=method,
                      statistic=statistic, p_value=p, cliffs_delta=cliffs_delta(x, y))
