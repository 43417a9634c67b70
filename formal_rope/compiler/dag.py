"""Stage 1, ``formula_to_dag``: an LTL[P,Y,MOD] formula → a hash-consed subformula DAG.

Normalization (exact on every string, so the DAG defines the same language):
  H φ → ¬P¬φ;  constants are folded (¬⊤ = ⊥, φ∧⊥ = ⊥, P⊥ = ⊥, Yᵏ⊥ = ⊥, MOD₁ʳ = ⊤, …);
  MODₘʳ keeps r mod m.  Yᵏ with k ≥ 2 gets an extra dependency on the gate Pᵏ⊤ (i > k) of
  appendix D; for k = 1 the strict mask already makes the head output bos's value 0 at i = 1.
Constructs without a construction (S) raise FormalRopeError naming the construct.
"""

from __future__ import annotations

from dataclasses import dataclass

from formal_rope.errors import FormalRopeError
from formal_rope.lang.analysis import fold_ast
from formal_rope.lang.ast import (
    And,
    Atom,
    Const,
    Formula,
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
from formal_rope.lang.printer import format_ltl

BOOLEAN_KINDS = ("not", "and", "or", "implies", "iff")
TEMPORAL_KINDS = ("past", "mod", "yesterday")


@dataclass(frozen=True)
class DagNode:
    """One subformula. ``children`` index earlier nodes; ``text`` is its canonical formula text."""

    kind: str  # atom, true, false, not, and, or, implies, iff, past, mod, yesterday
    children: tuple[int, ...]
    text: str
    symbol: str | None = None
    modulus: int | None = None
    residue: int | None = None
    offset: int | None = None  # k of Y^k
    gate: int | None = None  # node index of P^k(true) for Y^k, k >= 2


@dataclass(frozen=True)
class FormulaDag:
    """The normalized formula as shared subformulas: `nodes` in topological order, `root` the whole formula."""

    nodes: tuple[DagNode, ...]  # topological order: children before parents
    root: int
    alphabet: tuple[str, ...]

    def node(self, index: int) -> DagNode:
        return self.nodes[index]


class _Builder:
    def __init__(self, alphabet: tuple[str, ...]) -> None:
        self.alphabet = alphabet
        self.nodes: list[DagNode] = []
        self.index: dict[tuple, int] = {}
        self.asts: list[Formula] = []

    def add(self, key: tuple, node: DagNode, ast: Formula) -> int:
        if key not in self.index:
            self.index[key] = len(self.nodes)
            self.nodes.append(node)
            self.asts.append(ast)
        return self.index[key]

    def constant(self, value: bool) -> int:
        return self.add(("const", value), DagNode("true" if value else "false", (), ""), Const(value))

    def is_const(self, index: int) -> bool | None:
        kind = self.nodes[index].kind
        return True if kind == "true" else False if kind == "false" else None

    def build(self, formula: Formula) -> int:
        """The node index of `formula`, built bottom-up without recursion (formulas nest thousands deep)."""
        return fold_ast(formula, self._combine)

    def negate(self, child: int) -> int:
        value = self.is_const(child)
        if value is not None:
            return self.constant(not value)
        return self.add(("not", child), DagNode("not", (child,), ""), Not(self.asts[child]))

    def past(self, child: int) -> int:
        if self.is_const(child) is False:
            return self.constant(False)
        return self.add(("past", child), DagNode("past", (child,), ""), Past(self.asts[child]))

    def _combine(self, formula: Formula, children: list[int]) -> int:
        kind = type(formula)
        if kind is Atom:
            if formula.symbol not in self.alphabet:
                raise FormalRopeError(
                    f"atom {formula.symbol!r} is not in the alphabet {{{', '.join(self.alphabet)}}}; "
                    "pass every symbol the formula uses (--alphabet / alphabet=)"
                )
            return self.add(("atom", formula.symbol), DagNode("atom", (), "", symbol=formula.symbol), formula)
        if kind is Const:
            return self.constant(bool(formula.value))
        if kind is Not:
            return self.negate(children[0])
        if kind in (And, Or, Implies, Iff):
            return self.binary({And: "and", Or: "or", Implies: "implies", Iff: "iff"}[kind], children[0], children[1])
        if kind is Historically:  # H φ = ¬P¬φ
            return self.negate(self.past(self.negate(children[0])))
        if kind is Past:
            return self.past(children[0])
        if kind is Mod:
            if formula.m <= 0:
                raise FormalRopeError(f"MOD_{formula.m}^{formula.r}: the modulus m must be a positive integer")
            if formula.m == 1:
                return self.constant(True)
            residue = formula.r % formula.m
            return self.add(
                ("mod", formula.m, residue),
                DagNode("mod", (), "", modulus=formula.m, residue=residue),
                Mod(formula.m, residue),
            )
        if kind is Yesterday:
            if formula.k < 1:
                raise FormalRopeError(f"Y^{formula.k}: the offset k must be at least 1")
            child = children[0]
            if self.is_const(child) is False:
                return self.constant(False)
            gate = None
            if formula.k >= 2:
                gate = self.constant(True)
                for _ in range(formula.k):
                    gate = self.add(("past", gate), DagNode("past", (gate,), ""), Past(self.asts[gate]))
            children_ = (child,) if gate is None else (child, gate)
            return self.add(
                ("yesterday", child, formula.k),
                DagNode("yesterday", children_, "", offset=formula.k, gate=gate),
                Yesterday(self.asts[child], formula.k),
            )
        if kind is Since:
            raise FormalRopeError(
                f"the compiler has no construction for S (since) in {format_ltl(formula)!r}: it compiles "
                "LTL[P,Y,MOD] (P, H, Y^k, MOD and Boolean connectives); S needs rightmost attention (LTL[S] is "
                "beyond soft-attention NoPE/RoPE_P transformers)"
            )
        raise FormalRopeError(f"the compiler has no construction for {type(formula).__name__} nodes")

    def binary(self, kind: str, left: int, right: int) -> int:
        a, b = self.is_const(left), self.is_const(right)
        if kind == "and":
            if a is False or b is False:
                return self.constant(False)
            if a is True:
                return right
            if b is True:
                return left
        elif kind == "or":
            if a is True or b is True:
                return self.constant(True)
            if a is False:
                return right
            if b is False:
                return left
        elif kind == "implies":
            if a is False or b is True:
                return self.constant(True)
            if a is True:
                return right
            if b is False:
                return self.build_not(left)
        elif kind == "iff":
            if a is not None and b is not None:
                return self.constant(a == b)
            if a is True:
                return right
            if b is True:
                return left
            if a is False:
                return self.build_not(right)
            if b is False:
                return self.build_not(left)
        ast_type = {"and": And, "or": Or, "implies": Implies, "iff": Iff}[kind]
        return self.add(
            (kind, left, right), DagNode(kind, (left, right), ""), ast_type(self.asts[left], self.asts[right])
        )

    def build_not(self, child: int) -> int:
        return self.add(("not", child), DagNode("not", (child,), ""), Not(self.asts[child]))


# A node's text names its residual coordinate. Small subformulas are written out; a larger one is
# its operator over its children's texts, a long child shown as #index (its node), so the texts of a
# DAG whose tree has 10^11 nodes stay short and still differ from node to node.
_WHOLE_TEXT_TREE_SIZE = 64
_INLINE_TEXT = 40
_OPERATOR_TEXT = {"and": "&", "or": "|", "implies": "->", "iff": "<->"}


def _has_top_level_operator(text: str) -> bool:
    depth = 0
    for char in text:
        depth += char == "("
        depth -= char == ")"
        if char == " " and depth == 0:
            return True
    return False


def _composed_text(node: DagNode, parts: list[str]) -> str:
    if node.kind == "past":
        return f"P({parts[0]})"
    if node.kind == "yesterday":
        return ("Y" if node.offset == 1 else f"Y^{node.offset}") + f"({parts[0]})"
    shown = [f"({part})" if _has_top_level_operator(part) else part for part in parts]
    if node.kind == "not":
        return f"!{shown[0]}"
    return f" {_OPERATOR_TEXT[node.kind]} ".join(shown)


def formula_to_dag(formula: Formula, alphabet: tuple[str, ...]) -> FormulaDag:
    """Normalize and hash-cons ``formula`` over ``alphabet`` (see module docstring)."""
    builder = _Builder(tuple(alphabet))
    root = builder.build(formula)
    # Folding can leave built-but-unused nodes (P(a) in P(a) & false): keep what the root reaches.
    reachable: set[int] = set()
    stack = [root]
    while stack:
        current = stack.pop()
        if current not in reachable:
            reachable.add(current)
            stack.extend(builder.nodes[current].children)
    kept = sorted(reachable)
    renumber = {old: new for new, old in enumerate(kept)}
    nodes = []
    tree_sizes: list[int] = []
    for old in kept:
        node = builder.nodes[old]
        kids = tuple(renumber[child] for child in node.children if child != node.gate)  # gate: not in the text
        tree_sizes.append(1 + sum(tree_sizes[child] for child in kids))
        if tree_sizes[-1] <= _WHOLE_TEXT_TREE_SIZE:
            text = format_ltl(builder.asts[old], share=False)
        else:
            text = _composed_text(node, [nodes[child].text if len(nodes[child].text) <= _INLINE_TEXT
                                         else f"#{child}" for child in kids])
        nodes.append(
            DagNode(
                kind=node.kind,
                children=tuple(renumber[child] for child in node.children),
                text=text,
                symbol=node.symbol,
                modulus=node.modulus,
                residue=node.residue,
                offset=node.offset,
                gate=None if node.gate is None else renumber[node.gate],
            )
        )
    return FormulaDag(nodes=tuple(nodes), root=renumber[root], alphabet=tuple(alphabet))
