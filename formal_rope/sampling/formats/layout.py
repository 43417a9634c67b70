"""Where a dataset's strings live on disk: the splits a format writes and the files a run reads."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class FolderSplit:
    """One split of a language folder: written under `path` (relative to the folder; "." is the
    folder itself) with `strings` strings spread evenly over the lengths `min_length..max_length`."""

    name: str
    path: str
    min_length: int
    max_length: int
    strings: int

    @property
    def lengths(self) -> list[int]:
        return list(range(self.min_length, self.max_length + 1))

    def per_length(self) -> dict[int, int]:
        """Strings per length: `strings` split as evenly as possible, the lengths that take one more
        (when it does not divide) spread evenly over the range (10,000 over 0..40: 37 lengths
        with 244, 4 with 243; 100 over 0..500: one string at every fifth length)."""
        lengths = self.lengths
        base, extra = divmod(self.strings, len(lengths))
        more = {(index * len(lengths)) // extra for index in range(extra)}
        return {length: base + (index in more) for index, length in enumerate(lengths)}


@dataclass(frozen=True)
class DataFiles:
    """Where a dataset's training and test strings are (see `locate_dataset`).

    `files` are the files a run reads, in the order its content hash covers them, named relative
    to `files_root` in the hash."""

    format: str
    root: str
    train: Path  # FLaRe: the training split folder; MLRegTest: the _Train.txt file
    tests: tuple[Path, ...]  # FLaRe: the test split folder; MLRegTest: the _Test*.txt files
    files: tuple[Path, ...] = ()
    files_root: Path | None = None


@dataclass(frozen=True)
class WriteOptions:
    """What a writer may be asked besides the strings: FLaRe's next-symbols.jsonl, the distribution
    the positives were drawn from (`sampling.distributions`), and the lengths the split draws from
    (None: the lengths of the sets written)."""

    next_symbols: bool = True
    distribution: str = "uniform"
    split_lengths: tuple[int, ...] | None = None
