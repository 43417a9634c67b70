"""The theory's own counterexamples (formal_rope.theory.families, formal_rope.runs.blind_spots):
families derived from the decider's witness, checked against the DFA, and scored on fake models."""

from __future__ import annotations

import numpy as np
import pytest

from formal_rope.automata import language_dfa
from formal_rope.automata.membership import accepts_encoded
from formal_rope.lang.source import resolve_language
from formal_rope.run_config.config import RunConfig
from formal_rope.runs.blind_spots import family_for, score_family
from formal_rope.theory.families import family_strings, separating_suffix, witness_family

RARE = "data/mlregtest/16.16.SL.6.1.5.att"  # starts with aaaaa and never contains ababab


def _dfa(text: str):
    return language_dfa(resolve_language(text))


def _text(dfa, word) -> str:
    return "".join(dfa.alphabet[s] for s in word)


def test_rare_language_family_alternates_labels():
    dfa = _dfa(RARE)
    family = witness_family(dfa)
    assert family.describe() == "aaaaa(baa)^m·b·abab vs aaaaa(baa)^m·abab"
    listed = family_strings(family, dfa, 500)
    assert len(listed.strings) == 2 * ((500 - 9) // 3 + 1)  # m = 0..163: both strings <= 500
    for m in range(0, 160):
        first, second = family.pair(m)
        assert _text(dfa, first) == "aaaaa" + "baa" * m + "b" + "abab"
        assert not accepts_encoded(dfa, np.array([first]), np.array([len(first)]))[0]  # contains ababab
        assert accepts_encoded(dfa, np.array([second]), np.array([len(second)]))[0]
    # the listed labels are the DFA's, and alternate rejected / accepted pair by pair
    assert (listed.labels == np.tile([False, True], len(listed.labels) // 2)[: len(listed.labels)]).all()
    assert listed.lengths.max() <= 500


def test_families_exist_exactly_outside_the_class():
    assert witness_family(_dfa("ltl:P(a & P(b))")) is None  # in LTL[P]
    assert witness_family(_dfa("(aa)*")) is not None  # outside LTL[P] ...
    assert witness_family(_dfa("(aa)*"), modulus=2) is None  # ... inside LTL[P,MOD_2]
    parity = _dfa("(aa)*")
    assert witness_family(parity, modulus=3) is not None  # not inside MOD_3
    counting = _dfa("re:(b*ab*a)*b*")  # an even number of a: no period suffices
    for modulus in (1, 2, 3, 4):
        family = witness_family(counting, modulus)
        assert family is not None
        assert len(family.forward) % modulus == 0 and len(family.backward) % modulus == 0
        listed = family_strings(family, counting, 60)
        pairs = listed.labels.reshape(-1, 2)
        assert (pairs[:, 0] != pairs[:, 1]).all()


def test_separating_suffix_is_shortest():
    dfa = _dfa(RARE)
    family = witness_family(dfa)
    q, p = family.states
    suffix = separating_suffix(dfa, p, q)
    assert len(suffix) == 4
    with pytest.raises(ValueError):
        separating_suffix(dfa, q, q)


def test_fake_models_are_refuted_or_held():
    dfa = _dfa(RARE)
    family = witness_family(dfa)
    a = dfa.alphabet.index("a")

    def starts_with_aaaaa(symbols):  # ignores the rare part: "never contains ababab"
        return (symbols[:, :5] == a).all(axis=1) if symbols.shape[1] >= 5 else np.zeros(len(symbols), bool)

    found = score_family(starts_with_aaaaa, family, dfa, 500)
    assert found.refuted_at == 9 + 1  # aaaaa·b·abab (10 symbols, rejected) is accepted
    assert found.failure == "aaaaababab"
    assert found.tried == 2  # lengths 9 and 10

    def the_language(symbols):
        return accepts_encoded(dfa, symbols, np.full(len(symbols), symbols.shape[1]))

    held = score_family(the_language, family, dfa, 500)
    assert held.refuted_at is None and held.failure is None
    assert held.tried == len(family_strings(family, dfa, 500).strings)

    def right_up_to_100(symbols):  # a model that forgets the suffix past length 100
        return the_language(symbols) if symbols.shape[1] <= 100 else starts_with_aaaaa(symbols)

    late = score_family(right_up_to_100, family, dfa, 500)
    assert 100 < late.refuted_at <= 103
    assert score_family(right_up_to_100, family, dfa, 100).refuted_at is None


def test_family_for_follows_the_prediction():
    dfa = _dfa(RARE)
    nope = RunConfig(RARE, pe="nope")
    assert family_for(nope, dfa).describe() == "aaaaa(baa)^m·b·abab vs aaaaa(baa)^m·abab"
    assert family_for(RunConfig(RARE, pe="rope"), dfa) is None  # no not_expressible verdict
    parity = _dfa("(aa)*")
    assert family_for(RunConfig("(aa)*", pe="rope_p", periods=(2,)), parity, (2,)) is None  # expressible
    three = family_for(RunConfig("(aa)*", pe="rope_p", periods=(3,)), parity, (3,))
    assert three is not None and three.modulus == 3
