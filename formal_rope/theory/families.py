"""The theory's own counterexamples: string families that must defeat a run the theory says cannot
be right at every length.

A fixed-precision NoPE transformer recognises only LTL[P] languages (Li & Cotterell 2025), whose
minimal DFAs are partially ordered (PODFA). A language outside LTL[P] has two distinct states q ≠ p
of its minimal DFA that reach each other, q·s = p and p·t = q (the decider's witness,
`classes.podfa.block_cycle`), an access word u (start·u = q) and a separating suffix v (exactly one
of q·v, p·v accepts). Then for every m

    u·(st)^m·s·v  (ends in p·v)   and   u·(st)^m·v  (ends in q·v)

carry different labels, while no LTL[P] formula (its language R-trivial) separates them once m is
large: a NoPE model misclassifies one of each such pair from some m on. For periodic encodings with
periods of lcm K (RoPE_P, SiPE_P, and hybrids of NoPE and periodic layers: LTL[P,MOD_K]) the same
holds in the K-automaton A_K: the witness is a pair of states joined by words whose lengths are
multiples of K (`block_cycle(dfa, K)`), so every symbol of v sits at the same residue mod K in both
strings of a pair and MOD_K predicates cannot tell them apart either.

`witness_family` derives the family from a DFA and K; `family_strings` lists its strings up to a
length with their DFA labels. `formal_rope.runs.blind_spots` tests a trained run on them.
"""

from __future__ import annotations

import math
from collections import deque
from dataclasses import dataclass

import numpy as np

from formal_rope.automata.dfa import DFA, require_dfa
from formal_rope.automata.membership import accepts_encoded
from formal_rope.automata.ops import minimize
from formal_rope.classes.classify import format_word
from formal_rope.classes.podfa import access_word, block_cycle


@dataclass(frozen=True)
class WitnessFamily:
    """u·(st)^m·s·v against u·(st)^m·v (symbol indices of `alphabet`), from the states q (after u)
    and p (after u·s) of the minimal DFA; `modulus` K: |s| and |t| are multiples of it."""

    alphabet: tuple[str, ...]
    modulus: int
    states: tuple[int, int]
    prefix: tuple[int, ...]
    forward: tuple[int, ...]
    backward: tuple[int, ...]
    suffix: tuple[int, ...]

    def word(self, symbols) -> str:
        return format_word(list(symbols), self.alphabet) or "ε"

    def describe(self) -> str:
        """'aaaaa(baa)^m·b·abab vs aaaaa(baa)^m·abab' (ε for an empty word)."""
        u, s, t, v = (format_word(list(w), self.alphabet) for w in (self.prefix, self.forward, self.backward,
                                                                      self.suffix))
        cycle = f"({s}{t})^m"
        first = "·".join(part for part in (u + cycle, s, v) if part)
        second = "·".join(part for part in (u + cycle, v) if part)
        return f"{first} vs {second}"

    def pair(self, m: int) -> tuple[tuple[int, ...], tuple[int, ...]]:
        """(u·(st)^m·s·v, u·(st)^m·v)."""
        cycle = (self.forward + self.backward) * m
        return self.prefix + cycle + self.forward + self.suffix, self.prefix + cycle + self.suffix


def separating_suffix(dfa: DFA, first: int, second: int) -> tuple[int, ...]:
    """The shortlex-least word v with exactly one of first·v, second·v accepting (ValueError when
    the states are equivalent: never in a minimal DFA)."""
    start = (int(first), int(second))
    previous: dict[tuple[int, int], tuple[tuple[int, int], int] | None] = {start: None}
    queue = deque([start])
    while queue:
        pair = queue.popleft()
        if dfa.accepting[pair[0]] != dfa.accepting[pair[1]]:
            word = []
            while previous[pair] is not None:
                pair, symbol = previous[pair]
                word.append(symbol)
            return tuple(reversed(word))
        for symbol in range(dfa.n_symbols):
            successor = (int(dfa.transitions[pair[0], symbol]), int(dfa.transitions[pair[1], symbol]))
            if successor not in previous:
                previous[successor] = (pair, symbol)
                queue.append(successor)
    raise ValueError(f"states {first} and {second} are equivalent")


def witness_family(dfa: DFA, modulus: int = 1) -> WitnessFamily | None:
    """The family of the language of `dfa` against models inside LTL[P, MOD_modulus] (modulus 1:
    LTL[P], NoPE), or None when the language is inside (its K-automaton is a PODFA)."""
    require_dfa(dfa, "witness_family", "dfa")
    if modulus < 1:
        raise ValueError("the modulus must be at least 1")
    minimal = minimize(dfa)
    cycle = block_cycle(minimal, int(modulus))
    if cycle is None:
        return None
    q, p = cycle.states
    return WitnessFamily(tuple(minimal.alphabet), int(modulus), (q, p), access_word(minimal, q), cycle.forward,
                         cycle.backward, separating_suffix(minimal, p, q))


def family_modulus(periods) -> int:
    """The K of a run's family: lcm of its periods (None or empty: 1, NoPE)."""
    return math.lcm(*[int(p) for p in periods]) if periods else 1


@dataclass(frozen=True, eq=False)
class FamilyStrings:
    """A family's strings up to a length: per string its m, its symbols and its DFA label."""

    family: WitnessFamily
    m: np.ndarray
    strings: tuple[tuple[int, ...], ...]
    labels: np.ndarray

    @property
    def lengths(self) -> np.ndarray:
        return np.array([len(word) for word in self.strings], dtype=np.int64)


def family_strings(family: WitnessFamily, dfa: DFA, max_length: int) -> FamilyStrings:
    """Both strings of every pair m = 0, 1, ... whose strings are no longer than `max_length`,
    labelled by `dfa` (the two of a pair always differ), pair by pair."""
    strings, ms = [], []
    m = 0
    while True:
        first, second = family.pair(m)
        if max(len(first), len(second)) > max_length:
            break
        strings += [first, second]
        ms += [m, m]
        m += 1
    labels = np.zeros(len(strings), dtype=bool)
    for length in sorted({len(word) for word in strings}):
        rows = [index for index, word in enumerate(strings) if len(word) == length]
        symbols = np.array([strings[index] for index in rows], dtype=np.int64).reshape(len(rows), length)
        labels[rows] = accepts_encoded(dfa, symbols, np.full(len(rows), length))
    return FamilyStrings(family, np.array(ms, dtype=np.int64), tuple(strings), labels)
