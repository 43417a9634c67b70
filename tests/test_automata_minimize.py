"""Hopcroft minimization vs the Moore reference and automata-lib; long chains; empty alphabets."""

from __future__ import annotations

import random

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from formal_rope.automata import (
    DFA,
    accepts,
    accepts_encoded,
    complement,
    empty_language,
    encode_strings,
    equivalent,
    load_att,
    minimize,
    product,
    regex_to_dfa,
    shortest_accepted,
    universal_language,
)
from formal_rope.automata.ops import _hopcroft_blocks, _minimize_moore, _moore_rounds, _quotient, trim_unreachable
from formal_rope.errors import FormalRopeError
from formal_rope.lang.ast import AnySymbol, Concat, Epsilon, Repeat, Star, Symbol

automata_lib = pytest.importorskip("automata.fa.dfa", reason="automata-lib is a test dependency")


@st.composite
def random_dfas(draw, max_states=30, max_symbols=4):
    n_symbols = draw(st.integers(0, max_symbols))
    n_states = draw(st.integers(1, max_states))
    alphabet = tuple("abcdefgh"[:n_symbols])
    flat = draw(st.lists(st.integers(0, n_states - 1), min_size=n_states * n_symbols, max_size=n_states * n_symbols))
    accepting = draw(st.lists(st.booleans(), min_size=n_states, max_size=n_states))
    return DFA(
        alphabet, np.array(flat, dtype=np.int64).reshape(n_states, n_symbols), draw(st.integers(0, n_states - 1)),
        np.array(accepting),
    )


def same_table(left: DFA, right: DFA) -> bool:
    return (
        left.start == right.start
        and np.array_equal(left.transitions, right.transitions)
        and np.array_equal(left.accepting, right.accepting)
    )


def to_lib(dfa: DFA):
    return automata_lib.DFA(
        states=set(range(dfa.n_states)),
        input_symbols=set(dfa.alphabet),
        transitions={q: dict(zip(dfa.alphabet, map(int, dfa.transitions[q]))) for q in range(dfa.n_states)},
        initial_state=dfa.start,
        final_states={int(q) for q in np.flatnonzero(dfa.accepting)},
        allow_partial=False,
    )


@settings(max_examples=150, deadline=None)
@given(random_dfas())
def test_hopcroft_equals_moore_reference(dfa):
    assert same_table(minimize(dfa), _minimize_moore(dfa))


@settings(max_examples=80, deadline=None)
@given(random_dfas(), st.integers(0, 3))
def test_hopcroft_from_a_partially_refined_partition(dfa, rounds):
    # minimize hands Hopcroft the partition left by a few Moore rounds on large automata.
    reachable = trim_unreachable(dfa)
    block = reachable.accepting.astype(np.int64)
    block = np.unique(block, return_inverse=True)[1].reshape(-1)
    if rounds:
        block, _ = _moore_rounds(reachable.transitions, block, rounds)
    assert same_table(_quotient(reachable, _hopcroft_blocks(reachable.transitions, block)), _minimize_moore(dfa))


def test_large_automata_take_the_moore_then_hopcroft_route():
    rng = np.random.default_rng(5)
    # Random part (Moore rounds refine it a lot) feeding a long chain (refined one state per
    # round, so minimize switches to Hopcroft with many blocks already split).
    n_random, n_chain = 5000, 3000
    random_part = rng.integers(0, n_random, (n_random, 2))
    random_part[rng.random((n_random, 2)) < 0.01] = n_random  # some arcs enter the chain
    chain = np.repeat((np.arange(n_random + 1, n_random + n_chain + 1) % (n_random + n_chain))[:, None], 2, axis=1)
    accepting = np.concatenate([rng.random(n_random) < 0.3, np.arange(n_chain) == n_chain - 1])
    dfa = DFA(("a", "b"), np.concatenate([random_part, chain]), 0, accepting)
    assert same_table(minimize(dfa), _minimize_moore(dfa))
    # Shallow and wide: Moore rounds alone finish.
    shallow = regex_to_dfa(Concat(Concat(Star(AnySymbol()), Symbol("a")), Repeat(AnySymbol(), 12, 12)), ("a", "b"))
    assert shallow.n_states == 2**13
    assert same_table(minimize(shallow), _minimize_moore(shallow))


@settings(max_examples=40, deadline=None)
@given(random_dfas(max_states=12, max_symbols=3).filter(lambda d: d.n_symbols > 0))
def test_minimal_size_and_language_match_automata_lib(dfa):
    ours = minimize(dfa)
    theirs = to_lib(dfa).minify()
    assert ours.n_states == len(theirs.states)
    words = ["".join(random.Random(i).choices(dfa.alphabet, k=i % 9)) for i in range(60)]
    assert accepts(ours, words).tolist() == [theirs.accepts_input(w) for w in words]


def test_mlregtest_hopcroft_equals_moore(mlregtest_dir):
    files = sorted(mlregtest_dir.glob("*.att"))
    assert len(files) >= 900
    for path in files:
        dfa = load_att(path)
        assert same_table(minimize(dfa), _minimize_moore(dfa)), path.name


def test_mlregtest_sizes_match_automata_lib(mlregtest_dir):
    rng = random.Random(11)
    for path in rng.sample(sorted(mlregtest_dir.glob("*.att")), 25):
        dfa = load_att(path)
        assert minimize(dfa).n_states == len(to_lib(dfa).minify().states), path.name


def test_long_counter_chain():
    # a cycle of 6001 states with one accepting state: nothing merges; Moore needs 6000 rounds.
    n = 6001
    counter = DFA(("a",), ((np.arange(n) + 1) % n)[:, None], 0, np.arange(n) == 0)
    minimal = minimize(counter)
    assert same_table(minimal, counter)
    # a{3000} as a regex: 3001 live states plus the sink, numbered along the chain.
    chain = regex_to_dfa(Repeat(Symbol("a"), 3000, 3000), ("a", "b"))
    assert chain.n_states == 3002
    assert accepts(chain, ["a" * 3000, "a" * 2999, "a" * 3001]).tolist() == [True, False, False]


def test_chain_with_redundant_copies_merges():
    # Two interleaved copies of a mod-501 counter (A_i -> B_i+1 -> A_i+2 ...): all 1002 states
    # are reachable and a^k is accepted iff k = 0 mod 501, so the minimal DFA is one copy.
    n = 501
    successor = np.concatenate([n + (np.arange(n) + 1) % n, (np.arange(n) + 1) % n])
    doubled = DFA(("a",), successor[:, None], 0, np.tile(np.arange(n) == 0, 2))
    minimal = minimize(doubled)
    assert minimal.n_states == n == len(to_lib(doubled).minify().states)
    assert equivalent(minimal, doubled).equivalent


# ------------------------------------------------------------------------ empty alphabet
EMPTY = ()


def test_empty_alphabet_minimize_keeps_only_the_start():
    dfa = DFA(EMPTY, np.zeros((3, 0), dtype=np.int64), 1, np.array([False, True, False]))
    for minimal in (minimize(dfa), _minimize_moore(dfa)):
        assert minimal.n_states == 1 and minimal.start == 0 and minimal.accepting.tolist() == [True]
        assert minimal.transitions.shape == (1, 0)
    rejecting = DFA(EMPTY, np.zeros((2, 0), dtype=np.int64), 0, np.array([False, True]))
    assert minimize(rejecting).accepting.tolist() == [False]


def test_empty_alphabet_operations():
    only_epsilon = universal_language(EMPTY)
    nothing = empty_language(EMPTY)
    assert same_table(regex_to_dfa(Epsilon(), EMPTY), only_epsilon)
    assert same_table(regex_to_dfa(Star(Epsilon()), EMPTY), only_epsilon)
    assert equivalent(complement(only_epsilon), nothing).equivalent
    result = equivalent(only_epsilon, nothing)
    assert not result.equivalent and result.counterexample == ()
    assert shortest_accepted(only_epsilon) == () and shortest_accepted(nothing) is None
    assert minimize(product(only_epsilon, nothing, "or")).n_states == 1
    assert accepts(only_epsilon, ["", ""]).tolist() == [True, True]
    assert accepts(nothing, [""]).tolist() == [False]
    symbols, lengths = encode_strings(["", ""], EMPTY)
    assert symbols.shape == (2, 0) and accepts_encoded(only_epsilon, symbols, lengths).tolist() == [True, True]
    with pytest.raises(FormalRopeError, match="'a' at column 1"):
        accepts(only_epsilon, ["", "a"])
    with pytest.raises(FormalRopeError, match="not in the alphabet"):
        regex_to_dfa(Symbol("a"), EMPTY)
