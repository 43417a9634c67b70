"""RunConfig values (canonical fields, sparse test lengths, typed settings), the up-front workload
limits, and the notes on settings without effect (issues 9 and 12)."""

from __future__ import annotations

import pytest

from formal_rope.errors import FormalRopeError
from formal_rope.run_config.config import RunConfig
from formal_rope.run_config.fields import parse_field_text
from formal_rope.run_config.text import lengths_fields
from formal_rope.scheduling.workload import FLOP_LIMIT, check_workload, estimate
from formal_rope.training.scales import apply_scale


def test_configs_are_canonical_and_typed():
    assert RunConfig("(ab)*", steps=1e3, lr=1).steps == 1000 and isinstance(RunConfig("(ab)*", lr=1).lr, float)
    assert RunConfig("(ab)*", lr=1).run_id() == RunConfig("(ab)*", lr=1.0).run_id()
    for bad, message in [({"steps": "5"}, "steps must be an integer"), ({"lr": "x"}, "lr must be a number"),
                         ({"layers": True}, "layers must be an integer"), ({"periods": [2.5]}, "periods must be"),
                         ({"pe": 3}, "pe must be a string"), ({"test_lengths": []}, "test_lengths must be")]:
        with pytest.raises(FormalRopeError, match=message):
            RunConfig("(ab)*", **{"pe": "rope_p", **bad})
    config = RunConfig("(ab)*", pe="nope", base=5.0, rope_fraction=0.1, phase_precision="fp32", periods=(2,))
    assert config == RunConfig("(ab)*", pe="nope")
    assert {config.to_dict()[name] for name in ("base", "rope_fraction", "phase_precision", "periods")} == {None}
    assert RunConfig.from_dict(config.to_dict()) == config
    assert RunConfig("(ab)*", pe="rope", base=None).base == 1e4  # None means the default


def test_sparse_test_lengths_are_sorted_and_a_contiguous_list_is_a_range():
    sparse = RunConfig("(ab)*", test_lengths=[50, 41, 45, 45])
    assert sparse.test_lengths == (41, 45, 50) and list(sparse.tested_lengths()) == [41, 45, 50]
    assert (sparse.test_min_length, sparse.test_max_length) == (41, 50)
    contiguous = RunConfig("(ab)*", test_lengths=(43, 41, 42))
    assert contiguous == RunConfig("(ab)*", test_min_length=41, test_max_length=43)
    assert contiguous.tested_lengths() == range(41, 44)
    huge = RunConfig("(ab)*", test_min_length=41, test_max_length=10**15)
    assert isinstance(huge.tested_lengths(), range)  # never materialised
    assert sparse.with_(test_max_length=60).tested_lengths() == range(41, 61)  # a range replaces the list


def test_length_and_field_text_parsers():
    assert lengths_fields("41..500") == {"test_min_length": 41, "test_max_length": 500, "test_lengths": None}
    assert lengths_fields("41..43,50") == {"test_lengths": (41, 42, 43, 50)}
    assert lengths_fields("0..40", "--train-lengths", prefix="train") == {"train_min_length": 0, "train_max_length": 40}
    assert parse_field_text("periods", "[2,3]") == (2, 3) and parse_field_text("periods", "auto") is None
    assert parse_field_text("alphabet", "ab") == ("a", "b") and parse_field_text("test_lengths", "41..43") == (
        41, 42, 43
    )
    for text in ("50..41", "-3", "x", ""):
        with pytest.raises(FormalRopeError):
            lengths_fields(text)


def test_workload_refuses_what_cannot_finish_or_fit_and_accepts_the_papers_scale():
    paper = apply_scale(RunConfig("(ab)*"), "paper")
    quick = apply_scale(RunConfig("(ab)*"), "quick")
    assert check_workload(paper).flops < FLOP_LIMIT / 1000  # a paper run is GPU-scale, far from the limit
    assert 1 < check_workload(quick).cpu_seconds() < 1000  # a quick run takes about a minute on one core
    assert estimate(quick.with_(steps=2000)).training_flops == pytest.approx(2 * estimate(quick).training_flops)
    sparse = quick.with_(test_lengths=(41, 500))
    assert estimate(sparse).evaluation_flops < estimate(quick).evaluation_flops / 100
    with pytest.raises(FormalRopeError, match="cannot finish.*years on one CPU core.*Shrink the training"):
        check_workload(quick.with_(steps=10**20))
    with pytest.raises(FormalRopeError, match="cannot finish.*Shrink the evaluation"):
        check_workload(quick.with_(test_max_length=10**11))
    with pytest.raises(FormalRopeError, match="cannot fit in memory.*longest length 500"):
        check_workload(quick, memory=1 << 20)
    with pytest.raises(FormalRopeError, match="cannot fit in memory"):
        check_workload(quick.with_(d_model=1 << 20, heads=1, steps=0, test_max_length=41), memory=1 << 40)


def test_periods_are_refused_when_their_tables_cannot_be_built_or_a_period_would_be_dropped():
    # Regression: periods=10^11 passed every check and raised MemoryError (a 745 GiB table) inside the
    # run, 10^23 an OverflowError; a period beyond the number of rotary pairs was silently unused.
    from formal_rope.run_config.config import check_config
    from formal_rope.run_config.rules import MAX_PERIOD, check_periods
    from formal_rope.training.encodings.builders import PositionalSpec, build_positional
    from formal_rope.training.encodings.periods import assign_periods

    tiny = RunConfig("(ab)*", pe="rope_p", layers=1, d_model=16, heads=2, steps=5, test_max_length=45,
                     n_per_length=4, periods=(2,))
    for huge in (10**11, 10**23, MAX_PERIOD + 1):
        for pe in ("rope_p", "sipe_p"):
            with pytest.raises(FormalRopeError, match="too large"):
                check_config(tiny.with_(pe=pe, periods=(2, huge)))
    assert check_periods((MAX_PERIOD,)) == (MAX_PERIOD,)  # allowed where memory allows its tables:
    check_workload(tiny.with_(periods=(MAX_PERIOD,)), memory=1 << 40)
    table = estimate(tiny.with_(periods=(MAX_PERIOD,))).table_bytes
    assert table == pytest.approx(32 * 4 * MAX_PERIOD)  # 4 pairs per head, one entry per residue
    with pytest.raises(FormalRopeError, match="lookup tables hold one rotation per residue of period 134,217,728"):
        check_workload(tiny.with_(periods=(MAX_PERIOD,)), memory=table // 2)
    assert estimate(tiny).table_bytes == 32 * 4 * 2 and estimate(tiny.with_(pe="rope")).table_bytes == 0
    # Pairs: rope_p has (d_model / heads) / 2 per head, sipe_p d_model / 2.
    check_config(tiny.with_(periods=(2, 3, 5, 7)))
    check_config(tiny.with_(periods=(2, 3)))  # fewer periods than pairs are repeated round-robin
    with pytest.raises(FormalRopeError, match=r"5 periods \(2,3,5,7,11\) but rope_p .* 4 rotary pairs per head.*"
                                              r"11 would never be used. Give at most 4 periods"):
        check_config(tiny.with_(periods=(2, 3, 5, 7, 11)))
    check_config(tiny.with_(pe="sipe_p", periods=(2, 3, 5, 7, 11, 13, 17, 19)))
    with pytest.raises(FormalRopeError, match="sipe_p with d_model 16 has 8 sin/cos pairs.*23 would never be used"):
        check_config(tiny.with_(pe="sipe_p", periods=(2, 3, 5, 7, 11, 13, 17, 19, 23)))
    # The library's own building blocks refuse it too, rather than spreading 5 periods over 4 pairs.
    with pytest.raises(FormalRopeError, match="would never be used"):
        assign_periods((2, 3, 5, 7, 11), 4)
    with pytest.raises(FormalRopeError, match="4 rotary pairs per head"):
        build_positional(PositionalSpec("rope_p", d_model=16, heads=2, layers=1, periods=(2, 3, 5, 7, 11)))


def test_test_blocks_follow_the_sparse_list_and_match_the_range_sets():
    import numpy as np

    from formal_rope.training.data import test_length_blocks
    from formal_rope.training.resolve import resolve_dfa

    config = RunConfig("(ab)*", n_per_length=8, test_lengths=(41, 45, 50))
    sparse = list(test_length_blocks(resolve_dfa(config), config))
    dense = {s.length: s for s in test_length_blocks(resolve_dfa(config), config.with_(test_max_length=50))}
    assert [s.length for s in sparse] == [41, 45, 50]
    for labelled in sparse:  # the strings of a length depend only on eval_seed and the length
        assert np.array_equal(labelled.symbols, dense[labelled.length].symbols)


def test_periods_auto_outside_ltl_p_mod_is_an_error_and_period_one_is_noted():
    from formal_rope.training.context import context_notes
    from formal_rope.training.resolve import resolve_dfa, resolve_periods

    config = RunConfig("Σ*a", pe="rope_p")
    with pytest.raises(FormalRopeError, match="not in LTL\\[P,MOD\\].*--periods"):
        resolve_periods(config, resolve_dfa(config))
    assert resolve_periods(config.with_(periods=(2,)), resolve_dfa(config)) == (2,)
    ltl_p = RunConfig("aΣ*", pe="rope_p")
    periods = resolve_periods(ltl_p, resolve_dfa(ltl_p))
    # Issue 43.4: auto never gives period 1 (NoPE again); an LTL[P] language gets 2, and a note says so
    notes = context_notes(ltl_p, resolve_dfa(ltl_p), periods)
    assert periods == (2,) and any("periods auto resolved to 2" in n for n in notes)
    assert not any("this run is NoPE" in n for n in notes)
    for pe in ("rope_p", "sipe_p"):
        assert resolve_periods(RunConfig("aΣ*", pe=pe), resolve_dfa(ltl_p)) == (2,)
    explicit = ltl_p.with_(periods=(1,))
    assert any("this run is NoPE" in n for n in context_notes(explicit, resolve_dfa(ltl_p), (1,)))
    parity = RunConfig("(ab)*", pe="rope_p")
    assert context_notes(parity, resolve_dfa(parity), resolve_periods(parity, resolve_dfa(parity))) == []


def test_near_miss_training_negatives_without_near_misses_are_noted():
    from formal_rope.training.context import context_notes
    from formal_rope.training.resolve import resolve_dfa

    unary = RunConfig("(aa)*", pe="nope", train_near_miss_fraction=0.5)  # over {a}: no substitution exists
    assert any("has no effect" in note for note in context_notes(unary, resolve_dfa(unary), None))
    binary = RunConfig("(ab)*", pe="nope", train_near_miss_fraction=0.5)
    assert context_notes(binary, resolve_dfa(binary), None) == []


def test_a_warm_up_longer_than_training_is_noted():
    from formal_rope.training.context import context_notes
    from formal_rope.training.resolve import resolve_dfa

    config = RunConfig("(ab)*", pe="nope", steps=10, warmup_steps=10, lr_schedule="cosine")
    notes = context_notes(config, resolve_dfa(config), None)
    assert len(notes) == 1 and "never reaches lr" in notes[0] and "cosine schedule has no effect" in notes[0]
    assert context_notes(config.with_(warmup_steps=5), resolve_dfa(config), None) == []
