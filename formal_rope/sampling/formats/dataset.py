"""A language's training and test strings read from files in any registered dataset format."""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from pathlib import Path
from typing import Sequence

import numpy as np

import formal_rope.sampling.formats.registry as registry
from formal_rope.automata.membership import accepts_encoded
from formal_rope.errors import FormalRopeError
from formal_rope.sampling.datasets import LabeledSet, TrainingBatch
from formal_rope.sampling.formats.layout import DataFiles
from formal_rope.sampling.formats.strings import (
    DataFormatError,
    StringFile,
    encode_words,
    infer_alphabet,
    labeled_sets,
)
from formal_rope.sampling.text import decode


@dataclass(frozen=True, eq=False)
class Dataset:
    """Training and test strings read from a FLaRe language folder or an MLRegTest language.

    `files` are every file read (training first); `content_hash` is a SHA-256 prefix over their
    names and bytes, so a run records exactly which data it used."""

    format: str
    root: str
    alphabet: tuple[str, ...]
    train: StringFile
    tests: tuple[StringFile, ...]
    files: tuple[str, ...]
    content_hash: str

    def test_sets(self) -> list[LabeledSet]:
        """All test strings, one LabeledSet per length, increasing."""
        return labeled_sets(self.tests)

    def training_batch(self, rng: np.random.Generator, batch_size: int, rows: np.ndarray | None = None):
        """A balanced batch from the training file, like `sampling.training_batch`: ceil(B/2) rows
        drawn uniformly with replacement among its positives and floor(B/2) among its negatives,
        rows shuffled. `rows` (increasing indices) restricts the draw to those strings (the run's
        training lengths); None draws from all. No positive or no negative is a FormalRopeError."""
        labels = self.train.labels
        if rows is None:
            positives, negatives = np.flatnonzero(labels), np.flatnonzero(~labels)
        else:
            positives, negatives = rows[labels[rows]], rows[~labels[rows]]
        n_negative = batch_size // 2
        n_positive = batch_size - n_negative
        for name, rows, wanted in (("positive", positives, n_positive), ("negative", negatives, n_negative)):
            if wanted and not rows.size:
                raise FormalRopeError(
                    f"the training data {self.train.path} has no {name} string, so balanced batches cannot be drawn"
                )
        chosen = np.concatenate((
            positives[rng.integers(0, max(positives.size, 1), n_positive)] if n_positive else positives[:0],
            negatives[rng.integers(0, max(negatives.size, 1), n_negative)] if n_negative else negatives[:0],
        ))
        chosen = chosen[rng.permutation(batch_size)]
        symbols, lengths = self.train.padded(chosen)
        return TrainingBatch(symbols, lengths, labels[chosen].copy())


def _sources() -> list[registry.DatasetFormat]:
    return [row for row in registry.DATASET_FORMATS if row.training_source]


def locate_dataset(path: str | Path) -> DataFiles:
    """Find training and test data under `path`, in the first format (registry order) that
    recognises it:

    * a FLaRe language folder: main.tok + labels.txt (training) and datasets/test/ (test);
    * an MLRegTest language: `DIR/<language>` naming `<language>_Train.txt` and its `_Test*.txt`
      files (TestSR, TestSA, TestLR, TestLA, all used for testing), or a folder holding exactly
      one `*_Train.txt`."""
    path = Path(path)
    sources = _sources()
    for row in sources:
        located = row.locate(path)
        if located is not None:
            return located
    if path.is_dir():
        raise FormalRopeError(f"{path} is neither " + " nor ".join(row.folder_hint for row in sources))
    raise FormalRopeError(f"no data at {path}: expected " + " or ".join(row.path_hint for row in sources))


def _content_hash(files: Sequence[Path], root: Path) -> str:
    digest = hashlib.sha256()
    for path in files:
        try:
            name = str(path.relative_to(root))
        except ValueError:
            name = path.name
        digest.update(name.encode("utf-8") + b"\0")
        digest.update(path.read_bytes())
        digest.update(b"\0")
    return digest.hexdigest()[:16]


def load_dataset(path: str | Path, alphabet: Sequence[str] | None = None) -> Dataset:
    """Read a FLaRe language folder or an MLRegTest language (see `locate_dataset`).

    With `alphabet` every symbol must belong to it (DataFormatError naming file and line);
    without, the alphabet is the sorted set of symbols in all the files read."""
    located = locate_dataset(path)
    row = registry.dataset_format(located.format)
    parsed = [row.read_words(split, alphabet) for split in (located.train, *located.tests)]
    chosen = tuple(alphabet) if alphabet is not None else infer_alphabet(parsed)
    if not chosen:
        raise FormalRopeError(
            f"the data at {path} holds no symbols, so no alphabet can be learnt; "
            "give the alphabet (--alphabet / alphabet=) or, on the command line, --lang"
        )
    encoded = [encode_words(words, chosen) for words in parsed]
    return Dataset(
        format=located.format,
        root=located.root,
        alphabet=chosen,
        train=encoded[0],
        tests=tuple(encoded[1:]),
        files=tuple(str(p) for p in located.files),
        content_hash=_content_hash(located.files, located.files_root),
    )


def check_labels(strings: StringFile, dfa) -> None:
    """FormalRopeError at the first line whose label disagrees with `dfa`'s language (same alphabet)."""
    if tuple(dfa.alphabet) != tuple(strings.alphabet):
        raise FormalRopeError(
            f"{strings.path} is read over {{{', '.join(strings.alphabet)}}} but the language is over "
            f"{{{', '.join(dfa.alphabet)}}}"
        )
    wrong = []
    for length, rows in strings.length_groups():
        members = accepts_encoded(dfa, strings.block(length, rows), np.full(len(rows), length))
        wrong.append(rows[members != strings.labels[rows]])
    wrong = np.sort(np.concatenate(wrong)) if wrong else np.zeros(0, dtype=np.int64)
    if wrong.size:
        row = int(wrong[0])
        symbols, lengths = strings.padded([row])
        word = decode(symbols, strings.alphabet, lengths)[0]
        said = "in the language" if strings.labels[row] else "not in the language"
        actual = "rejects" if strings.labels[row] else "accepts"
        line = int(strings.lines[row])
        where = "" if strings.label_path is None else f" ({strings.label_path}:{line})"
        raise DataFormatError(
            strings.path, line,
            f"the label{where} says {word!r} is {said}, but the language {actual} it "
            f"({wrong.size} of {len(strings)} labels in this file disagree with the language)",
        )
