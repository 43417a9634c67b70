"""Sizes of a formula seen as a DAG of shared subformulas (and as the tree its text spells out).

A formula built with shared subformulas (the automaton construction, `formal_rope.compiler.
automaton_to_formula`) can spell out far more text than it has distinct subformulas, so every
count walks the distinct nodes once; `tree_size` is an exact integer however large.
"""

from __future__ import annotations

from dataclasses import dataclass

from formal_rope.lang.ast import Formula, Historically, Mod, Past, Since, Yesterday, children


@dataclass(frozen=True)
class FormulaMetrics:
    """dag_size: distinct subformulas; tree_size: nodes of the formula written out as a tree;
    depth: operators on the longest root-to-leaf path (an atom has depth 0); temporal_depth: P, H,
    S and Y nested on one path; past_nodes / mod_nodes: distinct P (and H) and MOD subformulas."""

    dag_size: int
    tree_size: int
    depth: int
    temporal_depth: int
    past_nodes: int
    mod_nodes: int

    def to_json(self) -> dict[str, int]:
        return {"size": self.dag_size, "tree_size": self.tree_size, "depth": self.depth,
                "temporal_depth": self.temporal_depth, "p_nodes": self.past_nodes, "mod_nodes": self.mod_nodes}


def distinct_subformulas(formula: Formula) -> list[Formula]:
    """The distinct subformulas (by identity, then structure), children before parents, iteratively."""
    ordered: list[Formula] = []
    done: set[int] = set()
    seen: set[Formula] = set()
    stack: list[tuple[Formula, bool]] = [(formula, False)]
    while stack:
        node, expanded = stack.pop()
        if id(node) in done:
            continue
        if expanded:
            done.add(id(node))
            if node not in seen:
                seen.add(node)
                ordered.append(node)
            continue
        stack.append((node, True))
        stack.extend((child, False) for child in reversed(children(node)) if id(child) not in done)
    return ordered


def formula_metrics(formula: Formula) -> FormulaMetrics:
    nodes = distinct_subformulas(formula)
    tree: dict[Formula, int] = {}
    depth: dict[Formula, int] = {}
    temporal: dict[Formula, int] = {}
    for node in nodes:
        kids = children(node)
        tree[node] = 1 + sum(tree[child] for child in kids)
        depth[node] = (1 + max(depth[child] for child in kids)) if kids else 0
        own = node.k if isinstance(node, Yesterday) else int(isinstance(node, (Past, Historically, Since)))
        temporal[node] = own + max((temporal[child] for child in kids), default=0)
    return FormulaMetrics(
        dag_size=len(nodes),
        tree_size=tree[formula],
        depth=depth[formula],
        temporal_depth=temporal[formula],
        past_nodes=sum(isinstance(node, (Past, Historically)) for node in nodes),
        mod_nodes=sum(isinstance(node, Mod) for node in nodes),
    )
