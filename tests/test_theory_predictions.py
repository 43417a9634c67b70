"""The theory's predictions (formal_rope.theory): the papers' statements on known languages, and
properties the theorems imply, cross-checked against independent deciders (explicit k-automata)."""

from __future__ import annotations

import math
import subprocess
import sys
from functools import lru_cache
from itertools import product

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from formal_rope.automata import DFA, language_dfa, load_att, minimize
from formal_rope.classes import classify, is_podfa, k_automaton
from formal_rope.errors import FormalRopeError
from formal_rope.lang.source import resolve_language
from formal_rope.run_config.config import RunConfig
from formal_rope.run_config.encodings import ENCODINGS
from formal_rope.theory import (
    BOUNDED,
    EXPRESSIBLE,
    NO_PREDICTION,
    NOT_EXPRESSIBLE,
    PREDICTION_COLUMNS,
    VERDICTS,
    LanguageFacts,
    PositionalScheme,
    Prediction,
    mlregtest_ltl_p_y,
    predict,
    predict_run,
)
from formal_rope.theory.locality import is_locally_testable, ltl_p_y_of, maps_commute
from formal_rope.theory.predictions import ENCODING_KINDS

E, B, N, X = EXPRESSIBLE, BOUNDED, NOT_EXPRESSIBLE, NO_PREDICTION

# The known languages: (expression or MLRegTest file, alphabet). Σ*abΣ* over {a, b, c}: over {a, b}
# it is Σ*aΣ*bΣ*, in LTL[P] (docs/classes.md); the paper's Prop. B.2 takes |Σ| > 2.
LANGUAGES = {
    "(aa)*": ("(aa)*", None),
    "(ab)*": ("(ab)*", None),
    "aΣ*": ("aΣ*", "ab"),
    "Σ*a": ("Σ*a", "ab"),
    "Σ*abΣ*": ("Σ*abΣ*", "abc"),
    "parity": ("parity", None),
    "SP": ("04.04.SP.2.1.0.att", None),  # strictly piecewise: in LTL[P] (MLRegTest README)
    "SL": ("04.04.SL.2.1.0.att", None),  # strictly local: locally testable, not LTL[P]
}


@lru_cache(maxsize=None)
def language(name: str):
    """(minimal DFA, classification, LTL[P,Y] membership as far as known) of a named language."""
    source, alphabet = LANGUAGES[name]
    if source.endswith(".att"):
        from pathlib import Path

        dfa = load_att(Path(__file__).resolve().parent.parent / "data" / "mlregtest" / source)
    else:
        dfa = language_dfa(resolve_language(source, tuple(alphabet) if alphabet else None))
    classification = classify(dfa)
    return dfa, classification, ltl_p_y_of(dfa, classification)


def verdict(name: str, scheme: PositionalScheme) -> Prediction:
    _, classification, ltl_p_y = language(name)
    return predict(classification, scheme, ltl_p_y=ltl_p_y)


def test_the_deciders_verdicts_are_the_papers_classes():
    """Table 1 of the core paper and App. B.1 (and MLRegTest's README): what the rules below read."""
    facts = {name: language(name)[1] for name in LANGUAGES}
    assert [(facts[n].ltl_p, facts[n].mod_k, facts[n].star_free) for n in LANGUAGES] == [
        (False, 2, False),  # (aa)*: LTL[P,MOD], not star-free
        (False, 2, True),  # (ab)*: LTL[P,MOD], not LTL[P]
        (True, 1, True),  # aΣ*: LTL[P]
        (False, None, True),  # Σ*a: LTL[Y], not LTL[P]
        (False, None, True),  # Σ*abΣ*: locally testable, not LTL[P,MOD] (Prop. B.2)
        (False, None, False),  # parity: not LTL[P,MOD] (Prop. B.3)
        (True, 1, True),  # SP
        (False, None, True),  # SL
    ]
    # LTL[P,Y] as far as known: Σ*a = Y π_a and Σ*abΣ* = P(π_b ∧ Y π_a) are in it (Table 1), and so is
    # every locally testable language; (aa)* and parity are not star-free, so not in it.
    assert {name: language(name)[2] for name in LANGUAGES} == {
        "(aa)*": False, "(ab)*": True, "aΣ*": True, "Σ*a": True, "Σ*abΣ*": True, "parity": False, "SP": True,
        "SL": True,
    }


NOPE = PositionalScheme.single("nope", layers=2)
ROPE_P_AUTO = PositionalScheme.single("rope_p", layers=2)
ROPE_P_WRONG = PositionalScheme.single("rope_p", layers=2, periods=(3,))  # k = 2 does not divide 3
ROPE_P_RIGHT = PositionalScheme.single("rope_p", layers=2, periods=(4, 3))  # lcm 12: every k ∈ {1, 2}
SIPE_P_AUTO = PositionalScheme.single("sipe_p", layers=2)
ROPE_1E4 = PositionalScheme.single("rope", layers=2)
PARTIAL = PositionalScheme.single("partial_rope", layers=2, rotated_pairs=2, pairs=4)
WINDOWED_HYBRID = PositionalScheme(("rope", "nope"), (8, None))  # findings' windowed RoPE_NP + global NoPE
ROPE_P_NOPE = PositionalScheme(("rope_p", "nope"), (None, None), periods=(2,))
ROPE_NOPE = PositionalScheme(("rope", "nope"), (None, None))

# The papers' statements, language by language (columns in LANGUAGES' order):
# (aa)*, (ab)*, aΣ*, Σ*a, Σ*abΣ*, parity, SP, SL.
EXPECTED = {
    # Li & Cotterell: NoPE = LTL[P].
    "nope": (NOPE, (N, N, E, N, N, N, E, N)),
    # Thm 3.1 with the least k (auto), at least 2: LTL[P] languages get period 2 (1 divides 2).
    "rope_p auto": (ROPE_P_AUTO, (E, E, E, N, N, N, E, N)),
    # Lemma 3.1: periods 3 keep the model inside PFO²[<,MOD_3], which lacks the k = 2 languages.
    "rope_p 3": (ROPE_P_WRONG, (N, N, E, N, N, N, E, N)),
    "rope_p 4,3": (ROPE_P_RIGHT, (E, E, E, N, N, N, E, N)),
    # Thm 3.2: SiPE_P has RoPE_P's class.
    "sipe_p auto": (SIPE_P_AUTO, (E, E, E, N, N, N, E, N)),
    # Prop. 4.1 + Cor. 4.1: LTL[P,Y] only up to N_max; nothing proved outside it.
    "rope 1e4": (ROPE_1E4, (X, B, B, B, B, X, B, B)),
    # Partial RoPE keeps NoPE's LTL[P] at every length (§2.3) and adds Y up to N_max (Cor. 4.1).
    "partial_rope": (PARTIAL, (X, B, E, B, B, X, E, B)),
    # Windowed RoPE_NP + global NoPE (findings, Hybrid models): LTL[P,Y] at every length, no period.
    "windowed hybrid": (WINDOWED_HYBRID, (X, E, E, E, E, X, E, E)),
    # RoPE_P + NoPE: inside LTL[P,MOD_2] and able to build all of it.
    "rope_p + nope": (ROPE_P_NOPE, (E, E, E, N, N, N, E, N)),
    # RoPE_NP + global NoPE: the NoPE layer gives P at every length, Y stays bounded.
    "rope + nope": (ROPE_NOPE, (X, B, E, B, B, X, E, B)),
}


@pytest.mark.parametrize("model", list(EXPECTED))
def test_predictions_on_known_languages_are_the_papers_statements(model):
    scheme, expected = EXPECTED[model]
    got = tuple(verdict(name, scheme).verdict for name in LANGUAGES)
    assert dict(zip(LANGUAGES, got)) == dict(zip(LANGUAGES, expected))


def test_citations_name_the_theorem_that_gives_each_verdict():
    assert verdict("aΣ*", NOPE).citation.startswith("Li & Cotterell 2025")
    assert verdict("(aa)*", NOPE).citation.startswith("Li & Cotterell 2025")
    assert "Thm 3.1" in verdict("(ab)*", ROPE_P_AUTO).citation
    assert "Thm 3.2" in verdict("(ab)*", SIPE_P_AUTO).citation
    assert "Lemma 3.1" in verdict("(ab)*", ROPE_P_WRONG).citation
    assert "Cor. 4.1" in verdict("Σ*a", ROPE_1E4).citation
    assert "Prop. 4.1" in verdict("(aa)*", ROPE_1E4).citation
    # auto on an LTL[P] language resolves to period 2 (never 1, which is NoPE): Thm 3.1 still gives it.
    assert "Thm 3.1" in verdict("aΣ*", ROPE_P_AUTO).citation
    assert "k = 1 divides lcm(periods 2) = 2" in verdict("aΣ*", ROPE_P_AUTO).reason
    # explicit period 1 is still NoPE, and so is the citation.
    assert verdict("aΣ*", PositionalScheme.single("rope_p", periods=(1,))).citation.startswith("Li & Cotterell")
    # The paper's statements are not derived; the project's readings of them are flagged.
    assert not verdict("(ab)*", ROPE_P_AUTO).derived and not verdict("Σ*a", PARTIAL).derived
    assert verdict("(ab)*", ROPE_P_WRONG).derived and verdict("Σ*a", ROPE_1E4).derived
    assert all(verdict(name, WINDOWED_HYBRID).derived for name in LANGUAGES)
    assert "k = 2 does not divide lcm(periods 3) = 3" in verdict("(aa)*", ROPE_P_WRONG).reason


def test_unknown_ltl_p_y_gives_no_prediction_for_conventional_rope():
    # Without the locality test, Σ*a's LTL[P,Y] membership is unknown to the decider's verdicts.
    _, classification, _ = language("Σ*a")
    assert predict(classification, ROPE_1E4).verdict == NO_PREDICTION
    assert predict(classification, ROPE_1E4, ltl_p_y=True).verdict == BOUNDED
    assert predict(classification, NOPE).verdict == NOT_EXPRESSIBLE  # NoPE's verdict needs no LTL[P,Y]


def test_sipe_np_and_joformer_have_no_prediction():
    for pe in ("sipe", "jof_fixed", "jof_learned", "jof_projected"):
        scheme = PositionalScheme.single(pe, layers=2)
        assert {verdict(name, scheme).verdict for name in LANGUAGES} == {NO_PREDICTION}, pe


def test_every_registry_encoding_has_a_rule():
    assert set(ENCODINGS) == set(ENCODING_KINDS)


def test_a_new_encoding_name_gets_no_prediction():
    result = verdict("aΣ*", PositionalScheme.single("alibi"))
    assert result.verdict == NO_PREDICTION and "alibi" in result.reason


def test_partial_rope_rotating_nothing_or_everything_is_nope_or_rope():
    for name in LANGUAGES:
        assert verdict(name, PositionalScheme.single("partial_rope", rotated_pairs=0, pairs=4)).verdict == \
            verdict(name, NOPE).verdict
        assert verdict(name, PositionalScheme.single("partial_rope", rotated_pairs=4, pairs=4)).verdict == \
            verdict(name, ROPE_1E4).verdict


# ------------------------------------------------------------------------------ from a RunConfig
def test_predict_run_reads_a_run_config():
    _, classification, ltl_p_y = language("(ab)*")
    run = RunConfig("(ab)*", pe="rope_p", layers=2, d_model=32, heads=4)
    assert predict_run(classification, run).verdict == EXPRESSIBLE  # auto: k = 2
    assert predict_run(classification, run.with_(periods=(3,))).verdict == NOT_EXPRESSIBLE
    assert predict_run(classification, run.with_(periods=(3,)), resolved_periods=(6,)).verdict == EXPRESSIBLE
    assert predict_run(classification, run.with_(pe="nope")).verdict == NOT_EXPRESSIBLE
    assert predict_run(classification, run.with_(pe="rope"), ltl_p_y=ltl_p_y).verdict == BOUNDED
    hybrid = RunConfig("(ab)*", layer_pe=("rope", "nope"), window=(8, -1), layers=2, d_model=32, heads=4)
    assert PositionalScheme.of_config(hybrid).layer_windows == (8, None)
    assert predict_run(classification, hybrid, ltl_p_y=ltl_p_y).verdict == EXPRESSIBLE
    # partial_rope's rotated pairs follow training's rule: 0.5 of 4 pairs per head (d_model 32, 4 heads) = 2.
    partial = RunConfig("aΣ*", alphabet=("a", "b"), pe="partial_rope", rope_fraction=0.5, layers=2, d_model=32,
                        heads=4)
    assert PositionalScheme.of_config(partial).rotated_pairs == 2
    assert predict(language("aΣ*")[1], partial).verdict == EXPRESSIBLE  # a RunConfig works as the scheme too


def test_prediction_columns_and_validation():
    prediction = verdict("(ab)*", ROPE_P_AUTO)
    columns = prediction.columns()
    assert tuple(columns) == PREDICTION_COLUMNS == ("predicted", "predicted_by", "predicted_reason")
    assert columns["predicted"] == EXPRESSIBLE and "Thm 3.1" in columns["predicted_by"]
    assert verdict("(ab)*", ROPE_P_WRONG).columns()["predicted_by"].endswith("[derived]")
    assert set(VERDICTS) == {E, B, N, X}
    with pytest.raises(ValueError):
        Prediction("maybe", "x", "y")
    with pytest.raises(FormalRopeError):
        LanguageFacts(ltl_p=True, ltl_p_mod=True, mod_k=2, star_free=True)
    with pytest.raises(FormalRopeError):
        LanguageFacts(ltl_p=False, ltl_p_mod=False, mod_k=None, star_free=False, ltl_p_y=True)
    with pytest.raises(FormalRopeError):
        PositionalScheme(("nope", "rope"), (None,))


def test_the_module_imports_neither_torch_nor_numpy():
    code = ("import sys, formal_rope.theory; "
            "print(sorted(m for m in ('torch', 'numpy', 'pandas') if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"


# ---------------------------------------------------------------------------------- properties
def random_dfa(seed: int) -> DFA:
    rng = np.random.default_rng(seed)
    n_states = int(rng.integers(2, 7))
    n_symbols = int(rng.integers(2, 4))
    transitions = rng.integers(0, n_states, size=(n_states, n_symbols))
    return DFA(tuple("abc"[:n_symbols]), transitions, 0, rng.random(n_states) < 0.5)


# Languages of LTL[P,MOD] \ LTL[P] with k = 2..6, which random DFAs rarely are.
MODULAR = ["(aa)*", "(ab)*", "(aaa)*", "(abc)*", "(aaaa)*", "(ab)*c", "(aaaaa)*", "(aaaaaa)*", "a(bb)*"]


@lru_cache(maxsize=None)
def modular(index: int):
    dfa = minimize(language_dfa(resolve_language(MODULAR[index])))
    return dfa, classify(dfa)


@settings(max_examples=60, deadline=None)
@given(st.integers(0, 10**6), st.lists(st.integers(1, 6), min_size=1, max_size=3))
def test_rope_p_verdict_is_the_explicit_k_automaton(seed, periods):
    """expressible ⇔ the M-automaton A_M (M = lcm(periods)) is a PODFA, checked on A_M built explicitly
    over the block alphabet Σ^M (`k_automaton`, all states), independently of the decider's least k;
    otherwise not expressible (Lemma 3.1's upper bound)."""
    modulus = math.lcm(*periods)
    dfa = minimize(random_dfa(seed))
    for candidate, facts in [(dfa, classify(dfa)), *(modular(i) for i in range(len(MODULAR)))]:
        if len(candidate.alphabet) ** modulus > 4096:
            expected = is_podfa(candidate, modulus)  # the product-graph criterion (too many blocks to list)
        else:
            expected = is_podfa(k_automaton(candidate, modulus), 1)
        got = predict(facts, PositionalScheme.single("rope_p", periods=periods)).verdict
        assert got == (EXPRESSIBLE if expected else NOT_EXPRESSIBLE), (MODULAR, periods)


P_CAPABLE_SCHEMES = [
    PositionalScheme.single("nope"),
    PositionalScheme.single("rope_p", periods=(2,)),
    PositionalScheme.single("rope_p", periods=(1, 3)),
    PositionalScheme.single("sipe_p", periods=(5,)),
    PositionalScheme.single("partial_rope", rotated_pairs=1, pairs=4),
    PositionalScheme(("rope", "nope"), (None, None)),
    PositionalScheme(("rope", "rope", "nope"), (8, 8, None)),
    PositionalScheme(("jof_fixed", "nope"), (32, None)),
    PositionalScheme(("rope_p", "nope"), (None, None), periods=(3,)),
]
NO_UPPER_BOUND_SCHEMES = [
    PositionalScheme.single("rope"),
    PositionalScheme.single("partial_rope", rotated_pairs=2, pairs=4),
    PositionalScheme(("rope", "nope"), (8, None)),
    PositionalScheme(("nope", "nope"), (4, None)),
    PositionalScheme.single("sipe"),
    PositionalScheme.single("jof_projected"),
]


@settings(max_examples=60, deadline=None)
@given(st.integers(0, 10**6))
def test_properties_the_theorems_imply(seed):
    dfa = minimize(random_dfa(seed))
    facts = classify(dfa)
    ltl_p_y = ltl_p_y_of(dfa, facts)
    # NoPE ⊆ every family that can run its construction: an LTL[P] language is expressible in each.
    if facts.ltl_p:
        for scheme in P_CAPABLE_SCHEMES:
            assert predict(facts, scheme, ltl_p_y=ltl_p_y).verdict == EXPRESSIBLE, scheme
    # Only an upper bound proves inexpressibility, and windows and non-periodic rotations have none.
    for scheme in NO_UPPER_BOUND_SCHEMES:
        assert predict(facts, scheme, ltl_p_y=ltl_p_y).verdict != NOT_EXPRESSIBLE, scheme
    # NoPE's and RoPE_P's verdicts never hedge: the classes are exact.
    for scheme in (NOPE, ROPE_P_AUTO, ROPE_P_WRONG, ROPE_P_NOPE):
        assert predict(facts, scheme, ltl_p_y=ltl_p_y).verdict in (EXPRESSIBLE, NOT_EXPRESSIBLE)
    # More periods never lose a language: whatever (2,) expresses, (2, 3) does too.
    two = predict(facts, PositionalScheme.single("rope_p", periods=(2,))).verdict
    more = predict(facts, PositionalScheme.single("rope_p", periods=(2, 3))).verdict
    assert two != EXPRESSIBLE or more == EXPRESSIBLE
    # Knowing LTL[P,Y] membership can only turn "no prediction" into a verdict, never change one.
    for scheme in (*P_CAPABLE_SCHEMES, *NO_UPPER_BOUND_SCHEMES):
        without = predict(facts, scheme).verdict
        assert without == NO_PREDICTION or without == predict(facts, scheme, ltl_p_y=ltl_p_y).verdict


# -------------------------------------------------------------------------------------- locality
@pytest.mark.parametrize("expression, alphabet, expected", [
    ("Σ*a", "ab", True), ("Σ*abΣ*", "abc", True), ("(ab)*", None, True), ("a*b*", None, True),
    ("(aa)*", None, False), ("Σ*aΣ*bΣ*", "abc", False), ("parity", None, False),
])
def test_locally_testable(expression, alphabet, expected):
    dfa = language_dfa(resolve_language(expression, tuple(alphabet) if alphabet else None))
    assert is_locally_testable(dfa) is expected


def test_locally_testable_on_mlregtest_sl_lt_and_zp(mlregtest_dir):
    """SL and LT are locally testable by definition, Zp is not even star-free (the small ones: the
    test stays fast)."""
    for path in sorted(mlregtest_dir.glob("04.04.*.att")):
        language_class = path.name.split(".")[2]
        if language_class not in ("SL", "LT", "Zp"):
            continue
        dfa = load_att(path)
        if classify(dfa).monoid_size > 60:
            continue
        assert is_locally_testable(dfa) is (language_class != "Zp"), path.name
        assert mlregtest_ltl_p_y(language_class) is (True if language_class != "Zp" else None)


def test_locally_testable_is_a_block_property_on_short_words():
    """Independent check: for an LT language with k-factors, two words of the same length with the
    same prefix, suffix (length k − 1) and set of k-factors agree; for Σ*aΣ*bΣ* over {a, b, c} no
    small k works (ccaccbcc vs ccbccacc for k = 2: the order of a and b is not local)."""
    dfa = language_dfa(resolve_language("Σ*abΣ*", ("a", "b", "c")))
    assert _k_profile_consistent(dfa, k=2, max_length=7)
    order = language_dfa(resolve_language("Σ*aΣ*bΣ*", ("a", "b", "c")))
    assert not any(_k_profile_consistent(order, k=k, max_length=8) for k in (1, 2))


def _k_profile_consistent(dfa: DFA, k: int, max_length: int) -> bool:
    seen: dict = {}
    for length in range(max_length + 1):
        for word in product(range(len(dfa.alphabet)), repeat=length):
            state = dfa.start
            for symbol in word:
                state = int(dfa.transitions[state, symbol])
            accepted = bool(dfa.accepting[state])
            profile = (word[: k - 1], word[-(k - 1):] if k > 1 else (),
                       frozenset(word[i: i + k] for i in range(len(word) - k + 1)), min(length, k))
            if seen.setdefault(profile, accepted) != accepted:
                return False
    return True


@settings(max_examples=40, deadline=None)
@given(st.integers(0, 10**6), st.integers(1, 64))
def test_maps_commute_in_chunks_is_the_pairwise_check(seed, budget):
    rng = np.random.default_rng(seed)
    n_states = int(rng.integers(1, 5))
    if rng.random() < 0.5:
        # Powers of one map commute with each other.
        base = rng.integers(0, n_states, size=n_states)
        maps, current = [], np.arange(n_states)
        for _ in range(int(rng.integers(1, 6))):
            current = base[current]
            maps.append(current)
        maps = np.array(maps)
    else:
        maps = rng.integers(0, n_states, size=(int(rng.integers(1, 6)), n_states))
    brute = all(np.array_equal(u[t], t[u]) for t in maps for u in maps)
    assert maps_commute(maps, budget=budget) is brute
