"""Printing: parse(print(x)) == x for generated ASTs in both styles; the printer's parentheses are
minimal on known cases; a fully parenthesized printer (written here) parses to the same AST, which
checks the grammar independently of precedence. Also analysis helpers and JSON serialization."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from formal_rope.lang import format_ltl, format_regex, ltl_fragment, parse_ltl, parse_regex, symbols_of
from formal_rope.lang.analysis import max_lookback, moduli, needs_explicit_alphabet, uses_temporal_or_mod
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
    Iff,
    Implies,
    Intersect,
    Mod,
    Not,
    Optional_,
    Or,
    Past,
    Plus,
    Repeat,
    Since,
    Star,
    Symbol,
    Union_,
    Yesterday,
)
from formal_rope.lang.printer import quote_symbol
from formal_rope.lang.serialize import ast_from_dict, ast_to_dict

SYMBOLS = st.sampled_from(["a", "b", "c", "0", "7", "é", "P", "S", "Σ", "ε", "true", "long name", "it's", "x+y"])


@st.composite
def _mod(draw):
    m = draw(st.integers(1, 12))
    return Mod(m, draw(st.integers(0, m - 1)))


LTL_LEAVES = st.one_of(SYMBOLS.map(Atom), st.booleans().map(Const), _mod())


def _ltl_extend(children):
    return st.one_of(
        children.map(Not),
        children.map(Past),
        children.map(Historically),
        st.builds(Yesterday, children, st.integers(1, 5)),
        *(st.builds(kind, children, children) for kind in (And, Or, Implies, Iff, Since)),
    )


FORMULAS = st.recursive(LTL_LEAVES, _ltl_extend, max_leaves=14)


@st.composite
def _repeat(draw, children):
    low = draw(st.integers(0, 4))
    high = draw(st.one_of(st.none(), st.integers(low, low + 3)))
    return Repeat(draw(children), low, high)


REGEX_LEAVES = st.one_of(
    SYMBOLS.map(Symbol),
    st.just(Epsilon()),
    st.just(EmptySet()),
    st.just(AnySymbol()),
    st.builds(CharClass, st.lists(SYMBOLS, min_size=1, max_size=3, unique=True).map(tuple), st.just(False)),
    st.builds(CharClass, st.lists(SYMBOLS, max_size=3, unique=True).map(tuple), st.just(True)),
)


def _regex_extend(children):
    return st.one_of(
        children.map(Star),
        children.map(Plus),
        children.map(Optional_),
        children.map(Complement),
        _repeat(children),
        *(st.builds(kind, children, children) for kind in (Concat, Union_, Intersect)),
        # A postfix '+' right before an operand is the printer's trickiest case: make it common.
        st.builds(Concat, children.map(Plus), children),
        st.builds(Concat, st.builds(Concat, children, children.map(Plus)), children),
    )


REGEXES = st.recursive(REGEX_LEAVES, _regex_extend, max_leaves=14)


@given(FORMULAS, st.sampled_from(["ascii", "unicode"]))
def test_ltl_round_trip(formula, style):
    assert parse_ltl(format_ltl(formula, style)) == formula


@given(REGEXES, st.sampled_from(["ascii", "unicode"]))
def test_regex_round_trip(regex, style):
    assert parse_regex(format_regex(regex, style)) == regex


# ------------------------------------------------------- fully parenthesized reference printers
def _full_ltl(node) -> str:
    kind = type(node)
    if kind is Atom:
        return quote_symbol(node.symbol, __import__("re").compile(r"(?![PYSHεΣ])[^\W_]"))
    if kind is Const:
        return "true" if node.value else "false"
    if kind is Mod:
        return f"MOD({node.m},{node.r})"
    unary = {Not: "¬", Past: "P", Historically: "H"}
    if kind in unary:
        return f"({unary[kind]}{_full_ltl(node.child)})"
    if kind is Yesterday:
        return f"(Y^{{{node.k}}}{_full_ltl(node.child)})"
    binary = {And: "∧", Or: "∨", Implies: "→", Iff: "↔", Since: "S"}
    return f"({_full_ltl(node.left)} {binary[kind]} {_full_ltl(node.right)})"


def _full_regex(node) -> str:
    kind = type(node)
    if kind is Symbol:
        return quote_symbol(node.symbol)
    leaves = {Epsilon: "ε", EmptySet: "∅", AnySymbol: "."}
    if kind in leaves:
        return leaves[kind]
    if kind is CharClass:
        return ("[^" if node.negated else "[") + " ".join(quote_symbol(s) for s in node.symbols) + "]"
    suffix = {Star: "*", Plus: "+", Optional_: "?"}
    if kind in suffix:
        return f"({_full_regex(node.child)}{suffix[kind]})"
    if kind is Repeat:
        bounds = f"{node.low}," + ("" if node.high is None else str(node.high))
        return f"({_full_regex(node.child)}{{{bounds}}})"
    if kind is Complement:
        return f"(({_full_regex(node.child)})^c)"
    binary = {Concat: " ", Union_: "|", Intersect: "&"}
    return f"({_full_regex(node.left)}{binary[kind]}{_full_regex(node.right)})"


@given(FORMULAS)
def test_fully_parenthesized_formula_parses_to_the_same_ast(formula):
    assert parse_ltl(_full_ltl(formula)) == formula


@given(REGEXES)
def test_fully_parenthesized_regex_parses_to_the_same_ast(regex):
    assert parse_regex(_full_regex(regex)) == regex


@given(FORMULAS)
def test_minimal_printing_is_never_longer_than_full_parenthesization(formula):
    assert format_ltl(formula, "unicode").count("(") <= _full_ltl(formula).count("(")


# ------------------------------------------------------------------------- known printings
a, b, c = Atom("a"), Atom("b"), Atom("c")
A, B = Symbol("a"), Symbol("b")


@pytest.mark.parametrize(
    "formula, ascii_text, unicode_text",
    [
        (Or(And(a, b), c), "a & b | c", "a ∧ b ∨ c"),
        (And(a, Or(b, c)), "a & (b | c)", "a ∧ (b ∨ c)"),
        (Implies(Implies(a, b), c), "(a -> b) -> c", "(a → b) → c"),
        (Implies(a, Implies(b, c)), "a -> b -> c", "a → b → c"),
        (And(And(a, b), c), "a & b & c", "a ∧ b ∧ c"),
        (And(a, And(b, c)), "a & (b & c)", "a ∧ (b ∧ c)"),
        (Since(a, Since(b, c)), "a S b S c", "a S b S c"),
        (Not(And(a, b)), "!(a & b)", "¬(a ∧ b)"),
        (Not(Past(a)), "!P(a)", "¬P(a)"),
        (And(Past(a), Mod(2, 0)), "P(a) & MOD_2^0", "P(a) ∧ MOD_2^0"),
        (Yesterday(Const(True), 3), "Y^3(true)", "Y^3(⊤)"),
        (Iff(Atom("P"), Atom("long name")), "'P' <-> 'long name'", "'P' ↔ 'long name'"),
    ],
)
def test_ltl_printing_uses_minimal_parentheses(formula, ascii_text, unicode_text):
    assert format_ltl(formula) == ascii_text
    assert format_ltl(formula, "unicode") == unicode_text


@pytest.mark.parametrize(
    "text, unicode_text, ascii_text",
    [
        ("(aa)*", "(aa)*", "(aa)*"),
        ("aΣ*", "aΣ*", "a.*"),
        ("Σ*abΣ*", "Σ*abΣ*", ".*ab.*"),
        ("(a+)b", "(a+)b", "(a+)b"),
        ("x(a+)b", "x(a+)b", "x(a+)b"),
        ("Σ*ab(a+)b", "Σ*ab(a+)b", ".*ab(a+)b"),
        ("((a+)+)b", "(a++)b", "(a++)b"),
        ("(a+)+b", "a+|b", "a+|b"),
        ("a+b", "a|b", "a|b"),
        ("~(ab)", "~(ab)", "~(ab)"),
        ("(~a)*", "(~a)*", "(~a)*"),
        ("()∅", "ε∅", "()[]"),
        ("a{2,}b{3}c{1,2}", "a{2,}b{3}c{1,2}", "a{2,}b{3}c{1,2}"),
        ("(a|b)&c", "(a|b)&c", "(a|b)&c"),
        ("a|b&c", "a|b&c", "a|b&c"),
    ],
)
def test_regex_printing(text, unicode_text, ascii_text):
    ast = parse_regex(text)
    assert format_regex(ast) == unicode_text
    assert format_regex(ast, "ascii") == ascii_text


def test_long_chains_print_and_parse_without_recursion_limits():
    text = "ab" * 3000
    assert format_regex(parse_regex(text)) == text
    formula = " & ".join(["a", "b"] * 1500)
    assert format_ltl(parse_ltl(formula)) == formula
    assert symbols_of(parse_regex(text)) == ("a", "b")


# ------------------------------------------------------------------------------- analysis
@pytest.mark.parametrize(
    "text, fragment",
    [
        ("a & !b", "LTL[P]"),
        ("P(a) -> H(b)", "LTL[P]"),
        ("P(a) & MOD_2^0", "LTL[P,MOD]"),
        ("P(b & Y(a))", "LTL[P,Y]"),
        ("Y^2(a) | MOD(3,1)", "LTL[P,Y,MOD]"),
        ("a S b", "LTL[P,Y,S,MOD]"),
        ("P(a S b) & MOD_2^1", "LTL[P,Y,S,MOD]"),
    ],
)
def test_ltl_fragment(text, fragment):
    assert ltl_fragment(parse_ltl(text)) == fragment


def test_fragment_rejects_regexes_and_helpers_report_structure():
    with pytest.raises(TypeError):
        ltl_fragment(parse_regex("a"))
    formula = parse_ltl("Y^3(a) & Y(b) & MOD_4^1 & MOD_2^0 & MOD_4^3")
    assert max_lookback(formula) == 3 and moduli(formula) == (2, 4)
    assert uses_temporal_or_mod(parse_ltl("MOD_2^0"))
    assert uses_temporal_or_mod(parse_ltl("H(a)"))
    assert not uses_temporal_or_mod(parse_ltl("a -> b"))


def test_symbols_and_alphabet_needs():
    assert symbols_of(parse_regex("[cb]a'long'")) == ("a", "b", "c", "long")
    assert symbols_of(parse_ltl("P(z) & Y(a) S 'q r'")) == ("a", "q r", "z")
    assert needs_explicit_alphabet(parse_regex("aΣ*"))
    assert needs_explicit_alphabet(parse_regex("[^a]"))
    assert needs_explicit_alphabet(parse_regex("~a"))
    assert needs_explicit_alphabet(parse_ltl("P(!a)"))
    assert needs_explicit_alphabet(parse_ltl("P(true)"))
    assert not needs_explicit_alphabet(parse_regex("(aa)*"))
    assert not needs_explicit_alphabet(parse_regex("aΣ*b"))  # two symbols: alphabet {a, b}
    assert not needs_explicit_alphabet(parse_ltl("P(a) & MOD_2^0"))


@given(st.one_of(FORMULAS, REGEXES))
def test_json_serialization_round_trip(ast):
    assert ast_from_dict(ast_to_dict(ast)) == ast
