"""The worst-case search for misclassified strings, over any model that gives accept scores.

A model enters as a `Scorer`: for strings of one length (symbol indices, (n, L)) it returns each
run's accept score, > 0 exactly where the run accepts (a trained classifier: logit(accept) −
logit(reject); a compiled model: its readout value minus the threshold). Labels come from the
language's DFA. Per length, in increasing order:

1. the start set (the sampled test set of the length) is scored;
2. where the length has at most `exhaustive_limit` strings of one class (exact, capped counts:
   `sampling.enumeration`), that class is enumerated with every string one substitution or one
   adjacent swap away; where every string of the length fits the budget, all of them are;
3. the rest of the budget climbs the model's own margin toward the wrong class: a beam of the
   strings closest to failing (smallest *correctness margin*: the score for a positive, minus the
   score for a negative) is mutated (symbol substitutions, adjacent swaps, an insertion plus a
   deletion keeping the length; one or more edits per mutant), the mutants labelled by the DFA
   and scored in batched passes, and the beam keeps the closest.

A run stops searching a length at its first misclassified string, and (by default) every later
length after its first failing one: `n_star_worst` is the N* of the lengths searched, a failure at
a length meaning "some string of it is misclassified". A length passes only when it was tested: each
class that exists there (positives, negatives: the DFA's exact counts) has a scored string, in the
start set (the sampled test set, what sampled N* reads) and in the search alike; a length with an
unscored class ends the run of passed lengths as a failure does (however small the budget or the
start set, nothing is counted unseen). So `n_star_worst <= n_star_start`: the search scores the
start set first and counts a length no sampled evaluation of it counts. Everything is seeded per (seed, length), so
a search is deterministic for a fixed seed, model and start sets. Strings are counted once per
length however often mutations reach them.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Sequence
from dataclasses import asdict, dataclass
from typing import Protocol

import numpy as np

from formal_rope.automata.membership import accepts_encoded
from formal_rope.errors import FormalRopeError
from formal_rope.sampling.counts import dfa_graph
from formal_rope.sampling.enumeration import capped_counts, enumerate_class, one_edit_neighbours
from formal_rope.sampling.text import decode

DEFAULT_BUDGET = 256  # strings per length beyond the start set
STALE_ROUNDS = 3  # rounds without a new string before a length's climb gives up


class Scorer(Protocol):
    """A model as the search sees it: `runs` models (a pack; 1 for a single model) over
    `n_symbols` symbols. `scores(symbols (n, L), runs)` -> float64 (len(runs), n): the accept score
    of each asked run (indices into 0..runs-1) on each string; accept exactly where it is > 0."""

    runs: int
    n_symbols: int

    def scores(self, symbols: np.ndarray, runs: Sequence[int]) -> np.ndarray: ...


@dataclass(frozen=True)
class SearchSettings:
    """How hard to search: `budget` strings per length beyond the start set, a beam of `beam`
    strings mutated `round_size` strings at a time (`max_edits` edits at most per mutant), classes
    of at most `exhaustive_limit` strings enumerated with their one-edit neighbours, all seeded by
    `seed`. `stop_at_first_failure`: stop each run after its first failing length (enough for
    n_star_worst); False searches every length."""

    budget: int = DEFAULT_BUDGET
    seed: int = 0
    beam: int = 16
    round_size: int = 64
    exhaustive_limit: int = 16
    max_edits: int = 2
    stop_at_first_failure: bool = True

    def __post_init__(self) -> None:
        for name in ("beam", "round_size", "max_edits"):
            if getattr(self, name) < 1:
                raise FormalRopeError(f"worst-case search: {name} must be at least 1, got {getattr(self, name)}")
        for name in ("budget", "exhaustive_limit", "seed"):
            if getattr(self, name) < 0:
                raise FormalRopeError(f"worst-case search: {name} must be non-negative, got {getattr(self, name)}")


@dataclass(frozen=True)
class LengthSearch:
    """What the search found at one length for one run.

    `tried`: distinct strings scored (the start set included); `failures`: how many of them the run
    misclassifies; `failure`: the one furthest on the wrong side, `failure_margin` how far (≥ 0, in
    the model's score units), `failure_label` the DFA's label of it (True: in L, so the run rejects
    it). `closest_margin`: the smallest correctness margin tried (≤ 0 exactly when some string
    failed; NaN when nothing was tried). `enumerated`: the classes enumerated exactly ("all": every
    string of the length; "positive"/"negative": that class, with `neighbours_complete` saying
    whether every one-edit neighbour of it was tried too). `start_failures`: the failures among the
    start set (the sampled test set), so the sampled N* of the same start sets is known too.
    `unscored`: the classes ("positive", "negative") that exist at the length (the DFA's exact
    counts) of which the run scored no string; `start_unscored`: the same for the start set alone.
    A length with either is not passed (`passed`, `passed_start`)."""

    length: int
    tried: int
    failures: int
    failure: str | None
    failure_margin: float | None
    failure_label: bool | None
    closest_margin: float
    enumerated: tuple[str, ...] = ()
    neighbours_complete: bool = False
    start_failures: int = 0  # failures among the start set alone (what sampled evaluation sees)
    unscored: tuple[str, ...] = ()  # existing classes with no scored string: the length is not passed
    start_unscored: tuple[str, ...] = ()  # existing classes with no string in the start set

    @property
    def passed_start(self) -> bool:
        """The length passes the sampled evaluation of its start set: no failure there, every class tested."""
        return not self.start_failures and not self.start_unscored

    @property
    def passed(self) -> bool:
        """The length passes the worst case: no failure found, every class scored by the search and
        by its start set (so a length counts here only where the sampled N* counts it too)."""
        return not self.failures and not self.unscored and self.passed_start

    def to_dict(self) -> dict:
        return {**asdict(self), "enumerated": list(self.enumerated), "unscored": list(self.unscored),
                "start_unscored": list(self.start_unscored), "passed": self.passed}


@dataclass(frozen=True)
class WorstCase:
    """One run's worst-case evaluation: `per_length` in increasing length, `n_star_worst` (the
    largest N such that every searched length up to N passed: no failure found, each existing class
    scored; 0 when the first does not), the shortest failing string found (`failure`, at
    `failure_length`, with its margin and DFA label), the strings tried over all lengths, and
    `complete`: every requested length was searched (False when the run stopped at its first failing
    length) with a scored string of each class that exists there, in its start set and in the
    search. `n_star_start`: the N* the start sets alone give (the sampled N*), up to the lengths
    searched; `n_star_worst <= n_star_start`."""

    per_length: tuple[LengthSearch, ...]
    n_star_worst: int
    failure: str | None
    failure_length: int | None
    failure_margin: float | None
    failure_label: bool | None
    tried: int
    complete: bool
    n_star_start: int = 0  # the N* of the start sets alone (sampled N*, when they are the test sets)

    def to_dict(self) -> dict:
        data = {name: getattr(self, name) for name in self.__dataclass_fields__ if name != "per_length"}
        data["per_length"] = [entry.to_dict() for entry in self.per_length]
        return data


def n_star_of(searches: Sequence[LengthSearch], *, start_only: bool = False) -> int:
    """The largest searched length N such that every searched length up to N passed (`LengthSearch.passed`,
    or `passed_start` for the start sets alone); 0 if the first did not."""
    best = 0
    for entry in searches:
        if not (entry.passed_start if start_only else entry.passed):
            break
        best = entry.length
    return best


# ----------------------------------------------------------------------------------------------
# Mutations


def mutate(parents: np.ndarray, rng: np.random.Generator, n_symbols: int, max_edits: int) -> np.ndarray:
    """One mutant per row of `parents` (n, L): 1..max_edits edits each, every edit a symbol
    substitution, an adjacent swap or an insertion plus a deletion (the length is kept)."""
    mutants = np.array(parents, dtype=np.int64, copy=True)
    count, length = mutants.shape
    if count == 0 or length == 0:
        return mutants
    edits = rng.integers(1, max_edits + 1, size=count)
    kinds_available = 1 if length < 2 else 3
    for edit in range(max_edits):
        rows = np.flatnonzero(edits > edit)
        kinds = rng.integers(0, kinds_available, size=len(rows))
        positions = rng.integers(0, length, size=len(rows))
        if n_symbols > 1:
            chosen = rows[kinds == 0]
            where = positions[kinds == 0]
            shift = rng.integers(1, n_symbols, size=len(chosen))
            mutants[chosen, where] = (mutants[chosen, where] + shift) % n_symbols
        swapped = rows[kinds == 1]
        where = np.minimum(positions[kinds == 1], length - 2)
        mutants[swapped, where], mutants[swapped, where + 1] = mutants[swapped, where + 1], mutants[swapped, where]
        moved = rows[kinds == 2]
        if len(moved):
            deleted = rng.integers(0, length, size=len(moved))[:, None]
            inserted = positions[kinds == 2][:, None]
            symbol = rng.integers(0, n_symbols, size=len(moved))
            kept = np.arange(length - 1)[None, :]
            remaining = np.take_along_axis(mutants[moved], kept + (kept >= deleted), axis=1)  # (m, L-1)
            target = np.arange(length)[None, :]
            source = np.clip(np.where(target < inserted, target, target - 1), 0, length - 2)
            rebuilt = np.take_along_axis(remaining, source, axis=1)
            rebuilt[target == inserted] = symbol
            mutants[moved] = rebuilt
    return mutants


# ----------------------------------------------------------------------------------------------
# The search


class _ClassSizes:
    """Capped counts of positives and negatives per length, extended as longer lengths come."""

    def __init__(self, dfa, cap: int) -> None:
        self.graphs = {accepted: dfa_graph(dfa, accepted) for accepted in (True, False)}
        self.start = dfa.start
        self.cap = cap
        self.tables = {accepted: np.zeros((0, 0), dtype=np.int64) for accepted in (True, False)}

    def size(self, length: int, accepted: bool) -> int:
        table = self.tables[accepted]
        if length >= len(table):
            table = capped_counts(self.graphs[accepted], max(length, 2 * len(table)), self.cap)
            self.tables[accepted] = table
        return int(table[length, self.start])


class _Pool:
    """The distinct strings scored at one length: symbols, DFA labels, and each run's scores."""

    def __init__(self, length: int, runs: Sequence[int]) -> None:
        self.length = length
        self.rows: list[np.ndarray] = []
        self.labels: list[np.ndarray] = []
        self.margins: dict[int, list[np.ndarray]] = {run: [] for run in runs}
        self.seen: set[bytes] = set()

    def unseen(self, symbols: np.ndarray) -> np.ndarray:
        """The rows of `symbols` not scored yet, once each, in their order (nothing is marked)."""
        symbols = _rows(symbols, self.length)
        keep, keys = [], set()
        for index, row in enumerate(symbols):
            key = row.tobytes()
            if key not in self.seen and key not in keys:
                keys.add(key)
                keep.append(index)
        return symbols[keep]

    def add(self, symbols: np.ndarray, labels: np.ndarray) -> None:
        self.rows.append(symbols)
        self.labels.append(labels)
        self.seen.update(row.tobytes() for row in symbols)

    def symbols(self) -> np.ndarray:
        return np.concatenate(self.rows) if self.rows else np.empty((0, self.length), dtype=np.int64)

    def correctness(self, run: int) -> np.ndarray:
        return np.concatenate(self.margins[run]) if self.margins[run] else np.empty(0)


def _rows(symbols, length: int) -> np.ndarray:
    """`symbols` as int64 rows (n, length); a flat array is split into rows of `length` (none when
    empty: the empty string has no symbols to split by)."""
    array = np.asarray(symbols, dtype=np.int64)
    if array.ndim == 2:
        return array.reshape(array.shape[0], length)
    return array.reshape(-1, length) if length else np.empty((0, 0), dtype=np.int64)


@dataclass
class _RunAtLength:
    """One run's findings at the current length, while it is searched."""

    scored_positive: bool = False
    scored_negative: bool = False
    failures: int = 0
    failure_row: np.ndarray | None = None
    failure_margin: float | None = None
    failure_label: bool | None = None


def search(
    scorer: Scorer,
    dfa,
    start_sets: Iterable,
    *,
    settings: SearchSettings = SearchSettings(),
    alphabet: Sequence[str] | None = None,
    last_lengths: Sequence[int | None] | None = None,
    on_length: Callable[[int, LengthSearch], None] | None = None,
) -> list[WorstCase]:
    """Search every run of `scorer` for misclassified strings at the lengths of `start_sets`
    (objects with .length, .symbols (n, L), .labels (n,), in increasing length: the sampled test
    sets), labelled by `dfa`. Returns one WorstCase per run.

    last_lengths[r]: run r is searched up to that length only (None: every length; a run trained
    and evaluated already needs no length past its first sampled failure). alphabet decodes the
    failing strings (default: the DFA's). on_length(run, result) sees each searched length."""
    runs = scorer.runs
    if dfa.n_symbols != scorer.n_symbols:
        raise FormalRopeError(
            f"the language has {dfa.n_symbols} symbols but the model reads {scorer.n_symbols}; give the language "
            "over the model's alphabet"
        )
    alphabet = tuple(dfa.alphabet if alphabet is None else alphabet)
    last = list(last_lengths) if last_lengths is not None else [None] * runs
    if len(last) != runs:
        raise FormalRopeError(f"need one last length (or None) per run: {runs} runs, {len(last)} given")
    sizes = _ClassSizes(dfa, max(settings.exhaustive_limit, settings.budget) + 1)
    found: list[list[LengthSearch]] = [[] for _ in range(runs)]
    failures: list[tuple[int, str, float | None, bool | None] | None] = [None] * runs
    stopped = [False] * runs
    requested = 0
    for labelled in start_sets:
        length = int(labelled.length)
        requested += 1
        going = [run for run in range(runs) if not stopped[run] and (last[run] is None or length <= last[run])]
        if not going:
            break  # every run is done (lengths only grow): stop before sampling longer lengths
        results = _search_length(scorer, dfa, labelled, going, settings, sizes)
        for run, entry in results.items():
            entry = _decoded(entry, alphabet)
            found[run].append(entry)
            if on_length is not None:
                on_length(run, entry)
            if entry.failures:
                if failures[run] is None:
                    failures[run] = (length, entry.failure, entry.failure_margin, entry.failure_label)
                if settings.stop_at_first_failure:
                    stopped[run] = True
    total = requested
    outcomes = []
    for run in range(runs):
        failure = failures[run]
        outcomes.append(WorstCase(
            per_length=tuple(found[run]),
            n_star_worst=n_star_of(found[run]),
            failure=None if failure is None else failure[1],
            failure_length=None if failure is None else failure[0],
            failure_margin=None if failure is None else failure[2],
            failure_label=None if failure is None else failure[3],
            tried=int(sum(entry.tried for entry in found[run])),
            complete=(len(found[run]) == total and not stopped[run]
                      and not any(entry.unscored or entry.start_unscored for entry in found[run])),
            n_star_start=n_star_of(found[run], start_only=True),
        ))
    return outcomes


def _decoded(entry, alphabet):
    """A _search_length result (failure as a symbol row) with its failure as text."""
    row = entry.failure
    return LengthSearch(**{**entry.__dict__, "failure": None if row is None else decode(row[None, :], alphabet)[0]})


def _search_length(scorer: Scorer, dfa, labelled, going: list[int], settings: SearchSettings,
                   sizes: _ClassSizes) -> dict[int, LengthSearch]:
    length = int(labelled.length)
    rng = np.random.default_rng(np.random.SeedSequence([int(settings.seed), length, 19]))
    pool = _Pool(length, going)
    state = {run: _RunAtLength() for run in going}
    searching = list(going)
    n_symbols = scorer.n_symbols

    def score(candidates: np.ndarray) -> int:
        """Label (by the DFA) and score the new rows of `candidates` for the runs still searching;
        returns how many were new."""
        fresh = pool.unseen(candidates)
        if not len(fresh) or not searching:
            return 0
        labels = accepts_encoded(dfa, fresh, np.full(len(fresh), length, dtype=np.int64))
        scores = np.asarray(scorer.scores(fresh, searching), dtype=np.float64).reshape(len(searching), len(fresh))
        pool.add(fresh, labels)
        for position, run in enumerate(list(searching)):
            state[run].scored_positive |= bool(labels.any())
            state[run].scored_negative |= bool(not labels.all())
            run_scores = scores[position]
            wrong = (run_scores > 0) != labels
            margin = np.where(labels, run_scores, -run_scores)
            pool.margins[run].append(np.where(np.isnan(margin), np.inf, margin))
            if wrong.any():
                past = np.where(wrong, np.nan_to_num(-margin, nan=0.0), -np.inf)
                worst = int(np.argmax(past))
                entry = state[run]
                entry.failures += int(wrong.sum())
                entry.failure_row = fresh[worst]
                entry.failure_margin = None if np.isnan(margin[worst]) else float(max(0.0, -margin[worst]))
                entry.failure_label = bool(labels[worst])
                searching.remove(run)
        return len(fresh)

    counts = {accepted: sizes.size(length, accepted) for accepted in (True, False)}
    exists = (counts[True] > 0, counts[False] > 0)
    score(_rows(labelled.symbols, length))  # labels: the DFA's, as everywhere
    start_failures = {run: state[run].failures for run in going}
    start_unscored = {run: _unscored(exists, state[run]) for run in going}
    spent = 0
    enumerated: list[str] = []
    neighbours_complete = False
    if searching and counts[True] + counts[False] <= settings.budget:
        enumerated = ["all"]
        for accepted in (True, False):
            spent += score(enumerate_class(dfa, length, accepted=accepted, limit=settings.budget))
        neighbours_complete = True
    elif searching:
        small = [accepted for accepted in (True, False) if counts[accepted] <= settings.exhaustive_limit]
        neighbours_complete = bool(small)
        for accepted in small:
            enumerated.append("positive" if accepted else "negative")
            members = enumerate_class(dfa, length, accepted=accepted, limit=settings.exhaustive_limit)
            spent += score(members)
            neighbours = pool.unseen(one_edit_neighbours(members, n_symbols))
            if spent + len(neighbours) > settings.budget:
                neighbours_complete = False
                share = max(0, settings.budget // 2 - spent)
                neighbours = neighbours[np.sort(rng.permutation(len(neighbours))[:share])]
            for start in range(0, len(neighbours), settings.round_size):
                if not searching:
                    break
                spent += score(neighbours[start: start + settings.round_size])
    stale = 0
    while searching and spent < settings.budget and stale < STALE_ROUNDS:
        batch = min(settings.round_size, settings.budget - spent)
        symbols = pool.symbols()
        if not len(symbols):  # nothing to climb from: random strings start the beam
            new = score(rng.integers(0, n_symbols, size=(batch, length)) if n_symbols else symbols)
        else:
            quota = math.ceil(batch / len(searching))
            parents = []
            for run in searching:
                beam = np.argsort(pool.correctness(run), kind="stable")[: settings.beam]
                parents.append(beam[rng.integers(0, len(beam), size=quota)])
            offspring = mutate(symbols[np.concatenate(parents)], rng, n_symbols, settings.max_edits)
            new = score(pool.unseen(offspring)[:batch])
        spent += new
        stale = 0 if new else stale + 1
    start = (start_failures, start_unscored)
    return {run: _length_search(run, length, state[run], pool, (tuple(enumerated), neighbours_complete), start, exists)
            for run in going}


def _length_search(run: int, length: int, entry: _RunAtLength, pool: _Pool, enumeration: tuple, start: tuple,
                   exists: tuple[bool, bool]) -> LengthSearch:
    """Run `run`'s LengthSearch at `length` once the search there has ended. enumeration:
    (classes enumerated, whether every one-edit neighbour was scored); start: (failures, unscored
    classes) per run after the start strings alone."""
    enumerated, neighbours_complete = enumeration
    start_failures, start_unscored = start
    correctness = pool.correctness(run)
    closest = float(np.min(correctness)) if len(correctness) else math.nan
    if entry.failures:
        closest = min(closest, -(entry.failure_margin or 0.0))
    return LengthSearch(
        length=length,
        tried=_scored_for(pool, run),
        failures=entry.failures,
        failure=entry.failure_row,
        failure_margin=entry.failure_margin,
        failure_label=entry.failure_label,
        closest_margin=closest,
        enumerated=enumerated,
        neighbours_complete=neighbours_complete and not entry.failures,
        start_failures=start_failures[run],
        unscored=() if entry.failures else _unscored(exists, entry),
        start_unscored=() if start_failures[run] else start_unscored[run],
    )


def _unscored(exists: tuple[bool, bool], entry: _RunAtLength) -> tuple[str, ...]:
    """The classes that exist at the length (positives, negatives) of which `entry`'s run scored no string."""
    return tuple(name for name, there, scored in (("positive", exists[0], entry.scored_positive),
                                                  ("negative", exists[1], entry.scored_negative))
                 if there and not scored)


def _scored_for(pool: _Pool, run: int) -> int:
    """How many strings `run` scored before it found a failure and stopped."""
    return int(sum(len(margins) for margins in pool.margins[run]))
