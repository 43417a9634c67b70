"""The worst-case search (formal_rope.evaluation): planted flaws that sampling misses and the search
finds, compiled models inside and beyond their certified length, determinism, and its pieces
(exact enumeration, mutations, the scorers of both kinds of model)."""

from __future__ import annotations

import itertools

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from formal_rope.automata import accepts_encoded, language_dfa
from formal_rope.compiler.compiling import compile_formula
from formal_rope.errors import FormalRopeError
from formal_rope.evaluation import (
    PackScorer,
    SearchSettings,
    mutate,
    sampled_start_sets,
    search,
    worst_case,
)
from formal_rope.evaluation.length_generalization import evaluate_sets, pack_scores, predict_pack
from formal_rope.lang import resolve_language
from formal_rope.model.evaluate import evaluate, readout_scores
from formal_rope.run_config.config import RunConfig
from formal_rope.sampling import LabeledSet, test_sets
from formal_rope.sampling.counts import count_strings, dfa_graph
from formal_rope.sampling.enumeration import capped_counts, class_counts, enumerate_class, one_edit_neighbours
from formal_rope.training.setup import build_model


def _dfa(text: str):
    return language_dfa(resolve_language(text))


class Planted:
    """An exact classifier of `dfa` (score ±1 by the DFA's label) made wrong by `flaw`: the score is
    multiplied by flaw(symbols) (≤ 0 flips the decision), so the model errs exactly where flaw ≤ 0."""

    runs = 1

    def __init__(self, dfa, flaw):
        self.dfa, self.flaw, self.n_symbols = dfa, flaw, dfa.n_symbols
        self.calls = 0

    def scores(self, symbols, runs):
        self.calls += 1
        truth = accepts_encoded(self.dfa, symbols, np.full(len(symbols), symbols.shape[1]))
        return (np.where(truth, 1.0, -1.0) * self.flaw(symbols))[None]


def _sampled_failures(scorer, sets) -> int:
    """Misclassified strings among the start sets: what the sampled evaluation sees."""
    wrong = 0
    for labelled in sets:
        scores = scorer.scores(np.asarray(labelled.symbols), [0])[0]
        wrong += int(((scores > 0) != labelled.labels).sum())
    return wrong


# ------------------------------------------------------------------------------ planted models
def test_a_near_miss_at_one_position_of_one_length_is_found_where_sampling_misses_it():
    """(ab)*: wrong only on the near-miss of length 60 whose last a became b (one string of 2^60):
    16 random strings per length never see it; the exhaustive ring around the one positive does."""
    dfa = _dfa("(ab)*")
    planted = np.array([0, 1] * 30)
    planted[-2] = 1

    def flaw(symbols):
        out = np.ones(len(symbols))
        if symbols.shape[1] == 60:
            out[(symbols == planted).all(axis=1)] = -1.0
        return out

    scorer = Planted(dfa, flaw)
    sets = list(sampled_start_sets(dfa, range(41, 81), 16, 0))
    assert _sampled_failures(scorer, sets) == 0  # the sampled N* would be 80
    found = search(scorer, dfa, sets, settings=SearchSettings(budget=256, seed=0))[0]
    assert found.n_star_worst == 59 and found.failure_length == 60 and found.n_star_start == 60
    assert found.failure == "ab" * 29 + "bb" and found.failure_label is False
    assert found.failure_margin == pytest.approx(1.0)
    entry = found.per_length[-1]
    assert entry.length == 60 and entry.enumerated == ("positive",) and entry.start_failures == 0
    # lengths before: the positive (even lengths) and all its one-edit neighbours were tried
    assert all(e.neighbours_complete for e in found.per_length if e.length % 2 == 0 and e.length < 60)
    assert not found.complete  # it stopped at the first failing length


def test_a_rare_pattern_in_large_classes_is_reached_by_climbing_the_margin():
    """Even number of a's over {a, b} (both classes huge): wrong at length 60 only, on strings with
    at least 15 a's among the last 16 symbols (about 3 in 10^4 random strings); the margin shrinks
    as that window fills with a's, which the hill climb follows."""
    dfa = _dfa("(b*ab*a)*b*")

    def flaw(symbols):
        if symbols.shape[1] != 60:
            return np.ones(len(symbols))
        count = (symbols[:, -16:] == 0).sum(axis=1)
        return np.where(count >= 15, -0.5, np.maximum(1.0 - count / 15.0, 0.01))

    scorer = Planted(dfa, flaw)
    sets = list(sampled_start_sets(dfa, [58, 59, 60, 61], 16, 0))
    assert _sampled_failures(scorer, sets) == 0
    found = search(scorer, dfa, sets, settings=SearchSettings(budget=1024, seed=0))[0]
    assert found.failure_length == 60 and found.n_star_worst == 59
    assert found.failure.count("a", 44) >= 15 and found.per_length[-1].enumerated == ()


def test_the_search_is_deterministic_for_a_seed_and_uses_it():
    dfa = _dfa("(b*ab*a)*b*")

    def flaw(symbols):
        return 1.0 - 0.9 * (symbols[:, -8:] == 0).mean(axis=1)

    def run(seed):
        sets = sampled_start_sets(dfa, [30, 31], 8, 0)
        return search(Planted(dfa, flaw), dfa, sets, settings=SearchSettings(budget=128, seed=seed))[0]

    first, again, other = run(3), run(3), run(4)
    assert first.to_dict() == again.to_dict()
    assert [e.closest_margin for e in first.per_length] != [e.closest_margin for e in other.per_length]


def test_a_trained_pack_search_is_deterministic_and_matches_its_decisions():
    config = RunConfig(language="(ab)*", pe="rope_p", layers=1, d_model=16, heads=2, seed=1)
    torch.manual_seed(0)
    model = build_model(config, 2, (2,)).eval()
    symbols = np.random.default_rng(0).integers(0, 2, size=(40, 33))
    decisions, scores = pack_scores(model, symbols)
    assert (decisions == predict_pack(model, symbols)).all() and ((scores > 0) == decisions).all()
    dfa = _dfa("(ab)*")
    results = [worst_case(model=model, dfa=dfa, lengths=[41, 42, 43], budget=64, seed=5, n_start=8).to_dict()
               for _ in range(2)]
    assert results[0] == results[1] and results[0]["tried"] > 0


# ------------------------------------------------------------------------------ compiled models
def test_a_compiled_p_mod_model_has_no_failure_up_to_2000():
    """P(a) & MOD_2^0 (some a, odd length) compiled for fp32 is exact at every length. Sparse
    lengths up to 2,000 and a small budget (4 start strings and 8 more per length) keep this fast;
    at the odd lengths the lone negative b^N and some of its neighbours are enumerated."""
    model = compile_formula("P(a) & MOD_2^0", ("a", "b")).ir
    found = worst_case(model=model, lengths=[41, 100, 777, 1999, 2000], budget=8, seed=0, n_start=4)
    assert found.failure is None and found.n_star_worst == 2000 and found.complete
    assert [e.length for e in found.per_length] == [41, 100, 777, 1999, 2000]
    assert all(e.tried >= 5 and e.closest_margin > 0 for e in found.per_length)
    assert found.per_length[3].enumerated == ("negative",)  # 1999 odd: b^1999 is the one negative


def test_a_y_model_beyond_its_certified_length_yields_exactly_the_known_failures():
    """Y(a) with a coarse rotation (freq 0.8985979, scale 1024) is certified to length 6 in fp32.
    The lengths with a wrong verdict, found by classifying every string up to length 11, are
    exactly the lengths where the search (every string fits its budget) reports failures."""
    model = compile_formula("Y(a)", ("a", "b"), freq=0.8985979, scale=1024).ir
    assert model.metadata["certified_length"] == 6
    dfa = language_dfa(resolve_language("Y(a)", ("a", "b")))
    known = {}
    for length in range(1, 12):
        strings = ["".join(s) for s in itertools.product("ab", repeat=length)]
        verdicts = evaluate(model, strings).accepted
        truth = np.array([s.endswith("a") for s in strings])
        known[length] = int((verdicts != truth).sum())
    assert all(known[n] == 0 for n in range(1, 7)) and any(known.values())
    found = worst_case(model=model, dfa=dfa, lengths=range(1, 12), budget=2048, seed=0,
                       settings=SearchSettings(stop_at_first_failure=False))
    assert {e.length: e.failures > 0 for e in found.per_length} == {n: known[n] > 0 for n in known}
    first_bad = min(n for n in known if known[n])
    assert found.n_star_worst == first_bad - 1 >= 6 and found.failure_length == first_bad
    verdict = evaluate(model, [found.failure]).accepted[0]
    assert verdict != found.failure.endswith("a") and verdict != found.failure_label
    short = [e for e in found.per_length if e.length <= 11 and 2**e.length <= 2048 + 16]
    assert all(e.enumerated == ("all",) for e in short if e.failures == 0)


def test_readout_scores_decide_as_the_evaluator_does():
    model = compile_formula("P(a & P(b))", ("a", "b")).ir
    rng = np.random.default_rng(1)
    symbols = rng.integers(0, 2, size=(30, 9))
    strings = ["".join("ab"[i] for i in row) for row in symbols]
    assert ((readout_scores(model, symbols) > 0) == evaluate(model, strings).accepted).all()
    with pytest.raises(FormalRopeError):
        readout_scores(model, symbols[0])


# ------------------------------------------------------------------------------ the pieces
@pytest.mark.parametrize("language", ["(ab)*", "(aab)*", "(a|b)*b(a|b)(a|b)"])
def test_enumeration_and_capped_counts_match_brute_force(language):
    dfa = _dfa(language)
    for length in range(1, 9):
        every = np.array(list(itertools.product(range(dfa.n_symbols), repeat=length)), dtype=np.int64)
        labels = accepts_encoded(dfa, every, np.full(len(every), length))
        for accepted in (True, False):
            expected = every[labels == accepted]
            assert (enumerate_class(dfa, length, accepted=accepted, limit=len(expected)) == expected).all()
            exact = count_strings(dfa, length, accepted)
            assert capped_counts(dfa_graph(dfa, accepted), length, 5)[length, dfa.start] == min(5, exact)
            assert class_counts(dfa, [length], 1000)[accepted][0] == exact
    with pytest.raises(FormalRopeError):
        enumerate_class(dfa, 12, accepted=False, limit=10)


def test_one_edit_neighbours_are_the_substitutions_and_swaps():
    neighbours = one_edit_neighbours(np.array([[0, 1, 1]]), 3)
    expected = {(1, 1, 1), (2, 1, 1), (0, 2, 1), (0, 0, 1), (0, 1, 2), (0, 1, 0), (1, 0, 1)}
    assert {tuple(row) for row in neighbours} == expected and len(neighbours) == 7
    assert one_edit_neighbours(np.zeros((2, 4), dtype=np.int64), 1).shape == (0, 4)


def _edit_distance(a, b) -> int:
    rows = list(range(len(b) + 1))
    for i, x in enumerate(a, 1):
        previous, rows[0] = rows[0], i
        for j, y in enumerate(b, 1):
            previous, rows[j] = rows[j], min(rows[j] + 1, rows[j - 1] + 1, previous + (x != y))
    return rows[-1]


def test_mutations_keep_the_length_and_stay_within_two_edits_per_step():
    rng = np.random.default_rng(0)
    parents = rng.integers(0, 3, size=(300, 12))
    mutants = mutate(parents, rng, 3, max_edits=1)
    assert mutants.shape == parents.shape and mutants.min() >= 0 and mutants.max() <= 2
    distances = [_edit_distance(list(p), list(m)) for p, m in zip(parents, mutants)]
    assert max(distances) <= 2 and np.mean([d > 0 for d in distances]) > 0.6
    # each kind of edit occurs: substitutions (Hamming 1), swaps, and insertion + deletion
    hamming = (parents != mutants).sum(axis=1)
    assert (hamming == 1).any() and (hamming == 2).any() and (hamming > 2).any()
    assert (mutate(np.zeros((4, 5), dtype=np.int64), rng, 1, max_edits=2) == 0).all()  # {a}: nothing to change


def test_bad_inputs_are_user_errors():
    dfa = _dfa("(ab)*")
    model = compile_formula("P(a)", ("a", "b")).ir
    with pytest.raises(FormalRopeError, match="increasing"):
        worst_case(model=model, dfa=dfa, lengths=[5, 4])
    with pytest.raises(FormalRopeError, match="symbols"):
        worst_case(model=model, dfa=_dfa("(abc)*"), lengths=[3])
    with pytest.raises(FormalRopeError, match="budget"):
        SearchSettings(budget=-1)
    config = RunConfig(language="(ab)*", pe="nope", layers=1, d_model=8, heads=2)
    pack = build_model(config.with_(seed=0), 2, None)
    with pytest.raises(FormalRopeError, match="fp32"):
        worst_case(model=pack, dfa=dfa, lengths=[3], fmt="bf16")
    assert PackScorer(pack).runs == 1


# ------------------------------------------------------------------------------ lengths with nothing scored
class Recording:
    """A scorer that records every string it is asked to score, per length, and answers as `inner`."""

    def __init__(self, inner):
        self.inner, self.runs, self.n_symbols = inner, inner.runs, inner.n_symbols
        self.seen: dict[int, list[np.ndarray]] = {}

    def scores(self, symbols, runs):
        self.seen.setdefault(symbols.shape[1], []).append(np.array(symbols))
        return self.inner.scores(symbols, runs)

    def classes(self, dfa, length) -> set[bool]:
        rows = self.seen.get(length, [])
        if not rows:
            return set()
        every = np.concatenate(rows)
        return set(accepts_encoded(dfa, every, np.full(len(every), length)).tolist())


def _existing(dfa, length) -> set[bool]:
    return {accepted for accepted in (True, False) if count_strings(dfa, length, accepted) > 0}


def _sampled_n_star(scorer, dfa, sets) -> int:
    """N* of the start sets by SPEC §8 with the tested-classes rule, computed here from scratch: a
    length passes when every string is right and every class that exists there has a string."""
    best = 0
    for labelled in sets:
        labels = accepts_encoded(dfa, labelled.symbols, np.full(len(labelled.symbols), labelled.length))
        right = (scorer.scores(np.asarray(labelled.symbols), [0])[0] > 0) == labels
        if not right.all() or not _existing(dfa, labelled.length) <= set(labels.tolist()):
            break
        best = labelled.length
    return best


def test_lengths_where_nothing_was_scored_do_not_pass():
    """An exact model, no start strings and no budget: at odd lengths of (ab)* (only negatives, 2^L of
    them) nothing is scored, so no length passes: N* 0 and not complete (the old search said 60)."""
    dfa = _dfa("(ab)*")
    scorer = Planted(dfa, lambda symbols: np.ones(len(symbols)))
    sets = list(sampled_start_sets(dfa, range(41, 61), 0, 0))
    found = search(scorer, dfa, sets, settings=SearchSettings(budget=0, seed=0))[0]
    assert found.n_star_worst == 0 and found.n_star_start == 0 and not found.complete
    assert found.failure is None and len(found.per_length) == 20
    odd = [entry for entry in found.per_length if entry.length % 2]
    assert all(entry.tried == 0 and entry.unscored == ("negative",) and not entry.passed for entry in odd)
    # at even lengths the lone positive is enumerated, but no negative is scored, nor anything by the start set
    even = found.per_length[1]
    assert even.tried == 1 and even.unscored == ("negative",) and even.start_unscored == ("positive", "negative")
    assert found.to_dict()["per_length"][0]["passed"] is False


def test_a_search_cannot_count_a_length_its_start_set_did_not_test():
    """Empty start sets and a budget of 8: the search scores strings of both classes at some lengths,
    but the sampled N* of empty sets is 0, and the worst case never exceeds it."""
    dfa = _dfa("(a|b)*b(a|b)(a|b)")
    scorer = Planted(dfa, lambda symbols: np.ones(len(symbols)))
    sets = list(sampled_start_sets(dfa, range(0, 8), 0, 0))
    found = search(scorer, dfa, sets, settings=SearchSettings(budget=8, seed=0))[0]
    assert found.n_star_start == 0 and found.n_star_worst == 0 and not found.complete
    assert any(not entry.unscored for entry in found.per_length[1:])  # the search itself covered some lengths
    sets = list(sampled_start_sets(dfa, range(0, 8), 4, 0))
    covered = search(scorer, dfa, sets, settings=SearchSettings(budget=8))[0]
    assert covered.n_star_worst == covered.n_star_start == 7 and covered.complete


@settings(max_examples=60)
@given(
    language=st.sampled_from(["(ab)*", "(a|b)*b(a|b)(a|b)", "(aab)*", "(b*ab*a)*b*", "a*"]),
    lengths=st.lists(st.integers(0, 11), min_size=1, max_size=6, unique=True).map(sorted),
    start=st.integers(0, 5),
    budget=st.integers(0, 40),
    seed=st.integers(0, 3),
    modulus=st.integers(2, 40),
    all_lengths=st.booleans(),
)
def test_no_length_counts_without_a_scored_string_of_each_existing_class(language, lengths, start, budget, seed,
                                                                         modulus, all_lengths):
    """Any start size, budget and lengths (0 included), a model wrong on a pseudo-random set of
    strings: n_star_worst <= the sampled N* of the same start sets (computed here from scratch), and
    every length up to n_star_worst had a scored string of each class that exists there, in its start
    set and among everything the model was asked; `complete` only when that holds at every length."""
    dfa = _dfa(language)
    weights = np.arange(1, 13) * (seed + 3)

    def flaw(symbols):
        keys = (symbols * weights[: symbols.shape[1]]).sum(axis=1) + symbols.shape[1]
        return np.where(keys % modulus == 0, -1.0, 1.0)

    sets = list(sampled_start_sets(dfa, lengths, start, seed))
    scorer = Recording(Planted(dfa, flaw))
    found = search(scorer, dfa, sets, settings=SearchSettings(budget=budget, seed=seed,
                                                              stop_at_first_failure=not all_lengths))[0]
    sampled = _sampled_n_star(Planted(dfa, flaw), dfa, sets)
    assert found.n_star_worst <= found.n_star_start <= max(sampled, found.per_length[-1].length)
    assert found.n_star_worst <= sampled
    by_length = {labelled.length: labelled for labelled in sets}
    counted = 0  # the lengths n_star_worst counts: the searched prefix it reaches (none when it is 0 by a failure)
    while counted < len(found.per_length) and found.per_length[counted].length <= found.n_star_worst:
        counted += 1
    if found.n_star_worst == 0 and counted and not found.per_length[0].passed:
        counted = 0
    for index, entry in enumerate(found.per_length):
        exists = _existing(dfa, entry.length)
        start_labels = set(by_length[entry.length].labels.tolist())
        if index < counted:
            assert entry.failures == 0
            assert exists <= scorer.classes(dfa, entry.length) and exists <= start_labels
        if not entry.failures:
            names = {True: "positive", False: "negative"}
            assert set(entry.unscored) == {names[c] for c in exists - scorer.classes(dfa, entry.length)}
    if found.complete:
        assert [entry.length for entry in found.per_length] == lengths
        assert all(_existing(dfa, n) <= scorer.classes(dfa, n) & set(by_length[n].labels.tolist()) for n in lengths)


def test_the_empty_string_is_searched():
    """Length 0 is one string (the empty one): scored, enumerated, and reported as a failure ("")
    where the model is wrong on it; a flat start set of no symbols is zero rows, not a crash."""
    dfa = _dfa("(ab)*")
    exact = Planted(dfa, lambda symbols: np.ones(len(symbols)))
    found = search(exact, dfa, list(sampled_start_sets(dfa, range(0, 4), 4, 0)), settings=SearchSettings(budget=8))[0]
    assert found.n_star_worst == 3 and found.complete and found.per_length[0].tried == 1
    wrong_on_empty = Planted(dfa, lambda symbols: np.full(len(symbols), -1.0 if symbols.shape[1] == 0 else 1.0))
    found = search(wrong_on_empty, dfa, list(sampled_start_sets(dfa, range(0, 4), 4, 0)))[0]
    assert found.failure == "" and found.failure_length == 0 and found.failure_label is True
    assert found.n_star_worst == 0 and found.n_star_start == 0
    flat = LabeledSet(0, np.empty(0, dtype=np.int64), np.empty(0, dtype=bool), 0)
    found = search(exact, dfa, [flat], settings=SearchSettings(budget=4))[0]
    assert found.per_length[0].tried == 1 and found.n_star_worst == 0  # the search scored ε; the start set did not


def test_the_python_api_searches_length_zero_and_counts_nothing_unscored():
    """worst_case on a trained and a compiled model at lengths 0..3; with no start strings and no
    budget nothing passes (the old search counted every length)."""
    config = RunConfig(language="(ab)*", pe="nope", layers=1, d_model=16, heads=2, seed=1)
    torch.manual_seed(0)
    model = build_model(config, 2, None).eval()
    dfa = _dfa("(ab)*")
    found = worst_case(model=model, dfa=dfa, lengths=range(0, 4), budget=16, seed=0, n_start=4)
    assert [entry.length for entry in found.per_length][0] == 0 and found.per_length[0].tried >= 1
    assert found.n_star_worst <= found.n_star_start
    nothing = worst_case(model=model, dfa=dfa, lengths=range(41, 51), budget=0, seed=0, n_start=0)
    assert nothing.n_star_worst == 0 and nothing.n_star_start == 0 and not nothing.complete
    compiled = compile_formula("P(a) & MOD_2^0", ("a", "b")).ir
    found = worst_case(model=compiled, lengths=range(0, 6), budget=8, seed=0, n_start=4)
    assert found.n_star_worst == 5 and found.complete and found.per_length[0].length == 0


@settings(max_examples=8)
@given(start=st.integers(1, 4), budget=st.integers(0, 24), first=st.integers(0, 6), count=st.integers(1, 4))
def test_a_trained_models_worst_case_never_beats_its_sampled_n_star(start, budget, first, count):
    """The same start sets through the sampled evaluation (`evaluate_sets`, N* with the tested-classes
    rule) and the search of a trained model: n_star_worst <= n_star == n_star_start."""
    config = RunConfig(language="(a|b)*b(a|b)", pe="nope", layers=1, d_model=16, heads=2, seed=1)
    torch.manual_seed(1)
    model = build_model(config, 2, None).eval()
    dfa = _dfa("(a|b)*b(a|b)")
    lengths = list(range(first, first + count))
    sets = test_sets(dfa, lengths, start, 0)
    sampled = evaluate_sets(model, sets, decode=lambda row: str(row))
    found = worst_case(model=model, dfa=dfa, lengths=lengths, budget=budget, seed=0, start_sets=sets)
    assert found.n_star_worst <= sampled.n_star
    if len(found.per_length) == count:
        assert found.n_star_start == sampled.n_star
