"""DFA operations: automata laws (hypothesis) and cross-checks against automata-lib."""

from __future__ import annotations

import itertools

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from formal_rope.automata import (
    DFA,
    accepts,
    complement,
    difference,
    equivalent,
    extend_alphabet,
    intersection,
    is_empty,
    minimize,
    product,
    regex_to_dfa,
    shortest_accepted,
    union,
)
from formal_rope.lang.ast import AnySymbol, Concat, Star, Symbol, Union_

AB = ("a", "b")
automata_lib = pytest.importorskip("automata.fa.dfa", reason="automata-lib is a test dependency")


@st.composite
def dfas(draw, alphabet=AB, max_states=6):
    n_states = draw(st.integers(1, max_states))
    table = draw(
        st.lists(
            st.lists(st.integers(0, n_states - 1), min_size=len(alphabet), max_size=len(alphabet)), min_size=n_states,
            max_size=n_states,
        )
    )
    accepting = draw(st.lists(st.booleans(), min_size=n_states, max_size=n_states))
    start = draw(st.integers(0, n_states - 1))
    return DFA(alphabet, np.array(table, dtype=np.int64), start, np.array(accepting))


WORDS = ["".join(w) for k in range(7) for w in itertools.product(AB, repeat=k)]


def language(dfa: DFA) -> list[bool]:
    return accepts(dfa, WORDS).tolist()


def to_lib(dfa: DFA):
    return automata_lib.DFA(
        states=set(range(dfa.n_states)), input_symbols=set(dfa.alphabet),
        transitions={
            q: {s: int(dfa.transitions[q, i]) for i, s in enumerate(dfa.alphabet)} for q in range(dfa.n_states)
        },
        initial_state=dfa.start, final_states={int(q) for q in np.flatnonzero(dfa.accepting)},
    )


# --------------------------------------------------------------------------------- laws
@given(dfas(), dfas())
def test_de_morgan(a, b):
    assert equivalent(complement(union(a, b)), intersection(complement(a), complement(b))).equivalent
    assert equivalent(complement(intersection(a, b)), union(complement(a), complement(b))).equivalent


@given(dfas())
def test_complement_involution_and_partition(a):
    assert equivalent(complement(complement(a)), a).equivalent
    assert is_empty(intersection(a, complement(a)))
    assert all(language(union(a, complement(a))))


@given(dfas())
def test_minimize_idempotent_and_language_preserving(a):
    once = minimize(a)
    twice = minimize(once)
    assert np.array_equal(once.transitions, twice.transitions) and np.array_equal(once.accepting, twice.accepting)
    assert once.start == 0 and once.n_states <= a.n_states
    assert language(once) == language(a)


@given(dfas(), st.permutations(range(6)))
def test_minimize_is_canonical_under_renumbering(a, permutation):
    order = np.array([p for p in permutation if p < a.n_states])
    inverse = np.argsort(order)
    renumbered = DFA(a.alphabet, inverse[a.transitions[order]], int(inverse[a.start]), a.accepting[order])
    left, right = minimize(a), minimize(renumbered)
    assert np.array_equal(left.transitions, right.transitions) and np.array_equal(left.accepting, right.accepting)


@given(dfas(), dfas(), st.sampled_from(["and", "or", "xor", "diff"]))
def test_product_correctness(a, b, op):
    combine = {
        "and": lambda x, y: x and y,
        "or": lambda x, y: x or y,
        "xor": lambda x, y: x != y,
        "diff": lambda x, y: x and not y,
    }[op]
    assert language(product(a, b, op)) == [combine(x, y) for x, y in zip(language(a), language(b))]


@given(dfas(), dfas())
def test_counterexample_is_shortest_and_separating(a, b):
    result = equivalent(a, b)
    la, lb = language(a), language(b)
    if result.equivalent:
        assert la == lb
        return
    word = "".join(result.counterexample)
    assert accepts(a, [word])[0] != accepts(b, [word])[0]
    shorter = [i for i, w in enumerate(WORDS) if len(w) < len(word)]
    assert all(la[i] == lb[i] for i in shorter)


@given(dfas())
def test_shortest_accepted(a):
    word = shortest_accepted(a)
    verdicts = language(a)
    if word is None:
        assert is_empty(a) and not any(verdicts)
    else:
        text = "".join(word)
        assert accepts(a, [text])[0]
        assert not any(v for w, v in zip(WORDS, verdicts) if len(w) < len(text))


def test_different_alphabets_compare_over_union():
    only_a = regex_to_dfa(Star(Symbol("a")), ("a",))
    a_star_over_ab = regex_to_dfa(Star(Symbol("a")), AB)
    assert equivalent(only_a, a_star_over_ab).equivalent
    extended = extend_alphabet(only_a, ("b", "a"))
    assert extended.alphabet == ("b", "a") and accepts(extended, ["aa", "ab"]).tolist() == [True, False]
    everything_over_a = regex_to_dfa(Star(AnySymbol()), ("a",))
    result = equivalent(everything_over_a, regex_to_dfa(Star(AnySymbol()), AB))
    assert not result.equivalent and result.counterexample == ("b",)


def test_same_alphabet_in_another_order():
    left = regex_to_dfa(Concat(Symbol("a"), Star(Symbol("b"))), ("a", "b"))
    right = regex_to_dfa(Concat(Symbol("a"), Star(Symbol("b"))), ("b", "a"))
    assert equivalent(left, right).equivalent
    assert product(left, right, "and").alphabet == ("a", "b")


# ------------------------------------------------------------------------ automata-lib
@settings(max_examples=60)
@given(dfas(max_states=8))
def test_minimal_state_count_matches_automata_lib(a):
    ours = minimize(a)
    theirs = to_lib(a).minify()
    assert ours.n_states == len(theirs.states)
    assert to_lib(ours) == theirs  # automata-lib == is language equality


@settings(max_examples=60)
@given(dfas(), dfas())
def test_operations_match_automata_lib(a, b):
    la, lb = to_lib(a), to_lib(b)
    assert to_lib(union(a, b)) == la.union(lb)
    assert to_lib(intersection(a, b)) == la.intersection(lb)
    assert to_lib(difference(a, b)) == la.difference(lb)
    assert to_lib(complement(a)) == la.complement()
    assert equivalent(a, b).equivalent == (la == lb)
    assert is_empty(a) == la.isempty()


def test_regex_matches_automata_lib_regex():
    nfa_module = pytest.importorskip("automata.fa.nfa")
    cases = [
        ("(ab)*", Star(Concat(Symbol("a"), Symbol("b")))),
        ("a(a|b)*", Concat(Symbol("a"), Star(Union_(Symbol("a"), Symbol("b"))))),
        ("(a|b)*b", Concat(Star(AnySymbol()), Symbol("b"))),
    ]
    for text, ast in cases:
        partial = automata_lib.DFA.from_nfa(nfa_module.NFA.from_regex(text, input_symbols=set(AB)))
        theirs = partial.to_complete(trap_state="trap").minify()
        ours = regex_to_dfa(ast, AB)
        assert to_lib(ours) == theirs and ours.n_states == len(theirs.states)
