"""Path counts and uniform sampling: exact counts vs enumeration, chi-square uniformity against the
full list of strings, labels checked by an independent regex oracle, length 10⁴."""

from __future__ import annotations

import collections
import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from formal_rope.automata.dfa import DFA
from formal_rope.errors import FormalRopeError
from formal_rope.sampling import (
    PAD,
    EmptyClassError,
    count_near_misses,
    count_paths,
    count_strings,
    count_table,
    decode,
    dfa_graph,
    encode,
    exact_counts,
    log_counts,
    near_miss_graph,
    sample_strings,
    walk,
)
from test_sampling_support import (
    CASES,
    all_strings,
    chi_square_p_value,
    class_strings,
    near_miss_multiplicities,
)

# Significance level of every uniformity test. Seeds are fixed, so each test is deterministic; the
# level only says how surprising a failure would be for a correct sampler.
ALPHA = 1e-3


@pytest.mark.parametrize("name", sorted(CASES))
def test_exact_counts_match_enumeration(name):
    case = CASES[name]
    for accepted in (True, False):
        table = exact_counts(dfa_graph(case.dfa, accepted), 7)
        for length in range(8):
            expected = len(class_strings(case, length, accepted))
            assert count_strings(case.dfa, length, accepted) == expected
            assert table[length, case.dfa.start] == expected


@pytest.mark.parametrize("name", sorted(CASES))
def test_log_counts_match_exact_counts(name):
    case = CASES[name]
    for accepted in (True, False):
        graph = dfa_graph(case.dfa, accepted)
        exact = exact_counts(graph, 60)
        logs = log_counts(graph, 60)
        for length in range(61):
            for state in range(case.dfa.n_states):
                value = exact[length, state]
                if value == 0:
                    assert logs.log_count(length, state) == -math.inf
                    assert not logs.nonempty(length, state)
                else:
                    assert logs.log_count(length, state) == pytest.approx(math.log(value), rel=1e-12, abs=1e-12)


@pytest.mark.parametrize("name", ["contains_ab", "ab_star", "skewed", "ends_a"])
def test_near_miss_counts_match_enumeration(name):
    case = CASES[name]
    for length in range(7):
        expected = sum(near_miss_multiplicities(case, length).values())
        assert count_near_misses(case.dfa, length) == expected


def _sample_counter(case, length, n, seed, accepted):
    symbols = sample_strings(case.dfa, length, n, np.random.default_rng(seed), accepted)
    assert symbols.shape == (n, length) and symbols.dtype == np.int64
    return collections.Counter(decode(symbols, case.alphabet))


@pytest.mark.parametrize(
    "name, length",
    [("contains_ab", 5), ("ab_star", 6), ("skewed", 5), ("parity", 7), ("ends_a", 6)],
)
@pytest.mark.parametrize("accepted", [True, False])
def test_samples_are_uniform_over_the_class(name, length, accepted):
    case = CASES[name]
    population = class_strings(case, length, accepted)
    if len(population) < 2:  # e.g. (ab)* has one positive of length 6: nothing to test statistically
        counter = _sample_counter(case, length, 50, 1, accepted)
        assert set(counter) == set(population)
        return
    n = 40 * len(population)
    counter = _sample_counter(case, length, n, 7, accepted)
    assert set(counter) <= set(population), "sampled a string from the wrong class"
    observed = np.array([counter[word] for word in population])
    expected = np.full(len(population), n / len(population))
    assert chi_square_p_value(observed, expected) > ALPHA


def _locally_uniform_sample(case, length, n, rng, accepted):
    """A plausible but wrong sampler: uniform over the symbols that can still complete the string."""
    counts = count_table(case.dfa, "accepted" if accepted else "rejected", length)
    words = []
    for _ in range(n):
        state, word = case.dfa.start, []
        for position in range(length):
            remaining = length - position - 1
            live = [s for s in range(case.dfa.n_symbols) if counts.nonempty(remaining, case.dfa.transitions[state, s])]
            symbol = live[rng.integers(len(live))]
            word.append(case.alphabet[symbol])
            state = case.dfa.transitions[state, symbol]
        words.append("".join(word))
    return collections.Counter(words)


def test_chi_square_detects_a_locally_uniform_sampler():
    """Power check: the statistic used above rejects a sampler that is only locally uniform."""
    case, length, accepted = CASES["contains_ab"], 5, False
    population = class_strings(case, length, accepted)
    n = 40 * len(population)
    counter = _locally_uniform_sample(case, length, n, np.random.default_rng(0), accepted)
    observed = np.array([counter[word] for word in population])
    expected = np.full(len(population), n / len(population))
    assert chi_square_p_value(observed, expected) < 1e-9


@pytest.mark.parametrize("name, length", [("contains_ab", 4), ("skewed", 4), ("ab_star", 4)])
def test_near_miss_walk_matches_triple_distribution(name, length):
    """Near-misses are distributed like rejection sampling of (positive, position, symbol) triples."""
    case = CASES[name]
    multiplicities = near_miss_multiplicities(case, length)
    total = sum(multiplicities.values())
    n = 30 * len(multiplicities) + 200
    counts = count_table(case.dfa, "near_miss", length)
    symbols = walk(counts, np.full(n, length), np.random.default_rng(3).random((length, n)))
    counter = collections.Counter(decode(symbols, case.alphabet))
    assert set(counter) <= set(multiplicities)
    words = sorted(multiplicities)
    observed = np.array([counter[word] for word in words])
    expected = np.array([n * multiplicities[word] / total for word in words])
    if len(words) >= 2:
        assert chi_square_p_value(observed, expected) > ALPHA
    else:
        assert observed.sum() == n


def test_empty_class_is_a_clear_error():
    case = CASES["ab_star"]
    with pytest.raises(EmptyClassError, match="no string of length 5 is in L"):
        sample_strings(case.dfa, 5, 3, np.random.default_rng(0), accepted=True)
    assert issubclass(EmptyClassError, FormalRopeError)
    # (aa)* over {a}: at even lengths nothing is outside L.
    with pytest.raises(EmptyClassError, match="outside L"):
        sample_strings(CASES["aa_star"].dfa, 8, 3, np.random.default_rng(0), accepted=False)


def test_length_zero_and_one_class_lengths():
    aa = CASES["aa_star"]
    empty = sample_strings(aa.dfa, 0, 4, np.random.default_rng(0))
    assert empty.shape == (4, 0)
    assert decode(empty, aa.alphabet) == ["", "", "", ""]
    odd = sample_strings(aa.dfa, 9, 3, np.random.default_rng(0), accepted=False)
    assert decode(odd, aa.alphabet) == ["a" * 9] * 3


def test_length_ten_thousand():
    case = CASES["contains_ab"]
    rng = np.random.default_rng(11)
    positives = decode(sample_strings(case.dfa, 10_000, 6, rng, True), case.alphabet)
    negatives = decode(sample_strings(case.dfa, 10_000, 6, rng, False), case.alphabet)
    assert all(len(word) == 10_000 for word in positives + negatives)
    assert all(case.accepts(word) for word in positives)
    assert not any(case.accepts(word) for word in negatives)
    # Exact big-integer count vs the log-space table at n = 10⁴ (about 15,850 bits).
    exact = count_strings(case.dfa, 10_000, accepted=False)
    table = count_table(case.dfa, "rejected", 10_000)
    assert table.log_count(10_000) == pytest.approx(math.log(exact), rel=1e-12)
    ab = CASES["ab_star"]
    assert decode(sample_strings(ab.dfa, 10_000, 2, rng), ab.alphabet) == ["ab" * 5000] * 2


def test_walk_handles_mixed_lengths_in_any_order():
    case = CASES["parity"]  # positives exist at every length, including 0
    lengths = np.array([3, 0, 7, 1, 7, 5])
    counts = count_table(case.dfa, "accepted", 7)
    uniforms = np.random.default_rng(5).random((7, lengths.size))
    symbols = walk(counts, lengths, uniforms)
    assert symbols.shape == (lengths.size, 7)
    for row, length in zip(symbols, lengths):
        assert (row[length:] == PAD).all() and (row[:length] >= 0).all()
    words = decode(symbols, case.alphabet)
    assert [len(word) for word in words] == lengths.tolist()
    assert all(case.accepts(word) for word in words)
    # Each string depends only on its own column of draws, not on the batch it was walked in.
    single = walk(counts, lengths[2:3], uniforms[:, 2:3])
    assert np.array_equal(single[0], symbols[2])


@st.composite
def random_dfas(draw):
    n_states = draw(st.integers(1, 5))
    n_symbols = draw(st.integers(1, 3))
    transitions = draw(
        st.lists(
            st.lists(st.integers(0, n_states - 1), min_size=n_symbols, max_size=n_symbols), min_size=n_states,
            max_size=n_states,
        )
    )
    accepting = draw(st.lists(st.booleans(), min_size=n_states, max_size=n_states))
    return DFA(tuple("abc"[:n_symbols]), np.array(transitions), 0, np.array(accepting))


def _brute_force_class(dfa: DFA, length: int, accepted: bool) -> set[str]:
    index = dfa.symbol_index()
    return {
        word
        for word in all_strings(dfa.alphabet, length)
        if bool(dfa.accepting[dfa.run([index[s] for s in word])]) == accepted
    }


@settings(max_examples=60)
@given(random_dfas(), st.integers(0, 6), st.booleans(), st.integers(0, 2**32 - 1))
def test_random_dfas_counts_and_samples(dfa, length, accepted, seed):
    members = _brute_force_class(dfa, length, accepted)
    assert count_strings(dfa, length, accepted) == len(members)
    assert count_strings(dfa, length, True) + count_strings(dfa, length, False) == dfa.n_symbols**length
    if not members:
        with pytest.raises(EmptyClassError):
            sample_strings(dfa, length, 4, np.random.default_rng(seed), accepted)
        return
    words = decode(sample_strings(dfa, length, 32, np.random.default_rng(seed), accepted), dfa.alphabet)
    assert set(words) <= members


@settings(max_examples=40)
@given(random_dfas(), st.integers(0, 5))
def test_random_dfas_near_miss_count(dfa, length):
    positives = _brute_force_class(dfa, length, True)
    negatives = _brute_force_class(dfa, length, False)
    expected = sum(
        (word[:i] + c + word[i + 1 :]) in negatives
        for word in positives
        for i in range(length)
        for c in dfa.alphabet
        if c != word[i]
    )
    assert count_paths(near_miss_graph(dfa), length) == expected


@settings(max_examples=50)
@given(st.lists(st.text(alphabet="xyz", max_size=12), max_size=8))
def test_encode_decode_roundtrip(texts):
    symbols, lengths = encode(texts, "xyz")
    assert symbols.dtype == np.int64 and lengths.tolist() == [len(text) for text in texts]
    assert (symbols[np.arange(symbols.shape[1])[None, :] >= lengths[:, None]] == PAD).all()
    assert decode(symbols, "xyz") == list(texts)


def test_multi_character_symbols_roundtrip():
    alphabet = ("go", "stop", "x")
    texts = ["go stop x", "", "x x"]
    symbols, lengths = encode(texts, alphabet)
    assert symbols.tolist() == [[0, 1, 2], [PAD, PAD, PAD], [2, 2, PAD]]
    assert decode(symbols, alphabet) == texts
    with pytest.raises(FormalRopeError, match="'q'"):
        encode(["go q"], alphabet)


def test_decode_respects_explicit_lengths():
    symbols = np.array([[0, 1, 1], [1, 0, 0]])
    assert decode(symbols, "ab", lengths=np.array([2, 3])) == ["ab", "baa"]


@pytest.mark.parametrize("name", ["contains_ab", "skewed", "ab_star"])
@pytest.mark.parametrize("kind", ["accepted", "rejected", "near_miss"])
def test_alias_tables_reproduce_exact_edge_probabilities(name, kind):
    """P(edge) read back from the alias tables equals count(r-1, target) / count(r, node) computed
    with exact integers, for every reachable-with-paths (r, node)."""
    case = CASES[name]
    graph = near_miss_graph(case.dfa) if kind == "near_miss" else dfa_graph(case.dfa, kind == "accepted")
    length = 12
    logs = log_counts(graph, length)
    keep, alias = logs.alias_table
    exact = exact_counts(graph, length)
    degree = graph.degree
    checked = 0
    for remaining in range(1, length + 1):
        for node in range(graph.n_nodes):
            total = exact[remaining, node]
            if total == 0:
                continue
            probability = keep[remaining, node].copy()
            np.add.at(probability, alias[remaining, node], 1.0 - keep[remaining, node])
            probability /= degree
            expected = np.array([exact[remaining - 1, target] / total for target in graph.edge_target[node]])
            np.testing.assert_allclose(probability, expected, rtol=0, atol=1e-12)
            # A zero-probability edge must be unreachable through the table, not just unlikely.
            zero = expected == 0
            assert (keep[remaining, node][zero] == 0).all() and not zero[alias[remaining, node]][
                keep[remaining, node] < 1
            ].any()
            checked += 1
    assert checked > 0


def test_walk_without_alias_tables_is_uniform_too(monkeypatch):
    """Very large tables skip the alias tables and weigh edges per step: same distribution."""
    import formal_rope.sampling.walker as walk_module

    monkeypatch.setattr(walk_module, "ALIAS_TABLE_LIMIT", 0)
    case, length = CASES["skewed"], 5
    for accepted in (True, False):
        population = class_strings(case, length, accepted)
        n = 40 * len(population)
        counter = _sample_counter(case, length, n, 21, accepted)
        assert set(counter) <= set(population)
        observed = np.array([counter[word] for word in population])
        assert chi_square_p_value(observed, np.full(len(population), n / len(population))) > ALPHA


def test_walk_refuses_lengths_without_paths():
    counts = count_table(CASES["ab_star"].dfa, "accepted", 5)
    with pytest.raises(ValueError, match="no path"):
        walk(counts, np.array([4, 5]), np.zeros((5, 2)))


def test_symbols_with_blanks_or_leading_quotes_are_quoted_and_read_back():
    # Symbols that a plain blank-separated text would split (or misread) are written quoted, as in
    # expressions, so decode's text is what `formalrope accepts` reads.
    alphabet = ("long name", "it's", "'q", "x")
    symbols = np.array([[0, 1, 2, 3], [3, 0, PAD, PAD]])
    texts = decode(symbols, alphabet)
    assert texts == ["'long name' it's \"'q\" x", "x 'long name'"]
    back, lengths = encode(texts, alphabet)
    assert back.tolist() == symbols.tolist() and lengths.tolist() == [4, 2]
