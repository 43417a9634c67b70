"""Sampling stage: exact uniform strings of a given length inside/outside a regular language,
labelled test sets (with near-misses) and balanced training batches, all vectorized over strings."""

from formal_rope.sampling.counts import (
    CountingGraph,
    LogCounts,
    count_near_misses,
    count_paths,
    count_strings,
    dfa_graph,
    exact_counts,
    log_counts,
    near_miss_graph,
)
from formal_rope.sampling.datasets import (
    EmptyClassError,
    LabeledSet,
    TrainingBatch,
    count_table,
    sample_strings,
    test_set,
    test_sets,
    training_batch,
)
from formal_rope.sampling.text import decode, encode
from formal_rope.sampling.walker import PAD, walk

__all__ = [
    "PAD",
    "CountingGraph",
    "EmptyClassError",
    "LabeledSet",
    "LogCounts",
    "TrainingBatch",
    "count_near_misses",
    "count_paths",
    "count_strings",
    "count_table",
    "decode",
    "dfa_graph",
    "encode",
    "exact_counts",
    "log_counts",
    "near_miss_graph",
    "sample_strings",
    "test_set",
    "test_sets",
    "training_batch",
    "walk",
]
