"""A whole language folder in one call: every split of a format's layout sampled and written."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Sequence

from formal_rope.errors import FormalRopeError
from formal_rope.sampling.datasets import LabeledSet, test_sets
from formal_rope.sampling.distributions import DEFAULT_DISTRIBUTION
from formal_rope.sampling.formats.layout import FolderSplit, WriteOptions
from formal_rope.sampling.formats.registry import dataset_format


@dataclass(frozen=True, eq=False)
class WrittenSplit:
    """One split of a written language folder: where, its strings (one LabeledSet per length) and files."""

    split: FolderSplit
    out: Path
    sets: list[LabeledSet]
    files: list[Path]


def folder_splits(fmt: str, overrides: Sequence[FolderSplit] = ()) -> tuple[FolderSplit, ...]:
    """The splits of `fmt`'s language folder, each replaced by the override of the same name."""
    row = dataset_format(fmt)
    if not row.folder_splits:
        raise FormalRopeError(f"the {fmt} format has no language folder; write one split (--out; write_sets in Python)")
    names = [split.name for split in row.folder_splits]
    chosen = {split.name: split for split in row.folder_splits}
    for override in overrides:
        if override.name not in chosen:
            raise FormalRopeError(
                f"{fmt} language folders have no split {override.name!r}; they have {', '.join(names)}"
            )
        chosen[override.name] = FolderSplit(override.name, chosen[override.name].path, override.min_length,
                                            override.max_length, override.strings)
    return tuple(chosen[name] for name in names)


def sample_split(dfa, split: FolderSplit, *, seed: int, near_miss_fraction: float = 0.5,
                 distribution: str = DEFAULT_DISTRIBUTION) -> list[LabeledSet]:
    """The strings of `split`: `FolderSplit.per_length()` strings at each of its lengths, drawn as
    `test_sets` draws them (each length's strings depend only on seed, length and count)."""
    by_count: dict[int, list[int]] = {}
    for length, count in split.per_length().items():
        if count:
            by_count.setdefault(count, []).append(length)
    sets = [labeled for count, lengths in by_count.items()
            for labeled in test_sets(dfa, lengths, count, seed, near_miss_fraction, distribution=distribution)]
    return sorted(sets, key=lambda labeled: labeled.length)


def write_language_folder(
    fmt: str,
    out: str | Path,
    dfa,
    *,
    splits: Sequence[FolderSplit] | None = None,
    seed: int = 0,
    near_miss_fraction: float = 0.5,
    distribution: str = DEFAULT_DISTRIBUTION,
    next_symbols: bool = True,
) -> list[WrittenSplit]:
    """Sample and write every split of `fmt`'s language folder under `out` (default splits: the
    format's, e.g. FLaRe's training, validation-short, validation-long and test). Split i is drawn
    with seed `seed + i`, so the splits are drawn independently of each other."""
    row = dataset_format(fmt)
    splits = folder_splits(fmt) if splits is None else tuple(splits)
    written = []
    for index, split in enumerate(splits):
        sets = sample_split(dfa, split, seed=seed + index, near_miss_fraction=near_miss_fraction,
                            distribution=distribution)
        where = Path(out) / split.path
        options = WriteOptions(next_symbols, distribution, tuple(split.lengths))
        written.append(WrittenSplit(split, where, sets, row.write(where, sets, dfa, options)))
    return written
