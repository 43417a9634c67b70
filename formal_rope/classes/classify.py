"""Classify a regular language: LTL[P], LTL[P,MOD], star-free, R/L/J-trivial, with witnesses.

Every verdict is computed from the minimal complete DFA A of the language and its transition
monoid M (= the syntactic monoid, identity included). The paper's automaton criteria (PODFA,
PODFA_k) are decided on A alone (`formal_rope.classes.podfa`), the monoid criteria (R-trivial,
QR) on M alone (`formal_rope.classes.varieties`); `classify` computes both and refuses to answer
if they ever disagree, since each is a theorem-backed characterization of the same class.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from formal_rope.automata.dfa import DFA, require_dfa
from formal_rope.automata.membership import format_word as symbols_text
from formal_rope.automata.ops import minimize
from formal_rope.classes.monoid import (
    DEFAULT_MAX_MONOID_SIZE,
    TransitionMonoid,
    connecting_words,
    first_non_aperiodic,
    h_classes,
    index_and_period,
    is_trivial,
    j_classes,
    l_classes,
    nontrivial_pair,
    r_classes,
    strongly_connected_labels,
    transition_monoid,
)
from formal_rope.classes.podfa import access_word, block_cycle, cycle_structure, is_podfa
from formal_rope.classes.varieties import (
    DEFAULT_MAX_STABILITY_STEPS,
    LengthSets,
    is_block_semigroup_r_trivial,
    length_sets,
)


@dataclass(frozen=True)
class Classification:
    """Verdicts for one regular language.

    states            size of the minimal complete DFA (a rejecting sink counts as a state)
    monoid_size       size of the syntactic monoid (transition monoid of the minimal DFA, identity included)
    ltl_p             LTL[P] = PFO²[<]: the minimal DFA is a PODFA (⇔ r_trivial)
    ltl_p_mod         LTL[P,MOD] = PFO²[<,MOD]: some k-automaton A_k is a PODFA (⇔ qr)
    mod_k             the least such k (1 when ltl_p), None when not ltl_p_mod
    qr                the stable semigroup η(Σ^k_bound) is R-trivial (monoid side of ltl_p_mod)
    star_free         aperiodic syntactic monoid (= LTL[S] = FO[<])
    r_trivial, l_trivial, j_trivial   Green-trivial syntactic monoid (j_trivial = piecewise testable)
    stability_index, stability_period  least p, π with η(Σ^p) = η(Σ^(p+π))
    k_bound           k0 = least positive multiple of π that is ≥ p; ltl_p_mod ⇔ A_k0 is a PODFA
    witness           for each failing class, a JSON-ready explanation (words as strings)
    """

    alphabet: tuple[str, ...]
    states: int
    monoid_size: int
    ltl_p: bool
    ltl_p_mod: bool
    mod_k: int | None
    qr: bool
    star_free: bool
    r_trivial: bool
    l_trivial: bool
    j_trivial: bool
    stability_index: int
    stability_period: int
    k_bound: int
    witness: dict[str, dict[str, Any]] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready values (plain ints, bools, strings, lists, dicts)."""
        return {
            "alphabet": list(self.alphabet),
            "states": self.states,
            "monoid_size": self.monoid_size,
            "ltl_p": self.ltl_p,
            "ltl_p_mod": self.ltl_p_mod,
            "mod_k": self.mod_k,
            "qr": self.qr,
            "star_free": self.star_free,
            "r_trivial": self.r_trivial,
            "l_trivial": self.l_trivial,
            "j_trivial": self.j_trivial,
            "stability_index": self.stability_index,
            "stability_period": self.stability_period,
            "k_bound": self.k_bound,
            "witness": copy.deepcopy(self.witness),
        }


def format_word(word: tuple[int, ...] | list[int], alphabet: tuple[str, ...]) -> str:
    """Symbol indices -> the text `formalrope accepts` reads: concatenated, or blank-separated when
    some symbol is longer than one character (quoted where a symbol holds a blank: 'long name')."""
    return symbols_text([alphabet[symbol] for symbol in word], alphabet)


def _shown(word: str) -> str:
    return word if word else "ε"


def classify(
    dfa: DFA,
    max_monoid_size: int = DEFAULT_MAX_MONOID_SIZE,
    max_stability_steps: int = DEFAULT_MAX_STABILITY_STEPS,
) -> Classification:
    """Classify the language of `dfa` (any complete DFA; it is minimized first).

    Decision procedure for LTL[P,MOD] (complete, see docs/classes.md and
    formal_rope.classes.varieties): compute the eventually periodic sequence S_k = η(Σ^k) exactly,
    take k0 = π·max(1, ⌈p/π⌉); L ∈ LTL[P,MOD] iff A_k0 is a PODFA iff the stable semigroup S_k0 is
    R-trivial. The least k (≤ k0, a divisor of π) is read off the SCCs of A: every non-trivial
    SCC must be a simple cycle of d_C states, and then k = lcm(d_C); it is confirmed by checking
    A_k (PODFA), ⟨η(Σ^k)⟩ (R-trivial) and A_(k/prime) (not PODFA).

    Raises MonoidTooLargeError (a FormalRopeError) above `max_monoid_size` elements.
    """
    require_dfa(dfa, "classify", "dfa")
    minimal = minimize(dfa)
    monoid = transition_monoid(minimal, max_monoid_size)
    sets = length_sets(monoid, max_stability_steps)
    k_bound = sets.bound

    r_labels, l_labels, j_labels = r_classes(monoid), l_classes(monoid), j_classes(monoid)
    r_pair, l_pair, j_pair = nontrivial_pair(r_labels), nontrivial_pair(l_labels), nontrivial_pair(j_labels)
    # Aperiodic ⇔ H-trivial (finite monoids); the witness is the shortlex-first element whose
    # powers cycle, found by a chunked scan rather than by powering every element.
    star_free = is_trivial(h_classes(monoid, r_labels, l_labels))
    group_element = None if star_free else first_non_aperiodic(monoid)
    if star_free != (group_element is None):
        raise AssertionError(f"H-triviality and aperiodicity disagree on {minimal!r}")

    def podfa(k: int) -> bool:
        # The product graph Q × ℤ/k grows with k; past a budget use the maps of the k-blocks
        # (η(Σ^k), known for every k ≤ p + π, which covers k0, mod_k and its divisors).
        if minimal.n_states * k <= _GRAPH_BUDGET or k >= len(sets.levels):
            return is_podfa(minimal, k)
        return is_podfa(minimal, k, block_maps=monoid.elements[sets.elements(k)])

    def block_r_trivial(k: int) -> bool:
        # Monoid side: T_k = ⟨η(Σ^k)⟩ on the product M × ℤ/k of the right Cayley graph. Past the
        # budget, T_k0 = η(Σ^k0) is a semigroup acting faithfully on Q, and R-triviality of such a
        # semigroup is partial order of its action (docs/classes.md, step 1).
        if monoid.size * k <= _GRAPH_BUDGET:
            return is_block_semigroup_r_trivial(monoid, k)
        return is_podfa(minimal, k, block_maps=monoid.elements[sets.elements(k)])

    ltl_p = is_podfa(minimal, 1)
    ltl_p_mod = podfa(k_bound)
    qr = block_r_trivial(k_bound)
    mod_k = cycle_structure(minimal).least_block_length
    # Each class is characterised several ways (Def. A.7/A.8 on the automaton, Def. A.10/A.13 on
    # the monoid, the SCC-period form of docs/classes.md); a disagreement is a bug, never an answer.
    if ltl_p != (r_pair is None) or ltl_p_mod != qr or ltl_p_mod != (mod_k is not None):
        raise AssertionError(f"automaton and monoid criteria disagree on {minimal!r}")
    if mod_k is not None:
        smaller = [mod_k // prime for prime in _prime_factors(mod_k)]
        if sets.period % mod_k or not podfa(mod_k) or any(podfa(k) for k in smaller):
            raise AssertionError(f"least block length {mod_k} is inconsistent on {minimal!r}")

    alphabet = minimal.alphabet
    witness: dict[str, dict[str, Any]] = {}
    if not ltl_p:
        witness["ltl_p"] = podfa_witness(minimal)
    if not ltl_p_mod:
        witness["ltl_p_mod"] = _stable_witness(minimal, monoid, sets)
    if group_element is not None:
        witness["star_free"] = _group_witness(monoid, group_element)
    if r_pair is not None:
        witness["r_trivial"] = _green_witness(monoid, "R", r_pair)
    if l_pair is not None:
        witness["l_trivial"] = _green_witness(monoid, "L", l_pair)
    if j_pair is not None:
        witness["j_trivial"] = _green_witness(monoid, "J", j_pair)

    return Classification(
        alphabet=alphabet,
        states=minimal.n_states,
        monoid_size=monoid.size,
        ltl_p=ltl_p,
        ltl_p_mod=ltl_p_mod,
        mod_k=mod_k,
        qr=qr,
        star_free=star_free,
        r_trivial=r_pair is None,
        l_trivial=l_pair is None,
        j_trivial=j_pair is None,
        stability_index=sets.index,
        stability_period=sets.period,
        k_bound=k_bound,
        witness=witness,
    )


_GRAPH_BUDGET = 4_000_000  # nodes of a product graph (state or element) × ℤ/k before switching method


def _prime_factors(number: int) -> list[int]:
    factors, candidate = [], 2
    while candidate * candidate <= number:
        if number % candidate == 0:
            factors.append(candidate)
            while number % candidate == 0:
                number //= candidate
        candidate += 1
    if number > 1:
        factors.append(number)
    return factors


# ------------------------------------------------------------------------------------- witnesses
def podfa_witness(minimal: DFA) -> dict[str, Any]:
    cycle = block_cycle(minimal, 1)
    assert cycle is not None
    q, p = cycle.states
    words = [format_word(w, minimal.alphabet) for w in (access_word(minimal, q), access_word(minimal, p))]
    forward, backward = (format_word(w, minimal.alphabet) for w in (cycle.forward, cycle.backward))
    return {
        "criterion": "PODFA",
        "states": [q, p],
        "access": words,
        "forward": forward,
        "backward": backward,
        "explanation": (
            f"states {q} (after {_shown(words[0])}) and {p} (after {_shown(words[1])}) of the minimal DFA "
            f"reach each other: {q} --{forward}--> {p} --{backward}--> {q}, so reachability is not a "
            "partial order (the minimal DFA is not a PODFA)"
        ),
    }


def _stable_witness(minimal: DFA, monoid: TransitionMonoid, sets: LengthSets) -> dict[str, Any]:
    """Two states joined in both directions by single k0-blocks (words of the stable semigroup).

    The map of any word in η(Σ^k0) is also the map of a word of length k·k0 for every k ≥ 1
    (η(Σ^(k·k0)) = η(Σ^k0)), i.e. of a sequence of k0 k-blocks; so the pair is mutually reachable
    in every k-automaton A_k, exactly the shape of the paper's Prop. B.2/B.3 proofs.
    """
    k0 = sets.bound
    stable = sets.stable_semigroup
    maps = monoid.elements[stable]  # (|S|, n_states)
    # S·S = S, so reachability under S is a single step and its SCCs are the mutual pairs.
    pair = nontrivial_pair(strongly_connected_labels(minimal.n_states, [np.ascontiguousarray(maps.T)]))
    assert pair is not None
    q, p = pair
    forward_element = int(stable[np.flatnonzero(maps[:, q] == p)[0]])
    backward_element = int(stable[np.flatnonzero(maps[:, p] == q)[0]])
    forward = format_word(sets.block_word(k0, forward_element), minimal.alphabet)
    backward = format_word(sets.block_word(k0, backward_element), minimal.alphabet)
    access = [format_word(access_word(minimal, s), minimal.alphabet) for s in (q, p)]
    return {
        "criterion": "PODFA_k",
        "k_bound": k0,
        "states": [q, p],
        "access": access,
        "forward": forward,
        "backward": backward,
        "explanation": (
            f"in the {k0}-automaton, states {q} (after {_shown(access[0])}) and {p} (after {_shown(access[1])}) "
            f"reach each other by single blocks: {q} --{forward}--> {p} --{backward}--> {q}. These blocks lie in "
            f"the stable semigroup η(Σ^{k0}) = η(Σ^(k·{k0})), so for every k some words of length k·{k0} "
            f"({k0} block{'s' if k0 != 1 else ''} of A_k) connect the same states: no A_k is a PODFA"
        ),
    }


def _group_witness(monoid: TransitionMonoid, element: int) -> dict[str, Any]:
    index, period = index_and_period(monoid, element)
    word = format_word(monoid.word(element), monoid.alphabet)
    return {
        "word": word,
        "index": index,
        "period": period,
        "explanation": (
            f"the powers of w = {_shown(word)} repeat with period {period} from w^{index} on, so w^n ≠ w^(n+1) "
            "for every n: the syntactic monoid contains a non-trivial group (not aperiodic)"
        ),
    }


def _green_witness(monoid: TransitionMonoid, relation: str, pair: tuple[int, int]) -> dict[str, Any]:
    x, y = pair
    use_right, use_left = relation in ("R", "J"), relation in ("L", "J")
    there = connecting_words(monoid, x, y, use_right, use_left)
    back = connecting_words(monoid, y, x, use_right, use_left)
    alphabet = monoid.alphabet
    x_word, y_word = (format_word(monoid.word(e), alphabet) for e in (x, y))
    (u1, v1), (u2, v2) = ((format_word(u, alphabet), format_word(v, alphabet)) for u, v in (there, back))

    def product(prefix: str, middle: str, suffix: str) -> str:
        parts = [part for part in (prefix, f"[{_shown(middle)}]", suffix) if part]
        return "·".join(parts)

    return {
        "relation": relation,
        "elements": [x_word, y_word],
        "to_second": [u1, v1],
        "to_first": [u2, v2],
        "explanation": (
            f"x = [{_shown(x_word)}] and y = [{_shown(y_word)}] are distinct syntactic classes but "
            f"{product(u1, x_word, v1)} = y and {product(u2, y_word, v2)} = x, so x {relation} y"
        ),
    }
