"""Test sets (balance, one-class lengths, near-misses, reproducibility, per-length independence) and
training batches (balance, lengths, labels, padding)."""

from __future__ import annotations

import numpy as np
import pytest

from formal_rope.automata.dfa import DFA
from formal_rope.errors import FormalRopeError
from formal_rope.sampling import PAD, EmptyClassError, decode, test_set, test_sets, training_batch
from formal_rope.sampling import datasets as datasets_module
from test_sampling_support import CASES, chi_square_p_value


def _words(labeled, case):
    return decode(labeled.symbols, case.alphabet)


def _has_positive_neighbour(case, word: str) -> bool:
    return any(
        case.accepts(word[:i] + c + word[i + 1 :]) for i in range(len(word)) for c in case.alphabet if c != word[i]
    )


@pytest.mark.parametrize("name, length", [("contains_ab", 6), ("contains_ab", 41), ("skewed", 30), ("parity", 41)])
def test_balanced_set_with_near_misses(name, length):
    case = CASES[name]
    labeled = test_set(case.dfa, length, n_per_length=64, seed=2, near_miss_fraction=0.5)
    words = _words(labeled, case)
    assert labeled.length == length and labeled.symbols.shape == (64, length) and labeled.symbols.dtype == np.int64
    assert labeled.labels.sum() == 32 and labeled.n_near_miss == 16 and labeled.note is None
    assert [case.accepts(word) for word in words] == labeled.labels.tolist()
    near = labeled.near_miss
    assert near.sum() == 16 and not labeled.labels[near].any()
    for word in np.array(words)[near]:
        assert not case.accepts(word) and _has_positive_neighbour(case, word)


def test_near_miss_fraction_extremes():
    case = CASES["contains_ab"]
    none = test_set(case.dfa, 20, 40, near_miss_fraction=0.0)
    assert none.n_near_miss == 0 and not none.near_miss.any()
    every = test_set(case.dfa, 20, 40, near_miss_fraction=1.0)
    assert every.n_near_miss == 20 and (every.near_miss == ~every.labels).all()


def test_one_class_lengths_are_recorded():
    aa = CASES["aa_star"]
    odd, even = test_sets(aa.dfa, [41, 42], n_per_length=10)
    assert not odd.labels.any() and _words(odd, aa) == ["a" * 41] * 10
    assert "only negative strings exist at length 41" in odd.note
    assert "no near-miss" in odd.note and odd.n_near_miss == 0
    assert even.labels.all() and _words(even, aa) == ["a" * 42] * 10
    assert even.note == "only positive strings exist at length 42"


def test_missing_near_misses_fall_back_to_uniform_negatives():
    case = CASES["ab_star"]  # no positive of odd length, hence no near-miss either
    labeled = test_set(case.dfa, 43, 16, near_miss_fraction=1.0)
    assert labeled.n_near_miss == 0 and not labeled.labels.any()
    assert "no near-miss exists at length 43; all negatives are uniform" in labeled.note
    assert not any(case.accepts(word) for word in _words(labeled, case))


def test_reproducible_and_independent_per_length(monkeypatch):
    case = CASES["skewed"]
    together = test_sets(case.dfa, [50, 41, 60], n_per_length=32, seed=9)
    again = test_sets(case.dfa, [50, 41, 60], n_per_length=32, seed=9)
    alone = test_set(case.dfa, 60, n_per_length=32, seed=9)
    for first, second in zip(together, again):
        assert np.array_equal(first.symbols, second.symbols) and np.array_equal(first.labels, second.labels)
    assert np.array_equal(together[2].symbols, alone.symbols)
    # Chunking (how many lengths are walked together) must not change anything either.
    monkeypatch.setattr(datasets_module, "_CHUNK_DRAWS", 1)
    one_by_one = test_sets(case.dfa, [60, 50], n_per_length=32, seed=9)
    assert np.array_equal(one_by_one[0].symbols, alone.symbols)
    assert np.array_equal(one_by_one[1].symbols, together[0].symbols)
    other_seed = test_set(case.dfa, 60, n_per_length=32, seed=10)
    assert not np.array_equal(other_seed.symbols, alone.symbols)


def test_invalid_arguments_are_user_errors():
    dfa = CASES["ab_star"].dfa
    with pytest.raises(FormalRopeError, match="non-negative"):
        test_sets(dfa, [3, -1])
    with pytest.raises(FormalRopeError, match=r"\[0, 1\]"):
        test_set(dfa, 4, near_miss_fraction=1.5)
    with pytest.raises(FormalRopeError):
        training_batch(dfa, np.random.default_rng(0), 8, min_length=5, max_length=4)


def test_paper_test_set_shape():
    case = CASES["ab_star"]
    sets = test_sets(case.dfa, range(41, 61), n_per_length=8)
    assert [labeled.length for labeled in sets] == list(range(41, 61))
    for labeled in sets:
        assert labeled.symbols.shape == (8, labeled.length)
        if labeled.length % 2:
            assert not labeled.labels.any() and labeled.note
        else:
            assert labeled.labels.sum() == 4 and labeled.n_near_miss == 2
        assert [case.accepts(word) for word in _words(labeled, case)] == labeled.labels.tolist()


@pytest.mark.parametrize("batch_size", [128, 7])
def test_training_batch_is_balanced_and_correct(batch_size):
    case = CASES["contains_ab"]
    batch = training_batch(case.dfa, np.random.default_rng(4), batch_size, min_length=0, max_length=40)
    assert batch.symbols.shape == (batch_size, 40) and batch.symbols.dtype == np.int64
    assert batch.labels.sum() == batch_size - batch_size // 2
    assert ((batch.lengths >= 0) & (batch.lengths <= 40)).all()
    for row, length in zip(batch.symbols, batch.lengths):
        assert (row[length:] == PAD).all() and (row[:length] >= 0).all()
    words = decode(batch.symbols, case.alphabet)
    assert [case.accepts(word) for word in words] == batch.labels.tolist()


def test_training_batches_are_reproducible():
    case = CASES["parity"]
    first = training_batch(case.dfa, np.random.default_rng(123), 32)
    second = training_batch(case.dfa, np.random.default_rng(123), 32)
    assert np.array_equal(first.symbols, second.symbols) and np.array_equal(first.labels, second.labels)


def test_training_lengths_resampled_where_a_class_is_empty():
    """(aa)* over {a}: positives only have even lengths, negatives odd; lengths uniform over those."""
    aa = CASES["aa_star"]
    rng = np.random.default_rng(8)
    positive_lengths, negative_lengths = [], []
    for _ in range(60):
        batch = training_batch(aa.dfa, rng, 128, min_length=0, max_length=40)
        assert batch.labels.sum() == 64
        positive_lengths.append(batch.lengths[batch.labels])
        negative_lengths.append(batch.lengths[~batch.labels])
    positive_lengths = np.concatenate(positive_lengths)
    negative_lengths = np.concatenate(negative_lengths)
    assert (positive_lengths % 2 == 0).all() and (negative_lengths % 2 == 1).all()
    observed = np.bincount(positive_lengths, minlength=41)[0::2]  # 21 even lengths 0..40
    assert chi_square_p_value(observed, np.full(21, positive_lengths.size / 21)) > 1e-3
    observed = np.bincount(negative_lengths, minlength=41)[1::2]  # 20 odd lengths 1..39
    assert chi_square_p_value(observed, np.full(20, negative_lengths.size / 20)) > 1e-3


def test_training_batch_without_negatives_is_an_error():
    universal = DFA(("a", "b"), np.array([[0, 0]]), 0, np.array([True]))
    with pytest.raises(EmptyClassError, match="outside L"):
        training_batch(universal, np.random.default_rng(0), 8)


def test_rejection_near_misses_match_the_exact_graph_distribution(monkeypatch):
    """Automata too large for the exact near-miss table fall back to rejection sampling, which must
    give the same distribution over near-misses (uniform over valid (positive, position, symbol))."""
    from test_sampling_support import near_miss_multiplicities

    monkeypatch.setattr(datasets_module, "NEAR_MISS_TABLE_LIMIT", 0)
    case, length = CASES["contains_ab"], 4
    multiplicities = near_miss_multiplicities(case, length)
    labeled = test_set(case.dfa, length, n_per_length=2400, seed=5, near_miss_fraction=1.0)
    assert labeled.n_near_miss == 1200 and labeled.note is None
    near_words = np.array(_words(labeled, case))[labeled.near_miss]
    words = sorted(multiplicities)
    observed = np.array([(near_words == word).sum() for word in words])
    total = sum(multiplicities.values())
    expected = np.array([1200 * multiplicities[word] / total for word in words])
    assert observed.sum() == 1200
    assert chi_square_p_value(observed, expected) > 1e-3


def test_rejection_shortfall_is_recorded_and_filled(monkeypatch):
    monkeypatch.setattr(datasets_module, "NEAR_MISS_TABLE_LIMIT", 0)
    monkeypatch.setattr(datasets_module, "_REJECTION_TRIES_PER_NEAR_MISS", 1)
    case = CASES["contains_ab"]  # at length 60 almost every positive contains ab several times
    labeled = test_set(case.dfa, 60, n_per_length=64, seed=1, near_miss_fraction=1.0)
    assert len(labeled) == 64 and labeled.labels.sum() == 32
    assert labeled.n_near_miss < 32 and "rejection sampling found" in labeled.note
    words = _words(labeled, case)
    assert [case.accepts(word) for word in words] == labeled.labels.tolist()
    for word in np.array(words)[labeled.near_miss]:
        assert _has_positive_neighbour(case, word)
