"""Print ASTs back to text with the fewest parentheses that keep parse(print(x)) == x.

Two styles: "ascii" (! & | -> <-> true false; . () [] in regexes) and "unicode" (¬ ∧ ∨ → ↔ ⊤ ⊥;
Σ ε ∅). Formulas default to ASCII (the spelling used on command lines), regexes to Unicode (the
paper's notation: aΣ*, Σ*abΣ*). P, H and Y always print with parentheses: P(a), Y^2(a).
Left-associative chains (a & b & c, long concatenations) are printed in one loop, and nesting is
walked by a driver with an explicit stack (each node's renderer is a generator that yields the
child it needs printed), so expressions thousands of levels deep print fine.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Generator
from typing import Literal

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
    Formula,
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
    Regex,
    Repeat,
    Since,
    Star,
    Symbol,
    Union_,
    Yesterday,
    children,
)

Style = Literal["ascii", "unicode"]

_LTL_BARE_ATOM = re.compile(r"(?![PYSHεΣ])[^\W_]")
_REGEX_BARE_SYMBOL = re.compile(r"(?![εΣ])[^\W_]")


def quote_symbol(symbol: str, bare: re.Pattern[str] = _REGEX_BARE_SYMBOL) -> str:
    """A symbol as the grammars read it: bare when a single letter/digit, else quoted."""
    if not symbol:
        raise ValueError("an empty symbol cannot be printed")
    if len(symbol) == 1 and bare.fullmatch(symbol):
        return symbol
    if "\n" in symbol or ("'" in symbol and '"' in symbol):
        raise ValueError(f"symbol {symbol!r} cannot be quoted (newline or both quote characters)")
    quote = '"' if "'" in symbol else "'"
    return f"{quote}{symbol}{quote}"


def _drive(root, render: Callable[[object], Generator]) -> str:
    """Run the generator renderers without recursion: a renderer yields a child node and is sent
    back that child's text; its return value is the node's text."""
    stack = [render(root)]
    text = None
    while stack:
        try:
            child = stack[-1].send(text)
        except StopIteration as done:
            stack.pop()
            text = done.value
            continue
        stack.append(render(child))
        text = None
    return text


# ------------------------------------------------------------------------------------- LTL
# Binding strength: higher binds tighter. Unary operators and atoms are 6.
_LTL_LEVEL = {Iff: 1, Implies: 2, Or: 3, And: 4, Since: 5}
_LTL_RIGHT_ASSOC = {Implies, Since}
_LTL_SYMBOLS = {
    "ascii": {Iff: "<->", Implies: "->", Or: "|", And: "&", Since: "S", Not: "!", True: "true", False: "false"},
    "unicode": {Iff: "↔", Implies: "→", Or: "∨", And: "∧", Since: "S", Not: "¬", True: "⊤", False: "⊥"},
}


def _ltl_level(formula: Formula) -> int:
    return _LTL_LEVEL.get(type(formula), 6)


# A formula whose tree is larger than this, and more than twice its number of distinct
# subformulas, prints with shared definitions (`@1 := P(a); @1 & Y(@1)`): the automaton
# construction shares subformulas so heavily that its tree can have 10^11 nodes.
SHARE_ABOVE_TREE_SIZE = 512


def format_ltl(formula: Formula, style: Style = "ascii", share: bool | None = None, separator: str = "; ") -> str:
    """Canonical text of a formula; parse_ltl(format_ltl(f)) == f.

    share=None (auto) writes subformulas used more than once as definitions ``@k := ...;`` when
    the tree spelled out would be large (SHARE_ABOVE_TREE_SIZE); True always shares, False never.
    `separator` ends each definition (";\n" puts one per line; any ';' and whitespace parse).
    """
    names: dict[Formula, str] = {}
    if share is not False:
        names = _shared_names(formula, always=bool(share))
    symbols = _LTL_SYMBOLS[style]
    top: list[Formula] = [formula]  # the definition being written: the one node not shown by its name

    def named(node: Formula) -> bool:
        return bool(names) and node is not top[0] and node in names

    def level(node: Formula) -> int:
        return 6 if named(node) else _ltl_level(node)

    def wrap(child: Formula, needs: bool) -> Generator:
        text = yield child
        return f"({text})" if needs else text

    def render(formula: Formula) -> Generator:
        if named(formula):
            return names[formula]
        kind = type(formula)
        if kind is Atom:
            return quote_symbol(formula.symbol, _LTL_BARE_ATOM)
        if kind is Const:
            return symbols[bool(formula.value)]
        if kind is Mod:
            return f"MOD_{formula.m}^{formula.r}"
        if kind is Not:
            return symbols[Not] + (yield from wrap(formula.child, level(formula.child) < 6))
        if kind is Past:
            return f"P({(yield formula.child)})"
        if kind is Historically:
            return f"H({(yield formula.child)})"
        if kind is Yesterday:
            power = "" if formula.k == 1 else f"^{formula.k}"
            return f"Y{power}({(yield formula.child)})"
        if kind in _LTL_LEVEL:
            precedence = _LTL_LEVEL[kind]
            operator = f" {symbols[kind]} "
            if kind in _LTL_RIGHT_ASSOC:
                # Walk the right spine: a -> (b -> c) prints as a -> b -> c.
                parts = []
                node = formula
                while type(node) is kind and (node is formula or not named(node)):
                    parts.append((yield from wrap(node.left, level(node.left) <= precedence)))
                    node = node.right
                parts.append((yield from wrap(node, level(node) < precedence)))
                return operator.join(parts)
            # Left-associative: walk the left spine iteratively.
            rights = []
            node = formula
            while type(node) is kind and (node is formula or not named(node)):
                rights.append(node.right)
                node = node.left
            parts = [(yield from wrap(node, level(node) < precedence))]
            for right in reversed(rights):
                parts.append((yield from wrap(right, level(right) <= precedence)))
            return operator.join(parts)
        raise TypeError(f"not an LTL formula node: {type(formula).__name__}")

    if not names:
        return _drive(formula, render)
    lines = []
    for node, name in names.items():  # children before parents: each name is defined before its uses
        top[0] = node
        lines.append(f"{name} := {_drive(node, render)}")
    top[0] = formula
    lines.append(_drive(formula, render))
    return separator.join(lines)


def _shared_names(formula: Formula, always: bool) -> dict[Formula, str]:
    """@1, @2, ... for the non-leaf subformulas with more than one use, children first; {} when the
    tree is small enough to print whole (unless `always`)."""
    from formal_rope.lang.metrics import distinct_subformulas  # metrics imports the AST only

    nodes = distinct_subformulas(formula)
    uses: dict[Formula, int] = {}
    tree: dict[Formula, int] = {}
    for node in nodes:
        kids = children(node)
        tree[node] = 1 + sum(tree[child] for child in kids)
        for child in kids:
            uses[child] = uses.get(child, 0) + 1
    if not always and (tree[formula] <= SHARE_ABOVE_TREE_SIZE or tree[formula] <= 2 * len(nodes)):
        return {}
    shared = [node for node in nodes
              if node is not formula and uses.get(node, 0) > 1 and type(node) not in (Atom, Const, Mod)]
    return {node: f"@{index}" for index, node in enumerate(shared, 1)}


# ----------------------------------------------------------------------------------- regex
# Binding strength: union 1 < intersection 2 < concatenation 3 < prefix complement 4 < postfix 5 < atoms 6.
_REGEX_LEVEL = {Union_: 1, Intersect: 2, Concat: 3, Complement: 4, Star: 5, Plus: 5, Optional_: 5, Repeat: 5}
_REGEX_CONSTANTS = {
    "ascii": {Epsilon: "()", EmptySet: "[]", AnySymbol: "."},
    "unicode": {Epsilon: "ε", EmptySet: "∅", AnySymbol: "Σ"},
}


def _regex_level(regex: Regex) -> int:
    return _REGEX_LEVEL.get(type(regex), 6)


def format_regex(regex: Regex, style: Style = "unicode") -> str:
    """Canonical text of a regular expression; parse_regex(format_regex(r)) == r.

    Union prints as '|', never '+'. A postfix '+' directly followed by an operand would read as a
    union, so such a left operand of a concatenation is parenthesized: (a+)b.
    """
    constants = _REGEX_CONSTANTS[style]

    def wrap(child: Regex, needs: bool) -> Generator:
        text = yield child
        return f"({text})" if needs else text

    def postfix(child: Regex, suffix: str) -> Generator:
        return (yield from wrap(child, _regex_level(child) < 5)) + suffix

    def render(regex: Regex) -> Generator:
        kind = type(regex)
        if kind is Symbol:
            return quote_symbol(regex.symbol)
        if kind in constants:
            return constants[kind]
        if kind is CharClass:
            members = "".join(quote_symbol(symbol) for symbol in regex.symbols)
            return ("[^" if regex.negated else "[") + members + "]"
        if kind is Star:
            return (yield from postfix(regex.child, "*"))
        if kind is Plus:
            return (yield from postfix(regex.child, "+"))
        if kind is Optional_:
            return (yield from postfix(regex.child, "?"))
        if kind is Repeat:
            if regex.high is None:
                bounds = f"{regex.low},"
            elif regex.high == regex.low:
                bounds = f"{regex.low}"
            else:
                bounds = f"{regex.low},{regex.high}"
            return (yield from postfix(regex.child, "{" + bounds + "}"))
        if kind is Complement:
            return "~" + (yield from wrap(regex.child, _regex_level(regex.child) < 4))
        if kind in (Union_, Intersect, Concat):
            level = _REGEX_LEVEL[kind]
            rights = []
            node = regex
            while type(node) is kind:
                rights.append(node.right)
                node = node.left
            pieces = [(yield from wrap(node, _regex_level(node) < level))]
            for right in reversed(rights):
                pieces.append((yield from wrap(right, _regex_level(right) <= level)))
            if kind is Concat:
                # Every concatenation operand starts an operand, so a piece ending in postfix '+'
                # would be read as union with what follows: parenthesize that piece (parentheses
                # never add a node, so the AST is unchanged).
                return "".join(
                    f"({piece})" if piece.endswith("+") and index < len(pieces) - 1 else piece
                    for index, piece in enumerate(pieces)
                )
            operator = "|" if kind is Union_ else "&"
            return operator.join(pieces)
        raise TypeError(f"not a regular-expression node: {type(regex).__name__}")

    return _drive(regex, render)
