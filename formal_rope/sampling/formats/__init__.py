"""Labelled string sets in other tools' formats, as their own code writes and reads them (no torch).

One module per format (`flare`: FLaRe split folders; `mlregtest`: MLRegTest string files;
`parquet`), the strings they share (`strings`: StringFile, DataFormatError), the registry that
`sample --format` and `train --data` read (`registry.DATASET_FORMATS`), whole language folders
(`folders`) and datasets for training (`dataset`: locate_dataset, load_dataset, check_labels).

Strings stay int64 symbol-index arrays (PAD after a string's end), as in the rest of the sampling
stage; malformed files raise `DataFormatError` (a FormalRopeError) naming the file and the line.

The names below load on first use: the CLI reads the registry at start-up, which must not import
numpy or the format modules.
"""

from __future__ import annotations

from formal_rope._lazy import lazy_exports

_MODULES = {
    "formal_rope.automata.ops": ["coaccessible_states"],
    "formal_rope.sampling.formats.dataset": ["Dataset", "check_labels", "load_dataset", "locate_dataset"],
    "formal_rope.sampling.formats.flare": [
        "FLARE_LABELS", "FLARE_LOG_PROBABILITIES", "FLARE_NEXT_SYMBOLS", "FLARE_NUM_EDITS", "FLARE_STRINGS",
        "FLARE_TEST_SPLIT", "flare_log_probabilities", "read_flare_split", "write_flare_split",
    ],
    "formal_rope.sampling.formats.folders": ["WrittenSplit", "folder_splits", "sample_split", "write_language_folder"],
    "formal_rope.sampling.formats.layout": ["DataFiles", "FolderSplit", "WriteOptions"],
    "formal_rope.sampling.formats.mlregtest": [
        "MLREGTEST_LABELS", "MLREGTEST_TEST_PATTERN", "MLREGTEST_TRAIN_SUFFIX", "mlregtest_lines",
        "read_mlregtest_file", "write_mlregtest_file",
    ],
    "formal_rope.sampling.formats.parquet": ["read_parquet_strings", "write_parquet_file"],
    "formal_rope.sampling.formats.registry": [
        "DATASET_FORMATS", "DEFAULT_FORMAT", "DatasetFormat", "dataset_format", "format_names", "write_sets",
    ],
    "formal_rope.sampling.formats.strings": ["DataFormatError", "StringFile", "labeled_sets"],
}
_LAZY = {name: module for module, names in _MODULES.items() for name in names}

__all__ = sorted(_LAZY)
__getattr__, __dir__ = lazy_exports(__name__, _LAZY, globals())
