"""Uniform random paths through a counting graph, many strings (of mixed lengths) at once.

At every position each active string moves along an edge with probability proportional to the
number of completions behind that edge: count(r-1, target) / count(r, current). The product of these
ratios telescopes to 1 / count(n, start), so every path of length n is equally likely. In floating
point each step's probabilities are renormalised by the sum of that step's weights, so the table
only enters through ratios of adjacent rows; the deviation from uniform is a few ulps per position
(about n·1e-15 relative), not an error accumulated over the table.

Strings are processed position by position, all strings in parallel: sorting them by length (longest
first) makes the active strings at position t a prefix of the batch, so no masking is needed. The
per-(remaining length, node) edge distribution is precomputed once per table as alias tables, so a
step is a handful of flat gathers whatever the alphabet size.
"""

from __future__ import annotations

import numpy as np

from formal_rope.sampling.counts import LogCounts

PAD = -1  # symbol value in padded positions after the end of a string

# Above this many (remaining length, node, edge) entries the alias tables (12 bytes per entry) are not
# built and each step weighs its edges from the log table instead (same distribution, slower steps).
ALIAS_TABLE_LIMIT = 8_000_000


def walk_sorted(
    counts: LogCounts, lengths: np.ndarray, uniforms: np.ndarray, pad: bool = True, starts: np.ndarray | None = None,
    alias: bool = True,
) -> np.ndarray:
    """Core walker for `lengths` sorted in non-increasing order.

    starts: optional start node per string (default: the graph's start for all).
    uniforms: float64 (>= lengths[0], n) position-major U[0, 1) draws; row t drives position t.
    alias: False weighs each step's edges from the log table even where alias tables would fit
    (the same distribution; for a table walked a few times, building alias rows would cost more).
    Returns position-major symbols (lengths[0], n), int8 when the alphabet allows (callers convert
    while transposing); entries past a string's end hold PAD when
    `pad`, otherwise they are left unspecified (callers that slice each string out skip the fill).
    """
    graph = counts.graph
    n_strings = lengths.size
    width = int(lengths[0]) if n_strings else 0
    # Every caller transposes the position-major output; int8 makes that copy 8x smaller.
    out = np.empty((width, n_strings), dtype=np.int8 if graph.edge_symbol.max(initial=0) < 127 else np.int64)
    if n_strings == 0 or width == 0:
        return out
    if width > counts.max_length:
        raise ValueError(f"count table covers lengths up to {counts.max_length}, asked for {width}")
    if uniforms.shape[0] < width or uniforms.shape[1] != n_strings:
        raise ValueError(f"uniforms must have shape ({width}, {n_strings}), got {uniforms.shape}")
    node = np.full(n_strings, graph.start, dtype=np.int64) if starts is None else np.array(starts, dtype=np.int64)
    if not np.isfinite(counts.shifted[lengths, node]).all():
        # Walking from a node with no path of the requested length would emit garbage silently.
        raise ValueError("some requested (length, start node) has no path; check counts.nonempty first")
    # active[t] = number of strings longer than t, a prefix of the sorted batch.
    active = n_strings - np.searchsorted(lengths[::-1], np.arange(width), side="right")
    degree, n_nodes = graph.degree, graph.n_nodes
    flat_target = graph.edge_target.ravel()
    flat_symbol = graph.edge_symbol.ravel()
    symbol_is_edge = bool(
        np.array_equal(graph.edge_symbol, np.broadcast_to(np.arange(degree), graph.edge_symbol.shape))
    )
    use_alias = alias and degree > 1 and counts.table_entries <= ALIAS_TABLE_LIMIT
    if use_alias:
        keep, alias = counts.alias_table
        flat_keep, flat_alias = keep.ravel(), alias.ravel()
    shifted, row_peak = counts.shifted, counts.row_peak
    for position in range(width):
        k = int(active[position])
        current = node[:k]
        remaining = lengths[:k] - position  # symbols still to emit, including this one
        if degree == 1:
            choice = np.zeros(k, dtype=np.int64)
        elif use_alias:
            # One draw gives both the alias column (integer part) and the coin (fractional part).
            scaled = uniforms[position, :k] * degree
            column = scaled.astype(np.int64)
            np.minimum(column, degree - 1, out=column)
            coin = scaled - column
            slot = (remaining * n_nodes + current) * degree + column
            choice = np.where(coin < flat_keep[slot], column, flat_alias[slot])
        else:
            # Tables too large to precompute alias rows for: weigh the edges from the log table.
            targets = graph.edge_target[current]
            log_total = shifted[remaining, current] + row_peak[remaining]
            weights = np.exp(shifted[(remaining - 1)[:, None], targets] - log_total[:, None])
            cumulative = np.cumsum(weights, axis=1)
            threshold = uniforms[position, :k] * cumulative[:, -1]
            choice = (cumulative <= threshold[:, None]).sum(axis=1)
            overflow = np.flatnonzero(choice >= degree)
            if overflow.size:  # u * total rounded up to total: take the last positive-weight edge
                choice[overflow] = (cumulative[overflow] < cumulative[overflow, -1:]).sum(axis=1)
        edge = current * degree + choice
        # Emit before moving: `current` is a view of `node`.
        out[position, :k] = choice if symbol_is_edge else flat_symbol[edge]
        node[:k] = flat_target[edge]
        if pad:
            out[position, k:] = PAD
    return out


def walk(counts: LogCounts, lengths: np.ndarray, uniforms: np.ndarray, starts: np.ndarray | None = None,
         alias: bool = True) -> np.ndarray:
    """Sample one path per entry of `lengths` (any order) from the graph's start node (or from
    `starts[i]` for string i).

    uniforms: float64 (max(lengths), len(lengths)) of U[0, 1) draws, position-major; column i drives
      string i (entries past its end are ignored).
    Returns int64 symbols (len(lengths), max(lengths)) padded with PAD. Every requested length must
    have at least one path (callers check counts.nonempty). alias: as for `walk_sorted`.
    """
    lengths = np.asarray(lengths, dtype=np.int64)
    if lengths.size == 0:
        return np.empty((0, 0), dtype=np.int64)
    order = np.argsort(-lengths, kind="stable")
    if np.all(order == np.arange(lengths.size)):
        return np.array(walk_sorted(counts, lengths, uniforms, starts=starts, alias=alias).T, dtype=np.int64,
                        order="C")
    out = walk_sorted(
        counts, lengths[order], uniforms[:, order], starts=None if starts is None else np.asarray(starts)[order],
        alias=alias,
    )
    symbols = np.empty((lengths.size, out.shape[0]), dtype=np.int64)
    symbols[order] = out.T
    return symbols
