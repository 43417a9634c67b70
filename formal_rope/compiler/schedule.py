"""Stage 2, ``dag_to_schedule``: when (which sub-layer) every subformula becomes an exact 0/1 coordinate.

Sub-layer clock: 0 = embedding, 2l−1 = attention of layer l, 2l = feed-forward of layer l. A node is
*ready* at the even time after which its coordinate holds its exact truth value.

* Atoms, constants and every Boolean node whose leaves are all atoms: ready at 0 (the embedding
  evaluates them per symbol: they depend only on the current symbol).
* P, MOD, Y: an attention head in the first layer l whose input is ready (child ready ≤ 2l−2, and
  for Yᵏ the gate Pᵏ⊤ too), its raw output snapped to 0/1 by the feed-forward of the same layer:
  ready at 2l. MOD has no input: layer 1.
* Other Boolean nodes: one ReLU block computes the node directly from its *support* (the nearest
  non-Boolean or embedding-ready descendants) by a minterm expansion, in the feed-forward after all
  support nodes are ready: ready = max(support) + 2. Supports larger than ``MAX_SUPPORT`` fall back
  to the node's children (one block per nesting level).
"""

from __future__ import annotations

from dataclasses import dataclass

from formal_rope.compiler.dag import BOOLEAN_KINDS, FormulaDag

MAX_SUPPORT = 8


@dataclass(frozen=True)
class Schedule:
    """When each DAG node becomes an exact 0/1 coordinate (`ready`, sub-layer clock) and in which layer its head
    sits."""

    dag: FormulaDag
    ready: tuple[int, ...]  # per node
    support: tuple[tuple[int, ...], ...]  # per Boolean node (empty for others)
    head_layer: tuple[int | None, ...]  # attention layer (1-based) of each temporal node
    n_layers: int
    needs_first_flag: bool  # a MOD head needs the first-position flag of layer 1

    def nodes_in_embedding(self) -> list[int]:
        return [index for index, time in enumerate(self.ready) if time == 0]

    def heads_of_layer(self, layer: int) -> list[int]:
        return [index for index, value in enumerate(self.head_layer) if value == layer]

    def booleans_of_layer(self, layer: int) -> list[int]:
        return [
            index
            for index, node in enumerate(self.dag.nodes)
            if node.kind in BOOLEAN_KINDS and self.ready[index] == 2 * layer
        ]


def _support(dag: FormulaDag, index: int, ready: list[int]) -> tuple[int, ...]:
    found: list[int] = []
    stack = [index]
    seen: set[int] = set()
    while stack:
        current = stack.pop()
        for child in dag.nodes[current].children:
            if child in seen:
                continue
            seen.add(child)
            if dag.nodes[child].kind in BOOLEAN_KINDS and ready[child] != 0:
                stack.append(child)
            else:
                found.append(child)
    return tuple(sorted(found))


def dag_to_schedule(dag: FormulaDag) -> Schedule:
    """Stage 2: the sub-layer at which each node is ready and the layer of each head (rules in the module docstring)."""
    ready: list[int] = []
    supports: list[tuple[int, ...]] = []
    head_layer: list[int | None] = []
    for index, node in enumerate(dag.nodes):
        support: tuple[int, ...] = ()
        layer = None
        if node.kind in ("atom", "true", "false"):
            time = 0
        elif node.kind in BOOLEAN_KINDS:
            if all(ready[child] == 0 for child in node.children):
                time = 0
            else:
                support = _support(dag, index, ready)
                if len(support) > MAX_SUPPORT:
                    support = tuple(node.children)
                time = max(ready[s] for s in support) + 2
        elif node.kind == "mod":
            layer, time = 1, 2
        else:  # past, yesterday: every input ready before the head's layer
            layer = max(ready[child] for child in node.children) // 2 + 1
            time = 2 * layer
        ready.append(time)
        supports.append(support)
        head_layer.append(layer)
    n_layers = max(ready) // 2 if ready else 0
    needs_first = any(node.kind == "mod" for node in dag.nodes)
    return Schedule(
        dag=dag,
        ready=tuple(ready),
        support=tuple(supports),
        head_layer=tuple(head_layer),
        n_layers=n_layers,
        needs_first_flag=needs_first,
    )
