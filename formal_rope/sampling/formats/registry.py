"""The dataset formats, one row each: everything `sample --format`, `train --data` and the Python
API ask about a format. Adding a format is one module implementing the protocol below plus one row
here (docs/formats.md, "How to extend: add a dataset format").

A row describes its format in plain values (the CLI reads them at start-up, so this module imports
neither numpy nor the format modules) and names the module that implements it. That module
defines, at its top level:

    check_request(alphabet, lengths) -> None   FormalRopeError, before anything is sampled, for
                                               strings or symbols the format cannot hold
    write(out, sets, dfa, options) -> [Path]   write LabeledSets (options: layout.WriteOptions)
    read(path, alphabet) -> StringFile         read one written file or split back
  and, when the row says `training_source=True` (`train --data` reads the format):
    locate(path) -> DataFiles | None           the training and test files of a language at
                                               `path`, or None when `path` is not in this format
    read_words(path, alphabet) -> Words        one split before encoding (alphabets are learnt
                                               over all the splits of a language)
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import Sequence

from formal_rope.errors import FormalRopeError
from formal_rope.sampling.distributions import DEFAULT_DISTRIBUTION
from formal_rope.sampling.formats.layout import DataFiles, FolderSplit, WriteOptions

PROTOCOL = ("check_request", "write", "read")
TRAINING_PROTOCOL = ("locate", "read_words")


@dataclass(frozen=True)
class DatasetFormat:
    """One dataset format.

    name: the `--format` value; help: what --out then receives (in `sample --help`); writes:
    "file" or "folder", what --out names; files: the files one written split consists of; module:
    the module implementing the protocol (see the module docstring); next_symbols: whether it
    writes FLaRe's next-symbols.jsonl (`--next-symbols` applies), with the warning shown when that
    is turned off; training_source: whether `train --data` reads it (the module has locate and
    read_words), with folder_hint / path_hint saying what a folder / a path lacked when no format
    recognises it; folder_splits: the splits of a whole language folder (`sample --language-folder`),
    () when the format has none."""

    name: str
    help: str
    writes: str
    files: tuple[str, ...]
    module: str
    next_symbols: bool = False
    no_next_symbols_warning: str = ""
    training_source: bool = False
    folder_hint: str = ""
    path_hint: str = ""
    folder_splits: tuple[FolderSplit, ...] = ()

    def implementation(self) -> ModuleType:
        return importlib.import_module(self.module)

    def check_request(self, alphabet: Sequence[str], lengths: Sequence[int]) -> None:
        self.implementation().check_request(alphabet, lengths)

    def write(self, out: Path, sets, dfa, options: WriteOptions) -> list[Path]:
        return self.implementation().write(Path(out), sets, dfa, options)

    def read(self, path: Path, alphabet: Sequence[str] | None = None):
        return self.implementation().read(Path(path), alphabet)

    def locate(self, path: Path) -> DataFiles | None:
        return self.implementation().locate(Path(path)) if self.training_source else None

    def read_words(self, path: Path, alphabet: Sequence[str] | None = None):
        return self.implementation().read_words(Path(path), alphabet)


DATASET_FORMATS: tuple[DatasetFormat, ...] = (
    DatasetFormat(
        name="flare",
        help="a FLaRe split folder: main.tok, labels.txt, num-edits.txt, log-probabilities.txt, next-symbols.jsonl",
        writes="folder",
        files=("main.tok", "labels.txt", "num-edits.txt", "log-probabilities.txt", "next-symbols.jsonl"),
        module="formal_rope.sampling.formats.flare",
        next_symbols=True,
        no_next_symbols_warning=(
            "without next-symbols.jsonl FLaRe's preparation refuses the split: its prepare_language.bash runs "
            "prepare_data.py --use-next-symbols, which opens next-symbols.jsonl in every split (FileNotFoundError)"
        ),
        training_source=True,
        folder_hint="a FLaRe language folder (no main.tok)",
        path_hint="a FLaRe language folder (main.tok, labels.txt, datasets/test/)",
        # What FLaRe's string_sampling/sample_dataset.py writes (FLaRe draws each string's length;
        # here a split's strings are spread evenly over its lengths). Its optional
        # test-short-held-out and test-edit-distance splits are not written.
        folder_splits=(
            FolderSplit("training", ".", 0, 40, 10_000),
            FolderSplit("validation-short", "datasets/validation-short", 0, 40, 1_000),
            FolderSplit("validation-long", "datasets/validation-long", 0, 80, 1_000),
            FolderSplit("test", "datasets/test", 0, 500, 5_010),  # 10 strings per length
        ),
    ),
    DatasetFormat(
        name="mlregtest",
        help="one string<TAB>TRUE|FALSE file",
        writes="file",
        files=("<language>_<Split>.txt",),
        module="formal_rope.sampling.formats.mlregtest",
        training_source=True,
        folder_hint="an MLRegTest folder with one language (no *_Train.txt files); give DIR/<language> to pick "
        "one MLRegTest language",
        path_hint="an MLRegTest language DIR/<language> with <language>_Train.txt and <language>_Test*.txt",
    ),
    DatasetFormat(
        name="parquet",
        help="one file",
        writes="file",
        files=("FILE.parquet",),
        module="formal_rope.sampling.formats.parquet",
    ),
)
DEFAULT_FORMAT = "parquet"


def format_names() -> tuple[str, ...]:
    return tuple(row.name for row in DATASET_FORMATS)


def listed(names: Sequence[str]) -> str:
    """'a', 'a or b', 'a, b or c'."""
    names = list(names)
    return names[0] if len(names) == 1 else ", ".join(names[:-1]) + " or " + names[-1]


def dataset_format(name: str) -> DatasetFormat:
    """The row called `name` (FormalRopeError listing the formats)."""
    for row in DATASET_FORMATS:
        if row.name == name:
            return row
    raise FormalRopeError(f"unknown data format {name!r}; expected one of {', '.join(format_names())}")


def format_help() -> str:
    """`sample --format`'s help: the default first, then the others, each with what --out receives."""
    default = dataset_format(DEFAULT_FORMAT)
    others = [f"{row.name} ({row.help})" for row in DATASET_FORMATS if row.name != DEFAULT_FORMAT]
    return f"With --out: {listed([f'{default.name} (default; {default.help})', *others])}. See docs/formats.md."


def write_sets(
    fmt: str,
    out: str | Path,
    sets: Sequence,
    dfa,
    *,
    next_symbols: bool = True,
    distribution: str = DEFAULT_DISTRIBUTION,
    split_lengths: Sequence[int] | None = None,
) -> list[Path]:
    """Write `sets` (LabeledSets) of `dfa`'s language in format `fmt` (DATASET_FORMATS: flare, a
    split folder; mlregtest or parquet, one file). Returns the paths written."""
    lengths = None if split_lengths is None else tuple(int(n) for n in split_lengths)
    return dataset_format(fmt).write(Path(out), sets, dfa, WriteOptions(next_symbols, distribution, lengths))
