"""Benchmark: the full paper test set (lengths 41..500 x 512 strings) in one call, against a
per-string Python sampler walking the same count tables, plus training-batch latency.

    python bench/sampling.py [--language ab_star] [--n 512] [--baseline-strings 1500]

The baseline draws one string at a time, one symbol at a time, with the same completion-count
probabilities (read from the same LogCounts tables) and the same mix of positives, uniform negatives
and near-misses, on a subsample of lengths spread over 41..500; rates are compared per string over
the same length distribution. Times are CPU seconds of this process (the machine is shared, so wall
time is also printed but is noisier).
"""

from __future__ import annotations

import argparse
import math
import random
import time

import numpy as np

from formal_rope.automata import language_dfa
from formal_rope.lang.source import resolve_language
from formal_rope.sampling import LogCounts, count_table, test_sets, training_batch


def _python_walk(counts: LogCounts, length: int, rng: random.Random) -> list[int]:
    """One string, one symbol at a time: P(edge) = count(r-1, target) / count(r, node)."""
    graph = counts.graph
    node, word = graph.start, []
    for position in range(length):
        remaining = length - position
        log_total = counts.shifted[remaining, node] + counts.row_peak[remaining]
        weights = [math.exp(counts.shifted[remaining - 1, target] - log_total) for target in graph.edge_target[node]]
        draw, cumulative = rng.random() * sum(weights), 0.0
        choice = len(weights) - 1
        for edge, weight in enumerate(weights):
            cumulative += weight
            if draw < cumulative and weight > 0:
                choice = edge
                break
        word.append(int(graph.edge_symbol[node, choice]))
        node = int(graph.edge_target[node, choice])
    return word


def _timed(function):
    cpu, wall = time.process_time(), time.perf_counter()
    result = function()
    return result, time.process_time() - cpu, time.perf_counter() - wall


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--language", default="ab_star", help="registry name or expression (default ab_star = (ab)*)")
    parser.add_argument("--n", type=int, default=512, help="strings per length")
    parser.add_argument("--baseline-strings", type=int, default=1500, help="strings drawn by the per-string baseline")
    parser.add_argument("--batches", type=int, default=300, help="training batches timed")
    args = parser.parse_args()

    dfa = language_dfa(resolve_language(args.language))
    lengths = list(range(41, 501))
    # Count tables are built once per DFA and cached; time them separately from sampling.
    _, table_cpu, _ = _timed(lambda: [count_table(dfa, kind, 500) for kind in ("accepted", "rejected", "near_miss")])
    _, alias_cpu, _ = _timed(
        lambda: [count_table(dfa, kind, 500).alias_table for kind in ("accepted", "rejected", "near_miss")]
    )
    sets, sets_cpu, sets_wall = _timed(lambda: test_sets(dfa, lengths, args.n, seed=0))
    n_strings = sum(len(labeled) for labeled in sets)
    n_symbols = sum(labeled.symbols.size for labeled in sets)
    vector_rate = n_strings / sets_cpu

    # Baseline on an even subsample of lengths, with each length's own class mix.
    rng = random.Random(0)
    per_length = max(1, args.baseline_strings // 40)
    sample_lengths = lengths[:: max(1, len(lengths) // 40)]
    tables = {kind: count_table(dfa, kind, 500) for kind in ("accepted", "rejected", "near_miss")}

    def baseline() -> int:
        drawn = 0
        for labeled in (sets[length - 41] for length in sample_lengths):
            positives = int(labeled.labels.sum())
            near = labeled.n_near_miss
            mix = [("accepted", positives), ("rejected", len(labeled) - positives - near), ("near_miss", near)]
            for kind, count in mix:
                for _ in range(round(per_length * count / len(labeled))):
                    _python_walk(tables[kind], labeled.length, rng)
                    drawn += 1
        return drawn

    baseline_strings, baseline_cpu, _ = _timed(baseline)
    # Same length distribution (uniform over 41..500) so strings/s are comparable.
    baseline_rate = baseline_strings / baseline_cpu

    generator = np.random.default_rng(0)
    training_batch(dfa, generator, 128)  # warm the 0..40 tables
    _, batch_cpu, batch_wall = _timed(lambda: [training_batch(dfa, generator, 128) for _ in range(args.batches)])

    def baseline_batch() -> None:
        accepted, rejected = count_table(dfa, "accepted", 40), count_table(dfa, "rejected", 40)
        for kind_table in (accepted, rejected):
            allowed = [r for r in range(41) if kind_table.nonempty(r)]
            for _ in range(64):
                _python_walk(kind_table, rng.choice(allowed), rng)

    _, baseline_batch_cpu, _ = _timed(lambda: [baseline_batch() for _ in range(5)])

    print(f"language {args.language}: {dfa.n_states} states, alphabet {{{', '.join(dfa.alphabet)}}}")
    print(f"count tables (lengths 0..500, 3 graphs): {table_cpu * 1e3:.1f} ms, alias tables {alias_cpu * 1e3:.1f} ms")
    print(
        f"test_sets 41..500 x {args.n}: {n_strings:,} strings, {n_symbols / 1e6:.1f}M symbols in "
        f"{sets_cpu:.2f} s CPU ({sets_wall:.2f} s wall): {vector_rate:,.0f} strings/s, "
        f"{n_symbols / sets_cpu / 1e6:.1f}M symbols/s"
    )
    print(
        f"per-string Python baseline: {baseline_strings} strings in {baseline_cpu:.2f} s CPU: "
        f"{baseline_rate:,.0f} strings/s"
    )
    print(f"speed-up vs per-string baseline: {vector_rate / baseline_rate:.1f}x (target >= 20x)")
    batch_ms = batch_cpu / args.batches * 1e3
    baseline_batch_ms = baseline_batch_cpu / 5 * 1e3
    print(
        f"training_batch(128, lengths 0..40): {batch_ms:.2f} ms CPU ({batch_wall / args.batches * 1e3:.2f} ms wall); "
        f"per-string baseline {baseline_batch_ms:.1f} ms: {baseline_batch_ms / batch_ms:.1f}x"
    )


if __name__ == "__main__":
    main()
