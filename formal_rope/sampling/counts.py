"""Path counts over DFAs: how many strings of each remaining length lead from a state to acceptance.

Sampling works on a *counting graph*: nodes with a fixed number of outgoing edges, each edge emitting
one symbol. A DFA is the simplest such graph (one edge per symbol). The near-miss graph (a positive
string with exactly one substituted symbol that lands outside L) is another one; both are sampled by
the same walker in `formal_rope.sampling.walker`.

Two count tables exist:
  * exact counts (Python ints in numpy object arrays) for exact answers ("how many strings of
    length n are in L?", emptiness of a class at a length);
  * log-space float64 counts for vectorized sampling. Each row is stored shifted by its maximum so
    that the largest entry is 0; the shift per row is kept separately. This keeps the entries that
    matter for sampling near 0, where float64 resolution is finest, even when raw counts are
    |Σ|^10000. A count is zero exactly when its log entry is -inf: logaddexp of finite numbers never
    returns -inf, so emptiness read from the log table is exact.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property

import numpy as np

from formal_rope.automata.dfa import DFA, require_dfa
from formal_rope.automata.ops import coaccessible_states


@dataclass(frozen=True, eq=False)
class CountingGraph:
    """Nodes with `degree` outgoing edges each; edge (v, e) goes to `edge_target[v, e]` emitting
    symbol `edge_symbol[v, e]`. Rows with fewer real edges are padded with edges into a dead node
    (a non-final node whose edges all loop on itself), so padded edges always have count zero."""

    edge_target: np.ndarray  # (n_nodes, degree) int64
    edge_symbol: np.ndarray  # (n_nodes, degree) int64
    start: int
    final: np.ndarray  # (n_nodes,) bool

    def __post_init__(self) -> None:
        for name, dtype in (("edge_target", np.int64), ("edge_symbol", np.int64), ("final", bool)):
            array = np.ascontiguousarray(getattr(self, name), dtype=dtype)
            array.setflags(write=False)
            object.__setattr__(self, name, array)
        if self.edge_target.shape != self.edge_symbol.shape or self.edge_target.ndim != 2:
            raise ValueError("edge_target and edge_symbol must both have shape (n_nodes, degree)")
        if self.final.shape != (self.edge_target.shape[0],):
            raise ValueError("final must have one entry per node")

    @property
    def n_nodes(self) -> int:
        return int(self.edge_target.shape[0])

    @property
    def degree(self) -> int:
        return int(self.edge_target.shape[1])


def dfa_graph(dfa: DFA, accepted: bool = True) -> CountingGraph:
    """The DFA as a counting graph whose paths end in accepting (accepted=True) or rejecting states.

    Counting the complement on the complemented DFA (rather than |Σ|^n minus the accepted count)
    avoids catastrophic cancellation in log space when almost every string is accepted."""
    require_dfa(dfa, "dfa_graph", "dfa")
    symbols = np.broadcast_to(np.arange(dfa.n_symbols, dtype=np.int64), dfa.transitions.shape)
    final = dfa.accepting if accepted else ~dfa.accepting
    return CountingGraph(dfa.transitions, symbols, dfa.start, final)


def labelled_graph(dfa: DFA) -> CountingGraph:
    """Disjoint union of the accepting graph (nodes 0..n-1, start = dfa.start) and the rejecting
    graph (nodes n..2n-1, start = n + dfa.start), so positives and negatives can be walked in one
    pass by starting each string in its own copy."""
    n_states, n_symbols = dfa.transitions.shape
    targets = np.concatenate([dfa.transitions, dfa.transitions + n_states])
    symbols = np.broadcast_to(np.arange(n_symbols, dtype=np.int64), targets.shape)
    return CountingGraph(targets, symbols, dfa.start, np.concatenate([dfa.accepting, ~dfa.accepting]))


def reachable_states(dfa: DFA) -> np.ndarray:
    """Bool (n_states,): the states some string reaches from the start."""
    seen = np.zeros(dfa.n_states, dtype=bool)
    seen[dfa.start] = True
    frontier = np.array([dfa.start])
    while frontier.size:
        successors = np.unique(dfa.transitions[frontier].ravel())
        frontier = successors[~seen[successors]]
        seen[frontier] = True
    return seen


def reachable_pairs(dfa: DFA) -> np.ndarray:
    """Boolean (n, n) matrix: pair (q, p) is reachable as (state on w, state on w with one symbol
    substituted) for some string w. Used to keep the near-miss graph small."""
    n_states, n_symbols = dfa.transitions.shape
    states = np.flatnonzero(reachable_states(dfa))
    # One edit: read s on the original string and c != s on the edited one.
    s_index, c_index = np.nonzero(~np.eye(n_symbols, dtype=bool))
    pairs = np.zeros((n_states, n_states), dtype=bool)
    first = dfa.transitions[states][:, s_index].ravel()
    second = dfa.transitions[states][:, c_index].ravel()
    pairs[first, second] = True
    frontier_q, frontier_p = np.nonzero(pairs)
    while frontier_q.size:
        next_q = dfa.transitions[frontier_q].ravel()
        next_p = dfa.transitions[frontier_p].ravel()
        new = ~pairs[next_q, next_p]
        next_q, next_p = next_q[new], next_p[new]
        pairs[next_q, next_p] = True
        flat = np.unique(next_q * n_states + next_p)
        frontier_q, frontier_p = flat // n_states, flat % n_states
    return pairs


def near_miss_graph(dfa: DFA) -> CountingGraph:
    """Counting graph whose length-n paths are the triples (w, i, c): w in L, |w| = n, 1 <= i <= n,
    c != w_i, and w with w_i replaced by c outside L. A path emits the edited string.

    Nodes: "before the edit" copies of the DFA states, then one node per reachable pair
    (state on w, state on the edited string), then a dead node. Sampling paths uniformly is exactly
    rejection sampling "uniform positive, uniform position, uniform other symbol, keep if outside L"
    but never loops, even when near-misses are rare, and reports exactly when there are none.
    """
    require_dfa(dfa, "near_miss_graph", "dfa")
    n_states, n_symbols = dfa.transitions.shape
    pair_q, pair_p = np.nonzero(reachable_pairs(dfa))
    n_pairs = pair_q.size
    pair_node = np.full((n_states, n_states), -1, dtype=np.int64)
    pair_node[pair_q, pair_p] = n_states + np.arange(n_pairs)
    dead = n_states + n_pairs
    degree = n_symbols * n_symbols
    edge_target = np.full((dead + 1, degree), dead, dtype=np.int64)
    edge_symbol = np.zeros((dead + 1, degree), dtype=np.int64)

    # Before the edit: edge (s, c) reads s on w and emits c; c == s keeps the copies in lock-step.
    s_grid, c_grid = np.meshgrid(np.arange(n_symbols), np.arange(n_symbols), indexing="ij")
    s_flat, c_flat = s_grid.ravel(), c_grid.ravel()
    next_q = dfa.transitions[:, s_flat]  # (n_states, degree)
    next_p = dfa.transitions[:, c_flat]
    edited = pair_node[next_q, next_p]
    edge_target[:n_states] = np.where(s_flat == c_flat, next_q, edited)
    edge_symbol[:n_states] = c_flat
    # Unreachable state copies can map to pairs never marked reachable; they are never visited,
    # so route them to the dead node rather than leave an invalid index.
    edge_target[:n_states][edge_target[:n_states] < 0] = dead

    # After the edit: both copies read the same symbol.
    edge_target[n_states:dead, :n_symbols] = pair_node[dfa.transitions[pair_q], dfa.transitions[pair_p]]
    edge_symbol[n_states:dead, :n_symbols] = np.arange(n_symbols)

    final = np.zeros(dead + 1, dtype=bool)
    final[n_states:dead] = dfa.accepting[pair_q] & ~dfa.accepting[pair_p]
    return CountingGraph(edge_target, edge_symbol, dfa.start, final)


@dataclass(frozen=True, eq=False)
class LogCounts:
    """log(number of paths of length r from node v to a final node) for 0 <= r <= max_length.

    Stored as `shifted[r, v] + row_peak[0] + ... + row_peak[r]`: each row of `shifted` has maximum
    0 (or is all -inf when no node has a path of that length) and `row_peak[r]` is the shift of row r
    relative to row r-1. The sampler only needs adjacent rows, so it uses `row_peak[r]` directly and
    never subtracts two large cumulative logs."""

    graph: CountingGraph
    shifted: np.ndarray  # (max_length + 1, n_nodes) float64
    row_peak: np.ndarray  # (max_length + 1,) float64

    @property
    def max_length(self) -> int:
        return int(self.shifted.shape[0] - 1)

    @property
    def table_entries(self) -> int:
        """(max_length + 1) x n_nodes x degree: the size of the per-edge tables."""
        return (self.max_length + 1) * self.graph.n_nodes * self.graph.degree

    @cached_property
    def alias_table(self) -> tuple[np.ndarray, np.ndarray]:
        """Walker/Vose alias tables for the edge choice at every (remaining length r, node v):
        `keep[r, v, j]` and `alias[r, v, j]`, each (max_length + 1, n_nodes, degree).

        Drawing j uniform in [0, degree) and f uniform in [0, 1), the edge is j if f < keep[j] else
        alias[j]; P(edge e) = (keep[e] + sum_{j: alias[j] = e} (1 - keep[j])) / degree equals the
        normalised completion count of e. This makes each sampling step a few flat gathers whatever
        the degree. Built for all rows at once: each round pairs every row's smallest unfinished
        entry (scaled weight <= 1) with its largest (>= 1), the classic construction vectorized."""
        degree = self.graph.degree
        rows = (self.max_length + 1) * self.graph.n_nodes
        with np.errstate(invalid="ignore", divide="ignore", over="ignore"):
            log_total = self.shifted[1:] + self.row_peak[1:, None]
            weights = np.exp(self.shifted[:-1][:, self.graph.edge_target] - log_total[:, :, None])
            scaled = np.ones((self.max_length + 1, self.graph.n_nodes, degree))
            scaled[1:] = weights * (degree / weights.sum(axis=2, keepdims=True))
        scaled = scaled.reshape(rows, degree)
        # Rows without paths (NaN) are never sampled; give them a harmless uniform table.
        scaled[~np.isfinite(scaled).all(axis=1)] = 1.0
        keep = np.ones((rows, degree))
        alias = np.broadcast_to(np.arange(degree, dtype=np.int32), (rows, degree)).copy()
        finished = np.zeros((rows, degree), dtype=bool)
        row_index = np.arange(rows)
        for _ in range(degree - 1):
            small = np.where(finished, np.inf, scaled).argmin(axis=1)
            large = np.where(finished, -np.inf, scaled).argmax(axis=1)
            keep[row_index, small] = scaled[row_index, small]
            alias[row_index, small] = large
            finished[row_index, small] = True
            scaled[row_index, large] -= 1.0 - scaled[row_index, small]
        # The last unfinished entry keeps probability 1 (its residual is 1 up to rounding). An entry
        # with zero weight is always finished first, so it can neither be kept nor be an alias.
        np.clip(keep, 0.0, 1.0, out=keep)
        shape = (self.max_length + 1, self.graph.n_nodes, degree)
        keep, alias = keep.reshape(shape), alias.reshape(shape)
        keep.setflags(write=False)
        alias.setflags(write=False)
        return keep, alias

    def log_count(self, length: int, node: int | None = None) -> float:
        """Natural log of the number of paths of `length` from `node` (default: start); -inf if none."""
        node = self.graph.start if node is None else node
        return float(self.shifted[length, node] + np.sum(self.row_peak[: length + 1]))

    def nonempty(self, lengths: np.ndarray | int, node: int | None = None) -> np.ndarray:
        """Whether at least one path of each length leaves `node` (default: start). Exact."""
        node = self.graph.start if node is None else node
        return np.isfinite(self.shifted[np.asarray(lengths), node])


def log_counts(graph: CountingGraph, max_length: int, node_log_weight: np.ndarray | None = None) -> LogCounts:
    """Log-space path counts for every remaining length 0..max_length (one vectorized step per length).

    With `node_log_weight` (one log weight per node) a path's weight is the product of the weights
    of the nodes it visits, its last node included, and the table holds log sums of path weights:
    the walker then draws each path with probability proportional to its weight (a node's weight
    multiplies all of its edges alike, so it only matters through the nodes after it)."""
    if max_length < 0:
        raise ValueError("max_length must be >= 0")
    shifted = np.empty((max_length + 1, graph.n_nodes), dtype=np.float64)
    row_peak = np.zeros(max_length + 1, dtype=np.float64)
    shifted[0] = np.where(graph.final, 0.0 if node_log_weight is None else node_log_weight, -np.inf)
    targets = graph.edge_target
    with np.errstate(invalid="ignore"):
        for length in range(1, max_length + 1):
            row = np.logaddexp.reduce(shifted[length - 1][targets], axis=1)
            if node_log_weight is not None:
                row = row + node_log_weight
            peak = row.max()
            if np.isfinite(peak):
                row -= peak
                row_peak[length] = peak
            shifted[length] = row
    shifted.setflags(write=False)
    row_peak.setflags(write=False)
    return LogCounts(graph, shifted, row_peak)


def flare_move_log_weights(dfa: DFA) -> np.ndarray:
    """Per state, -log(its number of moves) in FLaRe's sampler (rycolab/neural-network-recognizers,
    string_sampling/prepare_sampler.py `lift_finite_automaton`): FLaRe's automata keep only states
    from which acceptance is reachable, so a state's moves are its transitions into such states plus
    stopping when it accepts, each equally likely. States without moves get 0 (they are never on a
    member's path)."""
    require_dfa(dfa, "flare_move_log_weights", "dfa")
    live = coaccessible_states(dfa)
    moves = live[dfa.transitions].sum(axis=1) + np.asarray(dfa.accepting, dtype=np.int64)
    return -np.log(np.maximum(moves, 1).astype(np.float64))


def exact_counts(graph: CountingGraph, max_length: int) -> np.ndarray:
    """Exact path counts as Python ints: object array (max_length + 1, n_nodes).

    Memory grows like max_length² · log|Σ| bits per node; use `count_paths` for a single length."""
    table = np.empty((max_length + 1, graph.n_nodes), dtype=object)
    table[0] = [int(flag) for flag in graph.final]
    for length in range(1, max_length + 1):
        table[length] = table[length - 1][graph.edge_target].sum(axis=1)
    return table


def count_paths(graph: CountingGraph, length: int, node: int | None = None) -> int:
    """Exact number of paths of `length` from `node` (default: start), keeping one row at a time."""
    row = np.array([int(flag) for flag in graph.final], dtype=object)
    for _ in range(length):
        row = row[graph.edge_target].sum(axis=1)
    return int(row[graph.start if node is None else node])


def count_strings(dfa: DFA, length: int, accepted: bool = True) -> int:
    """Exact number of strings of exactly `length` symbols in L (accepted=True) or outside L."""
    require_dfa(dfa, "count_strings", "dfa")
    return count_paths(dfa_graph(dfa, accepted), length)


def count_near_misses(dfa: DFA, length: int) -> int:
    """Exact number of triples (w in L, position, other symbol) whose substitution leaves L."""
    require_dfa(dfa, "count_near_misses", "dfa")
    return count_paths(near_miss_graph(dfa), length)
