"""The paper's expected class memberships, witnesses that really witness, edge cases and caps."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from formal_rope.automata import DFA, language_dfa, minimize, trim_unreachable
from formal_rope.classes import (
    MonoidTooLargeError,
    classify,
    is_podfa,
    k_automaton,
    length_sets,
    transition_monoid,
)
from formal_rope.errors import FormalRopeError
from formal_rope.lang.source import resolve_language


def dfa_of(expression: str, alphabet: str | None = None) -> DFA:
    return language_dfa(resolve_language(expression, alphabet))


def hand_dfa(alphabet: str, transitions: list[list[int]], accepting: list[int], start: int = 0) -> DFA:
    return DFA(tuple(alphabet), np.array(transitions), start, np.array(accepting, dtype=bool))


# expression, alphabet, ltl_p, ltl_p_mod, mod_k, star_free
PAPER_FACTS = [
    ("(aa)*", None, False, True, 2, False),
    ("(ab)*", None, False, True, 2, True),
    ("aΣ*", None, True, True, 1, True),
    ("Σ*a", None, False, False, None, True),
    ("Σ*abΣ*", "abc", False, False, None, True),
    ("Σ*abΣ*", "ab", True, True, 1, True),
    ("parity", None, False, False, None, False),
    ("(abc)*", None, False, True, 3, True),
    ("(aaaaa)*", None, False, True, 5, False),
    ("b(aa)*", "ab", False, True, 2, False),
    ("ltl:MOD_2^0 & P(a)", "ab", False, True, 2, False),
]


@pytest.mark.parametrize("expression, alphabet, ltl_p, ltl_p_mod, mod_k, star_free", PAPER_FACTS)
def test_paper_facts(expression, alphabet, ltl_p, ltl_p_mod, mod_k, star_free):
    result = classify(dfa_of(expression, alphabet))
    assert (result.ltl_p, result.ltl_p_mod, result.mod_k, result.star_free) == (ltl_p, ltl_p_mod, mod_k, star_free)
    assert result.r_trivial == ltl_p
    assert result.qr == ltl_p_mod
    assert set(result.witness) >= {
        name for name, ok in (("ltl_p", ltl_p), ("ltl_p_mod", ltl_p_mod), ("star_free", star_free)) if not ok
    }


def test_parity_odd_number_of_ones_hand_built():
    parity = hand_dfa("01", [[0, 1], [1, 0]], [0, 1])
    result = classify(parity)
    assert not result.ltl_p_mod and not result.star_free and result.monoid_size == 2


def test_monoid_sizes_of_known_languages():
    assert classify(dfa_of("(ab)*")).monoid_size == 6  # {1, a, b, ab, ba, 0}
    assert classify(dfa_of("(aa)*")).monoid_size == 2  # ℤ/2
    assert classify(dfa_of("Σ*a")).monoid_size == 3  # {1, [a], [b]}: ends-with is decided by the last letter
    # identity included: in aΣ* no non-empty word acts as the identity, yet [ε] is an element
    assert classify(dfa_of("aΣ*")).monoid_size == 3


def _run(dfa: DFA, state: int, word: str) -> int:
    index = dfa.symbol_index()
    return dfa.run([index[c] for c in word], state)


@pytest.mark.parametrize(
    "expression, alphabet", [("Σ*abΣ*", "abc"), ("parity", None), ("Σ*a", None), ("Σ*ab|(aa)*", "ab")]
)
def test_failure_witnesses_connect_the_claimed_states(expression, alphabet):
    dfa = minimize(dfa_of(expression, alphabet))
    result = classify(dfa)
    for key in ("ltl_p", "ltl_p_mod"):
        witness = result.witness[key]
        q, p = witness["states"]
        assert q != p
        assert _run(dfa, dfa.start, witness["access"][0]) == q
        assert _run(dfa, dfa.start, witness["access"][1]) == p
        assert _run(dfa, q, witness["forward"]) == p
        assert _run(dfa, p, witness["backward"]) == q
    k0 = result.k_bound
    assert len(result.witness["ltl_p_mod"]["forward"]) == k0 == len(result.witness["ltl_p_mod"]["backward"])
    for k in range(1, 4 * k0 + 3):
        assert not is_podfa(dfa, k)


def test_block_witness_like_prop_b2():
    """Prop. B.2: q0 -a^k-> q1 and q1 -c^k-> q0 in every A_k for Σ*abΣ* over {a,b,c}."""
    dfa = minimize(dfa_of("Σ*abΣ*", "abc"))
    for k in range(1, 7):
        q1 = _run(dfa, dfa.start, "a" * k)
        assert q1 != dfa.start and _run(dfa, q1, "c" * k) == dfa.start


def _monoid_map(dfa: DFA, word: str) -> tuple[int, ...]:
    return tuple(_run(dfa, q, word) for q in range(dfa.n_states))


@pytest.mark.parametrize("expression, alphabet", [("(ab)*", None), ("Σ*abΣ*", "abc"), ("aΣ*", None), ("parity", None)])
def test_green_witnesses_hold_in_the_monoid(expression, alphabet):
    dfa = minimize(dfa_of(expression, alphabet))
    result = classify(dfa)
    for key, relation in (("r_trivial", "R"), ("l_trivial", "L"), ("j_trivial", "J")):
        if getattr(result, key):
            assert key not in result.witness
            continue
        witness = result.witness[key]
        assert witness["relation"] == relation
        x, y = witness["elements"]
        assert _monoid_map(dfa, x) != _monoid_map(dfa, y)
        (u1, v1), (u2, v2) = witness["to_second"], witness["to_first"]
        assert _monoid_map(dfa, u1 + x + v1) == _monoid_map(dfa, y)
        assert _monoid_map(dfa, u2 + y + v2) == _monoid_map(dfa, x)
        if relation == "R":
            assert u1 == u2 == ""
        if relation == "L":
            assert v1 == v2 == ""


def test_group_witness_powers_cycle():
    dfa = minimize(dfa_of("(aaa)*|b(aa)*", "ab"))
    result = classify(dfa)
    witness = result.witness["star_free"]
    word, index, period = witness["word"], witness["index"], witness["period"]
    assert period > 1
    assert _monoid_map(dfa, word * index) == _monoid_map(dfa, word * (index + period))
    for n in range(1, 12):
        assert _monoid_map(dfa, word * n) != _monoid_map(dfa, word * (n + 1))


def test_odd_length_ending_in_a_needs_all_states_of_the_k_automaton():
    """Even length, or odd length ending in a. Only the states A_k reaches from the start see even
    lengths, where everything is accepted; the odd-position states carry the Σ*a cycle. Reading
    Def. A.13 as "the minimal automaton of L(A_k) from the start" would wrongly accept it."""
    dfa = hand_dfa("ab", [[1, 2], [0, 0], [0, 0]], [1, 1, 0])
    result = classify(dfa)
    assert not result.ltl_p_mod and not result.qr and result.mod_k is None
    assert trim_unreachable(k_automaton(minimize(dfa), 2)).n_states == 1  # only the start: trivially PO
    assert not is_podfa(minimize(dfa), 2)
    # Indistinguishable by PFO²[<,MOD_d]: X = (a^d b^d)^n with X·a ∈ L, X·b ∉ L (see docs/classes.md).
    d, n = 3, 2
    x = ("a" * d + "b" * d) * n
    assert _run(dfa, dfa.start, x + "a") in np.flatnonzero(dfa.accepting)
    assert _run(dfa, dfa.start, x + "b") not in np.flatnonzero(dfa.accepting)


def test_stability_index_and_period():
    sets = length_sets(transition_monoid(minimize(dfa_of("(ab)*"))))
    assert (sets.index, sets.period, sets.bound) == (2, 2, 2)
    sets = length_sets(transition_monoid(minimize(dfa_of("(aaa)*"))))
    assert (sets.index, sets.period, sets.bound) == (0, 3, 3)
    assert sets.elements(0).tolist() == sets.elements(3).tolist() == sets.elements(300).tolist() == [0]
    # every stored element has a word of exactly its level's length evaluating to it
    monoid = transition_monoid(minimize(dfa_of("Σ*abΣ*", "abc")))
    sets = length_sets(monoid)
    for k in range(len(sets.levels)):
        for element in sets.levels[k].tolist():
            word = sets.block_word(k, element)
            assert len(word) == k and monoid.element_of(word) == element


def test_trivial_languages():
    for expression in ("∅", "Σ*"):
        result = classify(dfa_of(expression, "ab"))
        assert result.states == 1 and result.monoid_size == 1
        assert all(
            (result.ltl_p, result.ltl_p_mod, result.star_free, result.r_trivial, result.l_trivial, result.j_trivial)
        )
        assert result.mod_k == 1 and result.witness == {}
    epsilon_only = classify(dfa_of("ε", "a"))
    assert epsilon_only.ltl_p and epsilon_only.j_trivial


def full_transformation_monoid_dfa(n: int) -> DFA:
    """Generators of T_n: a cycle, a transposition, and a map merging two points."""
    cycle = [(q + 1) % n for q in range(n)]
    swap = [1, 0] + list(range(2, n))
    merge = [0, 0] + list(range(2, n))
    transitions = np.array([cycle, swap, merge]).T
    return DFA(("a", "b", "c"), transitions, 0, np.arange(n) == 0)


def test_full_transformation_monoid_size_and_cap():
    dfa = full_transformation_monoid_dfa(5)
    assert transition_monoid(dfa).size == 5**5
    symmetric = DFA(("a", "b"), dfa.transitions[:, :2], 0, dfa.accepting)
    assert transition_monoid(symmetric).size == 120
    with pytest.raises(MonoidTooLargeError) as caught:
        classify(dfa, max_monoid_size=1000)
    assert isinstance(caught.value, FormalRopeError) and "1000" in str(caught.value)
    result = classify(dfa)
    assert result.monoid_size == 3125 and not result.star_free and not result.ltl_p_mod


def test_words_of_elements_evaluate_to_their_maps():
    dfa = full_transformation_monoid_dfa(4)
    monoid = transition_monoid(dfa)
    for element in range(monoid.size):
        word = monoid.word(element)
        assert tuple(monoid.elements[element]) == tuple(dfa.run(list(word), q) for q in range(dfa.n_states))
    # shortlex order: BFS numbering never decreases word length
    lengths = [len(monoid.word(e)) for e in range(monoid.size)]
    assert lengths == sorted(lengths)


def test_multi_character_symbols_in_words():
    dfa = DFA(("foo", "bar"), np.array([[1, 0], [1, 0]]), 0, np.array([False, True]))
    result = classify(dfa)
    assert result.witness["ltl_p"]["forward"] == "foo"
    assert result.witness["ltl_p"]["backward"] == "bar"
    two = classify(DFA(("foo", "bar"), np.array([[1, 1], [0, 0]]), 0, np.array([True, False])))
    assert two.mod_k == 2
    assert not classify(DFA(("foo", "bar"), np.array([[1, 0], [1, 1]]), 0, np.array([False, True]))).witness


def test_to_dict_is_json_ready():
    import json

    payload = classify(dfa_of("Σ*abΣ*", "abc")).to_dict()
    assert json.loads(json.dumps(payload)) == payload
    assert set(payload) >= {
        "states", "monoid_size", "ltl_p", "ltl_p_mod", "mod_k", "star_free", "r_trivial", "l_trivial", "j_trivial",
        "witness",
    }


def test_k_automaton_matches_block_runs():
    dfa = minimize(dfa_of("Σ*abΣ*", "abc"))
    automaton = k_automaton(dfa, 2)
    assert automaton.n_symbols == 9
    for block, (x, y) in zip(automaton.alphabet, itertools.product("abc", repeat=2)):
        assert block == x + y
        for q in range(dfa.n_states):
            assert automaton.transitions[q, automaton.alphabet.index(block)] == _run(dfa, q, block)


def two_cycles_dfa(first: int, second: int) -> DFA:
    """a(a^first)* ∪ b(b^second)*: two simple cycles in separate SCCs, least k = lcm."""
    n_states = 1 + first + second + 1
    sink = n_states - 1
    transitions = np.full((n_states, 2), sink)
    transitions[0] = [1, 1 + first]
    for i in range(first):
        transitions[1 + i, 0] = 1 + (i + 1) % first
    for i in range(second):
        transitions[1 + first + i, 1] = 1 + first + (i + 1) % second
    accepting = np.zeros(n_states, dtype=bool)
    accepting[[1, 1 + first]] = True
    return DFA(("a", "b"), transitions, 0, accepting)


def test_least_k_is_the_lcm_of_cycle_lengths():
    result = classify(two_cycles_dfa(7, 11))
    assert result.ltl_p_mod and result.mod_k == 77 and result.k_bound % 77 == 0
    assert not result.ltl_p and not result.star_free
    assert classify(dfa_of("(a{97})*", "a")).mod_k == 97
    # with a self-loop inside a cycle the SCC is no longer a simple cycle: no k works
    assert classify(dfa_of("(aa|b)*", "ab")).mod_k is None


def test_witness_words_with_blank_symbols_are_quoted_as_accepts_reads_them():
    from formal_rope.automata import language_dfa
    from formal_rope.automata.membership import split_symbols
    from formal_rope.classes import classify
    from formal_rope.lang import resolve_language

    dfa = language_dfa(resolve_language("('long name' b)*", "'long name',b"))
    witness = classify(dfa).to_dict()["witness"]["ltl_p"]
    assert witness["forward"] == "'long name'" and witness["backward"] == "b"
    assert [split_symbols(word, dfa.alphabet) for word in witness["access"]] == [[], ["long name"]]
