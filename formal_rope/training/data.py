"""Where a run's strings come from: the data seam between languages/datasets and the trainer.

A run reads its training batches and its test sets through a `RunData` object. `SampledData` draws
them from the language's DFA (balanced training batches with optional near-miss negatives, seeded
balanced test sets per length, SPEC §4); other sources (files in a benchmark's format) implement
the same three members. The trainer never samples by itself, so a pack of runs shares one test
stream and every run draws its own training batches from its own generator — what it gets alone.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import Protocol

import numpy as np

from formal_rope.training.config import RunConfig

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


def mix_near_misses(batch, dfa, rng: np.random.Generator, fraction: float, min_length: int, max_length: int):
    """Replace round(fraction * #negatives) negatives by near-misses (a positive with one symbol
    substituted so that it leaves L), uniform over such strings at a length drawn uniformly from
    the lengths in [min_length, max_length] where near-misses exist. Returns a new batch."""
    from formal_rope.sampling import PAD, TrainingBatch, count_table, walk

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
    """Labelled test sets in increasing length, sampled lazily in blocks (bounded memory)."""
    from formal_rope.sampling import test_sets

    lengths = range(config.test_min_length, config.test_max_length + 1)  # lazy: ranges may be huge
    block: list[int] = []
    size = 0
    for length in lengths:
        block.append(length)
        size += max(1, length) * config.n_per_length
        if size >= TEST_SYMBOL_BUDGET:
            yield from test_sets(dfa, block, config.n_per_length, config.eval_seed)
            block, size = [], 0
    if block:
        yield from test_sets(dfa, block, config.n_per_length, config.eval_seed)


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
        from formal_rope.sampling import training_batch

        config = self.config
        batch = training_batch(self.dfa, rng, batch_size, config.train_min_length, config.train_max_length)
        if config.train_near_miss_fraction > 0:
            batch = mix_near_misses(
                batch, self.dfa, rng, config.train_near_miss_fraction, config.train_min_length, config.train_max_length
            )
        return batch

    def test_sets(self) -> Iterator:
        return test_length_blocks(self.dfa, self.config)

    def decode(self, symbols: np.ndarray) -> str:
        from formal_rope.sampling import decode

        return decode(np.asarray(symbols)[None, :], self.dfa.alphabet)[0]


def run_data(config: RunConfig, dfa) -> RunData:
    """The strings of one run: sampled from `dfa` (the resolved language of `config`)."""
    return SampledData(config, dfa)
