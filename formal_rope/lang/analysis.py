"""Static facts about ASTs: the LTL fragment a formula lies in, the symbols it mentions, and
whether its meaning depends on symbols it does not mention (so it needs an explicit alphabet).

All walks are iterative (explicit stack), so very deep ASTs are fine.
"""

from __future__ import annotations

from typing import Iterator

from formal_rope import limits
from formal_rope.errors import FormalRopeError
from formal_rope.lang.ast import (
    FORMULA_TYPES,
    REGEX_TYPES,
    AnySymbol,
    Atom,
    CharClass,
    Complement,
    Const,
    Formula,
    Historically,
    Iff,
    Implies,
    Mod,
    Not,
    Past,
    Regex,
    Since,
    Symbol,
    Yesterday,
    children,
)

FRAGMENTS = ("LTL[P]", "LTL[P,MOD]", "LTL[P,Y]", "LTL[P,Y,MOD]", "LTL[P,Y,S,MOD]")

def iter_nodes(ast: Formula | Regex) -> Iterator[Formula | Regex]:
    """Every node of the AST, parents before children, left before right; a subformula shared by
    several parents (the same object: definitions `@k := ...`, the automaton construction) once,
    so a DAG whose tree has 10^11 nodes is walked in time linear in its size."""
    stack = [ast]
    seen: set[int] = set()
    while stack:
        node = stack.pop()
        if id(node) in seen:
            continue
        seen.add(id(node))
        yield node
        stack.extend(reversed(children(node)))


def is_formula(ast: object) -> bool:
    return isinstance(ast, FORMULA_TYPES)


def is_regex(ast: object) -> bool:
    return isinstance(ast, REGEX_TYPES)


def node_types(ast: Formula | Regex) -> frozenset[type]:
    return frozenset(type(node) for node in iter_nodes(ast))


def ltl_fragment(formula: Formula) -> str:
    """The smallest of LTL[P] ⊂ LTL[P,MOD] / LTL[P,Y] ⊂ LTL[P,Y,MOD] ⊂ LTL[P,Y,S,MOD] whose
    operators cover the formula. H counts as P (H φ = ¬P¬φ); Boolean-only formulas are LTL[P].
    This is syntactic: a formula using S may still define an LTL[P] language."""
    if not is_formula(formula):
        raise TypeError(f"not an LTL formula: {formula!r}")
    kinds = node_types(formula)
    if Since in kinds:
        return "LTL[P,Y,S,MOD]"
    uses_y, uses_mod = Yesterday in kinds, Mod in kinds
    if uses_y and uses_mod:
        return "LTL[P,Y,MOD]"
    if uses_y:
        return "LTL[P,Y]"
    if uses_mod:
        return "LTL[P,MOD]"
    return "LTL[P]"


def uses_temporal_or_mod(formula: Formula) -> bool:
    """True when the formula uses P, H, Y, S or a MOD predicate (decides bare-expression reading)."""
    return bool(node_types(formula) & {Past, Historically, Yesterday, Since, Mod})


def max_lookback(formula: Formula) -> int:
    """The largest k of any Y^k in the formula (0 without Y)."""
    return max((node.k for node in iter_nodes(formula) if isinstance(node, Yesterday)), default=0)


def temporal_depth(formula: Formula) -> int:
    """The most temporal operators nested on one path of the formula: P, H and S count 1, Y^k counts k
    (the positions of memory its automaton and its compiled model keep along that path)."""

    def combine(node, depths) -> int:
        own = node.k if isinstance(node, Yesterday) else 1 if isinstance(node, (Past, Historically, Since)) else 0
        return own + max(depths, default=0)

    return int(fold_ast(formula, combine))


def check_temporal_depth(formula: Formula, what: str) -> None:
    """FormalRopeError when the formula nests more temporal operators than MAX_TEMPORAL_DEPTH (checked
    before `what` is built: its construction works position by position through every subformula)."""
    depth = temporal_depth(formula)
    if depth > limits.MAX_TEMPORAL_DEPTH:
        raise FormalRopeError(
            f"the formula nests {depth:,} temporal operators (P, H and S count 1, Y^k counts k), more than "
            f"{limits.describe('MAX_TEMPORAL_DEPTH')}: building {what} takes time that grows with the square of "
            "this depth; use a smaller k in Y^k or fewer nested operators"
        )


def moduli(formula: Formula) -> tuple[int, ...]:
    """The distinct moduli m of the MOD_m^r predicates, sorted."""
    return tuple(sorted({node.m for node in iter_nodes(formula) if isinstance(node, Mod)}))


def symbols_of(ast: Formula | Regex) -> tuple[str, ...]:
    """The symbols an expression mentions (atoms, regex symbols, class members), sorted."""
    found: set[str] = set()
    for node in iter_nodes(ast):
        if isinstance(node, (Atom, Symbol)):
            found.add(node.symbol)
        elif isinstance(node, CharClass):
            found.update(node.symbols)
    return tuple(sorted(found))


def uses_alphabet_wide_construct(ast: Formula | Regex) -> bool:
    """True when the meaning refers to 'any other symbol': Σ/., [^..], complement in regexes;
    negation, ->, <->, H or the constant true in formulas."""
    wide = (AnySymbol, Complement, Not, Implies, Iff, Historically)
    for node in iter_nodes(ast):
        if isinstance(node, wide):
            return True
        if isinstance(node, CharClass) and node.negated:
            return True
        if isinstance(node, Const) and node.value:
            return True
    return False


def needs_explicit_alphabet(ast: Formula | Regex) -> bool:
    """SPEC section 1: an expression using Σ/./negation that mentions fewer than two symbols cannot
    take its alphabet from the symbols it mentions. (Zero mentioned symbols always needs one too,
    see `resolve_language`, since the alphabet would be empty.)"""
    return uses_alphabet_wide_construct(ast) and len(symbols_of(ast)) < 2


def fold_ast(ast: Formula | Regex, combine) -> object:
    """Bottom-up fold without recursion: combine(node, [results of its children]) for every node."""
    results: dict[int, object] = {}
    stack: list[tuple[object, bool]] = [(ast, False)]
    while stack:
        node, expanded = stack.pop()
        direct = children(node)
        if expanded:
            results[id(node)] = combine(node, [results[id(child)] for child in direct])
            continue
        stack.append((node, True))
        stack.extend((child, False) for child in reversed(direct) if id(child) not in results)
    return results[id(ast)]
