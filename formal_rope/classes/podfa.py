"""The automaton criteria: PODFA (Def. A.7) and PODFA_k via the k-automaton A_k (Def. A.8).

A_k has the states Q of A (all of them, as in Def. A.8) and one transition per block of k
symbols. A state p is reachable from q in A_k iff some word whose length is a multiple of k
(including 0) leads from q to p in A. That is reachability from (q, 0) to (p, 0) in the product
graph Q × ℤ/k with edges (q, j) → (q·a, j+1 mod k), so one strongly-connected-components pass
over |Q|·k nodes decides whether A_k is partially ordered: no two distinct states of layer 0 may
share a component. This module looks only at the DFA, never at its monoid, so it is an
independent check of the monoid criteria in `formal_rope.classes.varieties`.
"""

from __future__ import annotations

import itertools
import math
from collections import deque
from dataclasses import dataclass

import numpy as np

from formal_rope.automata.dfa import DFA, require_dfa
from formal_rope.automata.membership import format_word
from formal_rope.classes.monoid import nontrivial_pair, strongly_connected_labels


@dataclass(frozen=True)
class StateCycle:
    """Two distinct states of A_k that reach each other: q —forward→ p —backward→ q.

    Both words have lengths that are multiples of k (sequences of k-blocks).
    """

    k: int
    states: tuple[int, int]
    forward: tuple[int, ...]
    backward: tuple[int, ...]


def _block_graph_tables(dfa: DFA, k: int) -> np.ndarray:
    """Successor table of the product graph Q × ℤ/k; node (q, j) has id q·k + j."""
    n_states = dfa.n_states
    states = np.repeat(np.arange(n_states), k)
    layers = np.tile(np.arange(k), n_states)
    return dfa.transitions[states] * k + ((layers + 1) % k)[:, None]


def block_state_labels(dfa: DFA, k: int = 1) -> np.ndarray:
    """Per state q: the SCC label of (q, 0) in Q × ℤ/k (equal labels = mutually reachable in A_k)."""
    if k < 1:
        raise ValueError("block length k must be at least 1")
    table = _block_graph_tables(dfa, k)
    labels = strongly_connected_labels(dfa.n_states * k, [table])
    return labels[np.arange(dfa.n_states) * k]


def is_podfa(dfa: DFA, k: int = 1, block_maps: np.ndarray | None = None) -> bool:
    """Whether the k-automaton A_k (all states of `dfa`) is partially ordered by reachability.

    Without `block_maps` this walks the product graph Q × ℤ/k (cost |Q|·k·|Σ|). With
    `block_maps`, the distinct state maps of all k-blocks (an (m, |Q|) array, e.g. η(Σ^k) from
    `formal_rope.classes.varieties.length_sets`), the transitions of A_k are those maps
    themselves (cost |Q|·m), which is cheaper when k is large.
    """
    require_dfa(dfa, "is_podfa", "dfa")
    if block_maps is None:
        labels = block_state_labels(dfa, k)
    else:
        labels = strongly_connected_labels(dfa.n_states, [np.ascontiguousarray(np.asarray(block_maps).T)])
    return np.unique(labels).size == labels.size


def _path(dfa: DFA, k: int, source: int, target: int) -> tuple[int, ...]:
    """Shortest word of length ≡ 0 (mod k) from state source to a different state target."""
    start = (source, 0)
    previous: dict[tuple[int, int], tuple[tuple[int, int], int]] = {}
    queue = deque([start])
    goal = (target, 0)
    while queue:
        state, layer = queue.popleft()
        for symbol, successor in enumerate(dfa.transitions[state].tolist()):
            node = (successor, (layer + 1) % k)
            if node in previous or node == start:
                continue
            previous[node] = ((state, layer), symbol)
            if node == goal:
                queue.clear()
                break
            queue.append(node)
    if goal not in previous:
        raise ValueError("target is not reachable in the k-automaton")
    word: list[int] = []
    node = goal
    while True:
        before, symbol = previous[node]
        word.append(symbol)
        node = before
        if node == start:
            break
    return tuple(reversed(word))


def block_cycle(dfa: DFA, k: int = 1) -> StateCycle | None:
    """Two distinct mutually reachable states of A_k with connecting words, or None for a PODFA_k.

    The pair has small state indices (the minimal DFA numbers states in BFS order, so these are
    states near the start): the two smallest states of the cycle whose second state is smallest.
    """
    require_dfa(dfa, "block_cycle", "dfa")
    pair = nontrivial_pair(block_state_labels(dfa, k))
    if pair is None:
        return None
    first, second = pair
    return StateCycle(k, (first, second), _path(dfa, k, first, second), _path(dfa, k, second, first))


def least_podfa_block_length(dfa: DFA, bound: int) -> int | None:
    """The least k in 1..bound with A_k a PODFA, or None."""
    require_dfa(dfa, "least_podfa_block_length", "dfa")
    for k in range(1, bound + 1):
        if is_podfa(dfa, k):
            return k
    return None


def access_word(dfa: DFA, state: int) -> tuple[int, ...]:
    """Shortlex-least word leading from the start state to `state` (ValueError if unreachable)."""
    previous: dict[int, tuple[int, int]] = {dfa.start: (-1, -1)}
    queue = deque([dfa.start])
    while queue and state not in previous:
        current = queue.popleft()
        for symbol, successor in enumerate(dfa.transitions[current].tolist()):
            if successor not in previous:
                previous[successor] = (current, symbol)
                queue.append(successor)
    if state not in previous:
        raise ValueError(f"state {state} is unreachable")
    word: list[int] = []
    while state != dfa.start:
        state, symbol = previous[state]
        word.append(symbol)
    return tuple(reversed(word))


def k_automaton(dfa: DFA, k: int, max_symbols: int = 4096) -> DFA:
    """A_k (Def. A.8) as an explicit DFA over the block alphabet Σ^k, same states and start.

    Blocks are listed in lexicographic order of symbol indices; a block's name is its symbols
    concatenated (space-separated when some symbol is longer than one character). Meant for
    inspection and cross-checks: the alphabet has |Σ|^k symbols (refused above `max_symbols`).
    """
    require_dfa(dfa, "k_automaton", "dfa")
    if k < 1:
        raise ValueError("block length k must be at least 1")
    n_blocks = dfa.n_symbols**k
    if n_blocks > max_symbols:
        raise ValueError(f"the {k}-automaton would have {n_blocks} block symbols (more than {max_symbols})")
    blocks = np.array(list(itertools.product(range(dfa.n_symbols), repeat=k)), dtype=np.int64).reshape(n_blocks, k)
    states = np.broadcast_to(np.arange(dfa.n_states)[:, None], (dfa.n_states, n_blocks)).copy()
    for position in range(k):
        states = dfa.transitions[states, blocks[:, position][None, :]]
    # Each block is named by its text as `accepts` reads it, so the names are distinct and readable.
    names = tuple(format_word([dfa.alphabet[s] for s in block], dfa.alphabet) for block in blocks.tolist())
    return DFA(names, states, dfa.start, dfa.accepting)


@dataclass(frozen=True, eq=False)
class CycleStructure:
    """Strongly connected components of A with their periods (gcd of cycle lengths).

    component  (n_states,) SCC label per state
    period     (n_states,) period of the state's SCC; 0 for a trivial SCC (one state, no self-loop)
    cyclic_class (n_states,) BFS depth modulo the period inside the SCC (0 for trivial SCCs)
    """

    component: np.ndarray
    period: np.ndarray
    cyclic_class: np.ndarray

    @property
    def simple_cycles_only(self) -> bool:
        """Whether every cyclic class of every SCC is a single state (each SCC is a simple cycle
        of blocks, possibly with several letters per edge, or a trivial/self-looping state)."""
        pairs = np.stack([self.component, self.cyclic_class], axis=1)
        return np.unique(pairs, axis=0).shape[0] == self.component.size

    @property
    def least_block_length(self) -> int | None:
        """lcm of the periods of all SCCs when simple_cycles_only, else None."""
        if not self.simple_cycles_only:
            return None
        return math.lcm(1, *{int(p) for p in self.period.tolist() if p > 0})


def cycle_structure(dfa: DFA) -> CycleStructure:
    """SCCs, periods and cyclic classes, by one vectorized level-synchronous BFS inside the SCCs.

    In a strongly connected graph of period d, fixing a root and its BFS depth δ, every edge
    u → v satisfies δ(v) ≡ δ(u) + 1 (mod d), d is the gcd of δ(u) + 1 − δ(v) over the edges, and
    for states in classes i, j every sufficiently long length ≡ j − i (mod d) labels a path.
    """
    require_dfa(dfa, "cycle_structure", "dfa")
    n_states = dfa.n_states
    table = dfa.transitions
    component = strongly_connected_labels(n_states, [table])
    inside = component[table] == component[:, None]  # edge stays in its SCC
    depth = np.full(n_states, -1, dtype=np.int64)
    _, roots = np.unique(component, return_index=True)
    depth[roots] = 0
    frontier = roots
    level = 0
    while frontier.size:
        level += 1
        successors = table[frontier][inside[frontier]]
        successors = np.unique(successors[depth[successors] < 0])
        depth[successors] = level
        frontier = successors
    sources = np.broadcast_to(np.arange(n_states)[:, None], table.shape)[inside]
    targets = table[inside]
    gaps = np.abs(depth[sources] + 1 - depth[targets])
    period_of_component = np.zeros(int(component.max()) + 1, dtype=np.int64)
    np.gcd.at(period_of_component, component[sources], gaps)
    period = period_of_component[component]
    cyclic_class = np.where(period > 0, depth % np.maximum(period, 1), 0)
    return CycleStructure(component, period, cyclic_class)
