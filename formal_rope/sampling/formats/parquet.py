"""Parquet files of labelled strings: what `formalrope sample --out FILE.parquet` writes.

The end of the module is the dataset-format protocol (`formats.registry`); Parquet is no source
for `train --data`, so it has no locate / read_words."""

from __future__ import annotations

from pathlib import Path
from typing import Sequence

import numpy as np

from formal_rope.errors import FormalRopeError
from formal_rope.files import atomic_file
from formal_rope.sampling.datasets import LabeledSet
from formal_rope.sampling.formats.layout import WriteOptions
from formal_rope.sampling.formats.strings import DataFormatError, StringFile, encode_inferred, text_words
from formal_rope.sampling.text import decode


def read_parquet_strings(path: str | Path, alphabet: Sequence[str] | None = None) -> StringFile:
    """The labelled strings of a Parquet file written by `formalrope sample --out FILE.parquet`
    (columns string, label, ...). "Lines" are 1-based rows."""
    import pyarrow.parquet as pq  # lazy: keeps pyarrow off the torch-free `sample --format flare` path

    path = Path(path)
    try:
        table = pq.read_table(path, columns=["string", "label"])
    except FileNotFoundError:
        raise DataFormatError(path, None, "no such file") from None
    except Exception as error:  # pyarrow raises several types for non-Parquet or column-less files
        raise DataFormatError(path, None, f"not a Parquet file with columns string and label ({error})") from None
    rows = table.column("string").to_pylist()
    labels = table.column("label").to_pylist()
    for number, (string, label) in enumerate(zip(rows, labels), start=1):
        if not isinstance(string, str) or not isinstance(label, bool):
            raise DataFormatError(
                path, number, f"row has string {string!r} and label {label!r}; expected text and a boolean"
            )
    words = text_words(path, rows, np.array(labels, dtype=bool), np.arange(1, len(rows) + 1, dtype=np.int64), alphabet)
    return encode_inferred(words, alphabet)


def write_parquet_file(path: str | Path, sets: Sequence[LabeledSet], alphabet: Sequence[str]) -> Path:
    """Write `sets` as Parquet with columns string, label, length, near_miss (what `sample --out` writes)."""
    import pandas as pd  # lazy: keeps pandas off the torch-free `sample --format flare` path

    path = Path(path)
    strings: list[str] = []
    for labeled in sets:
        strings.extend(decode(labeled.symbols, alphabet))

    def column(pick, dtype):
        return np.concatenate([pick(labeled) for labeled in sets]) if sets else np.zeros(0, dtype)

    frame = pd.DataFrame({
        "string": strings,
        "label": column(lambda s: s.labels, bool),
        "length": column(lambda s: np.full(len(s), s.length, dtype=np.int64), np.int64),
        "near_miss": column(lambda s: s.near_miss, bool),
    })
    try:
        with atomic_file(path, "the Parquet file") as temporary:  # never a half-written file under its name
            frame.to_parquet(temporary, index=False)
    except OSError as error:
        raise FormalRopeError(f"cannot write {str(path)!r}: {error.strerror or error}") from None
    return path


# --------------------------------------------------------------- dataset-format protocol (registry)
def check_request(alphabet: Sequence[str], lengths: Sequence[int]) -> None:
    """Parquet holds any string over any alphabet."""


def write(out: Path, sets: Sequence[LabeledSet], dfa, options: WriteOptions) -> list[Path]:
    return [write_parquet_file(out, sets, dfa.alphabet)]


read = read_parquet_strings
