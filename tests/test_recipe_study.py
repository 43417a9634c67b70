"""The recipe study's summary: per variant, learned expressible pairs with exact intervals, gains and
losses against the baseline with the sign test, the not-expressible control and the cost."""

from __future__ import annotations

import math
from pathlib import Path

import pytest
from scipy.stats import binomtest

from formal_rope.atlas.recipe_study import PairOutcome, study_markdown, study_outcomes, summarise
from formal_rope.errors import FormalRopeError

REPO = Path(__file__).resolve().parent.parent


def _outcome(variant, language, learned, predicted="expressible", encoding="nope", fit=True, worst=500, seconds=10.0):
    return PairOutcome(variant, language, encoding, predicted, learned, fit, worst if learned else 45, seconds)


OUTCOMES = [
    _outcome("atlas recipe", "L1", True), _outcome("atlas recipe", "L2", False, fit=False),
    _outcome("atlas recipe", "L3", False), _outcome("atlas recipe", "L4", False),
    _outcome("atlas recipe", "M1", False, predicted="not_expressible"),
    _outcome("prefix", "L1", False), _outcome("prefix", "L2", True), _outcome("prefix", "L3", True),
    _outcome("prefix", "L4", True, seconds=30.0), _outcome("prefix", "M1", True, predicted="not_expressible"),
]


def test_each_variant_is_counted_against_the_baseline_on_the_same_pairs():
    base, prefix = summarise(OUTCOMES)
    assert (base.variant, base.learned, base.expressible_pairs, base.sign_test_p) == ("atlas recipe", 1, 4, None)
    assert (base.not_learned_fit, base.not_learned_unfit, base.control_learned, base.control_pairs) == (2, 1, 0, 1)
    assert (prefix.learned, prefix.gained, prefix.lost) == (3, 3, 1)
    assert prefix.sign_test_p == pytest.approx(binomtest(3, 4, 0.5).pvalue)
    assert prefix.control_learned == 1 and prefix.seconds_per_run == 10.0
    low, high = prefix.interval
    assert 0 < low < 0.75 < high < 1  # Clopper-Pearson of 3/4, never zero-width
    assert math.isclose(base.interval[0], binomtest(1, 4).proportion_ci(0.95, "exact").low)


def test_the_table_shows_every_variant_and_pair():
    text = study_markdown(summarise(OUTCOMES), OUTCOMES)
    assert "| prefix | 3/4 |" in text and "+3 / −1" in text
    assert "| `L2` | nope | 45 (not fit) | **learned** |" in text
    assert "`M1`" not in text  # the control is counted, not listed per pair
    piped = [_outcome("atlas recipe", "P(a) | P(b)", True)]
    assert "| `P(a) \\| P(b)` | nope | **learned** |" in study_markdown(summarise(piped), piped)


def test_a_study_without_its_baseline_is_refused():
    with pytest.raises(FormalRopeError, match="baseline"):
        summarise([o for o in OUTCOMES if o.variant != "atlas recipe"])


@pytest.mark.skipif(not any((REPO / "atlas" / "recipe-study" / "runs").glob("*.parquet")),
                    reason="no committed study results")
def test_the_committed_study_reads_back_labelled():
    outcomes = study_outcomes(REPO / "atlas" / "recipe-study", REPO / "sweeps" / "recipe_study.toml")
    assert outcomes and all(o.variant for o in outcomes)
    summaries = summarise(outcomes)
    assert summaries[0].variant == "atlas recipe"
    for s in summaries:
        assert s.learned + s.not_learned_fit + s.not_learned_unfit == s.expressible_pairs
