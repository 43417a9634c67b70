"""Stage ``language_to_formula`` for LTL[P,MOD] \\ LTL[P]: a bounded bottom-up search over formulas.

The characterisation of LTL[P,MOD] (PODFA_k, core paper appendix B) goes through enriched
alphabets and gives no direct recipe, so formulas are enumerated by size (nodes of the tree):
atoms, MOD_k^r for the language's period k (every MOD_d^r with d | k is a disjunction of them),
¬, P, H, ∧, ∨, ↔. Formulas are deduplicated by their meaning on all short strings: the value of
the formula at every position i ≤ n+1 of every string of length n ≤ L (for i ≤ n with the symbol
w_i there, at n+1 with none), L as large as keeps the table near `SIGNATURE_CELLS` cells. Two
formulas with one table are kept once (the smaller, first found), as the atlas generator
deduplicates languages by their minimal DFA. A formula whose readout column equals the target's
membership on those strings is a candidate; it is accepted only when its DFA is equivalent to the
target DFA (`ltl_to_dfa_compositional`, then `equivalent`), so a look-alike that differs on longer
strings is skipped, never returned. The search stops at `max_size` nodes or `time_limit` seconds.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

import numpy as np

from formal_rope.automata.dfa import DFA
from formal_rope.automata.ltl_compositional import ltl_to_dfa_compositional
from formal_rope.automata.ops import discovery_order, equivalent
from formal_rope.errors import FormalRopeError
from formal_rope.lang.ast import And, Atom, Const, Formula, Historically, Iff, Mod, Not, Or, Past

SIGNATURE_CELLS = 6000
DEFAULT_MAX_SIZE = 14
DEFAULT_TIME_LIMIT = 60.0


@dataclass(frozen=True)
class SearchOptions:
    max_size: int = DEFAULT_MAX_SIZE
    time_limit: float = DEFAULT_TIME_LIMIT

    def __post_init__(self) -> None:
        if isinstance(self.max_size, bool) or not isinstance(self.max_size, int) or self.max_size < 1:
            raise FormalRopeError("the search's size limit (--max-size) must be a positive integer, "
                                  f"got {self.max_size!r}")
        if not self.time_limit > 0:
            raise FormalRopeError(f"the search's time limit (--time-limit) must be positive, got {self.time_limit!r}")


@dataclass(frozen=True)
class SearchResult:
    """formula: the smallest formula found (None when none up to `searched_size`); classes: how many
    distinct meanings were kept; candidates: look-alikes checked exactly (and rejected, but the last)."""

    formula: Formula | None
    searched_size: int
    classes: int
    candidates: int
    seconds: float
    timed_out: bool


class _Trie:
    """All strings of length ≤ L in BFS order: parent index and last symbol of each (root first)."""

    def __init__(self, n_symbols: int, max_length: int):
        parents, last, lengths = [-1], [-1], [0]
        level = [0]
        for length in range(1, max_length + 1):
            next_level = []
            for node in level:
                for symbol in range(n_symbols):
                    parents.append(node)
                    last.append(symbol)
                    lengths.append(length)
                    next_level.append(len(parents) - 1)
            level = next_level
        self.parent = np.asarray(parents, dtype=np.int64)
        self.last = np.asarray(last, dtype=np.int64)
        self.length = np.asarray(lengths, dtype=np.int64)
        self.levels = [np.flatnonzero(self.length == length) for length in range(1, max_length + 1)]
        self.n_symbols = n_symbols

    @property
    def size(self) -> int:
        return int(self.parent.size)


def _max_length(n_symbols: int) -> int:
    length, total = 0, 1
    while True:
        grown = total + n_symbols ** (length + 1)
        if grown * (n_symbols + 1) > SIGNATURE_CELLS or length >= 24:
            return max(length, 1)
        total, length = grown, length + 1


def _residue_dfa(dfa: DFA, period: int, residue: int) -> DFA:
    """The strings of L whose length is ≡ residue (mod period): states (q, length mod period)."""
    n = dfa.n_states
    codes = np.arange(n * period)
    state, count = codes // period, codes % period
    table = dfa.transitions[state] * period + ((count + 1) % period)[:, None]
    accepting = np.asarray(dfa.accepting, dtype=bool)[state] & (count == residue)
    return DFA(dfa.alphabet, table, dfa.start * period, accepting)


def _local_predicates(alphabet: tuple[str, ...], period: int, deadline: float) -> list[tuple[Formula, np.ndarray]]:
    """Every distinct temporal-free formula over the atoms and MOD_period^r, smallest first, with its
    table over (symbol here or none, i mod period); enumerated by size until all tables are found."""
    width = len(alphabet) + 1
    tables: dict[bytes, tuple[Formula, np.ndarray, int]] = {}
    by_size: dict[int, list[tuple[Formula, np.ndarray]]] = {1: []}
    leaves: list[tuple[Formula, np.ndarray]] = []
    for index, symbol in enumerate(alphabet):
        table = np.zeros((width, period), dtype=bool)
        table[index, :] = True
        leaves.append((Atom(symbol), table))
    if period > 1:
        for residue in range(period):
            table = np.zeros((width, period), dtype=bool)
            table[:, residue] = True
            leaves.append((Mod(period, residue), table))
    total = 2 ** (width * period)

    def add(size: int, formula: Formula, table: np.ndarray) -> None:
        key = np.packbits(table).tobytes()
        if key not in tables:
            tables[key] = (formula, table, size)
            by_size.setdefault(size, []).append((formula, table))

    for formula, table in leaves:
        add(1, formula, table)
    size = 1
    while len(tables) < total and size < 9 and time.perf_counter() < deadline:
        size += 1
        for formula, table in list(by_size.get(size - 1, [])):
            add(size, Not(formula), ~table)
        for left_size in range(1, (size - 1) // 2 + 1):
            right_size = size - 1 - left_size
            for i, (left, left_table) in enumerate(list(by_size.get(left_size, []))):
                for j, (right, right_table) in enumerate(list(by_size.get(right_size, []))):
                    if left_size == right_size and j <= i:
                        continue
                    add(size, And(left, right), left_table & right_table)
                    add(size, Or(left, right), left_table | right_table)
                    add(size, Iff(left, right), left_table == right_table)
    return [(formula, table) for formula, table, _ in tables.values()]


def search_formula(dfa: DFA, period: int, options: SearchOptions | None = None) -> SearchResult:
    """The smallest formula found (MOD_period^r predicates) equivalent to `dfa`, up to the limits.

    The readout position N+1 holds no symbol, so at the readout a formula is a Boolean combination
    of MOD_period^r and temporal formulas: the search looks for one temporal formula T_r per
    residue r of the length N (with any values on the other lengths) and returns
    ∨_r (MOD_period^(r+1) ∧ T_r). Temporal-free subformulas (Boolean combinations of atoms and MOD
    predicates) are enumerated first, by their table over (symbol, i mod period), and enter the
    main search as leaves of size 1; their true sizes count in the result.
    """
    options = options or SearchOptions()
    started = time.perf_counter()
    deadline = started + options.time_limit
    alphabet = dfa.alphabet
    n_symbols = len(alphabet)
    period = max(1, int(period))
    trie = _Trie(n_symbols, _max_length(n_symbols))
    width = n_symbols + 1
    states = np.zeros(trie.size, dtype=np.int64)
    states[0] = dfa.start
    for level in trie.levels:
        states[level] = dfa.transitions[states[trie.parent[level]], trie.last[level]]
    target = np.asarray(dfa.accepting, dtype=bool)[states]
    residue_of = trie.length % period
    weights = np.random.default_rng(0).integers(1, 2**62, size=(trie.size * width, 2), dtype=np.int64)
    candidates = 0
    solved: dict[int, Formula] = {}
    residue_dfas = {r: _residue_dfa(dfa, period, r) for r in range(period)}
    readout_mod = {r: (Mod(period, (r + 1) % period) if period > 1 else Const(True)) for r in range(period)}
    for residue, part in residue_dfas.items():
        # A residue class with no member, or with every string of that length: a constant.
        if not part.accepting[np.unique(_reachable(part))].any():
            solved[residue] = Const(False)
        elif equivalent(part, _residue_dfa(_universal(dfa), period, residue)).equivalent:
            solved[residue] = Const(True)

    def keys(tables: np.ndarray) -> np.ndarray:
        return tables.reshape(tables.shape[0], -1).astype(np.int64) @ weights

    def past(tables: np.ndarray, historically: bool) -> np.ndarray:
        flag = np.full((tables.shape[0], trie.size), historically, dtype=bool)
        for level in trie.levels:
            parent = trie.parent[level]
            here = tables[:, parent, trie.last[level]]
            flag[:, level] = (flag[:, parent] & here) if historically else (flag[:, parent] | here)
        return np.repeat(flag[:, :, None], width, axis=2)

    seen: set[tuple[int, int]] = set()
    by_size: dict[int, tuple[list[Formula], np.ndarray, np.ndarray]] = {}

    def admit(size: int, make, tables: np.ndarray, local: bool) -> None:
        nonlocal candidates
        if not tables.shape[0]:
            return
        kept_formulas, kept_rows = [], []
        for index, pair in enumerate(map(tuple, keys(tables).tolist())):
            if pair not in seen:
                seen.add(pair)
                kept_formulas.append(make(index))
                kept_rows.append(index)
        if not kept_rows:
            return
        rows = tables[kept_rows]
        old = by_size.get(size, ([], np.zeros((0, trie.size, width), dtype=bool), np.zeros(0, dtype=bool)))
        by_size[size] = (old[0] + kept_formulas, np.concatenate([old[1], rows]),
                         np.concatenate([old[2], np.full(len(kept_rows), local)]))
        if local:
            return  # at the readout a temporal-free formula is a MOD predicate: the wrapper supplies it
        for residue in range(period):
            if residue in solved:
                continue
            mask = residue_of == residue
            matches = np.flatnonzero((rows[:, mask, -1] == target[None, mask]).all(axis=1))
            for index in matches.tolist():
                candidates += 1
                formula = kept_formulas[index]
                whole = And(readout_mod[residue], formula) if period > 1 else formula
                if equivalent(ltl_to_dfa_compositional(whole, alphabet), residue_dfas[residue]).equivalent:
                    solved[residue] = formula
                    break

    positions = trie.length + 1
    for formula, table in _local_predicates(alphabet, period, started + options.time_limit / 4):
        # value at (u, c) = table[c, position of u's next symbol mod period]
        full = table[:, positions % period].T
        admit(1, lambda _row, formula=formula: formula, full[None], True)
    size, timed_out = 1, False
    while len(solved) < period and size < options.max_size:
        if time.perf_counter() > deadline:
            timed_out = True
            break
        size += 1
        children, child_tables, _ = by_size.get(size - 1, ([], None, None))
        if children:
            for build, transform in ((Past, lambda t: past(t, False)), (Historically, lambda t: past(t, True)),
                                     (Not, lambda t: ~t)):
                admit(size, lambda row, build=build: build(children[row]), transform(child_tables), False)
        for left_size in range(1, (size - 1) // 2 + 1):
            right_size = size - 1 - left_size
            lefts, left_tables, left_local = by_size.get(left_size, ([], None, None))
            rights, right_tables, right_local = by_size.get(right_size, ([], None, None))
            if not lefts or not rights:
                continue
            for index, left in enumerate(lefts):
                if len(solved) == period or time.perf_counter() > deadline:
                    break
                start = index + 1 if left_size == right_size else 0
                chosen = np.arange(start, len(rights))
                if left_local[index]:
                    chosen = chosen[~right_local[chosen]]  # local ∘ local is local: already enumerated
                if not chosen.size:
                    continue
                partners, partner_tables = [rights[i] for i in chosen.tolist()], right_tables[chosen]
                table = left_tables[index][None]
                for build, combined in ((And, table & partner_tables), (Or, table | partner_tables),
                                        (Iff, table == partner_tables)):
                    admit(size, lambda row, build=build: build(left, partners[row]), combined, False)
        if len(solved) < period and time.perf_counter() > deadline:
            timed_out = True
            size -= 1
            break
    classes = sum(len(entry[0]) for entry in by_size.values())
    formula = None
    if len(solved) == period:
        formula = Const(False)
        for residue in range(period):
            part = solved[residue]
            if part == Const(False):
                continue
            term = readout_mod[residue] if part == Const(True) else (
                And(readout_mod[residue], part) if period > 1 else part)
            formula = term if formula == Const(False) else Or(formula, term)
    return SearchResult(formula, size, classes, candidates, time.perf_counter() - started, timed_out)


def _reachable(dfa: DFA) -> np.ndarray:
    return discovery_order(dfa.transitions, dfa.start)


def _universal(dfa: DFA) -> DFA:
    return DFA(dfa.alphabet, np.zeros((1, len(dfa.alphabet)), dtype=np.int64), 0, np.array([True]))
