"""Issue 43.5: strings are shown in full, run-length compressed or visibly cut (one helper,
`sampling.text.shown_string`, in the terminal, Markdown and the results page), and rates of counts
get exact Clopper–Pearson intervals (never a zero-width bootstrap of all-equal outcomes)."""

from __future__ import annotations

import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy.stats import binomtest

from formal_rope.atlas.agreement import _interval
from formal_rope.atlas.render import _interval as interval_text
from formal_rope.atlas.render import _string
from formal_rope.sampling.text import CUT_MARK, SHOWN_LIMIT, expand_run_length, run_length, shown_string
from formal_rope.sweeps.statistics import proportion_interval

single = st.text(alphabet="abc", max_size=300)
spaced = st.lists(st.sampled_from(["foo", "bar", "long"]), min_size=1, max_size=80).map(" ".join)


@settings(max_examples=300, deadline=None)
@given(st.one_of(single, spaced))
def test_run_length_round_trips(text):
    form = run_length(text)
    assert expand_run_length(form) == text
    shown = shown_string(text)
    # shown in full, or as its run-length form, or cut with the visible mark
    assert shown in (text or "ε", form) or CUT_MARK in shown
    if CUT_MARK not in shown:
        assert expand_run_length(shown) == text


@settings(max_examples=200, deadline=None)
@given(single)
def test_a_cut_says_how_much_it_leaves_out(text):
    shown = shown_string(text, limit=30)
    if CUT_MARK in shown:
        start, _, rest = shown.partition(f" {CUT_MARK} (+")
        left_out, _, total = rest.removesuffix(" symbols not shown)").partition(" of ")
        assert int(total) == len(text) and len(shown) <= 30 + 20
        # the part shown is the string's start, and the count left out completes it
        assert len(expand_run_length(start)) + int(left_out) == len(text)
        assert text.startswith(expand_run_length(start))


def test_the_issue_s_string_reads_as_itself():
    text = "b" * 39 + "ab"  # a positive of its language; cut to 40 characters it read 'bbb…ba'
    assert run_length(text) == "b^39 a b" and shown_string(text, limit=40) == "b^39 a b"
    assert _string(text) == "`b^39 a b` (len 41)"
    assert shown_string("") == "ε" and shown_string("ab") == "ab"
    assert shown_string("a" * (SHOWN_LIMIT + 1)) == f"a^{SHOWN_LIMIT + 1}"


@pytest.mark.parametrize("k, n", [(0, 40), (40, 40), (3, 10), (1, 2), (17, 51), (0, 1)])
def test_clopper_pearson_matches_scipy_binomtest(k, n):
    interval = proportion_interval(k, n)
    expected = binomtest(k, n).proportion_ci(confidence_level=0.95, method="exact")
    assert math.isclose(interval.low, expected.low, abs_tol=1e-12)
    assert math.isclose(interval.high, expected.high, abs_tol=1e-12)
    assert interval.high > interval.low  # never zero-width


def test_zero_of_forty_is_not_zero_to_zero():
    interval = _interval([False] * 40, 0.95)
    assert interval["method"] == "clopper-pearson" and interval["low"] == 0
    assert math.isclose(interval["high"], 1 - 0.025 ** (1 / 40))
    assert interval_text(interval) == "0%–8.8%"
    assert interval_text(_interval([True] * 40, 0.95)) == "91.2%–100%"


def test_fractional_counts_stay_conservative():
    # per-language rates of 2 seeds: the sum of rates as the count, between the whole counts around it
    rates = [0.5, 1.0, 0.0, 0.5]
    interval = proportion_interval(sum(rates), len(rates))
    below, above = proportion_interval(1, 4), proportion_interval(3, 4)
    assert below.low <= interval.low <= above.low and below.high <= interval.high <= above.high
    with pytest.raises(ValueError):
        proportion_interval(5, 4)
    assert proportion_interval(0, 0).method == "none"


def test_the_page_and_the_report_show_strings_through_the_helper():
    import pandas as pd

    from formal_rope.sweeps.results_page import _runs_table

    text = "b" * 39 + "ab"
    runs = pd.DataFrame([{"pe": "nope", "seed": 0, "n_star": 40, "status": "ok", "run_id": "x",
                          "worst_failure": text, "first_failure": "ab" * 60}])
    page = _runs_table(runs, "runs")
    assert "<code title=\"" + text + "\">b^39 a b</code>" in page
    assert f"abab {CUT_MARK} (+74 of 120 symbols not shown)" in page  # cut, and the cut says so
