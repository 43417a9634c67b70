"""Sampling stage: exact uniform strings of a given length inside/outside a regular language,
labelled test sets (with near-misses) and balanced training batches, all vectorized over strings.

The names below load on first use, so that the CLI can read the dataset-format registry
(`sampling.formats.registry`) and the distributions (`sampling.distributions`) at start-up without
importing numpy."""

from __future__ import annotations

from formal_rope._lazy import lazy_exports

_MODULES = {
    "formal_rope.sampling.counts": [
        "CountingGraph", "LogCounts", "count_near_misses", "count_paths", "count_strings", "dfa_graph",
        "exact_counts", "log_counts", "near_miss_graph",
    ],
    "formal_rope.sampling.datasets": [
        "EmptyClassError", "LabeledSet", "TrainingBatch", "TrainingDraw", "count_table", "draw_training_batch",
        "sample_strings", "test_set", "test_sets", "training_batch", "uniform_set", "unscored_classes",
        "walk_training_batches",
    ],
    "formal_rope.sampling.distributions": ["DISTRIBUTIONS", "positive_distribution"],
    "formal_rope.sampling.enumeration": ["capped_counts", "class_counts", "enumerate_class", "one_edit_neighbours"],
    "formal_rope.sampling.formats.dataset": ["Dataset", "check_labels", "load_dataset"],
    "formal_rope.sampling.formats.flare": ["read_flare_split", "write_flare_split"],
    "formal_rope.sampling.formats.folders": ["write_language_folder"],
    "formal_rope.sampling.formats.mlregtest": ["read_mlregtest_file", "write_mlregtest_file"],
    "formal_rope.sampling.formats.parquet": ["read_parquet_strings", "write_parquet_file"],
    "formal_rope.sampling.formats.registry": ["DATASET_FORMATS", "write_sets"],
    "formal_rope.sampling.formats.strings": ["DataFormatError", "StringFile"],
    "formal_rope.sampling.text": ["decode", "encode"],
    "formal_rope.sampling.walker": ["PAD", "walk"],
}
_LAZY = {name: module for module, names in _MODULES.items() for name in names}

__all__ = sorted(_LAZY)
__getattr__, __dir__ = lazy_exports(__name__, _LAZY, globals())
