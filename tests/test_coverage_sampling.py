"""Coverage sampling (formal_rope.sampling.coverage): exact per-transition draws, cross-checked by
enumeration; the coverage mode of test sets and training batches; the RunConfig field."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest

from formal_rope.automata import language_dfa
from formal_rope.automata.membership import accepts_encoded
from formal_rope.errors import FormalRopeError
from formal_rope.lang.source import resolve_language
from formal_rope.run_config.config import RunConfig
from formal_rope.sampling.counts import count_paths
from formal_rope.sampling.coverage import (
    CoverageTally,
    TrainingCoverage,
    draw_taking,
    takeable,
    taken_graph,
    transitions_of,
    transitions_taken,
    with_training_coverage,
)
from formal_rope.sampling.datasets import test_sets, training_batch

RARE = "data/mlregtest/16.16.SL.6.1.5.att"  # starts with aaaaa and never contains ababab


def _dfa(text: str):
    return language_dfa(resolve_language(text))


def _runs_through(dfa, word) -> set[tuple[int, int]]:
    state, seen = dfa.start, set()
    for symbol in word:
        seen.add((state, symbol))
        state = int(dfa.transitions[state, symbol])
    return seen


@pytest.mark.parametrize("language", ["(ab)*", "a*b(a|b)*", "ltl:P(a & P(b))"])
def test_counts_and_takeable_match_enumeration(language):
    dfa = _dfa(language)
    transitions = transitions_of(dfa)
    longest = 7
    exists = {accepted: takeable(dfa, accepted, longest, transitions) for accepted in (True, False)}
    for length in range(longest + 1):
        words = list(itertools.product(range(dfa.n_symbols), repeat=length))
        labels = accepts_encoded(dfa, np.array(words, dtype=np.int64).reshape(len(words), length),
                                 np.full(len(words), length)) if words else np.zeros(0, bool)
        runs = [_runs_through(dfa, word) for word in words]
        for index, (state, symbol) in enumerate(transitions.tolist()):
            for accepted in (True, False):
                expected = sum(1 for run, label in zip(runs, labels) if (state, symbol) in run and label == accepted)
                graph = taken_graph(dfa, (state, symbol), accepted)
                assert count_paths(graph, length) == expected
                assert exists[accepted][index, length] == (expected > 0)


def test_draws_take_their_transition_uniformly():
    dfa = _dfa("a*b(a|b)*")
    transitions = transitions_of(dfa)
    length, count = 4, 6000
    rng = np.random.default_rng(3)
    for state, symbol in transitions.tolist():
        for accepted in (True, False):
            graph = taken_graph(dfa, (state, symbol), accepted)
            support = count_paths(graph, length)
            if not support:
                continue
            drawn = draw_taking(dfa, np.tile([state, symbol], (count, 1)), np.full(count, length), accepted,
                                rng.random((length, count)))
            assert (accepts_encoded(dfa, drawn, np.full(count, length)) == accepted).all()
            assert all((state, symbol) in _runs_through(dfa, row) for row in drawn.tolist())
            _, frequency = np.unique(drawn, axis=0, return_counts=True)
            assert len(frequency) == support  # every such string appears
            expected = count / support
            # every count within 5 standard deviations of the uniform expectation
            assert np.all(np.abs(frequency - expected) < 5 * math.sqrt(expected))


def test_coverage_test_sets_visit_the_rare_transitions():
    dfa = _dfa(RARE)
    # 32 per length: 16 positives (8 coverage), 8 uniform negatives (4 coverage), 8 near-misses; 4
    # coverage negatives per length, 50 lengths: every one of the 192 transitions
    lengths = list(range(12, 62))
    uniform = test_sets(dfa, lengths, 32, seed=0)
    covered = test_sets(dfa, lengths, 32, seed=0, sampling="coverage")
    tallies = []
    for sets in (uniform, covered):
        tally = CoverageTally(dfa)
        assert len(list(tally.tap(sets))) == len(lengths)
        tallies.append(tally.result(lengths))
    assert tallies[1].covered == tallies[1].total == 192  # every transition of the minimal DFA
    assert tallies[0].covered < tallies[0].total  # the uniform sets miss the ababab part
    alphabet = dfa.alphabet
    for mine, theirs in zip(covered, uniform):
        assert (mine.labels == theirs.labels).all()  # balance kept
        assert (accepts_encoded(dfa, mine.symbols, np.full(len(mine), mine.length)) == mine.labels).all()
        assert (mine.symbols[8:16] == theirs.symbols[8:16]).all()  # after the 8 coverage positives
        assert (mine.symbols[20:] == theirs.symbols[20:]).all()  # after the 4 coverage negatives
    texts = ["".join(alphabet[s] for s in row) for sets in covered for row in sets.symbols]
    assert any(text.startswith("aaaaa") and "ababa" in text for text in texts)
    # a length's strings do not depend on the other lengths asked
    alone = test_sets(dfa, [21], 32, seed=0, sampling="coverage")[0]
    assert (alone.symbols == covered[21 - 12].symbols).all()


def test_training_coverage_keeps_labels_and_lengths():
    dfa = _dfa(RARE)
    coverage = TrainingCoverage(dfa, 2, 20)
    rng = np.random.default_rng(0)
    batch = with_training_coverage(training_batch(dfa, rng, 32, 2, 20), coverage, rng)
    assert batch.symbols.shape == (32, 20)
    assert ((batch.lengths >= 2) & (batch.lengths <= 20)).all()
    symbols = np.where(batch.symbols < 0, 0, batch.symbols)
    assert (accepts_encoded(dfa, symbols, batch.lengths) == batch.labels).all()
    assert int(batch.labels.sum()) == 16
    for row, length in zip(batch.symbols, batch.lengths):
        assert (row[length:] == -1).all()
    taken = np.zeros((dfa.n_states, dfa.n_symbols), dtype=bool)
    for _ in range(30):
        drawn, lengths = coverage.draw(rng, 16, accepted=False)
        taken |= transitions_taken(dfa, np.where(drawn < 0, 0, drawn), lengths)
    assert taken.sum() > 150  # uniform negatives of lengths <= 20 reach far fewer


def test_sampling_field_is_id_neutral_and_checked():
    plain = RunConfig("(ab)*")
    assert "sampling" not in plain.id_fields()
    assert RunConfig("(ab)*", sampling="uniform").run_id() == plain.run_id()
    assert RunConfig("(ab)*", sampling="coverage").run_id() != plain.run_id()
    with pytest.raises(FormalRopeError, match="sampling mode"):
        RunConfig("(ab)*", sampling="stratified")
    with pytest.raises(FormalRopeError, match="sampling"):
        test_sets(_dfa("(ab)*"), [4], 4, sampling="stratified")
