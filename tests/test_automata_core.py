"""Core DFA facts: paper languages, MOD/Y boundaries, operations, membership, .att loading."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from formal_rope.automata import (
    DFA,
    TooManyStatesError,
    accepts,
    accepts_encoded,
    complement,
    complete,
    difference,
    encode_strings,
    equivalent,
    intersection,
    is_empty,
    load_att,
    ltl_accepts,
    ltl_to_dfa,
    minimize,
    regex_to_dfa,
    shortest_accepted,
    split_symbols,
    to_dot,
    to_table,
    union,
)
from formal_rope.errors import FormalRopeError
from formal_rope.lang.ast import (
    And,
    AnySymbol,
    Atom,
    CharClass,
    Complement,
    Concat,
    Const,
    EmptySet,
    Epsilon,
    Historically,
    Intersect,
    Mod,
    Optional_,
    Past,
    Plus,
    Repeat,
    Since,
    Star,
    Symbol,
    Union_,
    Yesterday,
)

AB = ("a", "b")


def words(alphabet, max_length):
    for length in range(max_length + 1):
        yield from ("".join(w) for w in itertools.product(alphabet, repeat=length))


def seq(*symbols):
    node = Symbol(symbols[0])
    for symbol in symbols[1:]:
        node = Concat(node, Symbol(symbol))
    return node


SIGMA_STAR = Star(AnySymbol())


# ------------------------------------------------------------------ paper languages (SPEC §2)
@pytest.mark.parametrize(
    "regex, alphabet, n_states, member",
    [
        (Star(seq("a", "a")), ("a",), 2, lambda w: len(w) % 2 == 0),
        (Star(seq("a", "b")), AB, 3, lambda w: w == "ab" * (len(w) // 2)),
        (Concat(Symbol("a"), SIGMA_STAR), AB, 3, lambda w: w.startswith("a")),
        (Concat(SIGMA_STAR, Symbol("a")), AB, 2, lambda w: w.endswith("a")),
        (Concat(Concat(SIGMA_STAR, seq("a", "b")), SIGMA_STAR), ("a", "b", "c"), 3, lambda w: "ab" in w),
    ],
)
def test_paper_languages(regex, alphabet, n_states, member):
    dfa = regex_to_dfa(regex, alphabet)
    assert dfa.n_states == n_states
    strings = list(words(alphabet, 6))
    assert accepts(dfa, strings).tolist() == [member(w) for w in strings]


def test_parity_over_binary_alphabet():
    odd_ones = Concat(Star(Symbol("0")), Concat(Symbol("1"), Star(Symbol("0"))))
    parity = Concat(odd_ones, Star(Concat(odd_ones, odd_ones)))
    dfa = regex_to_dfa(parity, ("0", "1"))
    assert dfa.n_states == 2
    strings = list(words("01", 7))
    assert accepts(dfa, strings).tolist() == [w.count("1") % 2 == 1 for w in strings]


# ------------------------------------------------------------------ LTL boundaries (SPEC §1)
def test_mod_2_0_accepts_odd_lengths():
    dfa = ltl_to_dfa(Mod(2, 0), AB)
    strings = list(words(AB, 6))
    assert accepts(dfa, strings).tolist() == [len(w) % 2 == 1 for w in strings]
    assert dfa.n_states == 2


@pytest.mark.parametrize("m, r", [(1, 0), (2, 1), (3, 0), (3, 1), (3, 2), (3, 4), (4, 3)])
def test_mod_counts_the_readout_from_one(m, r):
    dfa = ltl_to_dfa(Mod(m, r), ("a",))
    accepted = accepts(dfa, ["a" * n for n in range(12)]).tolist()
    assert accepted == [(n + 1) % m == r % m for n in range(12)]


def test_mod_at_symbol_positions():
    # P(a & MOD_2^1): some 'a' at an odd position (positions counted from 1).
    dfa = ltl_to_dfa(Past(And(Atom("a"), Mod(2, 1))), AB)
    for word in words(AB, 6):
        expected = any(symbol == "a" and position % 2 == 1 for position, symbol in enumerate(word, start=1))
        assert bool(accepts(dfa, [word])[0]) == expected == ltl_accepts(Past(And(Atom("a"), Mod(2, 1))), word)


@pytest.mark.parametrize("k", [1, 2, 3, 5])
def test_yesterday_k_boundary(k):
    formula = Yesterday(Atom("a"), k)
    dfa = ltl_to_dfa(formula, AB)
    for word in words(AB, 7):
        position = len(word) + 1
        expected = position > k and word[position - k - 1] == "a"
        assert bool(accepts(dfa, [word])[0]) == expected == ltl_accepts(formula, word)


def test_yesterday_of_true_needs_length_at_least_k():
    dfa = ltl_to_dfa(Yesterday(Const(True), 3), ("a",))
    assert accepts(dfa, ["a" * n for n in range(6)]).tolist() == [False, False, False, True, True, True]


def test_atoms_are_false_at_readout_and_h_vacuous():
    assert is_empty(ltl_to_dfa(Atom("a"), AB))
    always = ltl_to_dfa(Historically(Atom("a")), AB)
    assert accepts(always, ["", "a", "aa", "ab", "b"]).tolist() == [True, True, True, False, False]


def test_since():
    formula = Since(Atom("a"), Atom("b"))
    dfa = ltl_to_dfa(formula, ("a", "b", "c"))
    for word in words("abc", 5):
        expected = "b" in word and set(word[word.rindex("b") + 1 :]) <= {"a"}
        assert bool(accepts(dfa, [word])[0]) == expected


def test_p_a_is_sigma_star_a_sigma_star():
    assert equivalent(
        ltl_to_dfa(Past(Atom("a")), AB), regex_to_dfa(Concat(SIGMA_STAR, Concat(Symbol("a"), SIGMA_STAR)), AB)
    ).equivalent


# ------------------------------------------------------------------------------ operations
def test_minimize_canonical_tables():
    star_a = regex_to_dfa(Star(Symbol("a")), AB)
    plus_or_eps = regex_to_dfa(Union_(Plus(Symbol("a")), Epsilon()), AB)
    assert np.array_equal(star_a.transitions, plus_or_eps.transitions)
    assert np.array_equal(star_a.accepting, plus_or_eps.accepting)


def test_minimize_drops_unreachable_and_merges():
    dfa = DFA(("a",), np.array([[1], [0], [2], [3]]), 0, np.array([True, True, False, True]))
    minimal = minimize(dfa)
    assert minimal.n_states == 1 and minimal.accepting[0]


def test_complete_adds_sink_only_when_needed():
    partial = complete(("a", "b"), np.array([[1, -1], [1, 1]]), np.array([False, True]))
    assert partial.n_states == 3 and not partial.accepting[2]
    total = complete(("a",), np.array([[0]]), np.array([True]))
    assert total.n_states == 1


def test_equivalence_counterexample_is_shortest():
    a = regex_to_dfa(Star(seq("a", "b")), AB)
    b = regex_to_dfa(Union_(Star(seq("a", "b")), seq("b", "a", "b")), AB)
    result = equivalent(a, b)
    assert not result.equivalent and result.counterexample == ("b", "a", "b")
    assert equivalent(a, a).counterexample is None


def test_boolean_operations():
    a_first = regex_to_dfa(Concat(Symbol("a"), SIGMA_STAR), AB)
    a_last = regex_to_dfa(Concat(SIGMA_STAR, Symbol("a")), AB)
    strings = list(words(AB, 6))
    inter = accepts(intersection(a_first, a_last), strings)
    uni = accepts(union(a_first, a_last), strings)
    diff = accepts(difference(a_first, a_last), strings)
    comp = accepts(complement(a_first), strings)
    for w, i, u, d, c in zip(strings, inter, uni, diff, comp):
        first, last = w.startswith("a"), w.endswith("a")
        assert (i, u, d, c) == (first and last, first or last, first and not last, not first)


def test_shortest_accepted():
    assert shortest_accepted(regex_to_dfa(seq("b", "a", "b"), AB)) == ("b", "a", "b")
    assert shortest_accepted(regex_to_dfa(EmptySet(), AB)) is None
    assert shortest_accepted(regex_to_dfa(Star(Symbol("a")), AB)) == ()


# -------------------------------------------------------------------------- regex features
def test_negated_class_is_relative_to_alphabet():
    dfa = regex_to_dfa(CharClass(("a",), negated=True), ("a", "b", "c"))
    assert accepts(dfa, ["a", "b", "c", "", "bb"]).tolist() == [False, True, True, False, False]


def test_repeat_and_optional():
    dfa = regex_to_dfa(Repeat(Symbol("a"), 2, 4), ("a",))
    assert accepts(dfa, ["a" * n for n in range(7)]).tolist() == [n in (2, 3, 4) for n in range(7)]
    at_least = regex_to_dfa(Repeat(Symbol("a"), 3, None), ("a",))
    assert accepts(at_least, ["a" * n for n in range(7)]).tolist() == [n >= 3 for n in range(7)]
    optional = regex_to_dfa(Optional_(Symbol("b")), AB)
    assert accepts(optional, ["", "b", "a", "bb"]).tolist() == [True, True, False, False]
    with pytest.raises(FormalRopeError):
        regex_to_dfa(Repeat(Symbol("a"), 3, 2), ("a",))


def test_intersection_and_complement_nodes():
    even_length = Star(Concat(AnySymbol(), AnySymbol()))
    contains_a = Concat(SIGMA_STAR, Concat(Symbol("a"), SIGMA_STAR))
    dfa = regex_to_dfa(Intersect(even_length, Complement(contains_a)), AB)
    strings = list(words(AB, 6))
    assert accepts(dfa, strings).tolist() == [len(w) % 2 == 0 and "a" not in w for w in strings]


def test_too_many_states_is_refused():
    # Σ* a Σ^{12}: the minimal DFA has 2^13 states.
    regex = Concat(Concat(SIGMA_STAR, Symbol("a")), Repeat(AnySymbol(), 12, 12))
    with pytest.raises(TooManyStatesError, match="--max-states"):
        regex_to_dfa(regex, AB, max_states=1000)
    with pytest.raises(TooManyStatesError, match="1,000"):
        ltl_to_dfa(Yesterday(Atom("a"), 12), AB, max_states=1000)
    assert regex_to_dfa(regex, AB, max_states=10_000).n_states == 2**13
    assert issubclass(TooManyStatesError, FormalRopeError)


def test_unknown_symbol_in_expression():
    with pytest.raises(FormalRopeError, match="'c'"):
        regex_to_dfa(Symbol("c"), AB)
    with pytest.raises(FormalRopeError, match="'c'"):
        ltl_to_dfa(Past(Atom("c")), AB)


# ------------------------------------------------------------------------------ membership
def test_split_symbols():
    assert split_symbols("abba", AB) == ["a", "b", "b", "a"]
    assert split_symbols("  foo bar foo", ("foo", "bar")) == ["foo", "bar", "foo"]
    with pytest.raises(FormalRopeError, match=r"'c' at column 3"):
        split_symbols("abcb", AB)
    with pytest.raises(FormalRopeError, match=r"'baz' at column 5"):
        split_symbols("foo baz", ("foo", "bar"))


def test_encode_strings_padding_and_errors():
    symbols, lengths = encode_strings(["ab", "", "bba"], AB)
    assert symbols.dtype == np.int64 and lengths.dtype == np.int64
    assert symbols.tolist() == [[0, 1, 0], [0, 0, 0], [1, 1, 0]]
    assert lengths.tolist() == [2, 0, 3]
    with pytest.raises(FormalRopeError, match=r"'x' at column 2 of 'bx'"):
        encode_strings(["ab", "bx"], AB)
    symbols, lengths = encode_strings([["foo", "bar"], "bar"], ("foo", "bar"))
    assert symbols.tolist() == [[0, 1], [1, 0]] and lengths.tolist() == [2, 1]


def test_accepts_encoded_matches_run():
    dfa = regex_to_dfa(Star(seq("a", "b")), AB)
    strings = list(words(AB, 7))
    symbols, lengths = encode_strings(strings, AB)
    index = dfa.symbol_index()
    expected = [bool(dfa.accepting[dfa.run([index[c] for c in w])]) for w in strings]
    assert accepts_encoded(dfa, symbols, lengths).tolist() == expected


# ---------------------------------------------------------------------------------- render
def test_to_dot_and_table():
    dfa = regex_to_dfa(Star(seq("a", "b")), AB)
    dot = to_dot(dfa)
    assert "0 [shape=doublecircle]" in dot and '2 -> 2 [label="a,b"]' in dot
    headers, rows = to_table(dfa)
    assert headers == ["state", "a", "b"] and rows[0] == ["→*0", "1", "2"]


# ------------------------------------------------------------------------------ .att files
def test_att_loader_small(tmp_path):
    path = tmp_path / "x.att"
    path.write_text("0\t1\ta\ta\n1\t1\tb\tb\n1\n")
    dfa = load_att(path)
    assert dfa.alphabet == AB and dfa.n_states == 3
    assert accepts(dfa, ["a", "ab", "abb", "", "b", "aa"]).tolist() == [True, True, True, False, False, False]
    over_abc = load_att(path, alphabet=("a", "b", "c"))
    assert accepts(over_abc, ["ab", "ac"]).tolist() == [True, False]


@pytest.mark.parametrize(
    "content, message",
    [
        ("0 1 a a\nx\n", "x.att:2"),
        ("0 1 a a\n0 2 a a\n", "x.att:2: nondeterministic"),
        ("0 1 a a 1 2\n", "x.att:1"),
        ("0 1 a a z\n", "x.att:1: weight"),
        ("0 -1 a a\n", "x.att:1: state '-1'"),
        ("0 1 a b\n", "x.att:1"),
        ("", "no states"),
    ],
)
def test_att_loader_errors(tmp_path, content, message):
    path = tmp_path / "x.att"
    path.write_text(content)
    with pytest.raises(FormalRopeError, match=message):
        load_att(path)


def test_att_loader_missing_file(tmp_path):
    with pytest.raises(FormalRopeError, match="cannot read automaton file"):
        load_att(tmp_path / "missing.att")
