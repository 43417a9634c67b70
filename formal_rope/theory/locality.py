"""Locally testable languages, decided on the syntactic semigroup: a sufficient test for LTL[P,Y].

A language is locally testable (LT: membership depends only on the prefix and suffix of length
k − 1 and the set of factors of length k, for some k) iff its syntactic semigroup S = η(Σ⁺) is
locally idempotent and locally commutative: for every idempotent e of S, the monoid eSe is
idempotent and commutative (Brzozowski & Simon 1973; McNaughton 1974).

Every LT language is in LTL[P,Y]: "u is a factor" is P(φ_u) with φ_u = π_{u_n} ∧ Y(π_{u_n−1} ∧ Y(…))
(the core paper writes Σ*abΣ* = P(π_b ∧ Y π_a)), "u is a suffix" is Y(φ_u) read at the readout
position, "u is a prefix" anchors φ_u at position 1 (¬Y⊤), and LT is their Boolean closure. So
`ltl_p_y_of` returns True for LT and LTL[P] languages, False for languages that are not star-free
(LTL[P,Y] ⊆ LTL[S] = star-free), and None otherwise: a star-free language outside LT and LTL[P]
may or may not be in LTL[P,Y] (threshold counts of factors, for one, are in it and are not LT), and
nothing here decides that.
"""

from __future__ import annotations

import numpy as np

from formal_rope.automata.dfa import DFA
from formal_rope.automata.ops import minimize
from formal_rope.classes.monoid import DEFAULT_MAX_MONOID_SIZE, TransitionMonoid, transition_monoid


def semigroup_elements(monoid: TransitionMonoid) -> np.ndarray:
    """Indices of η(Σ⁺): every element x·a (the identity only when a non-empty word acts as it)."""
    return np.unique(monoid.right.reshape(-1))


def is_locally_testable(dfa: DFA, max_monoid_size: int = DEFAULT_MAX_MONOID_SIZE) -> bool:
    """Whether the language of `dfa` (any complete DFA) is locally testable."""
    monoid = transition_monoid(minimize(dfa), max_monoid_size)
    maps = monoid.elements  # (size, n_states): maps[x, q] = q·x
    semigroup = maps[semigroup_elements(monoid)]
    # x·x = x as maps: applying x twice equals applying it once.
    idempotents = semigroup[np.all(np.take_along_axis(semigroup, semigroup, axis=1) == semigroup, axis=1)]
    for e in idempotents:
        # e·s·e for every s (left to right: apply e, then s, then e), deduplicated.
        local = np.unique(e[semigroup[:, e]], axis=0)  # (|eSe|, n)
        twice = np.take_along_axis(local, local, axis=1)
        if not np.array_equal(twice, local):
            return False  # some ese is not idempotent
        if not maps_commute(local):
            return False
    return True


def maps_commute(maps: np.ndarray, budget: int = 1 << 22) -> bool:
    """Whether the state maps (m, n) commute pairwise (t then u = u then t), in row chunks of at most
    `budget` entries, so that a large non-LT semigroup cannot ask for m² · n memory at once."""
    count, n_states = maps.shape
    chunk = max(1, budget // max(1, count * n_states))
    for start in range(0, count, chunk):
        rows = maps[start:start + chunk]
        shape = (len(rows), count, n_states)
        # rows_then[i, j, q] = maps[j][rows[i][q]]: row i applied first, then map j; then_rows the reverse.
        rows_then = np.take_along_axis(np.broadcast_to(maps[None, :, :], shape),
                                       np.broadcast_to(rows[:, None, :], shape), axis=2)
        then_rows = np.take_along_axis(np.broadcast_to(rows[:, None, :], shape),
                                       np.broadcast_to(maps[None, :, :], shape), axis=2)
        if not np.array_equal(rows_then, then_rows):
            return False
    return True


def ltl_p_y_of(dfa: DFA, classification) -> bool | None:
    """LTL[P,Y] membership as far as it is known: True for LTL[P] or locally testable languages,
    False for languages that are not star-free, None otherwise."""
    if classification.ltl_p:
        return True
    if not classification.star_free:
        return False
    return True if is_locally_testable(dfa) else None
