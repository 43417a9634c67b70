"""LTL -> DFA cross-checks: against the direct evaluator (hypothesis) and against MONA (M2L-Str)."""

from __future__ import annotations

import itertools
import re
import shutil
import subprocess

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from formal_rope.automata import DFA, accepts, equivalent, evaluate_ltl, ltl_accepts, ltl_to_dfa, product
from formal_rope.lang.ast import (
    And,
    Atom,
    Const,
    Historically,
    Iff,
    Implies,
    Mod,
    Not,
    Or,
    Past,
    Since,
    Yesterday,
)

AB = ("a", "b")
ABC = ("a", "b", "c")


def all_words(alphabet, max_length):
    for length in range(max_length + 1):
        yield from itertools.product(alphabet, repeat=length)


def formulas(alphabet):
    leaves = st.one_of(
        st.sampled_from([Atom(s) for s in alphabet]),
        st.builds(Const, st.booleans()),
        st.builds(Mod, st.integers(1, 4), st.integers(0, 5)),
    )

    def extend(children):
        return st.one_of(
            st.builds(Not, children),
            st.builds(And, children, children),
            st.builds(Or, children, children),
            st.builds(Implies, children, children),
            st.builds(Iff, children, children),
            st.builds(Past, children),
            st.builds(Historically, children),
            st.builds(Yesterday, children, st.integers(1, 3)),
            st.builds(Since, children, children),
        )

    return st.recursive(leaves, extend, max_leaves=6)


# ------------------------------------------------------------- evaluator semantics by hand
def test_evaluator_positions_and_readout():
    word = ("a", "b", "a")
    assert evaluate_ltl(Atom("a"), word, 1) and not evaluate_ltl(Atom("a"), word, 2)
    assert not evaluate_ltl(Atom("a"), word, 4)  # readout: no symbol
    assert evaluate_ltl(Yesterday(Atom("a"), 1), word, 4)
    assert not evaluate_ltl(Yesterday(Atom("a"), 1), word, 1)  # i > k fails
    assert evaluate_ltl(Yesterday(Const(True), 3), word, 4) and not evaluate_ltl(Yesterday(Const(True), 3), word, 3)
    assert evaluate_ltl(Mod(2, 0), word, 4) and not evaluate_ltl(Mod(2, 0), word, 3)
    assert not evaluate_ltl(Past(Const(True)), (), 1) and evaluate_ltl(Historically(Const(False)), (), 1)
    with pytest.raises(ValueError):
        evaluate_ltl(Atom("a"), word, 5)


# ------------------------------------------------------------------------ DFA vs evaluator
@settings(max_examples=60)
@given(formulas(AB))
def test_dfa_matches_evaluator_binary(formula):
    dfa = ltl_to_dfa(formula, AB)
    words = list(all_words(AB, 7))
    assert accepts(dfa, words).tolist() == [ltl_accepts(formula, w) for w in words]


@settings(max_examples=25)
@given(formulas(ABC))
def test_dfa_matches_evaluator_ternary(formula):
    dfa = ltl_to_dfa(formula, ABC)
    words = list(all_words(ABC, 5))
    assert accepts(dfa, words).tolist() == [ltl_accepts(formula, w) for w in words]


@settings(max_examples=30)
@given(formulas(AB))
def test_dfa_is_minimal_and_canonical(formula):
    dfa = ltl_to_dfa(formula, AB)
    # Rebuilding through an equivalent formula gives the identical canonical table.
    twin = ltl_to_dfa(Not(Not(formula)), AB)
    assert np.array_equal(dfa.transitions, twin.transitions) and np.array_equal(dfa.accepting, twin.accepting)
    # Minimal: every pair of states is distinguished by some suffix (checked by the table's rows
    # being pairwise non-equivalent through the product with itself from different starts).
    for p, q in itertools.combinations(range(dfa.n_states), 2):
        left = DFA(dfa.alphabet, dfa.transitions, p, dfa.accepting)
        right = DFA(dfa.alphabet, dfa.transitions, q, dfa.accepting)
        assert not equivalent(left, right).equivalent


def test_known_state_counts():
    assert ltl_to_dfa(Yesterday(Atom("a"), 3), AB).n_states == 2**3  # the last three symbols
    assert ltl_to_dfa(Mod(6, 1), ("a",)).n_states == 6
    assert ltl_to_dfa(And(Mod(2, 0), Mod(3, 0)), ("a",)).n_states == 6
    assert ltl_to_dfa(Past(Atom("a")), AB).n_states == 2


# ---------------------------------------------------------------------------------- MONA
MONA = shutil.which("mona")


class _Fresh:
    def __init__(self):
        self.count = 0

    def __call__(self) -> str:
        self.count += 1
        return f"v{self.count}"


def _at(formula, x: str, fresh: _Fresh, var: dict) -> str:
    """M2L-Str translation at a real position x (0-based; 1-based i = x + 1)."""
    if isinstance(formula, Atom):
        return f"({x} in {var[formula.symbol]})"
    if isinstance(formula, Const):
        return "true" if formula.value else "false"
    if isinstance(formula, Not):
        return f"(~{_at(formula.child, x, fresh, var)})"
    if isinstance(formula, (And, Or, Implies, Iff)):
        op = {And: "&", Or: "|", Implies: "=>", Iff: "<=>"}[type(formula)]
        return f"({_at(formula.left, x, fresh, var)} {op} {_at(formula.right, x, fresh, var)})"
    y = fresh()
    if isinstance(formula, Past):
        return f"(ex1 {y}: {y} < {x} & {_at(formula.child, y, fresh, var)})"
    if isinstance(formula, Historically):
        return f"(all1 {y}: {y} < {x} => {_at(formula.child, y, fresh, var)})"
    if isinstance(formula, Yesterday):
        return f"(ex1 {y}: {x} = {y} + {formula.k} & {_at(formula.child, y, fresh, var)})"
    if isinstance(formula, Since):
        z = fresh()
        return (
            f"(ex1 {y}: {y} < {x} & {_at(formula.right, y, fresh, var)} & "
            f"(all1 {z}: ({y} < {z} & {z} < {x}) => {_at(formula.left, z, fresh, var)}))"
        )
    if isinstance(formula, Mod):
        return f"({x} in M{formula.m}_{(formula.r - 1) % formula.m})"
    raise AssertionError(formula)


def _at_readout(formula, last: str, fresh: _Fresh, var: dict) -> str:
    """Translation at the readout position N+1 = last + 2 (1-based), which MONA cannot name."""
    if isinstance(formula, Atom):
        return "false"
    if isinstance(formula, Const):
        return "true" if formula.value else "false"
    if isinstance(formula, Not):
        return f"(~{_at_readout(formula.child, last, fresh, var)})"
    if isinstance(formula, (And, Or, Implies, Iff)):
        op = {And: "&", Or: "|", Implies: "=>", Iff: "<=>"}[type(formula)]
        return f"({_at_readout(formula.left, last, fresh, var)} {op} {_at_readout(formula.right, last, fresh, var)})"
    y = fresh()
    if isinstance(formula, Past):
        return f"(ex1 {y}: {_at(formula.child, y, fresh, var)})"
    if isinstance(formula, Historically):
        return f"(all1 {y}: {_at(formula.child, y, fresh, var)})"
    if isinstance(formula, Yesterday):
        # position i - k = N + 1 - k (1-based) is 0-based last + 1 - k
        return f"(ex1 {y}: {y} + {formula.k - 1} = {last} & {_at(formula.child, y, fresh, var)})"
    if isinstance(formula, Since):
        z = fresh()
        return (
            f"(ex1 {y}: {_at(formula.right, y, fresh, var)} & "
            f"(all1 {z}: {y} < {z} => {_at(formula.left, z, fresh, var)}))"
        )
    if isinstance(formula, Mod):
        return f"({last} in M{formula.m}_{(formula.r - 2) % formula.m})"
    raise AssertionError(formula)


def _moduli(formula) -> set[int]:
    if isinstance(formula, Mod):
        return {formula.m}
    found: set[int] = set()
    for name in ("child", "left", "right"):
        if hasattr(formula, name):
            found |= _moduli(getattr(formula, name))
    return found


def mona_program(formula, alphabet) -> str:
    var = {symbol: f"A{index}" for index, symbol in enumerate(alphabet)}
    names = list(var.values())
    fresh = _Fresh()
    exactly_one = " | ".join(
        "(" + " & ".join(f"{'' if other == name else '~'}(p in {other})" for other in names) + ")" for name in names
    )
    mod_sets, mod_rules = [], []
    for m in sorted(_moduli(formula)):
        sets = [f"M{m}_{c}" for c in range(m)]
        mod_sets += sets
        # Residue classes of 0-based positions: 0 in class 0, each successor in the next class.
        mod_rules.append(f"0 in M{m}_0")
        mod_rules.append(
            "all1 p: "
            + " | ".join("(" + " & ".join(f"{'' if t == s else '~'}(p in {t})" for t in sets) + ")" for s in sets)
        )
        mod_rules += [f"all1 p: (p in M{m}_{c} & p < L) => (p + 1 in M{m}_{(c + 1) % m})" for c in range(m)]
    body = " & ".join(f"({part})" for part in [*mod_rules, _at_readout(formula, "L", fresh, var)])
    if mod_sets:
        body = f"ex2 {', '.join(mod_sets)}: {body}"
    return (
        "m2l-str;\n"
        f"var2 {', '.join(names)};\n"
        f"all1 p: {exactly_one};\n"
        f"ex1 L: (all1 p: p <= L) & ({body});\n"
    )


def mona_dfa(program: str, alphabet, tmp_path) -> DFA:
    """Run MONA and read its automaton back over our alphabet (symbol a = only A_a set).

    MONA's state 0 is a dummy start with one transition to the real start (state 1), whose
    status is don't-care: M2L-Str has no empty string. We make it rejecting and compare
    nonempty strings only.
    """
    path = tmp_path / "formula.mona"
    path.write_text(program)
    output = subprocess.run([MONA, "-w", "-q", str(path)], capture_output=True, text=True, timeout=60).stdout
    variables = re.search(r"free variables: ([^\n]*)", output).group(1).split()
    n_states = int(re.search(r"Automaton has (\d+) states", output).group(1))
    accepting_line = re.search(r"Accepting states: ([^\n]*)", output).group(1).split()
    arcs = re.findall(r"State (\d+): ([01X]+) -> state (\d+)", output)
    table = np.full((n_states, len(alphabet)), -1, dtype=np.int64)
    for index, symbol in enumerate(alphabet):
        vector = ["1" if variables[i] == f"A{index}" else "0" for i in range(len(variables))]
        for source, pattern, target in arcs:
            if all(p in ("X", v) for p, v in zip(pattern, vector)):
                table[int(source), index] = int(target)
    accepting = np.zeros(n_states, dtype=bool)
    accepting[[int(s) for s in accepting_line]] = True
    accepting[1] = False
    table[0] = table[1]  # unused dummy state, kept complete
    assert (table >= 0).all()
    return DFA(tuple(alphabet), table, 1, accepting)


def _nonempty(dfa: DFA) -> DFA:
    sigma_plus = DFA(dfa.alphabet, np.array([[1] * dfa.n_symbols, [1] * dfa.n_symbols]), 0, np.array([False, True]))
    return product(dfa, sigma_plus, "and")


MONA_FORMULAS = [
    Past(Atom("a")),
    Historically(Atom("a")),
    Since(Atom("a"), Atom("b")),
    Yesterday(Atom("a"), 1),
    Yesterday(Atom("b"), 3),
    Yesterday(Const(True), 2),
    Mod(2, 0),
    Mod(2, 1),
    Mod(3, 2),
    Mod(1, 0),
    Past(And(Atom("a"), Mod(2, 1))),
    And(Past(Atom("a")), Mod(3, 0)),
    Since(Or(Atom("a"), Yesterday(Atom("b"), 2)), And(Atom("b"), Mod(2, 0))),
    Historically(Implies(Atom("b"), Yesterday(Atom("a"), 1))),
    Not(Past(And(Atom("b"), Past(Atom("a"))))),
    Yesterday(Past(Atom("b")), 2),
    Iff(Yesterday(Atom("a"), 2), Mod(4, 3)),
]


@pytest.mark.skipif(MONA is None, reason="mona is not installed (/usr/bin/mona)")
@pytest.mark.parametrize("formula", MONA_FORMULAS, ids=repr)
def test_dfa_matches_mona(formula, tmp_path):
    ours = ltl_to_dfa(formula, AB)
    theirs = mona_dfa(mona_program(formula, AB), AB, tmp_path)
    result = equivalent(_nonempty(ours), _nonempty(theirs))
    assert result.equivalent, f"differs on {result.counterexample}"


@pytest.mark.skipif(MONA is None, reason="mona is not installed (/usr/bin/mona)")
@settings(max_examples=15)
@given(formulas(AB))
def test_random_formulas_match_mona(tmp_path_factory, formula):
    ours = ltl_to_dfa(formula, AB)
    theirs = mona_dfa(mona_program(formula, AB), AB, tmp_path_factory.mktemp("mona"))
    assert equivalent(_nonempty(ours), _nonempty(theirs)).equivalent


@pytest.mark.skipif(MONA is None, reason="mona is not installed (/usr/bin/mona)")
def test_mona_translation_detects_an_off_by_one(tmp_path):
    # Guard against a vacuous comparison: Y^1 and Y^2 must come out different through MONA.
    theirs = mona_dfa(mona_program(Yesterday(Atom("a"), 2), AB), AB, tmp_path)
    ours = ltl_to_dfa(Yesterday(Atom("a"), 1), AB)
    assert not equivalent(_nonempty(ours), _nonempty(theirs)).equivalent
    odd_through_mona = mona_dfa(mona_program(Mod(2, 1), AB), AB, tmp_path)
    assert not equivalent(_nonempty(ltl_to_dfa(Mod(2, 0), AB)), _nonempty(odd_through_mona)).equivalent


@settings(max_examples=30)
@given(formulas(AB), st.lists(st.lists(st.sampled_from(AB), min_size=8, max_size=25), min_size=20, max_size=20))
def test_dfa_matches_evaluator_on_longer_words(formula, words):
    dfa = ltl_to_dfa(formula, AB)
    assert accepts(dfa, words).tolist() == [ltl_accepts(formula, w) for w in words]


# ---------------------------------------------------------------- acceptance-pass regressions
@pytest.mark.parametrize(
    "formula, message",
    [
        ("MOD_99999999999999999999^0", "1,000 states"),  # was OverflowError in the int64 counter
        ("P(a) & MOD_1001^3", "1,000 states"),  # the counter alone has 1001 reachable values
        ("Y^99999999999999999999(a)", "MAX_TEMPORAL_DEPTH"),  # was numpy's ValueError
    ],
)
def test_huge_modulus_or_offset_is_refused_up_front(formula, message):
    from formal_rope.errors import FormalRopeError
    from formal_rope.lang import parse_ltl

    with pytest.raises(FormalRopeError, match=message):
        ltl_to_dfa(parse_ltl(formula), ("a", "b"), max_states=1000)


def test_modulus_at_the_state_limit_is_still_built():
    from formal_rope.lang import parse_ltl

    dfa = ltl_to_dfa(parse_ltl("MOD_1000^0"), ("a",), max_states=1000)
    assert dfa.n_states == 1000
    assert accepts(dfa, ["a" * 999, "a" * 1000]).tolist() == [True, False]


def test_empty_alphabet_gives_the_one_state_automaton():
    """Only ε exists; the formula is evaluated at position 1 (used to fail in a reshape)."""
    from formal_rope.lang import parse_ltl

    for text, holds in [("MOD_3^1", True), ("MOD_3^0", False), ("H(false)", True), ("Y(true)", False)]:
        dfa = ltl_to_dfa(parse_ltl(text), ())
        assert dfa.n_states == 1 and dfa.transitions.shape == (1, 0) and bool(dfa.accepting[0]) is holds


@pytest.mark.parametrize("formula_text", ["MOD_{99999999999999999999}^1", "MOD_{99999999999999999999}^0"])
def test_empty_alphabet_with_a_modulus_beyond_int64(formula_text):
    # Only ε exists over the empty alphabet: a one-state DFA, accepting iff the formula holds at
    # position 1; the modulus must not be converted to int64 on the way.
    from formal_rope.lang import parse_ltl

    formula = parse_ltl(formula_text)
    dfa = ltl_to_dfa(formula, ())
    assert dfa.n_states == 1 and dfa.transitions.shape == (1, 0)
    assert bool(dfa.accepting[0]) == ltl_accepts(formula, ()) == formula_text.endswith("^1")


@pytest.mark.parametrize("text", ["MOD_3^1", "MOD_3^0 | MOD_1^0", "!MOD_2^1 & !P(true)", "MOD_2^1 S MOD_5^1"])
def test_empty_alphabet_agrees_with_the_oracle(text):
    from formal_rope.lang import parse_ltl

    formula = parse_ltl(text)
    assert bool(ltl_to_dfa(formula, ()).accepting[0]) == ltl_accepts(formula, ())


def test_a_modulus_beyond_int64_with_symbols_is_a_user_error_whatever_max_states():
    from formal_rope.errors import FormalRopeError
    from formal_rope.lang import parse_ltl

    with pytest.raises(FormalRopeError, match="least common multiple 99,999,999,999,999,999,999"):
        ltl_to_dfa(parse_ltl("MOD_{99999999999999999999}^1"), ("a",), max_states=10**30)
