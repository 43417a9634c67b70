"""Past-time LTL[P,Y,S,H,MOD] -> minimal DFA, and a direct evaluator used as the oracle.

Semantics (SPEC sections 1-2). A string w = w1...wN occupies positions 1..N; the formula is
evaluated at the readout position N+1, where no symbol is present (every atom is false there).
At a position i (1 <= i <= N+1):

  a          w_i = a                       (false at i = N+1)
  P(phi)     exists j < i: phi at j        (j ranges over positions >= 1)
  Y^k(phi)   i > k and phi at i-k
  phi S psi  exists j < i: psi at j and phi at every l with j < l < i
  H(phi)     phi at every j < i            (true at i = 1)
  MOD_m^r    i = r (mod m), i counted from 1

So MOD_2^0 at the readout holds iff N+1 is even, i.e. the string has odd length.

The automaton's state before reading position i holds exactly what is needed to evaluate every
subformula at i: for P/H/S the value each will have at i (a running "so far" bit), for Y^k the
values of its argument at i-1..i-k (a k-bit shift register, false before position 1), and
i mod lcm(moduli). The reachable states are explored by layered BFS -- one whole layer is
advanced on every symbol with vectorized boolean array code -- and the result is minimized.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from functools import lru_cache

import numpy as np

from formal_rope.automata.dfa import DFA
from formal_rope.automata.ops import DEFAULT_MAX_STATES, TooManyStatesError, check_state_limit, minimize
from formal_rope.errors import FormalRopeError
from formal_rope.lang.analysis import check_temporal_depth
from formal_rope.lang.ast import (
    FORMULA_TYPES,
    And,
    Atom,
    Const,
    Formula,
    Historically,
    Iff,
    Implies,
    Mod,
    Not,
    Or,
    Past,
    Since,
    Yesterday,
    children,
)


def _children(node: Formula) -> tuple[Formula, ...]:
    if not isinstance(node, FORMULA_TYPES):
        raise FormalRopeError(f"not an LTL formula node: {node!r}")
    return children(node)


def subformulas(formula: Formula) -> list[Formula]:
    """Distinct subformulas, children before parents (iterative: deep formulas are fine)."""
    ordered: list[Formula] = []
    done: set[Formula] = set()
    stack: list[tuple[Formula, bool]] = [(formula, False)]
    while stack:
        node, expanded = stack.pop()
        if node in done:
            continue
        if expanded:
            done.add(node)
            ordered.append(node)
            continue
        stack.append((node, True))
        for child in reversed(_children(node)):
            if child not in done:
                stack.append((child, False))
    return ordered


def _validate(nodes: list[Formula], alphabet: tuple[str, ...]) -> None:
    known = set(alphabet)
    for node in nodes:
        if isinstance(node, Atom) and node.symbol not in known:
            raise FormalRopeError(
                f"the formula mentions symbol {node.symbol!r}, which is not in the alphabet {{{', '.join(alphabet)}}}"
            )
        if isinstance(node, Mod) and node.m < 1:
            raise FormalRopeError(f"MOD_{node.m}^{node.r}: the modulus must be at least 1")
        if isinstance(node, Yesterday) and node.k < 1:
            raise FormalRopeError(f"Y^{node.k}: the offset k must be at least 1")


# ------------------------------------------------------------------------ oracle evaluator
def evaluate_ltl(formula: Formula, word: Sequence[str], position: int) -> bool:
    """Truth of `formula` at `position` (1..N+1) of `word`, straight from the definitions.

    Deliberately naive (quantifiers as loops over positions, memoized): it is the independent
    oracle the DFA construction is tested against.
    """
    word = tuple(word)
    length = len(word)
    if not 1 <= position <= length + 1:
        raise ValueError(f"position {position} outside 1..{length + 1}")

    @lru_cache(maxsize=None)
    def holds(node: Formula, i: int) -> bool:
        if isinstance(node, Atom):
            return i <= length and word[i - 1] == node.symbol
        if isinstance(node, Const):
            return node.value
        if isinstance(node, Not):
            return not holds(node.child, i)
        if isinstance(node, And):
            return holds(node.left, i) and holds(node.right, i)
        if isinstance(node, Or):
            return holds(node.left, i) or holds(node.right, i)
        if isinstance(node, Implies):
            return (not holds(node.left, i)) or holds(node.right, i)
        if isinstance(node, Iff):
            return holds(node.left, i) == holds(node.right, i)
        if isinstance(node, Past):
            return any(holds(node.child, j) for j in range(1, i))
        if isinstance(node, Historically):
            return all(holds(node.child, j) for j in range(1, i))
        if isinstance(node, Yesterday):
            return i > node.k and holds(node.child, i - node.k)
        if isinstance(node, Since):
            return any(
                holds(node.right, j) and all(holds(node.left, between) for between in range(j + 1, i))
                for j in range(1, i)
            )
        if isinstance(node, Mod):
            return i % node.m == node.r % node.m
        raise FormalRopeError(f"not an LTL formula node: {node!r}")

    return holds(formula, position)


def ltl_accepts(formula: Formula, word: Sequence[str]) -> bool:
    """Whether the formula holds at the readout position N+1 of `word`."""
    return evaluate_ltl(formula, word, len(word) + 1)


# --------------------------------------------------------------------- DFA construction
@dataclass(frozen=True)
class _Layout:
    """Where each temporal subformula keeps its memory in the state bit vector."""

    nodes: tuple[Formula, ...]
    bit_offset: dict  # temporal node -> first bit column
    n_bits: int
    period: int  # lcm of all moduli (1 without MOD)
    symbol_index: dict
    # MOD node -> its truth value, for MOD nodes evaluated once in Python instead of per state
    # (empty alphabet: only position 1 exists, and a modulus above int64 must not reach numpy).
    fixed_mods: dict = field(default_factory=dict)


def _layout(formula: Formula, alphabet: tuple[str, ...]) -> _Layout:
    nodes = subformulas(formula)
    _validate(nodes, alphabet)
    offsets: dict[Formula, int] = {}
    n_bits = 0
    period = 1
    for node in nodes:
        if isinstance(node, (Past, Historically, Since)):
            offsets[node] = n_bits
            n_bits += 1
        elif isinstance(node, Yesterday):
            offsets[node] = n_bits
            n_bits += node.k
        elif isinstance(node, Mod):
            period = math.lcm(period, node.m)
    return _Layout(tuple(nodes), offsets, n_bits, period, {s: i for i, s in enumerate(alphabet)})


def _initial_bits(layout: _Layout) -> np.ndarray:
    """Memory before position 1: nothing has happened, H is vacuously true, Y sees falses."""
    bits = np.zeros(layout.n_bits, dtype=bool)
    for node, offset in layout.bit_offset.items():
        if isinstance(node, Historically):
            bits[offset] = True
    return bits


def _step(layout: _Layout, counter: np.ndarray, bits: np.ndarray, symbols: np.ndarray):
    """Evaluate all subformulas at the current position for a batch of (state, symbol) pairs.

    counter: i mod period; bits: memory (batch, n_bits); symbols: symbol index or -1 for the
    readout (no symbol). Returns (value of the root formula, next counter, next bits).
    """
    value: dict[Formula, np.ndarray] = {}
    next_bits = np.empty_like(bits)
    for node in layout.nodes:
        if isinstance(node, Atom):
            value[node] = symbols == layout.symbol_index[node.symbol]
        elif isinstance(node, Const):
            value[node] = np.full(symbols.shape, node.value, dtype=bool)
        elif isinstance(node, Not):
            value[node] = ~value[node.child]
        elif isinstance(node, And):
            value[node] = value[node.left] & value[node.right]
        elif isinstance(node, Or):
            value[node] = value[node.left] | value[node.right]
        elif isinstance(node, Implies):
            value[node] = ~value[node.left] | value[node.right]
        elif isinstance(node, Iff):
            value[node] = value[node.left] == value[node.right]
        elif isinstance(node, Mod) and node in layout.fixed_mods:
            value[node] = np.full(symbols.shape, layout.fixed_mods[node], dtype=bool)
        elif isinstance(node, Mod):
            value[node] = counter % node.m == node.r % node.m
        elif isinstance(node, Past):
            offset = layout.bit_offset[node]
            value[node] = bits[:, offset]
            next_bits[:, offset] = bits[:, offset] | value[node.child]
        elif isinstance(node, Historically):
            offset = layout.bit_offset[node]
            value[node] = bits[:, offset]
            next_bits[:, offset] = bits[:, offset] & value[node.child]
        elif isinstance(node, Since):
            offset = layout.bit_offset[node]
            value[node] = bits[:, offset]
            # (phi S psi) at i+1  <=>  psi at i, or (phi at i and (phi S psi) at i)
            next_bits[:, offset] = value[node.right] | (value[node.left] & bits[:, offset])
        elif isinstance(node, Yesterday):
            offset, k = layout.bit_offset[node], node.k
            # register column offset+j holds the argument's value at position i-1-j
            value[node] = bits[:, offset + k - 1]
            next_bits[:, offset] = value[node.child]
            next_bits[:, offset + 1 : offset + k] = bits[:, offset : offset + k - 1]
    next_counter = (counter + 1) % layout.period
    return value[layout.nodes[-1]], next_counter, next_bits


def _state_keys(counter: np.ndarray, bits: np.ndarray) -> np.ndarray:
    """One uint8 row per state: counter bytes + packed memory bits (hashable via tobytes)."""
    counter_bytes = counter.astype("<i8").view(np.uint8).reshape(-1, 8)
    packed = np.packbits(bits, axis=1) if bits.shape[1] else np.zeros((bits.shape[0], 0), dtype=np.uint8)
    return np.concatenate([counter_bytes, packed], axis=1)


# States are stored as rows of memory bits (one per P/H/S node, k per Y^k node): cap the total,
# since Y^k(true) alone has k + 1 states of k bits each (quadratic in k).
_MAX_MEMORY_BITS = 2**31


def _check_memory(n_states: int, n_bits: int) -> None:
    if n_states * n_bits > _MAX_MEMORY_BITS:
        raise FormalRopeError(
            f"building the formula's automaton needs more than {_MAX_MEMORY_BITS:,} bits of state memory "
            f"({n_states:,} states so far × {n_bits:,} memory bits each: one per P, H or S subformula and k per "
            "Y^k); use a smaller k in Y^k or fewer temporal subformulas"
        )


# Counters are int64 (and i + 1 must not overflow); no automaton this large fits in memory anyway.
_MAX_PERIOD = 2**62


def ltl_to_dfa(formula: Formula, alphabet: Sequence[str], max_states: int = DEFAULT_MAX_STATES) -> DFA:
    """The minimal DFA of {w : formula holds at position |w|+1 of w} over `alphabet`.

    Raises TooManyStatesError when the reachable memory states exceed `max_states`.
    """
    alphabet = tuple(alphabet)
    check_temporal_depth(formula, "its automaton")  # before any exploration: the work grows with its square
    layout = _layout(formula, alphabet)
    n_symbols = len(alphabet)
    if not n_symbols:
        # Only ε exists: the one state is position 1, so each MOD is a constant there.
        fixed = {node: 1 % node.m == node.r % node.m for node in layout.nodes if isinstance(node, Mod)}
        layout = replace(layout, period=1, fixed_mods=fixed)
    # The counter i mod lcm(moduli) is part of every state and advances on every symbol, so all
    # of its values are reachable: refuse before exploring (and before int64 overflows on m).
    if layout.period > max_states:
        raise TooManyStatesError(max_states, "the formula's automaton")
    if layout.period > _MAX_PERIOD:
        raise FormalRopeError(
            f"the MOD moduli have least common multiple {layout.period:,}; the formula's automaton counts "
            f"positions modulo it, so it needs at least that many states, more than can be built whatever "
            f"--max-states says (at most {_MAX_PERIOD:,}); use smaller moduli"
        )
    _check_memory(1, layout.n_bits)
    start_counter = np.array([1 % layout.period], dtype=np.int64)
    start_bits = _initial_bits(layout)[None, :]
    index_of: dict[bytes, int] = {_state_keys(start_counter, start_bits)[0].tobytes(): 0}
    counters = [start_counter]
    memories = [start_bits]
    targets: list[np.ndarray] = []
    frontier_counter, frontier_bits = start_counter, start_bits
    while frontier_counter.size and n_symbols:  # no symbol: only the start state exists
        batch_counter = np.repeat(frontier_counter, n_symbols)
        batch_bits = np.repeat(frontier_bits, n_symbols, axis=0)
        batch_symbols = np.tile(np.arange(n_symbols, dtype=np.int64), frontier_counter.size)
        _, next_counter, next_bits = _step(layout, batch_counter, batch_bits, batch_symbols)
        keys = _state_keys(next_counter, next_bits)
        # Rows compared as opaque bytes: np.unique(axis=0) builds a structured dtype of one field per
        # byte, whose cost per call grows with the row width (quadratic work for a Y^k of large k).
        row_bytes = np.ascontiguousarray(keys).view(np.dtype((np.void, keys.shape[1]))).ravel()
        _, first, inverse = np.unique(row_bytes, return_index=True, return_inverse=True)
        unique_keys = keys[first]
        inverse = np.asarray(inverse).reshape(-1)
        # Number new states in the order they first appear (canonical BFS order).
        unique_index = np.empty(unique_keys.shape[0], dtype=np.int64)
        fresh = []
        for slot in np.argsort(first, kind="stable"):
            key = unique_keys[slot].tobytes()
            known = index_of.get(key)
            if known is None:
                known = len(index_of)
                index_of[key] = known
                fresh.append(first[slot])
            unique_index[slot] = known
        check_state_limit(len(index_of), max_states, "the formula's automaton")
        _check_memory(len(index_of), layout.n_bits)
        targets.append(unique_index[inverse].reshape(-1, n_symbols))
        fresh = np.asarray(fresh, dtype=np.int64)
        frontier_counter, frontier_bits = next_counter[fresh], next_bits[fresh]
        if fresh.size:
            counters.append(frontier_counter)
            memories.append(frontier_bits)
    all_counter = np.concatenate(counters)
    all_bits = np.concatenate(memories)
    readout = np.full(all_counter.shape, -1, dtype=np.int64)
    accepting, _, _ = _step(layout, all_counter, all_bits, readout)
    transitions = np.concatenate(targets) if n_symbols else np.zeros((all_counter.size, 0), dtype=np.int64)
    return minimize(DFA(alphabet, transitions, 0, accepting))
