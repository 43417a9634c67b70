"""Compiled LTL[P,Y,MOD] transformers agree with independent DFAs; certificates are meaningful."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest

from formal_rope.automata import accepts, equivalent, evaluate_ltl, ltl_to_dfa, regex_to_dfa
from formal_rope.compiler import compile_formula, formula_to_dag
from formal_rope.compiler.constructs.mod import mod_parameters
from formal_rope.compiler.examples import LTL_P_MOD_EXAMPLES
from formal_rope.compiler.verify import exhaustive_length, sampled_lengths, verify_compiled
from formal_rope.errors import FormalRopeError
from formal_rope.lang.ast import Atom, Mod, Past, Since
from formal_rope.lang.parser import parse_ltl, parse_regex
from formal_rope.model.evaluate import evaluate
from formal_rope.precision.formats import f_large, parse_format


def _words(alphabet, up_to):
    return [w for n in range(up_to + 1) for w in itertools.product(alphabet, repeat=n)]


@pytest.mark.parametrize("example", LTL_P_MOD_EXAMPLES, ids=lambda e: e.formula)
def test_example_formulas_agree_with_the_dfa_exhaustively_in_fp32(example):
    formula = parse_ltl(example.formula, alphabet=example.alphabet)
    dfa = ltl_to_dfa(formula, example.alphabet)
    if example.regex is not None:  # the formula defines the paper's language
        regex_dfa = regex_to_dfa(parse_regex(example.regex, alphabet=example.alphabet), example.alphabet)
        assert equivalent(dfa, regex_dfa).equivalent
    compiled = compile_formula(formula, example.alphabet, fmt="fp32")
    words = _words(example.alphabet, 8 if len(example.alphabet) < 3 else 5)
    got = evaluate(compiled.ir, words, fmt="fp32", mode="emulated").accepted
    assert np.array_equal(got, accepts(dfa, words))
    assert compiled.certified_length is None  # no Y heads: exact at every length


def test_mod_readout_off_by_one():
    # MOD_2^0 at the readout N+1 means N odd (SPEC section 1).
    compiled = compile_formula(parse_ltl("MOD_2^0", alphabet=("a",)), ("a",))
    assert evaluate(compiled.ir, ["", "a", "aa", "aaa"]).to_list() == [False, True, False, True]
    # MOD at the first position is a compile-time constant: P(a & MOD_3^1) needs a at 1, 4, 7, ...
    compiled = compile_formula(parse_ltl("P(a & MOD_3^1)", alphabet=("a", "b")), ("a", "b"))
    assert evaluate(compiled.ir, ["a", "ba", "bba", "bbba", "b"]).to_list() == [True, False, False, True, False]


@pytest.mark.parametrize("text,alphabet,mode", [("!P((a & MOD_2^0) | (b & MOD_2^1)) & MOD_2^1", ("a", "b"), "emulated"),
                                                 ("P(a & !P(true))", ("a", "b"), "native")])
def test_long_strings_stay_exact_in_fp32(text, alphabet, mode):
    formula = parse_ltl(text, alphabet=alphabet)
    dfa = ltl_to_dfa(formula, alphabet)
    compiled = compile_formula(formula, alphabet)
    from formal_rope.sampling import sample_strings

    rng = np.random.default_rng(3)
    words = []
    for length in (2000,):
        for accepted in (True, False):
            words += [tuple(alphabet[s] for s in row) for row in sample_strings(dfa, length, 1, rng, accepted)]
    assert np.array_equal(evaluate(compiled.ir, words, fmt="fp32", mode=mode).accepted, accepts(dfa, words))


@pytest.mark.parametrize("fmt", ["bf16", "fp16"])
def test_low_precision_formats_compile_exact_models(fmt):
    text, alphabet = "P(a & MOD_3^2) & !P(b & MOD_2^0)", ("a", "b")
    formula = parse_ltl(text, alphabet=alphabet)
    compiled = compile_formula(formula, alphabet, fmt=fmt)
    words = _words(alphabet, 8) + [tuple("b" * 299 + "a")] + [tuple("a" * 300)]
    expected = [evaluate_ltl(formula, w, len(w) + 1) for w in words]
    assert evaluate(compiled.ir, words, fmt=fmt, mode="emulated").to_list() == expected
    assert all(c.margin >= f_large(fmt) for c in compiled.constructs if c.construct in ("P", "MOD"))


def test_mod_scale_meets_the_paper_bound_and_the_realized_margin():
    for fmt in ("fp32", "bf16", "fp16"):
        for m in (2, 3, 5, 7):
            params = mod_parameters(m, 1 % m, parse_format(fmt))
            assert params["scale"] >= 2 * f_large(fmt) / params["delta"]
            assert params["margin"] >= f_large(fmt)


def test_y_head_with_small_certified_range_fails_just_beyond_it():
    # g = 2π/7 + 1e-3 nearly repeats after 7 positions: the key 7 further back ties with the target,
    # so N_max^(1) = n* + k - 2 = 6, and past it the head averages two positions.
    alphabet = ("a", "b")
    formula = parse_ltl("Y(a)", alphabet=alphabet)
    compiled = compile_formula(formula, alphabet, freq=2 * math.pi / 7 + 1e-3, scale=1024.0, certify_max_length=64)
    certified = compiled.certified_length
    y_report = next(c for c in compiled.constructs if c.construct == "Y")
    assert certified == 6 and y_report.certified_ideal == 6
    dfa = ltl_to_dfa(formula, alphabet)
    inside = _words(alphabet, certified)
    assert np.array_equal(evaluate(compiled.ir, inside).accepted, accepts(dfa, inside))
    result = verify_compiled(compiled, exhaustive_up_to=9, verify_to=0)
    assert result.ok  # every disagreement lies outside the certified range
    first = result.first_disagreement
    assert first is not None and first.length == certified + 2 and not first.inside_certified_range
    assert (first.string, first.expected, first.got) == ("aaaaaaab", False, True)


@pytest.mark.parametrize("fmt,scale", [("fp32", 2.0**16), ("fp16", 2048.0), ("bf16", 256.0)])
def test_realized_certificate_matches_the_models_own_scores(fmt, scale):
    # certify's realized N_max must be exactly where the compiled head's own scores first let a
    # competitor come within f_large of the target (query i = N_max + 2); in fp16 this is below
    # the ideal range (27 vs 43), so realized and ideal genuinely differ there.
    from formal_rope.model.evaluate import attention_scores

    compiled = compile_formula(parse_ltl("Y(a)", alphabet=("a", "b")), ("a", "b"), fmt=fmt, scale=scale,
                               certify_max_length=300)
    report = compiled.constructs[0]
    certified = compiled.certified_length
    scores = attention_scores(compiled.ir, "b" * (certified + 3), 0, 0, fmt)
    margin = f_large(fmt)
    first_failure = next(
        i for i in range(2, certified + 5)
        if (scores[i, i - 1] - np.delete(scores[i, :i], i - 1) < margin).any()
    )
    assert first_failure == certified + 2
    assert report.certified_ideal >= certified
    if fmt == "fp16":
        assert (certified, report.certified_ideal) == (27, 43)


def test_constructs_without_construction_and_bad_parameters_are_user_errors():
    with pytest.raises(FormalRopeError, match="S \\(since\\)"):
        compile_formula(Since(Atom("a"), Atom("b")), ("a", "b"))
    with pytest.raises(FormalRopeError, match="modulus"):
        formula_to_dag(Mod(0, 1), ("a",))
    with pytest.raises(FormalRopeError, match="unknown floating-point format"):
        compile_formula(Past(Atom("a")), ("a",), fmt="fp7")
    with pytest.raises(FormalRopeError, match="scale"):
        compile_formula(parse_ltl("Y(a)", alphabet=("a", "b")), ("a", "b"), scale=-1.0)
    with pytest.raises(FormalRopeError, match="not in the alphabet"):
        compile_formula(Past(Atom("c")), ("a", "b"))
    with pytest.raises(FormalRopeError, match="MOD_200"):
        mod_parameters(200, 1, parse_format("fp16"))  # C ≈ 2·17.3/δ_200 overflows fp16


def test_constant_folding_and_sharing():
    dag = formula_to_dag(parse_ltl("(P(a) & false) | (P(a) & MOD_1^0)", alphabet=("a",)), ("a",))
    kinds = [node.kind for node in dag.nodes]
    assert kinds.count("past") == 1 and "mod" not in kinds and "false" not in kinds


def test_verification_lengths_and_budget():
    assert exhaustive_length(2, 10) == 10 and exhaustive_length(3, 10) == 7 and exhaustive_length(26, 10) == 2
    lengths = sampled_lengths(10, 2000, extra=(709, 710, 711, 5000))
    assert lengths[0] > 10 and lengths[-1] == 2000 and {709, 710, 711} <= set(lengths) and 5000 not in lengths


def test_p_heads_in_narrow_formats_report_where_the_softmax_denominator_overflows():
    # Regression: in formats with max_finite < 2^(M+1) the sum of the tied exp(0) = 1 terms of a
    # P head overflows (1/inf = 0 wipes the weights), yet the model claimed exactness at every length.
    from formal_rope.precision import ones_sum_overflow
    from formal_rope.precision.formats import parse_format

    assert ones_sum_overflow(parse_format("fp16")) is None and ones_sum_overflow(parse_format("bf16")) is None
    assert ones_sum_overflow(parse_format("fp8e4m3")) is None  # stalls at 16 < 240
    assert ones_sum_overflow(parse_format("e3m4")) == 16 and ones_sum_overflow(parse_format("e4m10")) == 256
    compiled = compile_formula(parse_ltl("P(a)", ("a", "b")), ("a", "b"), fmt="e3m4")
    assert compiled.certified_length == 14 and not compiled.certified_length_is_lower_bound
    # Tight: bos plus 14 ψ-positions still count exactly, 15 overflow.
    got = evaluate(compiled.ir, ["a" * 14, "a" * 15, "b" * 15 + "a"], fmt="e3m4").to_list()
    assert got == [True, False, True]
    assert compile_formula(parse_ltl("P(a)", ("a", "b")), ("a", "b"), fmt="fp16").certified_length is None


def test_disagreement_strings_are_written_as_accepts_reads_them():
    # A symbol with a blank must come back quoted, and an all-single-character word over a
    # multi-character alphabet must stay blank-separated, or the reported string is unreadable.
    from formal_rope.automata.membership import split_symbols
    from formal_rope.compiler import verify_compiled

    alphabet = ("a", "b b")
    compiled = compile_formula(parse_ltl("P(a) & MOD_3^1", alphabet=alphabet), alphabet, fmt="e3m4")
    result = verify_compiled(compiled, verify_to=80, per_length=8, seed=0)
    assert result.first_disagreement is not None
    shown = result.first_disagreement.string
    assert "'b b'" in shown or shown.split() == ["a"] * len(shown.split())
    assert len(split_symbols(shown, alphabet)) == result.first_disagreement.length
