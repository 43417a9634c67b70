"""Evaluation: N* edge cases, early stopping in nstar mode, first failure, chunking, deduplication."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st

from formal_rope.automata import accepts_encoded, language_dfa
from formal_rope.errors import FormalRopeError
from formal_rope.evaluation import length_generalization as evaluation
from formal_rope.evaluation.length_generalization import evaluate_sets, n_star, predict_fixed_length
from formal_rope.lang import resolve_language
from formal_rope.run_config.config import RunConfig
from formal_rope.sampling import test_sets, unscored_classes
from formal_rope.training.setup import build_model


def test_n_star_edge_cases():
    assert n_star([], []) == 0
    assert n_star([41], [1.0]) == 41
    assert n_star([41], [0.99]) == 0
    assert n_star([41, 42, 43], [1.0, 1.0, 1.0]) == 43
    assert n_star([41, 42, 43], [0.5, 1.0, 1.0]) == 0  # first length imperfect
    assert n_star([41, 42, 43, 44], [1.0, 1.0, 0.9, 1.0]) == 42  # later recovery does not count
    assert n_star([41, 45, 50], [1.0, 1.0, 0.0]) == 45  # sparse test lengths


@given(st.lists(st.booleans(), min_size=1, max_size=30))
def test_n_star_matches_definition(perfect):
    lengths = list(range(41, 41 + len(perfect)))
    accuracies = [1.0 if ok else 0.75 for ok in perfect]
    expected = max([0] + [n for n in lengths if all(perfect[: n - 41 + 1])])
    assert n_star(lengths, accuracies) == expected


class ParityStub(torch.nn.Module):
    """A pack of one run that accepts exactly the strings whose length is even, except length 45
    where it always accepts."""

    n_symbols = 2
    runs = 1
    blocks = [type("B", (), {"heads": 1})()]

    def __init__(self) -> None:
        super().__init__()
        self.calls: list[int] = []

    def forward(self, tokens, readout):
        runs, count, width = tokens.shape  # the pack layout (runs, strings, tokens)
        self.calls.append(count)
        length = width - 2
        accept = length % 2 == 0 or length == 45
        logits = torch.zeros(runs, count, 2)
        logits[..., int(accept)] = 1.0
        return logits


@dataclass
class FakeSet:
    length: int
    symbols: np.ndarray
    labels: np.ndarray


def _even_length_sets(lengths):
    rng = np.random.default_rng(0)
    return [
        FakeSet(n, rng.integers(0, 2, size=(6, n)), np.full(6, n % 2 == 0)) for n in lengths
    ]


def test_full_and_nstar_modes():
    sets = _even_length_sets(range(41, 50))
    full = evaluate_sets(ParityStub(), sets, decode=lambda row: "".join("ab"[s] for s in row), mode="full")
    assert [r.length for r in full.per_length] == list(range(41, 50))
    assert full.n_star == 44 and full.complete
    assert [r.accuracy for r in full.per_length if r.length == 45] == [0.0]
    assert full.accuracy == pytest.approx(8 / 9)
    assert full.first_failure == "".join("ab"[s] for s in sets[4].symbols[0])
    consumed = []

    def lazy():
        for labelled in sets:
            consumed.append(labelled.length)
            yield labelled

    quick = evaluate_sets(ParityStub(), lazy(), decode=lambda row: "x", mode="nstar")
    assert quick.n_star == 44 and not quick.complete
    assert consumed == [41, 42, 43, 44, 45]  # stopped sampling at the first imperfect length
    with pytest.raises(FormalRopeError, match="unknown eval mode 'fast'"):  # was a plain ValueError
        evaluate_sets(ParityStub(), sets, decode=str, mode="fast")


def test_duplicates_are_classified_once_and_chunks_do_not_change_results(monkeypatch):
    stub = ParityStub()
    symbols = np.zeros((10, 44), dtype=np.int64)
    symbols[5:, 0] = 1
    assert predict_fixed_length(stub, symbols).tolist() == [True] * 10
    assert stub.calls == [2]  # two distinct strings

    config = RunConfig(language="(ab)*", pe="rope", layers=1, d_model=16, heads=2)
    torch.manual_seed(0)
    model = build_model(config, 2, None).eval()
    rng = np.random.default_rng(1)
    symbols = rng.integers(0, 2, size=(9, 60))
    whole = predict_fixed_length(model, symbols)
    monkeypatch.setattr(evaluation, "SCORE_ELEMENT_BUDGET", 2 * 62 * 62)  # one string per chunk
    assert evaluation.chunk_size(9, 2, 62) == 1
    calls = []
    original_forward = model.forward
    monkeypatch.setattr(model, "forward", lambda *args: calls.append(1) or original_forward(*args))
    assert np.array_equal(predict_fixed_length(model, symbols), whole)
    assert len(calls) == 9


class DfaStub(ParityStub):
    """A pack of one run that classifies exactly as `dfa` does (reads the symbols between bos and eos)."""

    def __init__(self, dfa) -> None:
        super().__init__()
        self.dfa = dfa

    def forward(self, tokens, readout):
        runs, count, width = tokens.shape
        symbols = tokens[0, :, 1:-1].numpy()
        accept = accepts_encoded(self.dfa, symbols, np.full(count, width - 2))
        logits = torch.zeros(runs, count, 2)
        logits[..., 1] = torch.from_numpy(accept.astype(np.float32))
        return logits


def test_n_star_stops_at_a_length_with_an_untested_class():
    assert n_star([41, 42, 43], [1.0, 1.0, 1.0], [True, False, True]) == 41
    assert n_star([0, 1], [1.0, 1.0], [False, True]) == 0
    assert unscored_classes((True, True), np.array([True, True])) == ("negative",)
    assert unscored_classes((True, False), np.array([True])) == ()
    assert unscored_classes((True, True), np.array([], dtype=bool)) == ("positive", "negative")
    assert unscored_classes(None, np.array([], dtype=bool)) == ("string",) and unscored_classes(None, [False]) == ()


def test_a_class_with_no_test_string_ends_n_star_even_for_an_exact_model():
    """Strings ending in b: both classes exist at every length from 1, only negatives (ε) at 0. One
    test string per length samples only a positive there, so an exact model's N* is 0 (the length 0
    alone passes), not 5; two strings per length test both classes and N* is 5. nstar mode stops at
    the first length not passed."""
    dfa = language_dfa(resolve_language("(a|b)*b"))
    one = test_sets(dfa, range(0, 6), 1, 0)
    assert [labelled.exists for labelled in one] == [(False, True)] + [(True, True)] * 5
    found = evaluate_sets(DfaStub(dfa), one, decode=str)
    assert all(r.accuracy == 1.0 for r in found.per_length) and found.first_failure is None
    assert [r.covered for r in found.per_length] == [True] + [False] * 5 and found.n_star == 0
    quick = evaluate_sets(DfaStub(dfa), one, decode=str, mode="nstar")
    assert [r.length for r in quick.per_length] == [0, 1] and quick.n_star == 0 and not quick.complete
    two = evaluate_sets(DfaStub(dfa), test_sets(dfa, range(0, 6), 2, 0), decode=str)
    assert two.n_star == 5 and all(r.covered for r in two.per_length)
    # sets without class information (strings from files) need one string at least
    empty = [FakeSet(41, np.zeros((0, 41), dtype=np.int64), np.zeros(0, dtype=bool)),
             *_even_length_sets([42])]
    assert evaluate_sets(ParityStub(), empty, decode=str).n_star == 0
