"""Shared helpers for the sampling tests (no tests here; named test_* to stay in the sampling test
files): hand-built DFAs with equivalent Python regexes (an oracle independent of the automata
stage), brute-force enumeration, and a chi-square p-value."""

from __future__ import annotations

import itertools
import re
from dataclasses import dataclass

import mpmath
import numpy as np

from formal_rope.automata.dfa import DFA


@dataclass(frozen=True)
class Case:
    name: str
    dfa: DFA
    pattern: str  # Python regex equivalent to the DFA (checked with re.fullmatch)

    def accepts(self, text: str) -> bool:
        return re.fullmatch(self.pattern, text) is not None

    @property
    def alphabet(self) -> tuple[str, ...]:
        return self.dfa.alphabet


def _dfa(alphabet, transitions, accepting, start=0) -> DFA:
    return DFA(tuple(alphabet), np.array(transitions), start, np.array(accepting))


CASES = {
    # (ab)*: 0 start/accept, 1 after a, 2 sink.
    "ab_star": Case("ab_star", _dfa("ab", [[1, 2], [2, 0], [2, 2]], [True, False, False]), "(ab)*"),
    # Σ*abΣ* over {a,b,c}: 0 nothing pending, 1 just read a, 2 found ab.
    "contains_ab": Case(
        "contains_ab", _dfa("abc", [[1, 0, 0], [1, 2, 0], [2, 2, 2]], [False, False, True]), "[abc]*ab[abc]*"
    ),
    "aa_star": Case("aa_star", _dfa("a", [[1], [0]], [True, False]), "(aa)*"),
    "parity": Case("parity", _dfa("01", [[0, 1], [1, 0]], [True, False]), "(0*10*1)*0*"),
    "ends_a": Case("ends_a", _dfa("ab", [[1, 0], [1, 0]], [False, True]), "[ab]*a"),
    # an a, later a b, and no c after that b: completion counts differ widely between states.
    "skewed": Case(
        "skewed",
        _dfa("abc", [[1, 0, 0], [1, 2, 1], [2, 2, 3], [3, 3, 3]], [False, False, True, False]),
        "[bc]*a[ac]*b[ab]*",
    ),
}


def all_strings(alphabet, length: int) -> list[str]:
    return ["".join(word) for word in itertools.product(alphabet, repeat=length)]


def class_strings(case: Case, length: int, accepted: bool) -> list[str]:
    return [word for word in all_strings(case.alphabet, length) if case.accepts(word) == accepted]


def near_miss_multiplicities(case: Case, length: int) -> dict[str, int]:
    """For each string outside L: the number of (w in L, position, other symbol) triples producing it."""
    counts: dict[str, int] = {}
    for word in class_strings(case, length, True):
        for position in range(length):
            for symbol in case.alphabet:
                if symbol == word[position]:
                    continue
                edited = word[:position] + symbol + word[position + 1 :]
                if not case.accepts(edited):
                    counts[edited] = counts.get(edited, 0) + 1
    return counts


def chi_square_p_value(observed: np.ndarray, expected: np.ndarray) -> float:
    """Upper-tail p-value of Pearson's statistic with len-1 degrees of freedom.

    scipy is not installed: the chi-square survival function is the regularised upper incomplete
    gamma function Q(k/2, x/2), which mpmath evaluates to full precision."""
    observed = np.asarray(observed, dtype=float)
    expected = np.asarray(expected, dtype=float)
    statistic = float(((observed - expected) ** 2 / expected).sum())
    dof = len(observed) - 1
    return float(mpmath.gammainc(dof / 2, statistic / 2, mpmath.inf, regularized=True))
