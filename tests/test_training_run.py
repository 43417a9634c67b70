"""run_training end to end on tiny configs: determinism, learning, outcomes, periods, checkpoints."""

from __future__ import annotations

import json
import math
import zipfile

import numpy as np
import pytest
import torch

from formal_rope.errors import FormalRopeError
from formal_rope.run_config.config import RunConfig, check_config
from formal_rope.runs import pack as training
from formal_rope.runs import run_training
from formal_rope.storage.checkpoints import read_metadata
from formal_rope.training import data as training_data
from formal_rope.training import resolve
from formal_rope.training.model import encode_fixed_length
from formal_rope.training.run_result import RunResult
from formal_rope.training.scales import QUICK_SHRINKS, SCALES, apply_scale
from formal_rope.training.trained_classifier import load_checkpoint

TINY = dict(layers=1, d_model=16, heads=2, batch_size=16, steps=20, lr=3e-3,
            test_min_length=41, test_max_length=44, n_per_length=6)


def _tiny(language="(ab)*", **changes) -> RunConfig:
    return RunConfig(language=language, **{**TINY, **changes})


def test_same_config_gives_bit_identical_runs():
    config = _tiny(pe="rope", seed=3)
    losses = []

    def record(event):
        if event.stage == "train":
            losses[-1].append(event.loss)

    results, models = [], []
    for _ in range(2):
        losses.append([])
        result, model = run_training(config, progress=record)
        results.append(result)
        models.append(model)
    assert losses[0] == losses[1] and len(losses[0]) >= 1
    assert results[0].final_loss == results[1].final_loss
    assert results[0].per_length == results[1].per_length
    for a, b in zip(models[0].state_dict().values(), models[1].state_dict().values()):
        assert torch.equal(a, b)
    # A different seed gives a different model (the seed is actually used).
    other, other_model = run_training(config.with_(seed=4), progress=False)
    assert not torch.equal(next(iter(other_model.state_dict().values())), next(iter(models[0].state_dict().values())))


def test_a_tiny_nope_model_learns_a_sigma_star():
    """aΣ*: the first symbol decides. Test on short lengths (a sanity check of the training loop)."""
    config = RunConfig(
        language="a.*", alphabet=("a", "b"), pe="nope", layers=2, d_model=16, heads=2, batch_size=32,
        steps=150, lr=1e-2, test_min_length=5, test_max_length=12, n_per_length=16,
    )
    result, _ = run_training(config, progress=False)
    assert result.status == "ok"
    assert result.final_loss < 0.1
    assert result.accuracy >= 0.95


def test_diverged_run_is_kept_with_its_status():
    config = _tiny(pe="rope", lr=1e30, grad_clip=0.0, steps=50)
    result, model = run_training(config, progress=False)
    assert result.status == "diverged"
    assert 0 < result.steps_done < 50 and not math.isfinite(result.final_loss)
    assert result.n_star == 0 and math.isnan(result.accuracy) and result.per_length == ()


def test_failure_during_evaluation_is_recorded(monkeypatch):
    def broken(*args, **kwargs):
        raise RuntimeError("evaluation exploded")

    monkeypatch.setattr(training, "evaluate_pack", broken)
    result, model = run_training(_tiny(pe="nope", steps=3), progress=False)
    assert result.status == "failed" and "evaluation exploded" in result.error
    assert result.steps_done == 3 and model is not None


@pytest.mark.parametrize(
    "changes",
    [dict(pe="alibi"), dict(base=0.0), dict(base=-1e4), dict(pe="rope_p", periods=(0,)),
     dict(phase_precision="fp16"), dict(eval_mode="fast"), dict(heads=3), dict(language="(ab")],
)
def test_bad_configs_are_user_errors(changes):
    with pytest.raises(FormalRopeError):
        run_training(_tiny(**changes), progress=False)


def test_periods_auto_and_explicit():
    result, model = run_training(_tiny(pe="rope_p", steps=1), progress=False)
    assert result.resolved_periods == (2,)  # (ab)* needs MOD_2
    assert model.positional.describe()["pair_periods"] == [2, 2, 2, 2]
    result, model = run_training(_tiny(pe="sipe_p", periods=(2, 3), steps=1), progress=False)
    assert result.resolved_periods == (2, 3)
    result, _ = run_training(_tiny(language="(aaa)*", pe="rope_p", steps=1), progress=False)
    assert result.resolved_periods == (3,)


def test_eval_nstar_mode_stops_at_the_first_imperfect_length():
    config = _tiny(pe="nope", steps=2, test_max_length=60, eval_mode="nstar")
    result, _ = run_training(config, progress=False)
    lengths = [r.length for r in result.per_length]
    assert lengths == list(range(41, 41 + len(lengths)))
    if result.n_star < 60:
        assert not result.eval_complete and result.per_length[-1].accuracy < 1.0
        assert result.first_failure is not None and len(result.first_failure) == lengths[-1]


def test_checkpoint_round_trip(tmp_path):
    config = _tiny(pe="jof_projected", steps=5)
    path = tmp_path / "run.zip"
    result, model = run_training(config, progress=False, checkpoint_path=path)
    with zipfile.ZipFile(path) as archive:
        assert sorted(archive.namelist()) == ["metadata.json", "state_dict.pt"]
        metadata = json.loads(archive.read("metadata.json"))
    assert metadata["kind"] == "trained" and metadata["run_id"] == config.run_id()
    assert read_metadata(path)["config"] == config.to_dict()
    loaded = load_checkpoint(path)
    assert loaded.config == config and loaded.alphabet == ("a", "b")
    assert isinstance(loaded.result, RunResult) and loaded.result.per_length == result.per_length
    strings = ["ab", "abab", "ba", "", "aab", "abababababababababab"]
    expected = []
    model.eval()
    with torch.no_grad():
        for text in strings:
            symbols = np.array([["ab".index(c) for c in text]], dtype=np.int64).reshape(1, len(text))
            logits = model(*encode_fixed_length(symbols, 2))
            expected.append(bool(logits[0, 1] > logits[0, 0]))
    assert loaded.classify(strings) == expected
    for fmt in ("fp32", "bf16", "fp16"):
        decisions = loaded.classify(strings, fmt)
        assert len(decisions) == len(strings) and all(isinstance(d, bool) for d in decisions)
    with pytest.raises(FormalRopeError):
        loaded.classify(["abc"])  # unknown symbol
    with pytest.raises(FormalRopeError):
        loaded.classify(["ab"], "fp8")
    (tmp_path / "junk.zip").write_bytes(b"not a zip")
    with pytest.raises(FormalRopeError):
        load_checkpoint(tmp_path / "junk.zip")


def test_scales_keep_test_lengths_and_list_what_quick_shrinks():
    quick = apply_scale(RunConfig(language="(ab)*"), "quick")
    paper = apply_scale(RunConfig(language="(ab)*"), "paper")
    assert (quick.test_min_length, quick.test_max_length) == (paper.test_min_length, paper.test_max_length) == (41, 500)
    assert paper.layers == 5 and paper.d_model == 64 and paper.heads == 8 and paper.steps == 10**6
    assert paper.batch_size == 128 and paper.n_per_length == 512
    assert SCALES["paper"]["lrs"] == (1e-4, 3e-4, 5e-4) and len(SCALES["paper"]["seeds"]) == 5
    assert quick.steps < paper.steps and quick.n_per_length < paper.n_per_length and QUICK_SHRINKS
    with pytest.raises(FormalRopeError):
        apply_scale(quick, "huge")


def test_near_miss_training_negatives_are_real_near_misses():
    from formal_rope.automata import accepts
    from formal_rope.sampling import decode, training_batch

    dfa = resolve.resolve_dfa(RunConfig(language="(ab)*"))
    rng = np.random.default_rng(5)
    batch = training_batch(dfa, rng, 64, 0, 40)
    mixed = training_data.mix_near_misses(batch, dfa, rng, 0.5, 0, 40)
    strings = decode(mixed.symbols, dfa.alphabet, mixed.lengths)
    assert np.array_equal(accepts(dfa, strings), mixed.labels)  # labels stay true
    changed = np.flatnonzero((mixed.lengths != batch.lengths) | np.any(mixed.symbols != batch.symbols, axis=1))
    assert len(changed) == 16 and not mixed.labels[changed].any()  # half of the 32 negatives
    # A near-miss is one substitution away from a positive: for (ab)*, even length and one bad symbol.
    for row in changed.tolist():
        text = strings[row]
        assert len(text) % 2 == 0
        assert sum(c != "ab"[i % 2] for i, c in enumerate(text)) == 1
    with pytest.raises(FormalRopeError):
        run_training(_tiny(train_near_miss_fraction=1.5), progress=False)


def test_test_lengths_are_generated_lazily():
    # Regression: the whole test range was materialised as a Python list before the first set was
    # sampled, so a huge --test-lengths range exhausted memory before evaluating anything.
    config = _tiny(test_min_length=41, test_max_length=10**13, n_per_length=2)
    first = next(training_data.test_length_blocks(resolve.resolve_dfa(config), config))
    assert first.length == 41


def test_unwritable_checkpoint_fails_before_training(tmp_path):
    events = []
    blocker = tmp_path / "file"
    blocker.write_text("")
    with pytest.raises(FormalRopeError, match="cannot write the checkpoint"):
        run_training(_tiny(), progress=events.append, checkpoint_path=blocker / "sub" / "model.zip")
    assert events == []  # no training step ran


def test_periods_are_only_reported_for_periodic_encodings():
    # Regression: `train --pe rope --periods 2` reported "periods 2" although RoPE has no periods.
    config = _tiny(pe="rope", periods=(2,))
    assert resolve.resolve_periods(config, resolve.resolve_dfa(config)) is None
    assert resolve.resolve_periods(config.with_(pe="rope_p"), resolve.resolve_dfa(config)) == (2,)


@pytest.mark.parametrize("language", [".*", "∅"])
def test_a_language_without_one_class_is_a_user_error_before_training(language):
    # Regression: Σ* and ∅ were "failed" runs (exit 1) instead of a user error (exit 2).
    events = []
    with pytest.raises(FormalRopeError, match="cannot train on .*balanced training batches"):
        run_training(_tiny(language=language, alphabet=("a", "b")), progress=events.append)
    assert events == []


def test_test_near_miss_fraction_shapes_the_test_sets_and_is_validated(capsys):
    """test_near_miss_fraction (default 0.5, SPEC §4) is passed to the test-set builder: 0 leaves no
    near-miss negative; it is absent from the run id at its default and refused outside [0, 1]."""
    from tests.cli_support import run_main

    config = _tiny(test_min_length=10, test_max_length=12, n_per_length=8)
    dfa = resolve.resolve_dfa(config)
    default = list(training_data.test_length_blocks(dfa, config))
    assert sum(int(s.near_miss.sum()) for s in default) > 0
    none = list(training_data.test_length_blocks(dfa, config.with_(test_near_miss_fraction=0.0)))
    assert sum(int(s.near_miss.sum()) for s in none) == 0
    assert any(not np.array_equal(a.symbols, b.symbols) for a, b in zip(default, none))
    assert config.with_(test_near_miss_fraction=0.5).run_id() == config.run_id()
    assert "test_near_miss_fraction" not in config.id_fields()
    assert config.with_(test_near_miss_fraction=0.0).run_id() != config.run_id()
    for bad in (-0.1, 1.5, math.nan):
        with pytest.raises(FormalRopeError, match="test_near_miss_fraction"):
            check_config(config.with_(test_near_miss_fraction=bad))
    code, _, err = run_main(capsys, ["train", "--lang", "(ab)*", "--steps", "1", "--set", "test_near_miss_fraction=2"])
    assert code == 2 and "test_near_miss_fraction must lie in [0, 1]" in err
