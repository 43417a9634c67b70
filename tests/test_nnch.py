"""NNCH's score (evaluation.nnch) against a direct transcription of DeepMind's reference code, the
always-reject model that separates it from our balanced accuracy, its uniform strings, and where
it is (not) measured."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest
import torch

from formal_rope.automata import accepts, language_dfa
from formal_rope.evaluation.pack_evaluation import evaluate_model, evaluate_pack
from formal_rope.lang.source import resolve_language
from formal_rope.run_config.config import RunConfig
from formal_rope.run_config.fields import ID_NEUTRAL
from formal_rope.run_config.sections import DEFAULT_NNCH_SAMPLES
from formal_rope.sampling import test_sets, uniform_set, write_flare_split
from formal_rope.sampling.text import decode
from formal_rope.training.data import is_nnch_length, run_data
from tests.cli_support import run_main


class RuleStub(torch.nn.Module):
    """A fixed toy model (a pack of `runs` runs): run r accepts a string iff `rules[r](symbols)`
    (symbols (n, L) of one length). It reads the tokens the evaluator builds (bos, symbols, eos)."""

    n_symbols = 2
    blocks = [type("B", (), {"heads": 1})()]

    def __init__(self, *rules) -> None:
        super().__init__()
        self.rules = rules
        self.runs = len(rules)

    def forward(self, tokens, readout):
        symbols = tokens[0, :, 1:-1].numpy()  # every run reads the same strings
        logits = torch.zeros(self.runs, tokens.shape[1], 2)
        for run, rule in enumerate(self.rules):
            logits[run, torch.from_numpy(np.asarray(rule(symbols), dtype=bool)), 1] = 1.0
            logits[run, torch.from_numpy(~np.asarray(rule(symbols), dtype=bool)), 0] = 1.0
        return logits


def first_symbol_is_0(symbols):
    return symbols[:, 0] == 0


def always_reject(symbols):
    return np.zeros(len(symbols), dtype=bool)


def nnch_reference_score(predict, language, *, sequence_length, max_test_length, total_batch_size,
                         sub_batch_size, strings):
    """DeepMind's experiments/range_evaluation.py + example.py, transcribed: for every length
    1..max_test_length the mean over total_batch_size // sub_batch_size sub-batches of the
    sub-batch's mean accuracy, then np.mean(accuracies[sequence_length + 1:]). `strings(length)`
    gives the length's total_batch_size uniform strings (NNCH: jrandom.randint); the labels come from
    the language's DFA through `accepts` (NNCH: the task's own rule)."""
    accuracies = []
    for length in range(1, max_test_length + 1):
        batch = strings(length)
        sub_accuracies = []
        for index in range(total_batch_size // sub_batch_size):
            rows = batch[index * sub_batch_size:(index + 1) * sub_batch_size]
            labels = accepts(language, decode(rows, language.alphabet))
            sub_accuracies.append(float(np.mean(np.asarray(predict(rows)) == labels)))
        accuracies.append({"length": length, "accuracy": np.mean(sub_accuracies)})
    return np.mean([r["accuracy"] for r in accuracies][sequence_length + 1:])


def test_score_equals_a_transcription_of_nnch_reference_code():
    config = RunConfig(language="parity", test_min_length=41, test_max_length=60, nnch_samples=64, n_per_length=8)
    dfa = language_dfa(resolve_language("parity"))
    evaluation = evaluate_model(RuleStub(first_symbol_is_0), config, dfa)
    expected = nnch_reference_score(
        first_symbol_is_0, dfa, sequence_length=config.train_max_length, max_test_length=60, total_batch_size=64,
        sub_batch_size=8, strings=lambda length: uniform_set(dfa, length, 64, config.eval_seed).symbols,
    )
    assert evaluation.nnch_accuracy == pytest.approx(expected, rel=1e-12, abs=1e-12)
    assert 0.3 < evaluation.nnch_accuracy < 0.7  # a real average, not a degenerate 0 or 1
    # 41, the first length past training, is left out, as example.py's slice leaves it out.
    assert [r.length for r in evaluation.per_length if r.nnch_n] == list(range(42, 61))
    assert all(r.nnch_n == 64 for r in evaluation.per_length if r.length > 41)


def test_always_reject_on_ab_star_scores_one_under_nnch_and_half_under_ours():
    config = RunConfig(language="(ab)*", test_min_length=41, test_max_length=80, nnch_samples=32, n_per_length=16)
    dfa = language_dfa(resolve_language("(ab)*"))
    evaluation = evaluate_model(RuleStub(always_reject), config, dfa)
    # Balanced sets: half positives (where (ab)* has strings: even lengths), all rejected.
    even = [r.accuracy for r in evaluation.per_length if r.length % 2 == 0]
    assert even == [0.5] * len(even)
    assert evaluation.accuracy < 0.8
    # Uniform strings: a positive of length 42 has probability 2^-42, so rejecting is (almost surely) right.
    assert evaluation.nnch_accuracy == 1.0


def test_uniform_strings_are_uniform_and_labelled_by_the_dfa():
    dfa = language_dfa(resolve_language("contains_ab"))
    strings = uniform_set(dfa, 30, 4000, seed=3)
    assert strings.symbols.shape == (4000, 30) and strings.n_near_miss == 0
    counts = np.bincount(strings.symbols.ravel(), minlength=3) / strings.symbols.size
    assert np.allclose(counts, 1 / 3, atol=0.01)  # each symbol independently uniform
    assert np.array_equal(strings.labels, accepts(dfa, decode(strings.symbols, dfa.alphabet)))
    # Σ*abΣ* at length 30: P(no ab) is small, so uniform strings are mostly positive (not balanced).
    assert strings.labels.mean() > 0.9
    assert np.array_equal(uniform_set(dfa, 30, 4000, seed=3).symbols, strings.symbols)
    assert not np.array_equal(uniform_set(dfa, 30, 4000, seed=4).symbols, strings.symbols)


def test_nnch_strings_change_no_balanced_number():
    """The uniform strings come from a stream of their own and never enter N*, accuracy or the first failure."""
    dfa = language_dfa(resolve_language("parity"))
    sets = test_sets(dfa, [42, 43], 8, seed=0)
    uniform_set(dfa, 42, 16, seed=0)
    assert all(np.array_equal(a.symbols, b.symbols) for a, b in zip(sets, test_sets(dfa, [42, 43], 8, seed=0)))
    base = RunConfig(language="parity", test_min_length=41, test_max_length=50, n_per_length=8)
    without, with_ = (evaluate_model(RuleStub(first_symbol_is_0), base.with_(nnch_samples=n), dfa) for n in (0, 16))
    assert [(r.length, r.accuracy, r.n) for r in without.per_length] == [
        (r.length, r.accuracy, r.n) for r in with_.per_length]
    assert (without.n_star, without.accuracy, without.first_failure) == (with_.n_star, with_.accuracy,
                                                                         with_.first_failure)
    assert math.isnan(without.nnch_accuracy) and not math.isnan(with_.nnch_accuracy)


def test_runs_of_a_pack_each_get_their_own_score():
    config = RunConfig(language="parity", test_min_length=41, test_max_length=50, nnch_samples=16, n_per_length=8)
    dfa = language_dfa(resolve_language("parity"))
    pack = evaluate_pack(RuleStub(first_symbol_is_0, always_reject), [config, config.with_(seed=1)],
                         [run_data(config, dfa)] * 2)
    alone = [evaluate_model(RuleStub(rule), config, dfa) for rule in (first_symbol_is_0, always_reject)]
    assert [e.nnch_accuracy for e in pack] == [e.nnch_accuracy for e in alone]


def test_nstar_mode_that_stops_early_has_no_score():
    config = RunConfig(language="(ab)*", test_min_length=41, test_max_length=60, eval_mode="nstar")
    dfa = language_dfa(resolve_language("(ab)*"))
    evaluation = evaluate_model(RuleStub(always_reject), config, dfa)
    assert not evaluation.complete and math.isnan(evaluation.nnch_accuracy)


def test_nnch_lengths_follow_training_not_the_test_range():
    config = RunConfig(language="(ab)*", train_max_length=20)
    assert not is_nnch_length(config, 21) and is_nnch_length(config, 22)
    sparse = RunConfig(language="(ab)*", test_lengths=(41, 45, 50))
    assert [length for length in sparse.tested_lengths() if is_nnch_length(sparse, length)] == [45, 50]


def test_default_keeps_every_run_id():
    assert ID_NEUTRAL["nnch_samples"] == DEFAULT_NNCH_SAMPLES
    config = RunConfig(language="(ab)*", steps=20, layers=1, d_model=8, heads=2, batch_size=16, n_per_length=8,
                       test_min_length=41, test_max_length=50)
    assert config.run_id() == "868cd1585dc6a463"  # its id before nnch_samples existed
    assert "nnch_samples" not in config.id_fields()
    assert config.with_(nnch_samples=512).run_id() != config.run_id()


def test_train_json_has_the_score_and_data_runs_refuse_the_option(tmp_path, capsys):
    small = ["--steps", "5", "--layers", "1", "--d-model", "8", "--heads", "2", "--batch-size", "8",
             "--n-per-length", "4", "--test-lengths", "41..44", "--no-save", "--json"]
    code, out, _ = run_main(capsys, ["train", "--lang", "(ab)*", *small])
    payload = json.loads(out)
    assert code == 0 and "nnch_accuracy" in payload
    assert [r["nnch_n"] for r in payload["per_length"]] == [0, 2, 2, 2]
    assert payload["config"]["nnch_samples"] == DEFAULT_NNCH_SAMPLES
    code, out, _ = run_main(capsys, ["train", "--lang", "(ab)*", *small, "--nnch-samples", "0"])
    assert code == 0 and json.loads(out)["nnch_accuracy"] is None
    code, _, err = run_main(capsys, ["train", "--lang", "(ab)*", *small, "--nnch-samples", "-1"])
    assert code == 2 and "nnch_samples must be non-negative" in err
    dfa = language_dfa(resolve_language("Σ*abΣ*"))
    folder = tmp_path / "sab"
    write_flare_split(folder, test_sets(dfa, range(0, 13), n_per_length=8, seed=5), dfa)
    write_flare_split(folder / "datasets" / "test", test_sets(dfa, [14, 15, 17], n_per_length=6, seed=6), dfa)
    code, _, err = run_main(capsys, ["train", "--data", str(folder), "--nnch-samples", "8", *small[:10], "--json"])
    assert code == 2 and "--nnch-samples" in err and "files" in err
    code, out, _ = run_main(capsys, ["train", "--data", str(folder), *small[:10], "--no-save", "--json"])
    assert code == 0 and json.loads(out)["nnch_accuracy"] is None  # a run on files: no uniform strings
