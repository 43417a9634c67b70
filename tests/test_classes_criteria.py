"""Independent criteria agree on random DFAs: automaton (PODFA/PODFA_k, explicit k-automaton),
monoid (Green's relations via Cayley graphs, QR via the stable semigroup), brute-force Def. A.10,
and libsemigroups' Konieczny/Froidure-Pin."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from formal_rope.automata import DFA, minimize
from formal_rope.classes import (
    block_semigroup_r_cycle,
    classify,
    h_classes,
    is_block_semigroup_r_trivial,
    is_podfa,
    j_classes,
    k_automaton,
    l_classes,
    least_podfa_block_length,
    least_r_trivial_block_length,
    length_sets,
    r_classes,
    transition_monoid,
)
from formal_rope.classes.monoid import aperiodic_mask, compose


def random_dfa(seed: int) -> DFA:
    rng = np.random.default_rng(seed)
    n_states = int(rng.integers(2, 7))
    n_symbols = int(rng.integers(2, 4))
    transitions = rng.integers(0, n_states, size=(n_states, n_symbols))
    accepting = rng.random(n_states) < 0.5
    return DFA(tuple("abc"[:n_symbols]), transitions, 0, accepting)


def random_minimal_dfas(count: int, offset: int = 0) -> list[DFA]:
    return [minimize(random_dfa(seed)) for seed in range(offset, offset + count)]


RANDOM = random_minimal_dfas(300)
_RESULTS: dict[int, object] = {}


def classified(position: int):
    """classify(RANDOM[position]), computed once per test session."""
    if position not in _RESULTS:
        _RESULTS[position] = classify(RANDOM[position])
    return _RESULTS[position]


def n_classes(labels: np.ndarray) -> int:
    return int(np.unique(labels).size)


def test_random_sample_covers_every_verdict():
    """The sample is only useful if both answers occur for each class."""
    results = [classified(position) for position in range(len(RANDOM))]
    for key in ("ltl_p", "ltl_p_mod", "star_free", "r_trivial", "l_trivial", "j_trivial"):
        values = {getattr(result, key) for result in results}
        assert values == {True, False}, key
    assert any(result.mod_k is not None and result.mod_k > 1 for result in results)


def test_automaton_and_monoid_criteria_agree_for_every_k():
    for dfa in RANDOM[:200]:
        monoid = transition_monoid(dfa)
        sets = length_sets(monoid)
        for k in sorted({1, 2, 3, 4, 5, 6, sets.bound, sets.bound + 1, 2 * sets.bound}):
            assert is_podfa(dfa, k) == is_block_semigroup_r_trivial(monoid, k), (dfa, k)
        assert least_podfa_block_length(dfa, sets.bound) == least_r_trivial_block_length(monoid, sets)


def test_bound_k0_is_complete():
    """No k beyond the proven bound k0 changes the answer: a brute-force scan to 24 agrees."""
    for position, dfa in enumerate(RANDOM[:150]):
        result = classified(position)
        scanned = [k for k in range(1, 25) if is_podfa(dfa, k)]
        assert bool(scanned) == result.ltl_p_mod
        if scanned:
            assert scanned[0] == result.mod_k
            # good block lengths are closed under multiples
            assert all(is_podfa(dfa, result.mod_k * m) for m in range(1, 4))


def test_explicit_k_automaton_agrees():
    """A_k built over the block alphabet Σ^k: PODFA ⇔ its own transition monoid is R-trivial."""
    for dfa in RANDOM[:120]:
        for k in (1, 2, 3):
            automaton = k_automaton(dfa, k)
            expected = is_podfa(dfa, k)
            assert is_podfa(automaton, 1) == expected
            labels = r_classes(transition_monoid(automaton))
            assert (n_classes(labels) == labels.size) == expected


def test_green_relation_identities():
    for dfa in RANDOM:
        monoid = transition_monoid(dfa)
        r_labels, l_labels, j_labels = r_classes(monoid), l_classes(monoid), j_classes(monoid)
        size = monoid.size
        r_trivial, l_trivial = n_classes(r_labels) == size, n_classes(l_labels) == size
        j_trivial = n_classes(j_labels) == size
        assert j_trivial == (r_trivial and l_trivial)  # finite monoids
        assert (n_classes(h_classes(monoid)) == size) == bool(aperiodic_mask(monoid).all())  # H-trivial ⇔ aperiodic
        # J is coarser than R and L (finite monoids: J = D = R∘L)
        assert n_classes(j_labels) <= min(n_classes(r_labels), n_classes(l_labels))


def multiplication_table(monoid) -> np.ndarray:
    """Full table by composing every pair of state maps and looking the result up."""
    index = {row.tobytes(): i for i, row in enumerate(monoid.elements)}
    size = monoid.size
    products = compose(np.repeat(monoid.elements, size, axis=0), np.tile(monoid.elements, (size, 1)))
    return np.array([index[row.tobytes()] for row in products]).reshape(size, size)


def test_r_and_l_triviality_match_definition_a10_by_brute_force():
    """Def. A.10: M ∈ R iff xyz = x ⇒ xy = x for all x, y, z (and dually for L)."""
    checked = 0
    for dfa in RANDOM:
        monoid = transition_monoid(dfa)
        if monoid.size > 40:
            continue
        table = multiplication_table(monoid)
        xy = table  # xy[x, y]
        xyz = table[xy]  # xyz[x, y, z] = (xy)z
        x = np.arange(monoid.size)[:, None, None]
        in_r = bool(np.all((xyz != x) | (xy[:, :, None] == x)))
        zyx = table[table]  # zyx[z, y, x] = (zy)x
        x_last = np.arange(monoid.size)[None, None, :]
        in_l = bool(np.all((zyx != x_last) | (table[None, :, :] == x_last)))
        assert in_r == (n_classes(r_classes(monoid)) == monoid.size)
        assert in_l == (n_classes(l_classes(monoid)) == monoid.size)
        assert table[0].tolist() == list(range(monoid.size))  # element 0 is the identity
        checked += 1
    assert checked > 100


def test_block_r_cycle_witness_is_valid():
    for dfa in RANDOM[:150]:
        monoid = transition_monoid(dfa)
        for k in (1, 2, 3):
            cycle = block_semigroup_r_cycle(monoid, k)
            if cycle is None:
                continue
            x, y = cycle.elements
            assert x != y
            assert len(cycle.forward) % k == 0 and len(cycle.backward) % k == 0
            assert monoid.element_of(monoid.word(x) + cycle.forward) == y
            assert monoid.element_of(monoid.word(y) + cycle.backward) == x
            sets = length_sets(monoid)
            block_monoid = {0}.union(*(sets.elements(j * k).tolist() for j in range(1, len(sets.levels) + 2)))
            assert x in block_monoid and y in block_monoid  # both lie in η((Σ^k)*)


def test_against_libsemigroups():
    libsemigroups = pytest.importorskip("libsemigroups_pybind11")
    guard = libsemigroups.ReportGuard(False)
    for position, dfa in enumerate(RANDOM[:80]):
        monoid = transition_monoid(dfa)
        identity = list(range(dfa.n_states))
        generators = [libsemigroups.Transf(identity)] + [
            libsemigroups.Transf([int(t) for t in dfa.transitions[:, a]]) for a in range(dfa.n_symbols)
        ]
        froidure_pin = libsemigroups.FroidurePin(generators)
        assert froidure_pin.size() == monoid.size
        konieczny = libsemigroups.Konieczny(generators)
        assert konieczny.size() == monoid.size
        assert konieczny.number_of_R_classes() == n_classes(r_classes(monoid))
        assert konieczny.number_of_L_classes() == n_classes(l_classes(monoid))
        assert konieczny.number_of_D_classes() == n_classes(j_classes(monoid))
        assert konieczny.number_of_H_classes() == n_classes(h_classes(monoid))
        result = classified(position)
        assert result.r_trivial == (konieczny.number_of_R_classes() == monoid.size)
        assert result.star_free == (konieczny.number_of_H_classes() == monoid.size)
        assert result.j_trivial == (konieczny.number_of_D_classes() == monoid.size)
    del guard


@given(st.integers(min_value=1000, max_value=10**6))
def test_classify_is_invariant_under_state_renumbering(seed):
    dfa = random_dfa(seed)
    rng = np.random.default_rng(seed + 1)
    permutation = rng.permutation(dfa.n_states)
    inverse = np.argsort(permutation)
    renamed = DFA(
        dfa.alphabet, permutation[dfa.transitions[inverse]], int(permutation[dfa.start]), dfa.accepting[inverse]
    )
    first, second = classify(dfa).to_dict(), classify(renamed).to_dict()
    first.pop("witness"), second.pop("witness")
    assert first == second


def _map_of(dfa: DFA, word: str) -> tuple[int, ...]:
    index = dfa.symbol_index()
    return tuple(dfa.run([index[c] for c in word], q) for q in range(dfa.n_states))


def test_every_witness_replays_on_random_dfas():
    replayed = 0
    for position, dfa in enumerate(RANDOM):
        result = classified(position)
        index = dfa.symbol_index()
        for key in ("ltl_p", "ltl_p_mod"):
            if key in result.witness:
                witness = result.witness[key]
                q, p = witness["states"]
                assert q != p
                assert dfa.run([index[c] for c in witness["forward"]], q) == p
                assert dfa.run([index[c] for c in witness["backward"]], p) == q
                replayed += 1
        if "ltl_p_mod" in result.witness:
            assert len(result.witness["ltl_p_mod"]["forward"]) == result.k_bound
        if "star_free" in result.witness:
            witness = result.witness["star_free"]
            word, i, m = witness["word"], witness["index"], witness["period"]
            assert m > 1 and _map_of(dfa, word * i) == _map_of(dfa, word * (i + m))
        for key in ("r_trivial", "l_trivial", "j_trivial"):
            assert (key in result.witness) == (not getattr(result, key))
            if key in result.witness:
                witness = result.witness[key]
                x, y = witness["elements"]
                (u1, v1), (u2, v2) = witness["to_second"], witness["to_first"]
                assert _map_of(dfa, x) != _map_of(dfa, y)
                assert _map_of(dfa, u1 + x + v1) == _map_of(dfa, y)
                assert _map_of(dfa, u2 + y + v2) == _map_of(dfa, x)
    assert replayed > 200


def test_scc_period_closed_form_matches_the_scan():
    """mod_k = lcm of the SCC periods when every SCC is a simple cycle (docs/classes.md)."""
    from formal_rope.classes import cycle_structure

    for position, dfa in enumerate(RANDOM):
        structure = cycle_structure(dfa)
        result = classified(position)
        scanned = next((k for k in range(1, 61) if is_podfa(dfa, k)), None)
        assert structure.least_block_length == scanned == result.mod_k
        if result.mod_k is not None:
            assert result.stability_period % result.mod_k == 0 and result.mod_k <= result.k_bound


def test_block_map_route_agrees_with_the_product_graph(monkeypatch):
    """Large k switch from the product graphs to the maps of η(Σ^k); force that route everywhere."""
    import importlib

    classify_module = importlib.import_module("formal_rope.classes.classify")  # the module, not the function

    for dfa in RANDOM[:100]:
        monoid = transition_monoid(dfa)
        sets = length_sets(monoid)
        for k in range(1, len(sets.levels)):
            maps = monoid.elements[sets.elements(k)]
            assert is_podfa(dfa, k, block_maps=maps) == is_podfa(dfa, k)
    monkeypatch.setattr(classify_module, "_GRAPH_BUDGET", 0)
    for position, dfa in enumerate(RANDOM[:100]):
        assert classify(dfa).to_dict() == classified(position).to_dict()
