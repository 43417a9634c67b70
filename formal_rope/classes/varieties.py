"""Monoid criteria: R, L, J-triviality, aperiodicity, and QR via the stable semigroup.

Length sets. Let η: Σ* → M be the syntactic morphism and S_k = η(Σ^k) (S_0 = {1}). Since
S_{k+1} = S_k·η(Σ), each set determines the next, so the sequence is eventually periodic: there
are least p ≥ 0 and π ≥ 1 with S_p = S_{p+π}, and then S_k = S_{k+π} for all k ≥ p. Put
k0 = π·max(1, ⌈p/π⌉), the least positive multiple of π that is ≥ p. For every multiple k of k0,
S_k = S_{k0} (same residue mod π, both ≥ p); in particular S_{k0}·S_{k0} = S_{2k0} = S_{k0}, so
S_{k0} is a semigroup: the *stable semigroup* of L.

The k-automaton. The transitions of A_k (Def. A.8) are the maps of the k-blocks, i.e. S_k, so
its transition monoid is T_k¹ with T_k = ⟨S_k⟩ = η((Σ^k)⁺), acting faithfully on the states Q
of the minimal DFA. For any complete automaton whose monoid acts faithfully on all of Q:
  * partially ordered ⇒ R-trivial: if x = ya and y = xb then q·x and q·y reach each other for
    every q, so they are equal, so x = y;
  * R-trivial ⇒ partially ordered: if q·u = p and p·v = q with p ≠ q, let e = (uv)^ω; then
    e R eu (eu·v(uv)^(ω-1) = e), so e = eu and p = q·u = q·eu = q·e = q, a contradiction.
Hence A_k is a PODFA ⇔ T_k is R-trivial (Lemma B.1's "transition monoid of A_k in R").

Decision bound. Both properties pass to multiples of k: T_{mk} ⊆ T_k and R-triviality passes to
subsemigroups (x = ya, y = xb inside T_{mk} is the same inside T_k). If A_k is a PODFA for some
k, then so is A_{k·k0}, and T_{k·k0} = ⟨S_{k·k0}⟩ = ⟨S_{k0}⟩ = S_{k0} = T_{k0}. Therefore
    L ∈ LTL[P,MOD]  ⇔  A_{k0} is a PODFA  ⇔  the stable semigroup S_{k0} is R-trivial (QR),
and the least witness k lies in 1..k0. No guess is involved: p, π are found exactly.

R-triviality of T_k, monoid side: y ∈ x·T_k¹ iff y = x·w for a word w with |w| ≡ 0 (mod k),
i.e. (y, 0) is reachable from (x, 0) in the product M × ℤ/k of the right Cayley graph with a
length counter. T_k¹ is the set of layer-0 nodes reachable from (1, 0); T_k is R-trivial iff no
two of them share a strongly connected component.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from formal_rope.classes.monoid import (
    TransitionMonoid,
    reachable_from,
    shortest_path_letters,
    strongly_connected_labels,
)
from formal_rope.errors import FormalRopeError

DEFAULT_MAX_STABILITY_STEPS = 100_000


@dataclass(frozen=True, eq=False)
class LengthSets:
    """S_k = η(Σ^k) for k = 0 … index + period, with one word of length exactly k per element.

    levels[k]   sorted element ids of S_k
    parents[k]  for each element of levels[k], its position in levels[k-1] (k ≥ 1)
    letters[k]  the last letter of its length-k word
    """

    index: int
    period: int
    levels: tuple[np.ndarray, ...]
    parents: tuple[np.ndarray, ...]
    letters: tuple[np.ndarray, ...]

    @property
    def bound(self) -> int:
        """k0 = the least positive multiple of the period that is ≥ the index."""
        blocks = max(1, -(-self.index // self.period))
        return self.period * blocks

    def elements(self, k: int) -> np.ndarray:
        """Sorted element ids of S_k, for any k ≥ 0."""
        if k >= len(self.levels):
            k = self.index + (k - self.index) % self.period
        return self.levels[k]

    @property
    def stable_semigroup(self) -> np.ndarray:
        return self.elements(self.bound)

    def block_word(self, k: int, element: int) -> tuple[int, ...]:
        """A word of length exactly k (k ≤ index + period) that evaluates to `element` ∈ S_k."""
        position = int(np.searchsorted(self.levels[k], element))
        if position >= self.levels[k].size or self.levels[k][position] != element:
            raise ValueError(f"element {element} is not in S_{k}")
        word: list[int] = []
        for level in range(k, 0, -1):
            word.append(int(self.letters[level][position]))
            position = int(self.parents[level][position])
        return tuple(reversed(word))


def length_sets(monoid: TransitionMonoid, max_steps: int = DEFAULT_MAX_STABILITY_STEPS) -> LengthSets:
    """Iterate S_{k+1} = S_k·Σ until the first repeat S_p = S_{p+π}."""
    levels = [np.zeros(1, dtype=np.int64)]
    parents = [np.zeros(0, dtype=np.int64)]
    letters = [np.zeros(0, dtype=np.int64)]
    first_seen = {levels[0].tobytes(): 0}
    n_symbols = monoid.right.shape[1]
    stride = max(n_symbols, 1)  # no symbols: S_k = ∅ for k ≥ 1, a repeat at k = 2
    for k in range(1, max_steps + 1):
        candidates = monoid.right[levels[-1]].ravel()
        level, first = np.unique(candidates, return_index=True)
        levels.append(level)
        parents.append(first // stride)
        letters.append(first % stride)
        key = level.tobytes()
        if key in first_seen:
            index = first_seen[key]
            return LengthSets(index, k - index, tuple(levels), tuple(parents), tuple(letters))
        first_seen[key] = k
    raise FormalRopeError(
        f"the sets of word-length classes η(Σ^k) did not become periodic within {max_steps} steps; "
        "raise the stability step cap to classify this language"
    )


@dataclass(frozen=True)
class ElementCycle:
    """Two distinct R-equivalent elements x, y of T_k = η((Σ^k)⁺)¹: x·forward = y, y·backward = x."""

    k: int
    elements: tuple[int, int]
    forward: tuple[int, ...]
    backward: tuple[int, ...]


def block_semigroup_r_cycle(monoid: TransitionMonoid, k: int) -> ElementCycle | None:
    """None when T_k = ⟨η(Σ^k)⟩ is R-trivial, else two distinct R-equivalent elements of T_k¹.

    The connecting words have lengths that are multiples of k.
    """
    if k < 1:
        raise ValueError("block length k must be at least 1")
    size = monoid.size
    layers = np.tile(np.arange(k), size)
    table = monoid.right[np.repeat(np.arange(size), k)] * k + ((layers + 1) % k)[:, None]
    labels = strongly_connected_labels(size * k, [table])
    members = np.flatnonzero(reachable_from(table, 0)[::k])  # layer-0 nodes are x·k
    member_labels = labels[members * k]
    unique_labels, counts = np.unique(member_labels, return_counts=True)
    if np.all(counts == 1):
        return None
    shared = unique_labels[counts > 1]
    in_shared = members[np.isin(member_labels, shared)]
    first = int(in_shared[0])
    second = int(in_shared[(labels[in_shared * k] == labels[first * k]) & (in_shared != first)][0])
    forward = shortest_path_letters(table, first * k, second * k)
    backward = shortest_path_letters(table, second * k, first * k)
    return ElementCycle(k, (first, second), forward, backward)


def is_block_semigroup_r_trivial(monoid: TransitionMonoid, k: int) -> bool:
    """Whether T_k = ⟨η(Σ^k)⟩ is R-trivial (equivalently A_k is a PODFA)."""
    return block_semigroup_r_cycle(monoid, k) is None


def least_r_trivial_block_length(monoid: TransitionMonoid, sets: LengthSets) -> int | None:
    """The least k ≥ 1 with ⟨η(Σ^k)⟩ R-trivial, or None; searches 1..k0 (complete, see module doc)."""
    if not is_block_semigroup_r_trivial(monoid, sets.bound):
        return None
    for k in range(1, sets.bound + 1):
        if is_block_semigroup_r_trivial(monoid, k):
            return k
    raise AssertionError("unreachable: k0 itself is R-trivial")
