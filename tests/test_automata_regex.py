"""Regex -> DFA cross-checks: Python's `re` on random strings, and an exact bounded-length set
oracle for the constructs `re` lacks (intersection, complement)."""

from __future__ import annotations

import itertools
import random
import re

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from formal_rope.automata import accepts, regex_to_dfa
from formal_rope.lang.ast import (
    AnySymbol,
    CharClass,
    Complement,
    Concat,
    EmptySet,
    Epsilon,
    Intersect,
    Optional_,
    Plus,
    Repeat,
    Star,
    Symbol,
    Union_,
)

AB = ("a", "b")
ABC = ("a", "b", "c")


def regexes(alphabet, with_boolean: bool):
    leaves = st.one_of(
        st.sampled_from([Symbol(s) for s in alphabet]), st.just(Epsilon()), st.just(EmptySet()), st.just(AnySymbol()),
        st.builds(
            CharClass, st.lists(st.sampled_from(alphabet), min_size=1, max_size=2, unique=True).map(tuple),
            st.booleans(),
        ),
    )

    def extend(children):
        options = [
            st.builds(Concat, children, children),
            st.builds(Union_, children, children),
            st.builds(Star, children),
            st.builds(Plus, children),
            st.builds(Optional_, children),
            st.integers(0, 2).flatmap(
                lambda low: st.builds(Repeat, children, st.just(low), st.one_of(st.none(), st.integers(low, low + 2)))
            ),
        ]
        if with_boolean:
            options += [st.builds(Intersect, children, children), st.builds(Complement, children)]
        return st.one_of(*options)

    return st.recursive(leaves, extend, max_leaves=7)


def to_python(node, alphabet) -> str:
    """Translate the intersection/complement-free subset into a Python pattern."""
    def char_set(symbols) -> str:
        symbols = sorted(symbols)
        return "[" + "".join(re.escape(s) for s in symbols) + "]" if symbols else "(?!)"

    if isinstance(node, Symbol):
        return re.escape(node.symbol)
    if isinstance(node, Epsilon):
        return "(?:)"
    if isinstance(node, EmptySet):
        return "(?!)"
    if isinstance(node, AnySymbol):
        return char_set(alphabet)
    if isinstance(node, CharClass):
        return char_set(set(alphabet) - set(node.symbols) if node.negated else node.symbols)
    if isinstance(node, Concat):
        return f"(?:{to_python(node.left, alphabet)})(?:{to_python(node.right, alphabet)})"
    if isinstance(node, Union_):
        return f"(?:{to_python(node.left, alphabet)}|{to_python(node.right, alphabet)})"
    if isinstance(node, Star):
        return f"(?:{to_python(node.child, alphabet)})*"
    if isinstance(node, Plus):
        return f"(?:{to_python(node.child, alphabet)})+"
    if isinstance(node, Optional_):
        return f"(?:{to_python(node.child, alphabet)})?"
    if isinstance(node, Repeat):
        high = "" if node.high is None else node.high
        return f"(?:{to_python(node.child, alphabet)}){{{node.low},{high}}}"
    raise AssertionError(node)


def bounded_language(node, alphabet, n: int) -> frozenset[str]:
    """Exactly the words of length <= n in the language (an independent set-based semantics)."""
    universe = frozenset("".join(w) for k in range(n + 1) for w in itertools.product(alphabet, repeat=k))

    def concat(left, right):
        return frozenset(x + y for x in left for y in right if len(x) + len(y) <= n)

    def star(inner):
        result, frontier = {""}, {""}
        while frontier:
            frontier = set(concat(frontier, inner)) - result
            result |= frontier
        return frozenset(result)

    def go(node):
        if isinstance(node, Symbol):
            return frozenset([node.symbol])
        if isinstance(node, Epsilon):
            return frozenset([""])
        if isinstance(node, EmptySet):
            return frozenset()
        if isinstance(node, AnySymbol):
            return frozenset(alphabet)
        if isinstance(node, CharClass):
            return frozenset(set(alphabet) - set(node.symbols) if node.negated else node.symbols)
        if isinstance(node, Concat):
            return concat(go(node.left), go(node.right))
        if isinstance(node, Union_):
            return go(node.left) | go(node.right)
        if isinstance(node, Intersect):
            return go(node.left) & go(node.right)
        if isinstance(node, Complement):
            return universe - go(node.child)
        if isinstance(node, Star):
            return star(go(node.child))
        if isinstance(node, Plus):
            inner = go(node.child)
            return concat(inner, star(inner))
        if isinstance(node, Optional_):
            return go(node.child) | {""}
        if isinstance(node, Repeat):
            inner, result, power = go(node.child), set(), frozenset([""])
            # Unbounded: a word of length <= n in L^c with c > max(n, low) has ε pieces, so it is
            # already in some L^c' with low <= c' <= max(n, low).
            for count in range((max(n, node.low) if node.high is None else node.high) + 1):
                if count >= node.low:
                    result |= power
                power = concat(power, inner)
            return frozenset(result)
        raise AssertionError(node)

    return go(node)


@settings(max_examples=80)
@given(regexes(AB, with_boolean=False), st.randoms(use_true_random=False))
def test_matches_python_re(regex, rng):
    dfa = regex_to_dfa(regex, AB)
    pattern = re.compile(to_python(regex, AB))
    strings = ["".join(w) for k in range(6) for w in itertools.product(AB, repeat=k)]
    strings += ["".join(rng.choice(AB) for _ in range(rng.randint(6, 12))) for _ in range(40)]
    assert accepts(dfa, strings).tolist() == [pattern.fullmatch(s) is not None for s in strings]


@settings(max_examples=40)
@given(regexes(ABC, with_boolean=False))
def test_matches_python_re_ternary(regex):
    dfa = regex_to_dfa(regex, ABC)
    pattern = re.compile(to_python(regex, ABC))
    strings = ["".join(w) for k in range(5) for w in itertools.product(ABC, repeat=k)]
    assert accepts(dfa, strings).tolist() == [pattern.fullmatch(s) is not None for s in strings]


@settings(max_examples=80)
@given(regexes(AB, with_boolean=True))
def test_matches_bounded_set_semantics(regex):
    n = 6
    dfa = regex_to_dfa(regex, AB)
    language = bounded_language(regex, AB, n)
    strings = ["".join(w) for k in range(n + 1) for w in itertools.product(AB, repeat=k)]
    assert accepts(dfa, strings).tolist() == [s in language for s in strings]


def test_paper_notation_shapes_against_re():
    sigma_star = Star(AnySymbol())
    cases = [
        (Concat(sigma_star, Concat(Concat(Symbol("a"), Symbol("b")), sigma_star)), ABC, r"[abc]*ab[abc]*"),
        (Repeat(Concat(Symbol("a"), Symbol("b")), 2, 3), AB, r"(?:ab){2,3}"),
        (Concat(CharClass(("a",), True), Plus(Symbol("a"))), ABC, r"[bc]a+"),
    ]
    rng = random.Random(0)
    for regex, alphabet, pattern in cases:
        dfa = regex_to_dfa(regex, alphabet)
        strings = ["".join(rng.choice(alphabet) for _ in range(rng.randint(0, 9))) for _ in range(400)]
        strings += [s for s in ["ab", "abab", "ababab", "ba", "caa"] if set(s) <= set(alphabet)]
        assert accepts(dfa, strings).tolist() == [re.fullmatch(pattern, s) is not None for s in strings]


def test_complement_is_relative_to_sigma_star():
    dfa = regex_to_dfa(Complement(Star(Symbol("a"))), AB)
    assert accepts(dfa, ["", "a", "aa", "b", "ab"]).tolist() == [False, False, False, True, True]


@pytest.mark.parametrize("low, high", [(0, 0), (0, 3), (2, 2), (3, None), (0, None)])
def test_repeat_bounds(low, high):
    dfa = regex_to_dfa(Repeat(Concat(Symbol("a"), Symbol("b")), low, high), AB)
    verdicts = accepts(dfa, ["ab" * count for count in range(8)]).tolist()
    assert verdicts == [count >= low and (high is None or count <= high) for count in range(8)]
    assert not np.any(accepts(dfa, ["a", "aba", "b"]))


# ---------------------------------------------------------------- acceptance-pass regressions
@settings(max_examples=40)
@given(regexes(AB, with_boolean=True))
def test_frozenset_subsets_give_the_bitset_automaton(regex):
    """Large NFAs determinize with frozenset subsets; forcing that path everywhere must give the
    identical (canonically numbered) minimal DFA."""
    import formal_rope.automata.regex as regex_module

    expected = regex_to_dfa(regex, AB)
    saved = regex_module._BITSET_MAX_NFA_STATES
    regex_module._BITSET_MAX_NFA_STATES = 0
    try:
        forced = regex_to_dfa(regex, AB)
    finally:
        regex_module._BITSET_MAX_NFA_STATES = saved
    assert np.array_equal(forced.transitions, expected.transitions)
    assert np.array_equal(forced.accepting, expected.accepting)


def test_subset_memory_grows_linearly_beyond_the_bitset_range():
    """Bitset subsets cost n bits each, n² bits for the chain automata of a{n} (≈ 2.5 GB at
    n = 10⁵, so a{99999999999999999999} died of MemoryError instead of the state limit). Past
    _BITSET_MAX_NFA_STATES subsets are frozensets: doubling n about doubles the peak memory
    of a concatenation (the bitset version: ×3 here, ×4 asymptotically)."""
    import tracemalloc

    import formal_rope.automata.regex as regex_module
    from formal_rope.lang import parse_regex

    saved = regex_module._BITSET_MAX_NFA_STATES
    regex_module._BITSET_MAX_NFA_STATES = 0
    peaks = []
    try:
        for n in (1000, 2000):
            chain = regex_to_dfa(parse_regex(f"a{{{n}}}"), AB)
            tracemalloc.start()
            try:
                doubled = regex_module.concatenate(chain, chain)
                peaks.append(tracemalloc.get_traced_memory()[1])
            finally:
                tracemalloc.stop()
            assert doubled.n_states == 2 * n + 2
    finally:
        regex_module._BITSET_MAX_NFA_STATES = saved
    assert peaks[1] < 2.5 * peaks[0]


def test_long_chains_are_built_as_balanced_trees():
    """A 2 000-symbol concatenation took 40 s (left fold: one growing automaton per symbol);
    chains of one operator are combined pairwise now, and equal pairs are built once."""
    from formal_rope.lang import parse_regex

    words = ["ab" * i for i in range(1, 40)]
    dfa = regex_to_dfa(parse_regex("|".join(words)), AB)
    strings = ["".join(w) for k in range(9) for w in itertools.product(AB, repeat=k)] + words
    assert accepts(dfa, strings).tolist() == [s in words for s in strings]
    chain = regex_to_dfa(parse_regex("a" * 2000), AB)
    assert chain.n_states == 2002 and accepts(chain, ["a" * 2000, "a" * 1999]).tolist() == [True, False]
