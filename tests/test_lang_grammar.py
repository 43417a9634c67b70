"""Grammar coverage: every construct and spelling of both languages, the paper's notation verbatim,
precedence and associativity, and the '+' union/postfix rule. Regex semantics are cross-checked
against Python's `re` on the syntax both share, through an independent matcher written here."""

from __future__ import annotations

import itertools
import re

import pytest

from formal_rope.lang import parse_ltl, parse_regex
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

a, b, c, d = Atom("a"), Atom("b"), Atom("c"), Atom("d")
A, B, C = Symbol("a"), Symbol("b"), Symbol("c")


# ------------------------------------------------------------------------------------ LTL
@pytest.mark.parametrize(
    "text, expected",
    [
        ("a", a),
        ("'long name'", Atom("long name")),
        ('"it\'s"', Atom("it's")),
        ("'P'", Atom("P")),
        ("7", Atom("7")),
        ("true", Const(True)),
        ("⊤", Const(True)),
        ("false", Const(False)),
        ("⊥", Const(False)),
        ("!a", Not(a)),
        ("~a", Not(a)),
        ("¬a", Not(a)),
        ("a & b", And(a, b)),
        ("a ∧ b", And(a, b)),
        ("a && b", And(a, b)),
        ("a | b", Or(a, b)),
        ("a ∨ b", Or(a, b)),
        ("a || b", Or(a, b)),
        ("a -> b", Implies(a, b)),
        ("a → b", Implies(a, b)),
        ("a => b", Implies(a, b)),
        ("a <-> b", Iff(a, b)),
        ("a ↔ b", Iff(a, b)),
        ("a <=> b", Iff(a, b)),
        ("P(a)", Past(a)),
        ("P a", Past(a)),
        ("Pa", Past(a)),
        ("P P a", Past(Past(a))),
        ("H(a)", Historically(a)),
        ("Y(a)", Yesterday(a, 1)),
        ("Y^3(a)", Yesterday(a, 3)),
        ("Y^{12}(a)", Yesterday(a, 12)),
        ("Y²(a)", Yesterday(a, 2)),
        ("a S b", Since(a, b)),
        ("MOD_2^0", Mod(2, 0)),
        ("MOD_{10}^{7}", Mod(10, 7)),
        ("MOD_{3}^1", Mod(3, 1)),
        ("MOD(5, 4)", Mod(5, 4)),
        ("MOD₂⁰", Mod(2, 0)),
        ("MOD₁₂¹¹", Mod(12, 11)),
        ("MOD_1^0", Mod(1, 0)),
        ("  ( ( a ) )  ", a),
    ],
)
def test_ltl_constructs_and_spellings(text, expected):
    assert parse_ltl(text) == expected


@pytest.mark.parametrize(
    "text, expected",
    [
        # unary > S > & > | > -> > <->
        ("!a & b", And(Not(a), b)),
        ("P a & b", And(Past(a), b)),
        ("!a S b", Since(Not(a), b)),
        ("a S b & c", And(Since(a, b), c)),
        ("a & b S c", And(a, Since(b, c))),
        ("a | b & c", Or(a, And(b, c))),
        ("a & b | c", Or(And(a, b), c)),
        ("a | b -> c", Implies(Or(a, b), c)),
        ("a -> b <-> c", Iff(Implies(a, b), c)),
        ("a <-> b -> c", Iff(a, Implies(b, c))),
        # associativity
        ("a & b & c", And(And(a, b), c)),
        ("a | b | c", Or(Or(a, b), c)),
        ("a <-> b <-> c", Iff(Iff(a, b), c)),
        ("a -> b -> c", Implies(a, Implies(b, c))),
        ("a S b S c", Since(a, Since(b, c))),
        ("(a -> b) -> c", Implies(Implies(a, b), c)),
        ("!!a", Not(Not(a))),
        ("¬P(a ∨ b) ∧ Y(c)", And(Not(Past(Or(a, b))), Yesterday(c))),
        ("Y(a) S H(b)", Since(Yesterday(a), Historically(b))),
    ],
)
def test_ltl_precedence(text, expected):
    assert parse_ltl(text) == expected


def test_ltl_paper_formulas():
    assert parse_ltl("P(a) & MOD_2^0") == And(Past(a), Mod(2, 0))
    assert parse_ltl("P(b ∧ Y a)") == Past(And(b, Yesterday(a)))
    assert parse_ltl("MOD_2^0 ∧ ¬P(a ∧ MOD_2^1)") == And(Mod(2, 0), Not(Past(And(a, Mod(2, 1)))))


def test_ltl_operator_letters_are_not_atoms_but_keywords_win_over_letters():
    # 'true' is the constant, not four atoms; letters of other words are single atoms.
    assert parse_ltl("P(true)") == Past(Const(True))
    assert parse_ltl("t") == Atom("t")
    assert parse_ltl("M & O") == And(Atom("M"), Atom("O"))


# ---------------------------------------------------------------------------------- regex
@pytest.mark.parametrize(
    "text, expected",
    [
        ("a", A),
        ("'long name'", Symbol("long name")),
        ("0", Symbol("0")),
        ("ε", Epsilon()),
        ("()", Epsilon()),
        ("∅", EmptySet()),
        ("[]", EmptySet()),
        ("Σ", AnySymbol()),
        (".", AnySymbol()),
        ("[abc]", CharClass(("a", "b", "c"))),
        ("[cab a]", CharClass(("c", "a", "b"))),
        ("[a-d]", CharClass(("a", "b", "c", "d"))),
        ("[0-2x]", CharClass(("0", "1", "2", "x"))),
        ("[^ab]", CharClass(("a", "b"), True)),
        ("['x y' b]", CharClass(("x y", "b"))),
        ("ab", Concat(A, B)),
        ("a b", Concat(A, B)),
        ("a|b", Union_(A, B)),
        ("a∪b", Union_(A, B)),
        ("a+b", Union_(A, B)),
        ("a&b", Intersect(A, B)),
        ("a∩b", Intersect(A, B)),
        ("a*", Star(A)),
        ("a+", Plus(A)),
        ("a?", Optional_(A)),
        ("a{3}", Repeat(A, 3, 3)),
        ("a{2,5}", Repeat(A, 2, 5)),
        ("a{2,}", Repeat(A, 2, None)),
        ("a{,4}", Repeat(A, 0, 4)),
        ("a{0}", Repeat(A, 0, 0)),
        ("~a", Complement(A)),
        ("¬a", Complement(A)),
        ("(ab)^c", Complement(Concat(A, B))),
        ("a^c", Complement(A)),
    ],
)
def test_regex_constructs_and_spellings(text, expected):
    assert parse_regex(text) == expected


def test_regex_paper_notation_verbatim():
    sigma_star = Star(AnySymbol())
    assert parse_regex("(aa)*") == Star(Concat(A, A))
    assert parse_regex("(ab)*") == Star(Concat(A, B))
    assert parse_regex("aΣ*") == Concat(A, sigma_star)
    assert parse_regex("Σ*a") == Concat(sigma_star, A)
    assert parse_regex("Σ*abΣ*") == Concat(Concat(Concat(sigma_star, A), B), sigma_star)


@pytest.mark.parametrize(
    "text, expected",
    [
        ("a+b", Union_(A, B)),
        ("a + b", Union_(A, B)),
        ("a+", Plus(A)),
        ("(ab)+c", Union_(Concat(A, B), C)),
        ("(ab)+", Plus(Concat(A, B))),
        ("a+*", Star(Plus(A))),
        ("(a+)", Plus(A)),
        ("(a+)b", Concat(Plus(A), B)),
        ("a++b", Union_(Plus(A), B)),
        ("a+(b)", Union_(A, B)),
        ("a+[bc]", Union_(A, CharClass(("b", "c")))),
        ("a+~b", Union_(A, Complement(B))),
        ("a+.", Union_(A, AnySymbol())),
        ("a+|b", Union_(Plus(A), B)),
        ("a+{2}", Repeat(Plus(A), 2, 2)),
        ("a+&b", Intersect(Plus(A), B)),
    ],
)
def test_regex_plus_is_union_only_before_an_operand(text, expected):
    assert parse_regex(text) == expected


@pytest.mark.parametrize(
    "text, expected",
    [
        ("ab|c", Union_(Concat(A, B), C)),
        ("a|bc", Union_(A, Concat(B, C))),
        ("ab*", Concat(A, Star(B))),
        ("ab&c", Intersect(Concat(A, B), C)),
        ("a|b&c", Union_(A, Intersect(B, C))),
        ("a&b|c", Union_(Intersect(A, B), C)),
        ("~ab", Concat(Complement(A), B)),
        ("~a*", Complement(Star(A))),
        ("~~a", Complement(Complement(A))),
        ("(~a)*", Star(Complement(A))),
        ("a|b|c", Union_(Union_(A, B), C)),
        ("abc", Concat(Concat(A, B), C)),
        ("a**", Star(Star(A))),
        ("a*?", Optional_(Star(A))),
        ("a{2}*", Star(Repeat(A, 2, 2))),
        ("(a|b)^c*", Star(Complement(Union_(A, B)))),
    ],
)
def test_regex_precedence(text, expected):
    assert parse_regex(text) == expected


def test_class_members_keep_written_order_without_duplicates():
    assert parse_regex("[baab]") == CharClass(("b", "a"))


# ------------------------------------------------- independent matcher vs Python's re module
def _ends(node, text: str, start: int, alphabet: str) -> set[int]:
    """End positions j such that text[start:j] is in the language of node (set semantics)."""
    kind = type(node)
    if kind is Symbol:
        return {start + 1} if text[start : start + 1] == node.symbol else set()
    if kind is AnySymbol:
        return {start + 1} if start < len(text) and text[start] in alphabet else set()
    if kind is CharClass:
        if start >= len(text):
            return set()
        inside = text[start] in node.symbols
        return {start + 1} if inside != node.negated else set()
    if kind is Epsilon:
        return {start}
    if kind is EmptySet:
        return set()
    if kind is Concat:
        return {
            j for middle in _ends(node.left, text, start, alphabet) for j in _ends(node.right, text, middle, alphabet)
        }
    if kind is Union_:
        return _ends(node.left, text, start, alphabet) | _ends(node.right, text, start, alphabet)
    if kind is Intersect:
        return _ends(node.left, text, start, alphabet) & _ends(node.right, text, start, alphabet)
    if kind is Complement:
        inside = _ends(node.child, text, start, alphabet)
        return {j for j in range(start, len(text) + 1) if j not in inside}
    if kind in (Star, Plus, Optional_, Repeat):
        low, high = {Star: (0, None), Plus: (1, None), Optional_: (0, 1)}.get(
            kind, (getattr(node, "low", 0), getattr(node, "high", None))
        )
        reached, frontier, count = ({start} if low == 0 else set()), {start}, 0
        while frontier and (high is None or count < high):
            count += 1
            frontier = {j for i in frontier for j in _ends(node.child, text, i, alphabet)} - (
                {start} if count > 1 and low == 0 else set()
            )
            if count >= low:
                new = frontier - reached
                reached |= frontier
                if high is None:
                    frontier = new
        return reached
    raise TypeError(node)


def _matches(regex, text: str, alphabet: str) -> bool:
    return len(text) in _ends(regex, text, 0, alphabet)


SHARED_SYNTAX = [
    "(aa)*",
    "(ab)*",
    "a(a|b)*",
    "(a|b)*a",
    "(a|b)*ab(a|b)*",
    "ab*|ba*",
    "a?b{2,3}",
    "(ab|b){1,}a?",
    "[ab]c{,2}",
    "[^a]*a",
    "((a|b)(a|b))*",
    "a{2}|b{0,1}c",
    "(a*b*)*c",
]


@pytest.mark.parametrize("expression", SHARED_SYNTAX)
def test_regex_meaning_matches_python_re_on_shared_syntax(expression):
    """Strings up to length 5 over {a,b,c}: our AST (independent matcher) agrees with re.fullmatch."""
    ast = parse_regex(expression)
    python = re.compile(expression)
    for length in range(6):
        for letters in itertools.product("abc", repeat=length):
            word = "".join(letters)
            assert _matches(ast, word, "abc") == bool(python.fullmatch(word)), (expression, word)


def test_regex_extensions_mean_what_they_say():
    alphabet = "ab"
    words = ["".join(p) for n in range(5) for p in itertools.product(alphabet, repeat=n)]
    sigma_star_ab = parse_regex("Σ*abΣ*")
    complement = parse_regex("~(Σ*abΣ*)")
    intersect = parse_regex("a.* & .*b")
    plus_union = parse_regex("aa+b")
    for word in words:
        assert _matches(complement, word, alphabet) == (not _matches(sigma_star_ab, word, alphabet))
        assert _matches(intersect, word, alphabet) == (word.startswith("a") and word.endswith("b"))
        assert _matches(plus_union, word, alphabet) == (word in ("aa", "b"))
