"""Where a run's strings come from: the data seam between languages/datasets and the trainer.

A run reads its training batches and its test sets through a `RunData` object. `SampledData` draws
them from the language's DFA (balanced training batches with optional near-miss negatives, seeded
balanced test sets per length, SPEC §4); other sources (files in a benchmark's format) implement
the same three members. The trainer never samples by itself, so a pack of runs shares one test
stream and every run draws its own training batches from its own generator — what it gets alone.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from functools import cached_property, lru_cache
from typing import Protocol

import numpy as np

from formal_rope.automata import language_dfa
from formal_rope.errors import FormalRopeError
from formal_rope.lang.source import resolve_language
from formal_rope.run_config.config import DATA_LANGUAGE_PREFIX, RunConfig
from formal_rope.sampling import (
    PAD,
    TrainingBatch,
    count_table,
    decode,
    draw_training_batch,
    test_sets,
    uniform_set,
    walk,
    walk_training_batches,
)
from formal_rope.sampling.coverage import COVERAGE, TrainingCoverage, with_training_coverage
from formal_rope.sampling.formats import check_labels, load_dataset

TEST_SYMBOL_BUDGET = 4_000_000  # symbols sampled per block of test lengths (bounds sampler memory)


class RunData(Protocol):
    """A run's strings: symbols are integer ids into `alphabet`."""

    alphabet: tuple[str, ...]

    def training_batch(self, rng: np.random.Generator, batch_size: int):
        """A formal_rope.sampling.TrainingBatch of `batch_size` strings drawn with `rng`."""

    def test_sets(self) -> Iterable:
        """Labelled test sets (.length, .symbols (n, L), .labels (n,)) in increasing length, lazily."""

    def decode(self, symbols: np.ndarray) -> str:
        """One string (a row of symbol ids) as text, as `accepts` reads it."""

    def nnch_set(self, length: int):
        """The uniformly random labelled strings NNCH's score reads at test length `length`
        (`nnch_set`, `evaluation.nnch`), or None where it reads none."""


def is_nnch_length(config: RunConfig, length: int) -> bool:
    """Whether NNCH's score averages test length `length`: every length past the first one beyond
    training (example.py's `accuracies[sequence_length + 1:]`)."""
    return int(length) > config.train_max_length + 1


def nnch_set(config: RunConfig, dfa, length: int):
    """The uniform strings of one length NNCH's score reads (a `sampling.LabeledSet`; the score and
    why it reads these: `evaluation.nnch`), or None where the score takes none: a length it leaves
    out, or `nnch_samples` 0."""
    if config.nnch_samples == 0 or not is_nnch_length(config, length):
        return None
    return uniform_set(dfa, int(length), config.nnch_samples, config.eval_seed)


def mix_near_misses(batch, dfa, rng: np.random.Generator, fraction: float, min_length: int, max_length: int):
    """Replace round(fraction * #negatives) negatives by near-misses (a positive with one symbol
    substituted so that it leaves L), uniform over such strings at a length drawn uniformly from
    the lengths in [min_length, max_length] where near-misses exist. Returns a new batch."""
    negatives = np.flatnonzero(~np.asarray(batch.labels, dtype=bool))
    count = int(round(fraction * len(negatives)))
    if count == 0:
        return batch
    counts = count_table(dfa, "near_miss", max_length)
    candidates = np.arange(min_length, max_length + 1)
    allowed = candidates[counts.nonempty(candidates)]
    if allowed.size == 0:
        return batch  # no near-miss of a training length exists (e.g. L = Σ*): keep uniform negatives
    chosen = allowed[rng.integers(0, allowed.size, size=count)]
    drawn = walk(counts, chosen, rng.random((max(1, int(chosen.max())), count)))
    symbols = np.array(batch.symbols, copy=True)
    lengths = np.array(batch.lengths, copy=True)
    rows = negatives[:count]  # the batch is already shuffled
    symbols[rows] = PAD
    symbols[rows, : drawn.shape[1]] = drawn
    lengths[rows] = chosen
    return TrainingBatch(symbols, lengths, batch.labels)


def test_length_blocks(dfa, config: RunConfig) -> Iterator:
    """Labelled test sets in increasing length (`config.tested_lengths()`: the range or the sparse
    list), sampled lazily in blocks (bounded memory)."""
    block: list[int] = []
    size = 0
    for length in config.tested_lengths():  # lazy: ranges may be huge
        block.append(length)
        size += max(1, length) * config.n_per_length
        if size >= TEST_SYMBOL_BUDGET:
            yield from test_sets(dfa, block, config.n_per_length, config.eval_seed, config.test_near_miss_fraction,
                                 sampling=config.sampling)
            block, size = [], 0
    if block:
        yield from test_sets(dfa, block, config.n_per_length, config.eval_seed, config.test_near_miss_fraction,
                             sampling=config.sampling)


@dataclass(frozen=True, eq=False)
class SampledData:
    """Strings drawn from the language's DFA as `config` asks (training lengths, near-miss share,
    test lengths, strings per length, evaluation seed)."""

    config: RunConfig
    dfa: object

    @property
    def alphabet(self) -> tuple[str, ...]:
        return tuple(self.dfa.alphabet)

    def training_batch(self, rng: np.random.Generator, batch_size: int):
        batch = walk_training_batches(self.dfa, [self.draw(rng, batch_size)], self.config.train_max_length)[0]
        return self.finish(batch, rng)

    def draw(self, rng: np.random.Generator, batch_size: int):
        """The draws of `training_batch` up to its walk (`sampling.draw_training_batch`)."""
        config = self.config
        return draw_training_batch(self.dfa, rng, batch_size, config.train_min_length, config.train_max_length)

    def finish(self, batch, rng: np.random.Generator):
        """What `training_batch` does after its walk: near-miss negatives, then (sampling
        "coverage") coverage strings, drawn from `rng`."""
        config = self.config
        if config.train_near_miss_fraction > 0:
            batch = mix_near_misses(
                batch, self.dfa, rng, config.train_near_miss_fraction, config.train_min_length, config.train_max_length
            )
        if config.sampling == COVERAGE:
            batch = with_training_coverage(batch, self.training_coverage, rng)
        return batch

    @cached_property
    def training_coverage(self) -> TrainingCoverage:
        """The transitions each label takes at the training lengths (`sampling.coverage`)."""
        return TrainingCoverage(self.dfa, self.config.train_min_length, self.config.train_max_length)

    def test_sets(self) -> Iterator:
        return test_length_blocks(self.dfa, self.config)

    def decode(self, symbols: np.ndarray) -> str:
        return decode(np.asarray(symbols)[None, :], self.dfa.alphabet)[0]

    def nnch_set(self, length: int):
        return nnch_set(self.config, self.dfa, length)


def training_batches(data: Sequence, rngs: Sequence[np.random.Generator], batch_size: int) -> list:
    """One training batch per run: `data[r].training_batch(rngs[r], batch_size)` for each r, with
    the DFA walks of runs sampling the same language (a pack's runs) done in one pass
    (`sampling.walk_training_batches`). Every run's batch and generator state are exactly what
    its own `training_batch` call gives: walking draws nothing, and each run's draws stay in order."""
    batches: list = [None] * len(data)
    groups: dict = {}
    for run, source in enumerate(data):
        if isinstance(source, SampledData):
            key = (id(source.dfa), source.config.train_max_length)
            groups.setdefault(key, []).append(run)
        else:
            batches[run] = source.training_batch(rngs[run], batch_size)
    for runs in groups.values():
        first = data[runs[0]]
        draws = [data[run].draw(rngs[run], batch_size) for run in runs]
        walked = walk_training_batches(first.dfa, draws, first.config.train_max_length)
        for run, batch in zip(runs, walked):
            batches[run] = data[run].finish(batch, rngs[run])
    return batches


# (DATA_LANGUAGE_PREFIX, the language of a run whose strings come only from files, lives in config:
# RunConfig needs it to canonicalise alphabets.)


def is_data_language(language: str) -> bool:
    """Whether a RunConfig.language names no language, only the data's labels (`data:PATH`)."""
    return language.startswith(DATA_LANGUAGE_PREFIX)


def language_key(config: RunConfig) -> tuple:
    """What decides a run's DFA and strings (its language, alphabet and data files): runs with equal
    keys read the same strings, and a pack evaluates them in the same passes."""
    return (config.language, config.alphabet, config.data)


@lru_cache(maxsize=4)
def _load(path: str, alphabet: tuple[str, ...] | None):
    """The dataset at `path` (memoised: the runs of a pack share one copy; callers check the hash)."""
    return load_dataset(path, alphabet)


def load_data(path: str, *, alphabet=None, dfa=None, expected_hash: str | None = None):
    """Read the FLaRe folder or MLRegTest language at `path` (`sampling.formats.load_dataset`).

    With `dfa` the strings are read over its alphabet and every label is checked against its
    language (DataFormatError at the first disagreeing line); `expected_hash` (a run's data_hash)
    must match the files' current content."""
    chosen = tuple(dfa.alphabet) if dfa is not None else (tuple(alphabet) if alphabet is not None else None)
    dataset = _load(str(path), chosen)
    if expected_hash is not None and dataset.content_hash != expected_hash:
        _load.cache_clear()  # maybe edited since it was cached: read again before refusing
        dataset = _load(str(path), chosen)
        if dataset.content_hash != expected_hash:
            raise FormalRopeError(
                f"the data at {path} has changed since the run was configured (content hash "
                f"{dataset.content_hash}, the run was set up with {expected_hash}); configure the run again"
            )
    if dfa is not None:
        for strings in (dataset.train, *dataset.tests):
            check_labels(strings, dfa)
    return dataset


def data_settings(
    path, *, language: str | None = None, alphabet=None, test_range: tuple[int, int] | None = None
) -> dict:
    """RunConfig fields for training and testing on the files at `path`: data, data_hash, the
    training length range of the training file and the test range (the test files' lengths, or
    `test_range` to evaluate on part of them). Labels are checked against `language` when given
    (a registry name, expression or .att path; without one the run's language is `data:PATH`).

    These are the defaults of a run on the files; other training or test lengths select part of
    the files' strings, and `fit_to_data` fits a config's lengths to what the files hold."""
    _load.cache_clear()  # configuring reads the files as they are now
    dfa = None
    if language is not None and not is_data_language(language):
        dfa = language_dfa(resolve_language(language, alphabet))
    dataset = load_data(str(path), alphabet=alphabet, dfa=dfa)
    train_lengths = dataset.train.lengths
    test_lengths = np.concatenate([t.lengths for t in dataset.tests])
    if not len(train_lengths) or not len(test_lengths):
        raise FormalRopeError(f"the data at {path} has no {'training' if not len(train_lengths) else 'test'} strings")
    low, high = test_range if test_range is not None else (int(test_lengths.min()), int(test_lengths.max()))
    return {
        "language": language if language is not None else DATA_LANGUAGE_PREFIX + str(path),
        "data": str(path),
        "data_hash": dataset.content_hash,
        "train_min_length": int(train_lengths.min()),
        "train_max_length": int(train_lengths.max()),
        "test_min_length": low,
        "test_max_length": high,
    }


@dataclass(frozen=True, eq=False)
class FileData:
    """Strings read from files (a FLaRe folder or an MLRegTest language, `config.data`): training
    batches are balanced draws from the training file's strings of the run's training lengths
    (`train_rows`; None: all of them), test sets its test strings grouped by length (those of the
    config's tested lengths: within its test range, or the lengths of its sparse list)."""

    config: RunConfig
    dataset: object  # formal_rope.sampling.formats.Dataset
    train_rows: np.ndarray | None = None

    @property
    def alphabet(self) -> tuple[str, ...]:
        return tuple(self.dataset.alphabet)

    def training_batch(self, rng: np.random.Generator, batch_size: int):
        return self.dataset.training_batch(rng, batch_size, self.train_rows)

    def test_sets(self) -> Iterator:
        return (s for s in self.dataset.test_sets() if _is_tested(self.config, s.length))

    def decode(self, symbols: np.ndarray) -> str:
        return decode(np.asarray(symbols)[None, :], self.alphabet)[0]

    def nnch_set(self, length: int):
        return None  # the run tests on the files' strings; nnch_samples does not apply (SAMPLING_FIELDS)


def _is_tested(config: RunConfig, length) -> bool:
    """Whether the run tests strings of `length` (its range, or one of its sparse lengths)."""
    if config.test_lengths is not None:
        return int(length) in config.test_lengths
    return config.test_min_length <= int(length) <= config.test_max_length


def _spans(lengths, shown: int = 8) -> str:
    """Sorted distinct lengths as merged ranges, '0..12, 14, 17..20', at most `shown` of them
    ('0, 2, 4, …, 40 (21 lengths)') so a message stays one readable paragraph."""
    spans: list[list[int]] = []
    distinct = sorted({int(n) for n in lengths})
    for length in distinct:
        if spans and spans[-1][1] + 1 == length:
            spans[-1][1] = length
        else:
            spans.append([length, length])
    texts = [str(a) if a == b else f"{a}..{b}" for a, b in spans]
    if len(texts) > shown:
        texts = texts[: shown - 1] + ["…", texts[-1] + f" ({len(distinct)} lengths)"]
    return ", ".join(texts)


def _training_rows(config: RunConfig, dataset) -> np.ndarray | None:
    """Indices of the training strings within the run's training lengths (None: every string, so
    a run on all of the file draws exactly the batches it drew before lengths could be chosen).
    FormalRopeError when they hold no positive or no negative (no balanced batch exists)."""
    lengths, labels = dataset.train.lengths, dataset.train.labels
    low, high = config.train_min_length, config.train_max_length
    inside = (lengths >= low) & (lengths <= high)
    for name, wanted in (("positive", labels), ("negative", ~labels)):
        if not np.any(inside & wanted):
            raise FormalRopeError(
                f"the training file of {config.data} has no {name} string of a length in {low}..{high} (its "
                f"{name} strings have lengths {_spans(lengths[wanted]) or 'none'}), so balanced training batches "
                "cannot be drawn; choose training lengths that hold both"
            )
    return None if inside.all() else np.flatnonzero(inside)


def _check_test_lengths(config: RunConfig, dataset) -> None:
    """FormalRopeError when the run would test nothing, or lists a length the test files lack."""
    held = {int(s.length) for s in dataset.test_sets()}
    if config.test_lengths is not None:
        missing = [length for length in config.test_lengths if length not in held]
        if missing:
            raise FormalRopeError(
                f"the test files of {config.data} hold no string of length {_spans(missing)} (listed in the test "
                f"lengths {_spans(config.test_lengths)}); they hold lengths {_spans(held)}: list only those, or "
                "give a range A..B to test whatever the files hold in it"
            )
    elif not any(_is_tested(config, length) for length in held):
        raise FormalRopeError(
            f"no test string of {config.data} has a length in {config.test_min_length}..{config.test_max_length} "
            f"(the test files hold lengths {_spans(held)})"
        )


def _dataset_of(config: RunConfig, dfa=None):
    """The run's files read as the run reads them: over the language's alphabet (dfa, or resolved
    from the config), else over config.alphabet or the files' own symbols."""
    if dfa is None and not is_data_language(config.language):
        return load_data(config.data, alphabet=resolve_language(config.language, config.alphabet).alphabet,
                         expected_hash=config.data_hash)
    return load_data(config.data, alphabet=config.alphabet, dfa=dfa, expected_hash=config.data_hash)


def fit_to_data(config: RunConfig) -> tuple[RunConfig, list[str]]:
    """`config` (a run on the files at config.data) with what it records fitted to what it
    measures, and a note for each change:

    * its training range narrowed to the lengths the training file holds in it (`0..100` on a file
      of lengths 0..40 trains on, and records, 0..40); no positive or no negative in it is an error;
    * its test range likewise narrowed to the test files' lengths in it; a sparse list of test
      lengths must name only lengths the files hold (FormalRopeError naming the others);
    * for a run without a language (`data:PATH`), an alphabet equal to the files' own (the sorted
      symbols they use) is dropped, as RunConfig drops a language's own alphabet.

    So two configs that train and test on the same strings are equal and share a run id."""
    dataset = _dataset_of(config)
    notes, changes = [], {}
    lengths = dataset.train.lengths
    _training_rows(config, dataset)
    inside = lengths[(lengths >= config.train_min_length) & (lengths <= config.train_max_length)]
    fitted = (int(inside.min()), int(inside.max()))
    if fitted != (config.train_min_length, config.train_max_length):
        changes.update(train_min_length=fitted[0], train_max_length=fitted[1])
        notes.append(
            f"the training file of {config.data} holds lengths {_spans(inside)} within the training lengths "
            f"{config.train_min_length}..{config.train_max_length}: the run trains on, and records, "
            f"{fitted[0]}..{fitted[1]}"
        )
    _check_test_lengths(config, dataset)
    if config.test_lengths is None:
        held = sorted(int(s.length) for s in dataset.test_sets() if _is_tested(config, s.length))
        if (held[0], held[-1]) != (config.test_min_length, config.test_max_length):
            changes.update(test_min_length=held[0], test_max_length=held[-1])
            notes.append(
                f"the test files of {config.data} hold lengths {_spans(held)} within the test lengths "
                f"{config.test_min_length}..{config.test_max_length}: the run tests, and records, "
                f"{held[0]}..{held[-1]}"
            )
    if config.alphabet is not None and is_data_language(config.language):
        if tuple(_load(str(config.data), None).alphabet) == tuple(config.alphabet):
            changes["alphabet"] = None  # the files' own alphabet: the same run as without -a
    return (config.with_(**changes) if changes else config), notes


def file_data(config: RunConfig, dfa=None) -> FileData:
    """FileData for `config.data`, checked: content hash, labels against `dfa` (when the run has a
    language), training strings of both labels within the config's training range, test strings
    at its tested lengths (every length of a sparse list)."""
    dataset = load_data(config.data, alphabet=config.alphabet, dfa=dfa, expected_hash=config.data_hash)
    rows = _training_rows(config, dataset)
    _check_test_lengths(config, dataset)
    return FileData(config, dataset, rows)


def run_data(config: RunConfig, dfa) -> RunData:
    """The strings of one run: read from `config.data` when set (FileData; `dfa` None for a
    `data:` language), else sampled from `dfa` (the resolved language of `config`)."""
    if config.data is not None:
        return file_data(config, dfa)
    return SampledData(config, dfa)
