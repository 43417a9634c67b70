"""Coverage sampling: strings whose run through the minimal DFA takes a chosen transition.

A uniform draw within a class and length almost never reaches a transition that few strings take
(16.16.SL.6.1.5, "starts with aaaaa and never contains ababab": the strings that start with aaaaa and
go on toward ababab are 1e-12 of a length's strings), so neither training nor testing nor a search
seeded by the test sets ever visits the part of the automaton that makes the language what it is.
The `coverage` sampling mode (RunConfig.sampling) therefore draws part of every test set and every
training batch *per transition*: for a transition t = (q, a), a label and a length n, a string drawn
uniformly among the strings of length n with that label whose run takes t at least once.

That draw is exact: it walks the product of the DFA with a "taken" bit (`taken_graph`: nodes
(state, not yet) and (state, taken); the bit turns on when the run takes t), whose paths from
(start, not yet) to (final, taken) are exactly those strings, one each, with the walker of
`sampling.walker` (uniform over paths). The products of many transitions are one graph (disjoint
copies), so one count table and one walk serve the strings of all of them. Which transitions a
length holds strings for (with a label) is decided exactly without that table, from forward
reachability (some string of length i reaches q) and the label's backward counts (some string of
length r leads from q·a to the label), convolved over the position of t (`takeable`).

Which transitions a test length draws: the takeable ones of each label, in (state, symbol) order,
from an offset into all transitions that moves with the length (`rotation`), so consecutive lengths
take consecutive transitions and a test range longer than |transitions| / slots visits every one of
them. Training
batches draw a transition uniformly among those takeable at some training length, then a length
uniformly among those where it is. Everything is seeded; nothing here reads a global.
"""

from __future__ import annotations

import dataclasses
import weakref
from collections import OrderedDict
from dataclasses import dataclass

import numpy as np

from formal_rope.automata.dfa import DFA, require_dfa
from formal_rope.errors import FormalRopeError
from formal_rope.sampling.counts import CountingGraph, LogCounts, dfa_graph, log_counts, reachable_states
from formal_rope.sampling.walker import walk

UNIFORM, COVERAGE = "uniform", "coverage"
SAMPLING_MODES = (UNIFORM, COVERAGE)
# Share of a test length's positives and of its uniform negatives that are coverage strings (the
# rest, and the near-misses, are drawn as in uniform mode, from the same generators).
TEST_SHARE = 0.5
# Share of a training batch's positives and negatives replaced by coverage strings (a quarter, so a
# recipe of near-miss negatives keeps three quarters of its near-misses).
TRAIN_SHARE = 0.25
# Spawn key of the coverage strings' generators: their stream never meets the test sets' own.
_COVERAGE_STREAM = 0x434F5645  # "COVE"


def check_sampling(mode: str) -> str:
    """`mode` when it is a sampling mode (FormalRopeError naming them otherwise)."""
    if mode not in SAMPLING_MODES:
        raise FormalRopeError(f"unknown sampling mode {mode!r}; expected {' or '.join(SAMPLING_MODES)}")
    return mode


def transitions_of(dfa: DFA) -> np.ndarray:
    """The transitions (state, symbol) of the DFA's reachable states, int64 (T, 2), state-major."""
    require_dfa(dfa, "transitions_of", "dfa")
    states = np.flatnonzero(reachable_states(dfa))
    grid = np.stack(np.meshgrid(states, np.arange(dfa.n_symbols), indexing="ij"), axis=-1)
    return grid.reshape(-1, 2).astype(np.int64)


def transitions_taken(dfa: DFA, symbols, lengths=None) -> np.ndarray:
    """Bool (n_states, n_symbols): the transitions some row of `symbols` (n, L) takes (rows padded
    past `lengths`; None: every row has length L)."""
    symbols = np.asarray(symbols, dtype=np.int64)
    taken = np.zeros((dfa.n_states, dfa.n_symbols), dtype=bool)
    if symbols.ndim != 2 or symbols.size == 0:
        return taken
    count, width = symbols.shape
    lengths = np.full(count, width) if lengths is None else np.asarray(lengths, dtype=np.int64)
    state = np.full(count, dfa.start, dtype=np.int64)
    for position in range(width):
        active = np.flatnonzero(lengths > position)
        if not active.size:
            break
        symbol = symbols[active, position]
        taken[state[active], symbol] = True
        state[active] = dfa.transitions[state[active], symbol]
    return taken


def taken_graph(dfa: DFA, transitions, accepted: bool) -> CountingGraph:
    """The DFA × {not yet, taken}, one copy per transition of `transitions` ((k, 2), or one pair),
    as a counting graph: in copy j (nodes 2|Q|j ..), node q is (q, not yet) and |Q| + q is (q, taken);
    the edge of transition j, (q, a), from (q, not yet) leads to (q·a, taken). Final: (f, taken) for
    the accepting (accepted=True) or rejecting states f. The paths of length n from (start, not yet)
    of copy j are the strings of length n with that label whose run takes transition j, one path
    each; the start is copy 0's."""
    transitions = np.asarray(transitions, dtype=np.int64).reshape(-1, 2)
    n_states = dfa.n_states
    copy = np.concatenate([dfa.transitions, dfa.transitions + n_states])
    offsets = 2 * n_states * np.arange(len(transitions))
    targets = (copy[None] + offsets[:, None, None]).copy()  # (k, 2n, |Σ|)
    targets[np.arange(len(transitions)), transitions[:, 0], transitions[:, 1]] = (
        offsets + n_states + dfa.transitions[transitions[:, 0], transitions[:, 1]])
    targets = targets.reshape(-1, dfa.n_symbols)
    symbols = np.broadcast_to(np.arange(dfa.n_symbols, dtype=np.int64), targets.shape)
    final_states = dfa.accepting if accepted else ~dfa.accepting
    final = np.tile(np.concatenate([np.zeros(n_states, dtype=bool), final_states]), len(transitions))
    return CountingGraph(targets, symbols, dfa.start, final)


# Nodes x lengths of one taken-bit table (float64 entries); transitions are walked in groups that fit.
_GROUP_ENTRIES = 4_000_000
_TABLES: "weakref.WeakKeyDictionary[DFA, OrderedDict]" = weakref.WeakKeyDictionary()
_TABLES_PER_DFA = 16


def _group_table(dfa: DFA, group: np.ndarray, accepted: bool, max_length: int) -> LogCounts:
    """The log counts of `taken_graph(dfa, group)` up to max_length (the last few memoised per DFA)."""
    per_dfa = _TABLES.setdefault(dfa, OrderedDict())
    key = (group.tobytes(), bool(accepted))
    table = per_dfa.get(key)
    if table is None or table.max_length < max_length:
        table = log_counts(taken_graph(dfa, group, accepted), max_length)
        per_dfa[key] = table
        while len(per_dfa) > _TABLES_PER_DFA:
            per_dfa.popitem(last=False)
    per_dfa.move_to_end(key)
    return table


def _forward_reach(dfa: DFA, max_length: int) -> np.ndarray:
    """Bool (max_length + 1, n_states): some string of length i leads from the start to q."""
    reach = np.zeros((max_length + 1, dfa.n_states), dtype=bool)
    reach[0, dfa.start] = True
    for length in range(1, max_length + 1):
        reach[length, np.unique(dfa.transitions[reach[length - 1]].ravel())] = True
    return reach


def takeable(dfa: DFA, accepted: bool, max_length: int, transitions: np.ndarray | None = None) -> np.ndarray:
    """Bool (T, max_length + 1): whether some string of length n with the label takes transition t
    (rows: `transitions`, default `transitions_of(dfa)`). Exact: the number of (string, position)
    pairs with t at position i is the convolution over i of forward reach into q (length i) and the
    label's backward counts from q·a (length n - 1 - i); as 0/1 sequences it is an integer
    convolution, computed by FFT and read against 1/2."""
    transitions = transitions_of(dfa) if transitions is None else np.asarray(transitions, dtype=np.int64)
    rows = max_length + 1
    forward = _forward_reach(dfa, max_length).astype(np.float64)  # (rows, n)
    backward_table = log_counts(dfa_graph(dfa, accepted), max_length)
    backward = np.isfinite(backward_table.shifted).astype(np.float64)  # (rows, n)
    into = forward[:, transitions[:, 0]].T  # (T, rows)
    out_of = backward[:, dfa.transitions[transitions[:, 0], transitions[:, 1]]].T
    size = 1 << int(np.ceil(np.log2(2 * rows)))
    pairs = np.fft.irfft(np.fft.rfft(into, size) * np.fft.rfft(out_of, size), size)[:, :rows]
    exists = np.zeros((len(transitions), rows), dtype=bool)
    exists[:, 1:] = pairs[:, : rows - 1] > 0.5  # a string of length n takes t at some position i < n
    return exists


def rotation(candidates: np.ndarray, slots: int, length: int, total: int) -> np.ndarray:
    """`slots` of `candidates` (sorted indices into `total` transitions): the first ones at or after
    an offset into all `total` that moves `slots` per length (wrapping, repeating when there are
    fewer candidates than slots). The offset moves through every transition's index whichever are
    takeable at a length, so consecutive lengths take consecutive transitions."""
    if slots <= 0 or not len(candidates):
        return np.empty(0, dtype=np.int64)
    offset = (int(length) * slots) % max(1, int(total))
    first = int(np.searchsorted(candidates, offset))
    return np.asarray(candidates)[(first + np.arange(slots)) % len(candidates)]


def draw_taking(dfa: DFA, transitions: np.ndarray, lengths: np.ndarray, accepted: bool,
                uniforms: np.ndarray, table_length: int | None = None,
                universe: np.ndarray | None = None) -> np.ndarray:
    """One string per row: of length `lengths[i]`, with the label, taking `transitions[i]`, drawn
    uniformly among such strings (a walk of the taken-bit product, `taken_graph`; the distinct
    transitions are walked together, in groups whose count table fits _GROUP_ENTRIES). uniforms:
    (max length, n), column i drives string i. table_length: the lengths the tables cover (default
    the longest asked; a caller drawing again and again passes its longest so they are reused).
    universe: the transitions (u, 2) the groups are cut from (default: the distinct ones asked); a
    caller drawing again and again passes the same one, so each group's table is built once.
    Returns int64 (n, max length) padded with PAD. Every (transition, length) must be takeable."""
    transitions = np.asarray(transitions, dtype=np.int64).reshape(-1, 2)
    lengths = np.asarray(lengths, dtype=np.int64)
    width = int(lengths.max()) if lengths.size else 0
    out = np.full((len(lengths), width), -1, dtype=np.int64)
    if not lengths.size:
        return out
    rows_long = max(width, int(table_length or 0)) + 1
    keys = transitions[:, 0] * dfa.n_symbols + transitions[:, 1]
    if universe is None:
        distinct, inverse = np.unique(keys, return_inverse=True)
    else:
        universe = np.asarray(universe, dtype=np.int64).reshape(-1, 2)
        distinct = universe[:, 0] * dfa.n_symbols + universe[:, 1]
        position = {int(key): index for index, key in enumerate(distinct)}
        inverse = np.array([position[int(key)] for key in keys], dtype=np.int64)
    per_group = max(1, _GROUP_ENTRIES // (2 * dfa.n_states * rows_long))
    for first in range(0, len(distinct), per_group):
        members = np.flatnonzero((inverse >= first) & (inverse < first + per_group))
        if not members.size:
            continue
        group = np.stack([distinct[first: first + per_group] // dfa.n_symbols,
                          distinct[first: first + per_group] % dfa.n_symbols], axis=1)
        table = _group_table(dfa, group, accepted, rows_long - 1)
        starts = 2 * dfa.n_states * (inverse[members] - first) + dfa.start
        longest = int(lengths[members].max())
        drawn = walk(table, lengths[members], uniforms[:longest, members], starts=starts, alias=False)
        out[members, : drawn.shape[1]] = drawn
    return out


@dataclass(frozen=True)
class CoverageRows:
    """The coverage strings of one test length: positives and negatives, (n, length) each, and the
    transitions they were drawn for (T_pos, 2), (T_neg, 2)."""

    positives: np.ndarray
    negatives: np.ndarray
    positive_transitions: np.ndarray
    negative_transitions: np.ndarray


class CoveragePlan:
    """Which transitions each test length's coverage strings take, for lengths up to `max_length`
    (the takeable tables of both labels, computed once), and their strings."""

    def __init__(self, dfa: DFA, max_length: int) -> None:
        self.dfa = dfa
        self.max_length = int(max_length)
        self.transitions = transitions_of(dfa)
        self.exists = {accepted: takeable(dfa, accepted, max_length, self.transitions) for accepted in (True, False)}

    def chosen(self, length: int, accepted: bool, slots: int) -> np.ndarray:
        """The transitions (k, 2) of a length's `slots` coverage strings of one label."""
        candidates = np.flatnonzero(self.exists[accepted][:, length])
        return self.transitions[rotation(candidates, slots, length, len(self.transitions))]

    def rows(self, requests, seed: int) -> list[CoverageRows]:
        """The coverage strings of several lengths, `requests` = [(length, n_positive, n_negative)]:
        per length `n_positive` positives and `n_negative` negatives (transitions repeat when a
        label has fewer takeable ones than slots; none of a label without a string of the length),
        each length's from a generator of (seed, length) alone; all walked in one pass per label."""
        asked = {True: [], False: []}
        for length, n_positive, n_negative in requests:
            rng = np.random.default_rng(np.random.SeedSequence([int(seed), int(length), _COVERAGE_STREAM]))
            for accepted, slots in ((True, n_positive), (False, n_negative)):
                chosen = self.chosen(length, accepted, slots)
                asked[accepted].append((length, chosen, rng.random((length, len(chosen)))))
        drawn = {}
        for accepted, items in asked.items():
            transitions = np.concatenate([chosen for _, chosen, _ in items]) if items else np.empty((0, 2))
            lengths = np.concatenate([np.full(len(chosen), length) for length, chosen, _ in items]) \
                if items else np.empty(0)
            width = max([length for length, _, _ in items], default=0)
            uniforms = np.zeros((width, len(lengths)))
            column = 0
            for length, chosen, draws in items:
                uniforms[:length, column: column + len(chosen)] = draws
                column += len(chosen)
            symbols = draw_taking(self.dfa, transitions, lengths, accepted, uniforms, self.max_length)
            parts, column = [], 0
            for length, chosen, _ in items:
                part = (symbols[column: column + len(chosen), :length] if len(chosen)
                        else np.empty((0, length), np.int64))
                parts.append((part, chosen))
                column += len(chosen)
            drawn[accepted] = parts
        return [CoverageRows(positive[0], negative[0], positive[1], negative[1])
                for positive, negative in zip(drawn[True], drawn[False])]


def coverage_slots(count: int, share: float) -> int:
    """How many of `count` strings of a class are coverage strings: round(share x count), at least
    one when there is any string."""
    return 0 if count <= 0 else max(1, int(np.floor(share * count + 0.5)))


class TrainingCoverage:
    """Coverage strings for training batches with lengths in [min_length, max_length]: per string, a
    transition uniform among those of its label takeable at some training length, then a length
    uniform among those where it is."""

    def __init__(self, dfa: DFA, min_length: int, max_length: int) -> None:
        self.dfa = dfa
        self.min_length, self.max_length = int(min_length), int(max_length)
        self.transitions = transitions_of(dfa)
        self.exists = {}
        for accepted in (True, False):
            table = takeable(dfa, accepted, max_length, self.transitions)
            table[:, : self.min_length] = False
            self.exists[accepted] = table

    def draw(self, rng: np.random.Generator, count: int, accepted: bool) -> tuple[np.ndarray, np.ndarray]:
        """(symbols (k, max_length) padded with PAD, lengths (k,)): k = count strings, or none when
        no training length holds a string of the label."""
        table = self.exists[accepted]
        usable = np.flatnonzero(table.any(axis=1))
        if count <= 0 or not usable.size:
            return np.empty((0, self.max_length), dtype=np.int64), np.empty(0, dtype=np.int64)
        chosen = usable[rng.integers(0, usable.size, size=count)]
        lengths = np.empty(count, dtype=np.int64)
        for position, index in enumerate(chosen):
            allowed = np.flatnonzero(table[index])
            lengths[position] = allowed[rng.integers(0, allowed.size)]
        uniforms = rng.random((max(1, int(lengths.max())), count))
        symbols = np.full((count, self.max_length), -1, dtype=np.int64)
        drawn = draw_taking(self.dfa, self.transitions[chosen], lengths, accepted, uniforms, self.max_length,
                            universe=self.transitions)
        symbols[:, : drawn.shape[1]] = drawn
        return symbols, lengths


def with_training_coverage(batch, coverage: TrainingCoverage, rng: np.random.Generator, share: float = TRAIN_SHARE):
    """`batch` (a sampling.TrainingBatch) with coverage_slots(share) of its positives and of its
    negatives replaced by coverage strings of the same label (the first such rows: the batch is
    shuffled). The draws come from `rng` after everything the batch drew."""
    labels = np.asarray(batch.labels, dtype=bool)
    symbols = np.array(batch.symbols, copy=True)
    lengths = np.array(batch.lengths, copy=True)
    for accepted in (True, False):
        rows = np.flatnonzero(labels == accepted)
        drawn, drawn_lengths = coverage.draw(rng, coverage_slots(len(rows), share), accepted)
        rows = rows[: len(drawn)]
        width = min(symbols.shape[1], drawn.shape[1])
        symbols[rows] = -1
        symbols[rows, :width] = drawn[:, :width]
        lengths[rows] = drawn_lengths
    return dataclasses.replace(batch, symbols=symbols, lengths=lengths)


@dataclass(frozen=True)
class TransitionCoverage:
    """Which transitions of the minimal DFA a run's test strings took: `covered` of `total` (the
    transitions some string of a tested length takes, either label), and the missed ones as text."""

    covered: int
    total: int
    missed: tuple[str, ...] = ()


class CoverageTally:
    """Counts the transitions the test sets passing through `tap` take."""

    def __init__(self, dfa: DFA) -> None:
        self.dfa = dfa
        self.taken = np.zeros((dfa.n_states, dfa.n_symbols), dtype=bool)
        self.longest = 0
        self.lengths: list[int] = []

    def tap(self, sets):
        for labelled in sets:
            self.taken |= transitions_taken(self.dfa, labelled.symbols)
            self.lengths.append(int(labelled.length))
            yield labelled

    def result(self, tested_lengths) -> TransitionCoverage:
        """The coverage against the transitions takeable at `tested_lengths` (every length of the
        run, evaluated or not)."""
        lengths = np.asarray(list(tested_lengths), dtype=np.int64)
        transitions = transitions_of(self.dfa)
        if not lengths.size:
            return TransitionCoverage(0, 0)
        longest = int(lengths.max())
        possible = np.zeros(len(transitions), dtype=bool)
        for accepted in (True, False):
            possible |= takeable(self.dfa, accepted, longest, transitions)[:, lengths].any(axis=1)
        hit = self.taken[transitions[:, 0], transitions[:, 1]] & possible
        alphabet = self.dfa.alphabet
        missed = tuple(f"{q}-{alphabet[a]}" for q, a in transitions[possible & ~hit].tolist())
        return TransitionCoverage(int(hit.sum()), int(possible.sum()), missed)
