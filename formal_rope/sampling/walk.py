"""Uniform random paths through a counting graph, many strings (of mixed lengths) at once.

At every position each active string moves along an edge with probability proportional to the
number of completions behind that edge: count(r-1, target) / count(r, current). The product of these
ratios telescopes to 1 / count(n, start), so every path of length n is equally likely. In floating
point each step's probabilities are renormalised by the sum of that step's weights, so the table
only enters through ratios of adjacent rows; the deviation from uniform is a few ulps per position
(about n·1e-15 relative), not an error accumulated over the table.

Strings are processed position by position, all strings in parallel: sorting them by length (longest
first) makes the active strings at position t a prefix of the batch, so no masking is needed. The
per-(remaining length, node) edge CDF is precomputed once per table, so a step is two gathers and a
comparison.
"""

from __future__ import annotations

import numpy as np

from formal_rope.sampling.counts import LogCounts

PAD = -1  # symbol value in padded positions after the end of a string


def walk_sorted(counts: LogCounts, lengths: np.ndarray, uniforms: np.ndarray, pad: bool = True) -> np.ndarray:
    """Core walker for `lengths` sorted in non-increasing order.

    uniforms: float64 (>= lengths[0], n) position-major U[0, 1) draws; row t drives position t.
    Returns position-major int64 symbols (lengths[0], n); entries past a string's end hold PAD when
    `pad`, otherwise they are left unspecified (callers that slice each string out skip the fill).
    """
    graph = counts.graph
    n_strings = lengths.size
    width = int(lengths[0]) if n_strings else 0
    out = np.empty((width, n_strings), dtype=np.int64)
    if n_strings == 0 or width == 0:
        return out
    if width > counts.max_length:
        raise ValueError(f"count table covers lengths up to {counts.max_length}, asked for {width}")
    if uniforms.shape[0] < width or uniforms.shape[1] != n_strings:
        raise ValueError(f"uniforms must have shape ({width}, {n_strings}), got {uniforms.shape}")
    # active[t] = number of strings longer than t, a prefix of the sorted batch.
    active = n_strings - np.searchsorted(lengths[::-1], np.arange(width), side="right")
    node = np.full(n_strings, graph.start, dtype=np.int64)
    edge_target, edge_symbol = graph.edge_target, graph.edge_symbol
    symbol_is_edge = bool(np.array_equal(edge_symbol, np.broadcast_to(np.arange(graph.degree), edge_symbol.shape)))
    cdf = counts.edge_cdf if graph.degree > 1 else None
    for position in range(width):
        k = int(active[position])
        current = node[:k]
        if cdf is None:
            choice = np.zeros(k, dtype=np.int64)
        else:
            remaining = lengths[:k] - position  # symbols still to emit, including this one
            thresholds = cdf[remaining, current]  # (k, degree - 1)
            choice = (thresholds <= uniforms[position, :k, None]).sum(axis=1)
        # Emit before moving: `current` is a view of `node`.
        out[position, :k] = choice if symbol_is_edge else edge_symbol[current, choice]
        node[:k] = edge_target[current, choice]
        if pad:
            out[position, k:] = PAD
    return out


def walk(counts: LogCounts, lengths: np.ndarray, uniforms: np.ndarray) -> np.ndarray:
    """Sample one path per entry of `lengths` (any order) from the graph's start node.

    uniforms: float64 (max(lengths), len(lengths)) of U[0, 1) draws, position-major; column i drives
      string i (entries past its end are ignored).
    Returns int64 symbols (len(lengths), max(lengths)) padded with PAD. Every requested length must
    have at least one path (callers check counts.nonempty).
    """
    lengths = np.asarray(lengths, dtype=np.int64)
    if lengths.size == 0:
        return np.empty((0, 0), dtype=np.int64)
    order = np.argsort(-lengths, kind="stable")
    if np.all(order == np.arange(lengths.size)):
        return walk_sorted(counts, lengths, uniforms).T.copy()
    out = walk_sorted(counts, lengths[order], uniforms[:, order])
    symbols = np.empty((lengths.size, out.shape[0]), dtype=np.int64)
    symbols[order] = out.T
    return symbols
