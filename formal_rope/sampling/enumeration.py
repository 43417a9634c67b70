"""Exact enumeration of small classes: every string of one length in L (or outside it), and the
one-edit neighbours of given strings.

Where a length holds few strings of one class ((ab)* has one positive per even length, (aa)* one
string per length), sampling it is pointless: the worst-case search (`formal_rope.evaluation`)
enumerates the class and every string one substitution or one adjacent swap away instead. Counts
here are capped: a table entry is min(cap, the exact count), computed in int64, which answers
"at most `cap`?" exactly without the big integers of `counts.exact_counts`.
"""

from __future__ import annotations

import numpy as np

from formal_rope.automata.dfa import DFA, require_dfa
from formal_rope.errors import FormalRopeError
from formal_rope.sampling.counts import CountingGraph, dfa_graph


def capped_counts(graph: CountingGraph, max_length: int, cap: int) -> np.ndarray:
    """int64 (max_length + 1, n_nodes): entry [r, v] = min(cap, number of paths of length r from v
    to a final node). Exact wherever the true count is below `cap` (saturation never undercounts)."""
    if max_length < 0 or cap < 1:
        raise ValueError("max_length must be >= 0 and cap >= 1")
    table = np.empty((max_length + 1, graph.n_nodes), dtype=np.int64)
    table[0] = graph.final.astype(np.int64)
    for remaining in range(1, max_length + 1):
        table[remaining] = np.minimum(table[remaining - 1][graph.edge_target].sum(axis=1), cap)
    return table


def class_counts(dfa: DFA, lengths, cap: int) -> dict[bool, np.ndarray]:
    """{True: positives, False: negatives} at each of `lengths`, each capped at `cap` (int64 arrays)."""
    require_dfa(dfa, "class_counts", "dfa")
    lengths = np.asarray(list(lengths), dtype=np.int64)
    longest = int(lengths.max(initial=0))
    return {
        accepted: capped_counts(dfa_graph(dfa, accepted), longest, cap)[lengths, dfa.start]
        for accepted in (True, False)
    }


def enumerate_class(dfa: DFA, length: int, *, accepted: bool, limit: int) -> np.ndarray:
    """Every string of exactly `length` symbols in L (accepted) or outside it, in lexicographic
    order of symbol indices: int64 (count, length). FormalRopeError when there are more than `limit`.

    Breadth-first over prefixes that still have a completion in the class, so the frontier never
    holds more rows than the class has strings: O(length · count · |Σ|) work."""
    require_dfa(dfa, "enumerate_class", "dfa")
    graph = dfa_graph(dfa, accepted)
    table = capped_counts(graph, length, limit + 1)
    total = int(table[length, dfa.start])
    if total > limit:
        raise FormalRopeError(
            f"length {length} has more than {limit} {'positive' if accepted else 'negative'} strings; "
            "enumerate only small classes"
        )
    prefixes = np.zeros((1 if total else 0, 0), dtype=np.int64)
    states = np.full(len(prefixes), dfa.start, dtype=np.int64)
    symbols = np.arange(dfa.n_symbols, dtype=np.int64)
    for position in range(length):
        following = dfa.transitions[states]  # (m, |Σ|)
        alive = table[length - position - 1][following] > 0
        parent, symbol = np.nonzero(alive)  # row-major: parents in order, symbols in order within each
        prefixes = np.concatenate([prefixes[parent], symbols[symbol][:, None]], axis=1)
        states = following[parent, symbol]
    return prefixes


def one_edit_neighbours(strings: np.ndarray, n_symbols: int) -> np.ndarray:
    """Every string one substitution or one adjacent swap (of two different symbols) away from a row
    of `strings` (n, L): int64 (m, L), duplicates and the inputs themselves possible (callers dedupe).

    Per row L·(|Σ| − 1) substitutions and up to L − 1 swaps."""
    strings = np.asarray(strings, dtype=np.int64)
    n, length = strings.shape
    parts = []
    if n_symbols > 1 and length:
        shifts = np.arange(1, n_symbols, dtype=np.int64)
        rows = np.repeat(np.arange(n), length * len(shifts))
        positions = np.tile(np.repeat(np.arange(length), len(shifts)), n)
        offsets = np.tile(shifts, n * length)
        substituted = strings[rows]
        index = np.arange(len(rows))
        substituted[index, positions] = (substituted[index, positions] + offsets) % n_symbols
        parts.append(substituted)
    if length >= 2:
        rows, positions = np.nonzero(strings[:, :-1] != strings[:, 1:])
        swapped = strings[rows]
        index = np.arange(len(rows))
        swapped[index, positions] = strings[rows, positions + 1]
        swapped[index, positions + 1] = strings[rows, positions]
        parts.append(swapped)
    if not parts:
        return np.empty((0, length), dtype=np.int64)
    return np.concatenate(parts)
