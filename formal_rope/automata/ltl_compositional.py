"""Past-time LTL → minimal DFA one subformula at a time (a second, independent construction).

`ltl_to_dfa` explores the memory of the whole formula at once: one bit per P/H/S subformula, so
a formula whose P bits record *which* states a run visited (the automaton construction of
`formal_rope.compiler.automaton_to_formula`) has one memory state per path of the automaton,
millions for a 600-state PODFA. Here every distinct subformula φ gets its own minimal machine,
built from its children's machines and minimized before its parents use it, so sizes stay those
of the subformulas' own languages.

The machine of φ is a complete DFA over Σ reading w1..w(i-1) plus a table `value[state, c]`
saying whether φ holds at position i when the symbol there is c (c ∈ Σ, or the last column:
the readout position N+1, which holds no symbol; SPEC §1):

  atom a        one state, value[·, c] = (c = a)
  MOD_m^r       i − 1 mod m, value = (i ≡ r mod m)
  ¬, ∧, ∨, →, ↔  the product of the children's machines, value combined
  P(ψ)          (ψ's state, "ψ held at some j < i"); value = that flag (H φ = ¬P¬φ)
  Y^k(ψ)        (ψ's state, ψ's values at i−1..i−k); value = the oldest one
  φ S ψ         (both states, the flag); flag' = ψ(i) ∨ (φ(i) ∧ flag)

A machine is minimized with the value rows as the initial partition (Moore equivalence with
outputs). The formula's DFA is the root machine with accepting = the readout column.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

import numpy as np

from formal_rope.automata.dfa import DFA
from formal_rope.automata.ops import DEFAULT_MAX_STATES, check_state_limit, minimize, moore_round
from formal_rope.errors import FormalRopeError
from formal_rope.lang.ast import (
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
)
from formal_rope.lang.metrics import distinct_subformulas


@dataclass(frozen=True, eq=False)
class Machine:
    """transitions (n, |Σ|), start state 0, value (n, |Σ| + 1) (last column: the readout)."""

    transitions: np.ndarray
    value: np.ndarray

    @property
    def n_states(self) -> int:
        return int(self.transitions.shape[0])


def _explore(start: int, step) -> tuple[np.ndarray, np.ndarray]:
    """Reachable integer codes from `start`, where step(codes) -> (len(codes), |Σ|) successor codes.

    Returns (codes in BFS order, transition table over their indices). Whole layers advance at
    once (vectorized); the code → index lookup is a sorted array searched per layer.
    """
    codes = np.array([start], dtype=np.int64)
    frontier = codes
    successors_of: list[np.ndarray] = []
    while frontier.size:
        successors = step(frontier)
        successors_of.append(successors)
        flat = successors.ravel()
        _, first = np.unique(flat, return_index=True)
        candidates = flat[np.sort(first)]
        known = np.sort(codes)
        position = np.searchsorted(known, candidates)
        found = (position < known.size) & (known[np.minimum(position, known.size - 1)] == candidates)
        frontier = candidates[~found]
        codes = np.concatenate([codes, frontier])
    order = np.argsort(codes, kind="stable")
    table = np.concatenate(successors_of) if successors_of else np.zeros((1, 0), dtype=np.int64)
    index = order[np.searchsorted(codes[order], table)]
    return codes, index.reshape(table.shape)


def _minimized(transitions: np.ndarray, value: np.ndarray) -> Machine:
    _, initial = np.unique(value, axis=0, return_inverse=True)
    initial = np.asarray(initial, dtype=np.int64).reshape(-1)
    # Moore rounds (vectorized) rather than Hopcroft's Python loop: these machines are small and
    # shallow (a round per level of the run's partial order), and there are thousands of them.
    block, n_blocks = initial, int(initial.max()) + 1
    while transitions.shape[1]:
        block = moore_round(block, transitions)
        if int(block.max()) + 1 == n_blocks:
            break
        n_blocks = int(block.max()) + 1
    # Renumber the blocks in BFS order from the start block (0 is the start state).
    _, representative = np.unique(block, return_index=True)
    quotient = block[transitions[representative]]
    order = [int(block[0])]
    seen = {order[0]}
    cursor = 0
    while cursor < len(order):
        for successor in quotient[order[cursor]].tolist():
            if successor not in seen:
                seen.add(successor)
                order.append(successor)
        cursor += 1
    renumber = np.full(quotient.shape[0], -1, dtype=np.int64)
    renumber[order] = np.arange(len(order))
    kept = np.asarray(order, dtype=np.int64)
    return Machine(renumber[quotient[kept]], value[representative[kept]])


def _product(first: Machine, second: Machine, combine) -> Machine:
    width = second.n_states
    codes, table = _explore(0, lambda c: first.transitions[c // width] * width + second.transitions[c % width])
    value = combine(first.value[codes // width], second.value[codes % width])
    if codes.size <= max(first.n_states, second.n_states):
        # No bigger than a factor (the usual case: both follow the same run), so minimizing
        # would cost more than it saves; the parents' products stay just as small.
        return Machine(table, value)
    return _minimized(table, value)


def _single(value_row: np.ndarray, n_symbols: int) -> Machine:
    return Machine(np.zeros((1, n_symbols), dtype=np.int64), value_row[None, :].astype(bool))


def _past(child: Machine, holds_on_hit: bool) -> Machine:
    """P (holds_on_hit=True: the flag is 'child held before') or H (the flag is 'child held at every j < i')."""
    n_symbols = child.transitions.shape[1]
    now = child.value[:, :n_symbols]

    def step(codes):  # code = 2·state + flag
        state, flag = codes // 2, (codes % 2).astype(bool)[:, None]
        new_flag = (flag | now[state]) if holds_on_hit else (flag & now[state])
        return child.transitions[state] * 2 + new_flag

    codes, transitions = _explore(int(not holds_on_hit), step)
    flags = (codes % 2).astype(bool)
    return _minimized(transitions, np.repeat(flags[:, None], n_symbols + 1, axis=1))


def _yesterday(child: Machine, k: int) -> Machine:
    n_symbols = child.transitions.shape[1]
    now = child.value[:, :n_symbols].astype(np.int64)
    if k > 40:
        raise FormalRopeError(f"Y^{k}: the subformula construction keeps a {k}-bit register in an integer (k <= 40)")
    span = 1 << k

    def step(codes):  # code = state·2^k + register (bit 0: the value at i − 1)
        state, register = codes // span, codes % span
        shifted = ((register << 1) % span)[:, None] | now[state]
        return child.transitions[state] * span + shifted

    codes, transitions = _explore(0, step)
    oldest = ((codes % span) >> (k - 1)) & 1
    return _minimized(transitions, np.repeat(oldest.astype(bool)[:, None], n_symbols + 1, axis=1))


def _since(left: Machine, right: Machine) -> Machine:
    n_symbols = left.transitions.shape[1]
    width = right.n_states
    left_now, right_now = left.value[:, :n_symbols], right.value[:, :n_symbols]

    def step(codes):  # code = 2·(a·width + b) + flag
        pair, flag = codes // 2, (codes % 2).astype(bool)[:, None]
        a, b = pair // width, pair % width
        new_flag = right_now[b] | (left_now[a] & flag)
        return (left.transitions[a] * width + right.transitions[b]) * 2 + new_flag

    codes, transitions = _explore(0, step)
    flags = (codes % 2).astype(bool)
    return _minimized(transitions, np.repeat(flags[:, None], n_symbols + 1, axis=1))


def _mod(m: int, r: int, n_symbols: int) -> Machine:
    transitions = np.repeat(((np.arange(m) + 1) % m)[:, None], n_symbols, axis=1)
    holds = ((np.arange(m) + 1) % m) == (r % m)  # state s = i − 1 mod m
    return _minimized(transitions, np.repeat(holds[:, None], n_symbols + 1, axis=1))


_COMBINE = {And: np.logical_and, Or: np.logical_or, Implies: lambda a, b: ~a | b, Iff: np.equal}


def subformula_machines(formula: Formula, alphabet: Sequence[str],
                        max_states: int = DEFAULT_MAX_STATES) -> dict[Formula, Machine]:
    """The minimal machine of every distinct subformula (see the module docstring)."""
    alphabet = tuple(alphabet)
    n_symbols = len(alphabet)
    machines: dict[Formula, Machine] = {}
    for node in distinct_subformulas(formula):
        kind = type(node)
        if kind is Atom:
            if node.symbol not in alphabet:
                raise FormalRopeError(f"the formula mentions symbol {node.symbol!r}, which is not in the alphabet "
                                      f"{{{', '.join(alphabet)}}}")
            row = np.zeros(n_symbols + 1, dtype=bool)
            row[alphabet.index(node.symbol)] = True
            machine = _single(row, n_symbols)
        elif kind is Const:
            machine = _single(np.full(n_symbols + 1, bool(node.value)), n_symbols)
        elif kind is Mod:
            if node.m < 1:
                raise FormalRopeError(f"MOD_{node.m}^{node.r}: the modulus must be at least 1")
            machine = _mod(node.m, node.r, n_symbols)
        elif kind is Not:
            child = machines[node.child]
            machine = Machine(child.transitions, ~child.value)
        elif kind in _COMBINE:
            machine = _product(machines[node.left], machines[node.right], _COMBINE[kind])
        elif kind is Past:
            machine = _past(machines[node.child], True)
        elif kind is Historically:
            machine = _past(machines[node.child], False)
        elif kind is Yesterday:
            if node.k < 1:
                raise FormalRopeError(f"Y^{node.k}: the offset k must be at least 1")
            machine = _yesterday(machines[node.child], node.k)
        elif kind is Since:
            machine = _since(machines[node.left], machines[node.right])
        else:
            raise FormalRopeError(f"not an LTL formula node: {node!r}")
        check_state_limit(machine.n_states, max_states, "a subformula's automaton")
        machines[node] = machine
    return machines


def ltl_to_dfa_compositional(formula: Formula, alphabet: Sequence[str],
                             max_states: int = DEFAULT_MAX_STATES) -> DFA:
    """The minimal DFA of {w : formula holds at position |w|+1}, built subformula by subformula."""
    alphabet = tuple(alphabet)
    root = subformula_machines(formula, alphabet, max_states)[formula]
    return minimize(DFA(alphabet, root.transitions, 0, root.value[:, -1]))
