"""MLRegTest string files, written so that MLRegTest's own reader reads them (no torch).

MLRegTest (van der Poel et al., JMLR 2024; github.com/heinz-jeffrey/subregular-learning,
src/data-gen.py writes, src/neural_net/tensorflow/data.py `parse_dataset` reads) stores each split
as one file `<language>_<Split>.txt` (Train, Dev, TestSR, TestSA, TestLR, TestLA) with lines
`string<TAB>TRUE|FALSE`, the string's single-character symbols concatenated.

Its reader splits `line.strip()` at the tab, so a line must keep its tab and its symbols after
`strip()`: the empty string (`\\tTRUE`: ValueError, MLRegTest never holds it) and whitespace
symbols at a string's ends cannot be written; both are refused (`check_request`).

The end of the module is the dataset-format protocol (`formats.registry`).
"""

from __future__ import annotations

from pathlib import Path
from typing import Sequence

import numpy as np

from formal_rope.errors import FormalRopeError
from formal_rope.sampling.datasets import LabeledSet
from formal_rope.sampling.formats.layout import DataFiles, WriteOptions
from formal_rope.sampling.formats.strings import (
    DataFormatError,
    StringFile,
    Words,
    check_line_symbols,
    encode_inferred,
    read_lines,
    text_words,
    write_lines,
)
from formal_rope.sampling.text import decode

MLREGTEST_TRAIN_SUFFIX = "_Train.txt"
MLREGTEST_TEST_PATTERN = "_Test*.txt"
MLREGTEST_LABELS = {"TRUE": True, "FALSE": False}


def read_mlregtest_words(path: Path, alphabet: Sequence[str] | None) -> Words:
    """The strings and labels of one MLRegTest file, before encoding."""
    rows: list[str] = []
    text_lines = read_lines(path)
    labels = np.empty(len(text_lines), dtype=bool)
    for number, text in enumerate(text_lines, start=1):
        string, tab, label = text.rpartition("\t")
        if not tab:
            raise DataFormatError(path, number, f"expected string<TAB>TRUE or string<TAB>FALSE, got {text!r}")
        value = MLREGTEST_LABELS.get(label.strip())
        if value is None:
            raise DataFormatError(path, number, f"expected the label TRUE or FALSE after the tab, got {label!r}")
        if "\t" in string:
            raise DataFormatError(path, number, f"more than one tab in {text!r}; expected string<TAB>TRUE|FALSE")
        rows.append(string)
        labels[number - 1] = value
    return text_words(path, rows, labels, np.arange(1, len(rows) + 1, dtype=np.int64), alphabet)


def read_mlregtest_file(path: str | Path, alphabet: Sequence[str] | None = None) -> StringFile:
    """The labelled strings of one MLRegTest file (`string<TAB>TRUE|FALSE` lines).

    Strings over single-character symbols are concatenated (MLRegTest's own files); strings with
    blanks are read as blank-separated symbols (how `sample --format mlregtest` writes
    multi-character symbols). Without `alphabet` it is the sorted set of symbols in the file."""
    path = Path(path)
    return encode_inferred(read_mlregtest_words(path, alphabet), alphabet)


def check_request(alphabet: Sequence[str], lengths: Sequence[int]) -> None:
    """FormalRopeError, before anything is sampled, for strings MLRegTest's reader cannot read back:
    a symbol with a tab or a line break, a whitespace symbol (its reader strips each line), or
    the empty string (length 0: its line `\\tTRUE` loses its tab to strip(), a ValueError there)."""
    check_line_symbols(alphabet)
    if all(len(symbol) == 1 for symbol in alphabet):  # MLRegTest's own convention: concatenated characters
        for symbol in alphabet:
            if symbol.isspace():
                raise FormalRopeError(
                    f"symbol {symbol!r} is whitespace: MLRegTest's reader strips every line before splitting it "
                    "at the tab, so a string that starts or ends with it would be read without it; rename it"
                )
    if 0 in set(int(length) for length in lengths):
        raise FormalRopeError(
            "MLRegTest files cannot hold the empty string: MLRegTest's reader strips each line before "
            "splitting it at the tab, so the empty string's line '\\tTRUE' has no tab left and stops it "
            "with a ValueError (MLRegTest's own files start at length 20); leave length 0 out"
        )


def mlregtest_lines(sets: Sequence[LabeledSet], alphabet: Sequence[str]) -> list[str]:
    """`string<TAB>TRUE|FALSE` lines for the sets' rows (strings as `sampling.decode` writes them)."""
    check_request(alphabet, [labeled.length for labeled in sets if len(labeled)])
    lines: list[str] = []
    for labeled in sets:
        for word, label in zip(decode(labeled.symbols, alphabet), labeled.labels.tolist()):
            lines.append(f"{word}\t{'TRUE' if label else 'FALSE'}")
    return lines


def write_mlregtest_file(path: str | Path, sets: Sequence[LabeledSet], alphabet: Sequence[str]) -> Path:
    """Write `sets` as one MLRegTest string file (name it `<language>_<Split>.txt`, e.g. `x_TestLR.txt`)."""
    path = Path(path)
    lines = mlregtest_lines(sets, alphabet)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        write_lines(path, lines)
    except OSError as error:
        raise FormalRopeError(f"cannot write {str(path)!r}: {error.strerror or error}") from None
    return path


def locate_mlregtest(path: Path) -> DataFiles | None:
    """An MLRegTest language: `DIR/<language>` naming `<language>_Train.txt` and its `_Test*.txt`
    files (TestSR, TestSA, TestLR, TestLA, all used for testing), or a folder holding exactly one
    `*_Train.txt`. None when `path` shows no MLRegTest file at all."""
    if path.is_dir():
        trains = sorted(path.glob("*" + MLREGTEST_TRAIN_SUFFIX))
        if not trains:
            return None
        if len(trains) > 1:
            raise FormalRopeError(
                f"{path} is neither a FLaRe language folder (no main.tok) nor an MLRegTest folder with one "
                f"language ({len(trains)} *{MLREGTEST_TRAIN_SUFFIX} files); give DIR/<language> to pick one "
                "MLRegTest language"
            )
        prefix = trains[0].with_name(trains[0].name[: -len(MLREGTEST_TRAIN_SUFFIX)])
    else:
        prefix = path
    train = prefix.with_name(prefix.name + MLREGTEST_TRAIN_SUFFIX)
    if not train.is_file():
        return None
    tests = tuple(sorted(prefix.parent.glob(prefix.name + MLREGTEST_TEST_PATTERN)))
    if not tests:
        raise FormalRopeError(f"{train} has no test files beside it ({prefix.name}{MLREGTEST_TEST_PATTERN})")
    return DataFiles("mlregtest", str(prefix), train, tests, files=(train, *tests), files_root=prefix.parent)


# --------------------------------------------------------------- dataset-format protocol (registry)
def write(out: Path, sets: Sequence[LabeledSet], dfa, options: WriteOptions) -> list[Path]:
    return [write_mlregtest_file(out, sets, dfa.alphabet)]


read = read_mlregtest_file
locate = locate_mlregtest
read_words = read_mlregtest_words
