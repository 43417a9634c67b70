"""Boolean node over support s₁…s_n: minterm expansion ``Σ_a ReLU(Σ_i (2a_i−1)s_i − |a| + true)`` over
the satisfying assignments a (or ``true − Σ`` over the falsifying ones, whichever is shorter). Exact
on 0/1 inputs with small-integer weights. Feed-forward units only, no head."""

from __future__ import annotations

from itertools import product

import numpy as np

from formal_rope.compiler.constructs.common import TRUE, Hidden
from formal_rope.compiler.dag import FormulaDag


def _boolean_truth(
    dag: FormulaDag, index: int, support: tuple[int, ...], assignment: dict[int, np.ndarray]
) -> np.ndarray:
    """Truth table of node ``index`` as a function of its support variables (vectorized)."""
    memo = dict(assignment)

    def value(current: int) -> np.ndarray:
        if current in memo:
            return memo[current]
        node = dag.nodes[current]
        args = [value(child) for child in node.children]
        if node.kind == "not":
            result = ~args[0]
        elif node.kind == "and":
            result = args[0] & args[1]
        elif node.kind == "or":
            result = args[0] | args[1]
        elif node.kind == "implies":
            result = ~args[0] | args[1]
        elif node.kind == "iff":
            result = args[0] == args[1]
        else:
            raise AssertionError(f"{node.kind} reached outside the support")
        memo[current] = result
        return result

    return value(index)


def boolean_units(dag: FormulaDag, node_index: int, support: tuple[int, ...], node_coord: list[str]) -> list[Hidden]:
    """The feed-forward units computing Boolean node `node_index` from its support's coordinates."""
    n = len(support)
    assignments = np.array(list(product((False, True), repeat=n)), dtype=bool).reshape(-1, n)
    variables = {s: assignments[:, position] for position, s in enumerate(support)}
    truth = _boolean_truth(dag, node_index, support, variables)
    out = node_coord[node_index]
    use_true_rows = int(truth.sum()) <= len(truth) - int(truth.sum())
    rows = assignments[truth] if use_true_rows else assignments[~truth]
    units = []
    if not use_true_rows:
        units.append(Hidden({TRUE: 1.0}, 0.0, {out: 1.0}))
    for row in rows:
        inputs = {TRUE: 1.0}
        for position, s in enumerate(support):
            coord = node_coord[s]
            inputs[coord] = inputs.get(coord, 0.0) + (1.0 if row[position] else -1.0)
        units.append(Hidden(inputs, -float(row.sum()), {out: 1.0 if use_true_rows else -1.0}))
    return units
