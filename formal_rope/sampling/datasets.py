"""Uniform string sampling inside / outside a regular language, labelled test sets, training batches.

Strings are int64 arrays of symbol indices (positions in `dfa.alphabet`); padded positions hold
`PAD` (-1). Text only appears at the edges (`formal_rope.sampling.text`).

Randomness: every function takes its randomness explicitly. Test sets derive one generator per length
from `SeedSequence([seed, length])`, so the strings for length n never depend on which other lengths
were requested or in which order.
"""

from __future__ import annotations

import weakref
from dataclasses import dataclass
from typing import Iterable, Sequence

import numpy as np

from formal_rope import limits
from formal_rope.automata.dfa import DFA, require_dfa
from formal_rope.automata.membership import accepts_encoded
from formal_rope.errors import FormalRopeError
from formal_rope.sampling.counts import (
    LogCounts,
    dfa_graph,
    flare_move_log_weights,
    labelled_graph,
    log_counts,
    near_miss_graph,
    reachable_pairs,
)
from formal_rope.sampling.coverage import (
    COVERAGE,
    TEST_SHARE,
    UNIFORM,
    CoveragePlan,
    check_sampling,
    coverage_slots,
)
from formal_rope.sampling.distributions import (
    ACCEPTED,
    DEFAULT_DISTRIBUTION,
    FLARE_ACCEPTED,
    positive_distribution,
)
from formal_rope.sampling.walker import PAD, walk, walk_sorted

REJECTED, NEAR_MISS, LABELLED = "rejected", "near_miss", "labelled"

# Uniform draws materialised at once by test_sets (per graph kind); bounds peak memory to ~64 MiB.
_CHUNK_DRAWS = 8_000_000

# The exact near-miss graph has (states + reachable state pairs) nodes and |Σ|² edges per node; above
# this many table entries (large automata over large alphabets, e.g. MLRegTest's 16-symbol DFAs)
# near-misses come from vectorized rejection sampling instead, which has the same distribution.
NEAR_MISS_TABLE_LIMIT = 8_000_000
# Rejection sampling gives up after this many candidates per requested near-miss (recorded in note).
_REJECTION_TRIES_PER_NEAR_MISS = 200


class EmptyClassError(FormalRopeError):
    """No string of the requested length lies in (or outside) the language."""


# Count tables are pure functions of the (immutable) DFA, so they are memoised per DFA object and
# dropped with it. training_batch runs every step; rebuilding its tables each time would double its cost.
_TABLE_CACHE: "weakref.WeakKeyDictionary[DFA, dict[str, LogCounts]]" = weakref.WeakKeyDictionary()


def _table_fits(max_length: int, nodes: int) -> bool:
    return 8.0 * (max_length + 1) * max(1, nodes) <= limits.MAX_COUNT_TABLE_BYTES


def check_table_size(max_length: int, nodes: int) -> None:
    """FormalRopeError before a count table is built for strings longer than MAX_SAMPLE_LENGTH (each
    string is drawn position by position), or one of more than MAX_COUNT_TABLE_BYTES (one float64
    per length 0..max_length and automaton node)."""
    if max_length > limits.MAX_SAMPLE_LENGTH:
        raise FormalRopeError(
            f"strings of length {max_length:,} cannot be sampled: at most {limits.describe('MAX_SAMPLE_LENGTH')} "
            "symbols per string (they are drawn position by position, from a table of counts per length)"
        )
    if not _table_fits(max_length, nodes):
        raise FormalRopeError(
            f"sampling strings of length {max_length:,} from an automaton of {nodes:,} nodes needs a count table of "
            f"{limits.describe_bytes(8.0 * (max_length + 1) * nodes)}, more than "
            f"{limits.describe('MAX_COUNT_TABLE_BYTES')}; sample shorter strings"
        )


def count_table(dfa: DFA, kind: str, max_length: int) -> LogCounts:
    """Log-space counts for `kind` covering lengths 0..max_length: accepted / rejected (the DFA with
    accepting / rejecting finals), near_miss (`near_miss_graph`) or labelled (`labelled_graph`)."""
    require_dfa(dfa, "count_table", "dfa")
    per_dfa = _TABLE_CACHE.setdefault(dfa, {})
    table = per_dfa.get(kind)
    if table is None or table.max_length < max_length:
        weights = None
        if kind == NEAR_MISS:
            graph = near_miss_graph(dfa)
        elif kind == LABELLED:
            graph = labelled_graph(dfa)
        elif kind in (ACCEPTED, REJECTED):
            graph = dfa_graph(dfa, accepted=kind == ACCEPTED)
        elif kind == FLARE_ACCEPTED:
            graph, weights = dfa_graph(dfa, accepted=True), flare_move_log_weights(dfa)
        else:
            raise ValueError(f"unknown count table kind {kind!r}")
        check_table_size(max_length, graph.n_nodes)
        # Grow geometrically so a sequence of slightly longer requests stays linear overall.
        grown = max_length if table is None else min(max(max_length, 2 * table.max_length), limits.MAX_SAMPLE_LENGTH)
        if not _table_fits(grown, graph.n_nodes):
            grown = max_length
        table = log_counts(graph, grown, weights)
        per_dfa[kind] = table
    return table


def _class_name(accepted: bool) -> str:
    return "in L" if accepted else "outside L"


def sample_strings(dfa: DFA, length: int, n: int, rng: np.random.Generator, accepted: bool = True) -> np.ndarray:
    """`n` strings of exactly `length` symbols drawn uniformly (with replacement) from L
    (accepted=True) or from its complement. Returns int64 (n, length).

    Raises EmptyClassError when no string of that length is in the requested class."""
    require_dfa(dfa, "sample_strings", "dfa")
    if length < 0 or n < 0:
        raise FormalRopeError(f"length and n must be non-negative (got length={length}, n={n})")
    counts = count_table(dfa, ACCEPTED if accepted else REJECTED, length)
    if not counts.nonempty(length):
        raise EmptyClassError(f"no string of length {length} is {_class_name(accepted)}; cannot sample {n} of them")
    uniforms = rng.random((length, n))
    return walk(counts, np.full(n, length, dtype=np.int64), uniforms).reshape(n, length)


@dataclass(frozen=True, eq=False)
class LabeledSet:
    """Test strings of one length. Rows are ordered: positives, then uniform negatives, then the
    `n_near_miss` near-misses (the last rows). `note` records any departure from the requested mix.
    `exists`: (positives exist, negatives exist) at this length by the DFA's exact counts, None where
    unknown (strings read from files); N* counts a length only where every existing class has a
    test string (`unscored_classes`)."""

    length: int
    symbols: np.ndarray  # (n, length) int64
    labels: np.ndarray  # (n,) bool, True = in L
    n_near_miss: int
    note: str | None = None
    exists: tuple[bool, bool] | None = None

    @property
    def near_miss(self) -> np.ndarray:
        """Bool (n,): which rows are near-misses."""
        flags = np.zeros(len(self.labels), dtype=bool)
        if self.n_near_miss:
            flags[-self.n_near_miss :] = True
        return flags

    def __len__(self) -> int:
        return int(self.labels.shape[0])


def unscored_classes(exists: tuple[bool, bool] | None, labels) -> tuple[str, ...]:
    """The classes that exist at a length but have no string among the scored `labels` (bool, True:
    in L): "positive" and/or "negative", in that order. `exists` is (positives exist, negatives
    exist) by the DFA's exact counts; None (unknown: strings from files) asks for one string at
    least ("string" when there is none: every length of a non-empty alphabet has strings).

    A length with an unscored class is not passed, whatever the accuracy on what was scored: N*
    (SPEC §8) counts a length only when it was tested on every class it has."""
    labels = np.asarray(labels, dtype=bool)
    if exists is None:
        return () if len(labels) else ("string",)
    has_positive, has_negative = exists
    missing = []
    if has_positive and not labels.any():
        missing.append("positive")
    if has_negative and labels.all():  # all() of nothing is True: no negative scored
        missing.append("negative")
    return tuple(missing)


@dataclass(frozen=True)
class _LengthPlan:
    length: int
    n_positive: int
    n_uniform_negative: int
    n_near_miss: int
    note: str | None


def _plan(
    length: int,
    n_per_length: int,
    near_miss_fraction: float,
    has_positive: bool,
    has_negative: bool,
    has_near_miss: bool,
) -> _LengthPlan:
    notes = []
    if has_positive and has_negative:
        n_negative = n_per_length // 2
        n_positive = n_per_length - n_negative
    elif has_positive:
        n_positive, n_negative = n_per_length, 0
        notes.append(f"only positive strings exist at length {length}")
    elif has_negative:
        n_positive, n_negative = 0, n_per_length
        notes.append(f"only negative strings exist at length {length}")
    else:  # only an empty alphabet has no string at all of a length > 0
        raise EmptyClassError(f"no string of length {length} exists")
    n_near_miss = int(np.floor(n_negative * near_miss_fraction + 0.5))  # round half up: 5 * 0.5 -> 3
    if n_near_miss and not has_near_miss:
        notes.append(f"no near-miss exists at length {length}; all negatives are uniform")
        n_near_miss = 0
    return _LengthPlan(length, n_positive, n_negative - n_near_miss, n_near_miss, "; ".join(notes) or None)


def _length_generator(seed: int, length: int) -> np.random.Generator:
    return np.random.default_rng(np.random.SeedSequence([int(seed), int(length)]))


def _chunks(sizes: Sequence[int], budget: int) -> Iterable[range]:
    """Consecutive index ranges whose summed sizes stay within budget (at least one item each)."""
    start, total = 0, 0
    for index, size in enumerate(sizes):
        if index > start and total + size > budget:
            yield range(start, index)
            start, total = index, 0
        total += size
    if start < len(sizes):
        yield range(start, len(sizes))


def _walk_many(counts: LogCounts, blocks: list[tuple[int, np.ndarray]]) -> list[np.ndarray]:
    """Walk several (length, uniforms (length, n)) blocks in one vectorized pass; one (n, length)
    array per block, in the order given."""
    order = sorted(range(len(blocks)), key=lambda index: -blocks[index][0])
    sizes = [blocks[index][1].shape[1] for index in order]
    total = sum(sizes)
    results: list[np.ndarray] = [np.empty((0, length), dtype=np.int64) for length, _ in blocks]
    if total == 0:
        return results
    width = max(blocks[index][0] for index, size in zip(order, sizes) if size)
    lengths = np.empty(total, dtype=np.int64)
    draws = np.empty((width, total), dtype=np.float64)
    offset = 0
    for index, size in zip(order, sizes):
        length, uniforms = blocks[index]
        if not size:
            continue
        lengths[offset : offset + size] = length
        draws[:length, offset : offset + size] = uniforms
        offset += size
    # Rows past a string's end are never read, so `draws` and the output need no padding.
    symbols = walk_sorted(counts, lengths, draws, pad=False)
    offset = 0
    for index, size in zip(order, sizes):
        length = blocks[index][0]
        if size:  # empty blocks keep their (0, length) placeholder
            results[index] = np.array(symbols[:length, offset : offset + size].T, dtype=np.int64, order="C")
        offset += size
    return results


def _near_miss_table_entries(dfa: DFA, max_length: int) -> int:
    nodes = dfa.n_states + int(reachable_pairs(dfa).sum()) + 1
    return (max_length + 1) * nodes * dfa.n_symbols**2


def _near_misses_by_rejection(
    dfa: DFA, positives: LogCounts, length: int, count: int, rng: np.random.Generator
) -> np.ndarray:
    """Up to `count` near-misses: uniform positives, one uniform position changed to a uniform other
    symbol, kept when the result leaves L (vectorized per round; rounds grow with the observed rate)."""
    n_symbols = dfa.n_symbols
    budget = _REJECTION_TRIES_PER_NEAR_MISS * count
    found: list[np.ndarray] = []
    n_found, tries = 0, 0
    while n_found < count and tries < budget:
        rate = n_found / tries if n_found else 0.5 ** (1 + tries // max(count, 1))
        size = int(min(budget - tries, max(64, 1.2 * (count - n_found) / max(rate, 1e-6))))
        candidates = walk(positives, np.full(size, length, dtype=np.int64), rng.random((length, size)))
        rows = np.arange(size)
        column = rng.integers(0, length, size)
        candidates[rows, column] = (candidates[rows, column] + rng.integers(1, n_symbols, size)) % n_symbols
        outside = ~accepts_encoded(dfa, candidates, np.full(size, length))
        found.append(candidates[outside])
        n_found += int(outside.sum())
        tries += size
    if not found:
        return np.empty((0, length), dtype=np.int64)
    return np.concatenate(found)[:count]


def _check_test_set_request(lengths: list[int], n_per_length: int, near_miss_fraction: float, seed: int) -> None:
    """FormalRopeError for a test-set request no sampler can serve (`test_sets`' arguments)."""
    if any(length < 0 for length in lengths):
        raise FormalRopeError(f"test lengths must be non-negative, got {min(lengths)}")
    if n_per_length < 0:
        raise FormalRopeError(f"n_per_length must be non-negative, got {n_per_length}")
    if not 0.0 <= near_miss_fraction <= 1.0:
        raise FormalRopeError(f"near_miss_fraction must lie in [0, 1], got {near_miss_fraction}")
    if int(seed) < 0:  # numpy's SeedSequence takes non-negative integers only
        raise FormalRopeError(f"seed must be non-negative, got {seed}")


def test_sets(
    dfa: DFA,
    lengths: Sequence[int],
    n_per_length: int = 512,
    seed: int = 0,
    near_miss_fraction: float = 0.5,
    progress=None,
    distribution: str = DEFAULT_DISTRIBUTION,
    sampling: str = UNIFORM,
) -> list[LabeledSet]:
    """One LabeledSet per entry of `lengths` (the paper's test set: lengths 41..500, 512 each).

    Each set is half positive / half negative when both classes exist at that length, else all from
    the existing class (recorded in `note`). Negatives are (1 - near_miss_fraction) uniform negatives
    and near_miss_fraction near-misses: uniform over (positive w, position, other symbol) triples whose
    substitution leaves L. Count tables are shared across lengths and strings of many lengths are
    sampled in one vectorized pass. `progress(done_lengths)` is called after each chunk if given.

    `distribution` says how the positives of a length are drawn (DISTRIBUTIONS: "uniform", or
    "flare" as FLaRe's sampler draws them); it draws the same uniforms, so the negatives and
    near-misses are the same under both.

    `sampling` "coverage" (`sampling.coverage`) replaces TEST_SHARE of each length's positives and of
    its uniform negatives by strings drawn per transition of the DFA (each uniform among the strings
    of its label and length that take that transition), from a generator of their own: every other
    row is the row uniform sampling draws."""
    require_dfa(dfa, "test_sets", "dfa")
    check_sampling(sampling)
    positive_table = positive_distribution(distribution).table
    lengths = [int(length) for length in lengths]
    _check_test_set_request(lengths, n_per_length, near_miss_fraction, seed)
    if not lengths:
        return []
    longest = max(lengths)
    tables = {kind: count_table(dfa, kind, longest) for kind in (ACCEPTED, REJECTED)}
    length_array = np.array(lengths)
    has_positive = tables[ACCEPTED].nonempty(length_array)
    has_negative = tables[REJECTED].nonempty(length_array)
    exact_near_misses = near_miss_fraction > 0 and _near_miss_table_entries(dfa, longest) <= NEAR_MISS_TABLE_LIMIT
    if exact_near_misses:
        tables[NEAR_MISS] = count_table(dfa, NEAR_MISS, longest)
        has_near_miss = tables[NEAR_MISS].nonempty(length_array)
    else:
        # With two or more symbols, the Hamming graph on Σ^n is connected, so when both classes are
        # non-empty some single substitution crosses from L to its complement.
        has_near_miss = has_positive & has_negative & (dfa.n_symbols > 1)
    walk_tables = dict(tables)
    if positive_table != ACCEPTED:  # same support, other weights: emptiness still read from tables
        walk_tables[ACCEPTED] = count_table(dfa, positive_table, longest)
    plans = [
        _plan(length, n_per_length, near_miss_fraction, pos, neg, near)
        for length, pos, neg, near in zip(lengths, has_positive, has_negative, has_near_miss)
    ]
    coverage = CoveragePlan(dfa, longest) if sampling == COVERAGE else None

    results: list[LabeledSet] = []
    for chunk in _chunks([max(length, 1) * n_per_length for length in lengths], _CHUNK_DRAWS):
        blocks: dict[str, list[tuple[int, np.ndarray]]] = {ACCEPTED: [], REJECTED: [], NEAR_MISS: []}
        generators = []
        for index in chunk:
            plan = plans[index]
            rng = _length_generator(seed, plan.length)
            generators.append(rng)
            # Fixed draw order per length: positives, uniform negatives, near-misses.
            blocks[ACCEPTED].append((plan.length, rng.random((plan.length, plan.n_positive))))
            blocks[REJECTED].append((plan.length, rng.random((plan.length, plan.n_uniform_negative))))
            n_walked = plan.n_near_miss if exact_near_misses else 0
            blocks[NEAR_MISS].append((plan.length, rng.random((plan.length, n_walked))))
        sampled = {
            kind: _walk_many(walk_tables[kind], kind_blocks) if kind in walk_tables else [
                np.empty((0, length), dtype=np.int64) for length, _ in kind_blocks
            ]
            for kind, kind_blocks in blocks.items()
        }
        covering = None
        if coverage is not None:
            covering = coverage.rows([(plans[index].length, coverage_slots(plans[index].n_positive, TEST_SHARE),
                                       coverage_slots(plans[index].n_uniform_negative, TEST_SHARE))
                                      for index in chunk], seed)
        for position, index in enumerate(chunk):
            plan = plans[index]
            parts = [sampled[kind][position] for kind in (ACCEPTED, REJECTED, NEAR_MISS)]
            n_near_miss, note = plan.n_near_miss, plan.note
            if not exact_near_misses and plan.n_near_miss:
                rng = generators[position]
                near = _near_misses_by_rejection(dfa, tables[ACCEPTED], plan.length, plan.n_near_miss, rng)
                shortfall = plan.n_near_miss - len(near)
                if shortfall:
                    extra = rng.random((plan.length, shortfall))
                    filler = walk(tables[REJECTED], np.full(shortfall, plan.length, dtype=np.int64), extra)
                    parts[1] = np.concatenate([parts[1], filler])
                    message = (
                        f"rejection sampling found {len(near)} of {plan.n_near_miss} near-misses at length "
                        f"{plan.length}; the rest are uniform negatives"
                    )
                    note = f"{note}; {message}" if note else message
                parts[2], n_near_miss = near, len(near)
            if covering is not None:
                parts = _with_coverage(parts, covering[position])
            symbols = np.concatenate(parts)
            labels = np.zeros(len(symbols), dtype=bool)
            labels[: plan.n_positive] = True
            symbols.setflags(write=False)
            labels.setflags(write=False)
            exists = (bool(has_positive[index]), bool(has_negative[index]))
            results.append(LabeledSet(plan.length, symbols, labels, n_near_miss, note, exists))
        if progress is not None:
            progress(len(results))
    return results


def _with_coverage(parts: list[np.ndarray], rows) -> list[np.ndarray]:
    """[positives, uniform negatives, near-misses] with the first rows of the first two replaced by
    the length's coverage strings (`coverage.CoverageRows`)."""
    positives, negatives = (np.array(part, copy=True) for part in parts[:2])
    positives[: len(rows.positives)] = rows.positives
    negatives[: len(rows.negatives)] = rows.negatives
    return [positives, negatives, parts[2]]


def test_set(
    dfa: DFA, length: int, n_per_length: int = 512, seed: int = 0, near_miss_fraction: float = 0.5,
    distribution: str = DEFAULT_DISTRIBUTION, sampling: str = UNIFORM,
) -> LabeledSet:
    """The LabeledSet for one length; identical to the corresponding entry of `test_sets`."""
    require_dfa(dfa, "test_set", "dfa")
    return test_sets(dfa, [length], n_per_length, seed, near_miss_fraction, distribution=distribution,
                     sampling=sampling)[0]


# pytest would otherwise collect these public functions as tests when imported into test modules.
test_sets.__test__ = False  # type: ignore[attr-defined]
test_set.__test__ = False  # type: ignore[attr-defined]


# Spawn key of the uniform strings' generators: their stream never meets a test set's ([seed, length]).
_UNIFORM_STREAM = 0x4E4E4348  # "NNCH"


def uniform_set(dfa: DFA, length: int, n: int, seed: int = 0) -> LabeledSet:
    """`n` strings of `length` symbols, every symbol drawn independently and uniformly from the alphabet
    (uniform over Σ^length, with replacement: *not* balanced, so a language with few strings of that
    length gets almost only negatives), labelled by the DFA. This is the test distribution of
    Delétang et al.'s range evaluation (`formal_rope.evaluation.nnch`). The generator depends on
    (seed, length) only, on a stream of its own: the strings never depend on the other lengths
    requested, and the balanced `test_sets` of the same seed are not changed by drawing them."""
    require_dfa(dfa, "uniform_set", "dfa")
    if length < 0 or n < 0:
        raise FormalRopeError(f"length and n must be non-negative (got length={length}, n={n})")
    if int(seed) < 0:  # numpy's SeedSequence takes non-negative integers only
        raise FormalRopeError(f"seed must be non-negative, got {seed}")
    rng = np.random.default_rng(np.random.SeedSequence([int(seed), int(length), _UNIFORM_STREAM]))
    symbols = rng.integers(0, dfa.n_symbols, size=(int(n), int(length)), dtype=np.int64)
    labels = accepts_encoded(dfa, symbols, np.full(int(n), int(length), dtype=np.int64))
    symbols.setflags(write=False)
    labels.setflags(write=False)
    return LabeledSet(int(length), symbols, labels, 0)


@dataclass(frozen=True, eq=False)
class TrainingBatch:
    """A balanced batch: symbols (B, max_length) int64 padded with PAD (-1), lengths (B,), labels (B,)."""

    symbols: np.ndarray
    lengths: np.ndarray
    labels: np.ndarray

    def __len__(self) -> int:
        return int(self.labels.shape[0])


@dataclass(frozen=True, eq=False)
class TrainingDraw:
    """The random choices behind one training batch, before any path is walked: each string's
    length, label and start node, its position-major uniforms (max length, B), and the row shuffle."""

    lengths: np.ndarray
    labels: np.ndarray
    starts: np.ndarray
    uniforms: np.ndarray
    permutation: np.ndarray


def draw_training_batch(
    dfa: DFA,
    rng: np.random.Generator,
    batch_size: int,
    min_length: int = 0,
    max_length: int = 40,
) -> TrainingDraw:
    """Every draw `training_batch` makes from `rng`, in the same order (walking consumes none)."""
    require_dfa(dfa, "draw_training_batch", "dfa")
    if not 0 <= min_length <= max_length:
        raise FormalRopeError(f"need 0 <= min_length <= max_length, got [{min_length}, {max_length}]")
    if batch_size < 0:
        raise FormalRopeError(f"batch_size must be non-negative, got {batch_size}")
    n_negative = batch_size // 2
    n_positive = batch_size - n_negative
    candidates = np.arange(min_length, max_length + 1)
    # Positives and negatives are walked together on the union graph, each from its own copy's start.
    counts = count_table(dfa, LABELLED, max_length)
    negative_start = dfa.n_states + dfa.start
    lengths = np.empty(batch_size, dtype=np.int64)
    for accepted, rows in ((True, slice(0, n_positive)), (False, slice(n_positive, batch_size))):
        count = rows.stop - rows.start
        if count == 0:
            continue
        allowed = candidates[counts.nonempty(candidates, dfa.start if accepted else negative_start)]
        if allowed.size == 0:
            raise EmptyClassError(
                f"no string with length in [{min_length}, {max_length}] is {_class_name(accepted)}; "
                "cannot build balanced training batches"
            )
        lengths[rows] = allowed[rng.integers(0, allowed.size, size=count)]
    labels = np.zeros(batch_size, dtype=bool)
    labels[:n_positive] = True
    starts = np.where(labels, dfa.start, negative_start)
    uniforms = rng.random((int(lengths.max()), batch_size)) if batch_size else np.zeros((0, 0))
    return TrainingDraw(lengths, labels, starts, uniforms, rng.permutation(batch_size))


def walk_training_batches(dfa: DFA, draws, max_length: int = 40) -> list[TrainingBatch]:
    """The batches of `draws` (from `draw_training_batch` with this dfa and max_length), all walked
    in one pass: a string's path depends only on its own length, start and uniforms, so each batch
    is exactly the one `training_batch` returns for its draw, while the walk's per-position steps
    serve every batch at once."""
    require_dfa(dfa, "walk_training_batches", "dfa")
    draws = list(draws)
    counts = count_table(dfa, LABELLED, max_length)
    sizes = [len(draw.lengths) for draw in draws]
    total = sum(sizes)
    symbols = np.full((total, max_length), PAD, dtype=np.int64)
    if total:
        longest = max(draw.uniforms.shape[0] for draw in draws)
        uniforms = np.zeros((longest, total))
        column = 0
        for draw, size in zip(draws, sizes):
            uniforms[: draw.uniforms.shape[0], column : column + size] = draw.uniforms
            column += size
        lengths = np.concatenate([draw.lengths for draw in draws])
        starts = np.concatenate([draw.starts for draw in draws])
        drawn = walk(counts, lengths, uniforms, starts=starts)
        symbols[:, : drawn.shape[1]] = drawn
    batches, first = [], 0
    for draw, size in zip(draws, sizes):
        rows = first + draw.permutation
        batches.append(TrainingBatch(symbols[rows], draw.lengths[draw.permutation], draw.labels[draw.permutation]))
        first += size
    return batches


def training_batch(
    dfa: DFA,
    rng: np.random.Generator,
    batch_size: int,
    min_length: int = 0,
    max_length: int = 40,
) -> TrainingBatch:
    """`batch_size` strings: ceil(B/2) positives and floor(B/2) negatives, rows shuffled.

    Each string's length is uniform over [min_length, max_length] restricted to the lengths where
    its class is non-empty (the same distribution as resampling the length until the class exists);
    given its length the string is uniform in its class. All strings are sampled in one pass
    (`draw_training_batch`, then `walk_training_batches`)."""
    require_dfa(dfa, "training_batch", "dfa")
    draw = draw_training_batch(dfa, rng, batch_size, min_length, max_length)
    return walk_training_batches(dfa, [draw], max_length)[0]
