"""Packed training: a run inside a pack is the run trained alone (same data, same initial weights,
same losses), each run keeps its own hyper-parameters, a diverged run is frozen without touching
the others, evaluation is packed, and checkpoints keep one run (old single-run files still load)."""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pytest
import torch

from formal_rope.errors import FormalRopeError
from formal_rope.run_config.config import RunConfig
from formal_rope.run_config.encodings import POSITIONAL_ENCODINGS, is_periodic
from formal_rope.runs import run_pack, run_training
from formal_rope.scheduling.packs import check_packable, group_packs, pack_key, parse_pack
from formal_rope.training.setup import build_model, build_pack

DATA = Path(__file__).parent / "data"


def _tiny(pe: str = "rope", **changes) -> RunConfig:
    settings = dict(
        language="(ab)*", pe=pe, layers=2, d_model=16, heads=2, steps=50, batch_size=16, lr=3e-3,
        test_min_length=41, test_max_length=46, n_per_length=8, periods=(2,) if is_periodic(pe) else None,
    )
    settings.update(changes)
    return RunConfig(**settings)


def _losses(configs) -> list[list[float]]:
    trace: list[list[float]] = []
    run_pack(configs, progress=False, on_step=lambda step, losses: trace.append(losses))
    return [list(column) for column in zip(*trace)]


@pytest.mark.parametrize("pe", POSITIONAL_ENCODINGS)
def test_a_run_in_a_pack_of_four_follows_the_run_trained_alone(pe):
    """Issue 10.4: per-step losses over the first 50 steps agree to 1e-4 relative (in practice exactly,
    see docs/training.md), with four different seeds, learning rates and (where used) bases."""
    base = _tiny(pe)
    members = [
        base.with_(seed=3, lr=3e-3, base=1e4),
        base.with_(seed=5, lr=1e-3, base=10.0),
        base.with_(seed=7, lr=5e-3, base=1e4, lr_schedule="cosine", warmup_steps=5),
        base.with_(seed=9, lr=2e-3, base=100.0, weight_decay=0.1, train_near_miss_fraction=0.5),
    ]
    packed = _losses(members)
    for run, config in enumerate(members):
        alone = _losses([config])[0]
        assert len(alone) == len(packed[run]) == 50
        np.testing.assert_allclose(packed[run], alone, rtol=1e-4, err_msg=f"{pe} run {run}")


def test_initial_weights_depend_on_the_seed_only():
    configs = [_tiny("jof_projected", seed=s) for s in (1, 2, 3)]
    pack = build_pack(configs, 2, [None] * 3)
    for run, config in enumerate(configs):
        alone = build_model(config, 2, None)
        for (name, packed), (_, single) in zip(pack.state_dict().items(), alone.state_dict().items()):
            assert torch.equal(packed[run], single[0]), name
    assert not torch.equal(pack.embedding.weight[0], pack.embedding.weight[1])


def test_pack_results_equal_the_runs_alone_and_are_reproducible():
    configs = [_tiny("rope_p", seed=s, lr=lr) for s, lr in ((0, 3e-3), (1, 5e-3), (2, 1e-3))]
    packed, _ = run_pack(configs, progress=False)
    again, _ = run_pack(configs, progress=False)
    for result, repeat, config in zip(packed, again, configs):
        alone, _ = run_training(config, progress=False)
        assert result.pack_size == 3 and result.pack_id == pack_key(configs) and alone.pack_size == 1
        assert result.final_loss == repeat.final_loss and result.per_length == repeat.per_length  # bit-identical
        assert result.final_loss == pytest.approx(alone.final_loss, rel=1e-4)
        assert result.n_star == alone.n_star and result.per_length == alone.per_length


def test_a_diverged_run_is_frozen_and_the_others_go_on():
    good = _tiny("rope", seed=0, lr=3e-3, steps=30)
    bad = _tiny("rope", seed=1, lr=1e30, steps=30, grad_clip=0.0, weight_decay=0.0)  # blows up at once
    trace: list = []
    results, _ = run_pack([good, bad], progress=False, on_step=lambda step, losses: trace.append(losses))
    assert results[1].status == "diverged" and results[1].steps_done < 30 and math.isnan(results[1].accuracy)
    assert results[0].status == "ok" and results[0].steps_done == 30 and results[0].per_length
    alone, _ = run_training(good, progress=False)
    assert results[0].final_loss == pytest.approx(alone.final_loss, rel=1e-4)
    assert all(math.isnan(losses[1]) for losses in trace[results[1].steps_done + 1 :])


def test_nstar_mode_runs_leave_the_pack_at_their_first_imperfect_length():
    trained = [_tiny("nope", seed=0, steps=5, eval_mode="nstar"), _tiny("nope", seed=1, steps=5, eval_mode="full")]
    results, _ = run_pack(trained, progress=False)
    assert results[1].eval_complete and [r.length for r in results[1].per_length] == list(range(41, 47))
    stopped = results[0]
    if stopped.per_length[0].accuracy < 1.0:  # an untrained NoPE run fails at once
        assert not stopped.eval_complete and len(stopped.per_length) == 1


def test_runs_that_cannot_share_a_pack_are_grouped_apart_never_refused():
    grid = [_tiny("rope", seed=s) for s in range(5)] + [_tiny("rope", seed=0, d_model=32)] + [_tiny("jof_fixed")]
    packs = group_packs(grid, 2)
    assert sorted(len(p) for p in packs) == [1, 1, 1, 2, 2]
    for members in packs:
        check_packable(members)
    assert [c for p in group_packs(grid, 1) for c in p] == grid
    assert [len(p) for p in group_packs(grid[:5], "auto", workers=2)] == [3, 2]
    # Many small groups (Table 2: a language and PE per group, two seeds each) are packed whole; the
    # workers are shared among the groups, not given to each of them.
    small = [_tiny(pe, language=language, seed=s) for language in ("(ab)*", "(aa)*") for pe in ("rope", "nope", "sipe")
             for s in (0, 1)]
    assert [len(p) for p in group_packs(small, "auto/by-pe", workers=2)] == [2] * 6
    # Mixed packs (issue 20): the encodings of one language share a pack, one pack per language.
    assert [{c.language for c in p} for p in group_packs(small, "auto", workers=2)] == [{"(ab)*"}, {"(aa)*"}]
    # Packs as large as keep both workers equally busy, largest first: 7 + 1 runs each.
    big = [_tiny("rope", seed=s) for s in range(14)] + [_tiny("nope", seed=s) for s in range(2)]
    assert [len(p) for p in group_packs(big, "auto/by-pe", workers=2)] == [7, 7, 1, 1]
    assert [len(p) for p in group_packs(big, "auto", workers=2)] == [8, 8]
    four_two = [_tiny("rope", seed=s) for s in range(4)] + [_tiny("nope", seed=s) for s in range(2)]
    assert [len(p) for p in group_packs(four_two, "auto/by-pe", workers=2)] == [2, 2, 1, 1]  # not 4 + 2
    assert [len(p) for p in group_packs(four_two, "auto", workers=2)] == [3, 3]
    assert [len(p) for p in group_packs(grid, 2)] == [2, 2, 1, 1, 1]  # largest first, for the pool
    with pytest.raises(FormalRopeError, match="share d_model"):
        check_packable(grid[4:6])
    with pytest.raises(FormalRopeError, match="needs about .* GiB"):
        group_packs(grid[:5], 5, memory_bytes=10 * 2**20)
    for bad in ("0", "-2", "x", "2.5"):
        with pytest.raises(FormalRopeError, match="--pack"):
            parse_pack(bad)


def test_checkpoints_hold_one_run_and_format_1_files_still_load(tmp_path):
    from formal_rope.storage.checkpoints import read_metadata, save_checkpoint
    from formal_rope.training.model import encode_fixed_length
    from formal_rope.training.trained_classifier import load_checkpoint

    configs = [_tiny("rope", seed=s, steps=3) for s in (0, 1)]
    paths = [tmp_path / "a.zip", tmp_path / "b.zip"]
    results, pack = run_pack(configs, progress=False, checkpoint_paths=paths)
    tokens, readout = encode_fixed_length(np.array([[0, 1, 0, 1]]), 2)
    for run, path in enumerate(paths):
        loaded = load_checkpoint(path)
        assert read_metadata(path)["format"] == 2 and loaded.model.runs == 1
        with torch.no_grad():
            assert torch.equal(loaded.model(tokens, readout), pack.select_runs([run])(tokens, readout))
    with pytest.raises(FormalRopeError, match="one run"):
        save_checkpoint(tmp_path / "c.zip", pack, configs[0], results[0])
    # Files written before packed training (format 1, no run axis) give the logits they gave then.
    expected = json.loads((DATA / "format1_logits.json").read_text())
    for pe, case in expected.items():
        loaded = load_checkpoint(DATA / f"format1_{pe}.zip")
        assert read_metadata(DATA / f"format1_{pe}.zip")["format"] == 1
        for string, logits in zip(case["strings"], case["logits"]):
            tokens, readout = encode_fixed_length(
                np.array([["ab".index(c) for c in string]], dtype=np.int64).reshape(1, -1), 2
            )
            with torch.no_grad():
                np.testing.assert_allclose(loaded.model(tokens, readout)[0].numpy(), logits, rtol=1e-5, atol=1e-6)


class _Stop(KeyboardInterrupt):
    """Stands for a kill (Ctrl-C, a lost worker) at a chosen step."""


@pytest.mark.parametrize("pe", POSITIONAL_ENCODINGS)
def test_a_killed_pack_resumes_bit_identically(pe, tmp_path):
    from formal_rope.storage.training_state import StateOptions

    configs = [_tiny(pe, seed=s, lr=lr, steps=24, train_near_miss_fraction=0.5) for s, lr in ((0, 3e-3), (1, 5e-3))]
    whole, whole_model = run_pack(configs, progress=False)
    state = StateOptions(str(tmp_path / "state"), every=5)

    def stop_at_step_13(step, losses):
        if step == 13:
            raise _Stop()

    with pytest.raises(_Stop):
        run_pack(configs, progress=False, state=state, on_step=stop_at_step_13)
    assert list((tmp_path / "state").iterdir())  # the state of step 10 was saved
    resumed, resumed_model = run_pack(configs, progress=False, state=state)
    for a, b in zip(whole, resumed):
        assert (a.final_loss, a.per_length, a.n_star, a.first_failure) == (
            b.final_loss, b.per_length, b.n_star, b.first_failure
        )
    for (name, x), (_, y) in zip(whole_model.state_dict().items(), resumed_model.state_dict().items()):
        assert torch.equal(x, y), name
    assert not [p for p in (tmp_path / "state").iterdir() if not p.name.startswith(".")]  # removed once finished


def _failing_for_period(monkeypatch, period: int):
    """Make building the rope_p tables of runs with `period` raise, as a 745 GiB table did."""
    import formal_rope.training.encodings.rotary as rotary  # where rope_p looks its tables up

    real = rotary.periodic_tables

    def tables(periods, n_pairs, positions, *dtype):
        if period in tuple(periods):
            raise MemoryError(f"Unable to allocate the tables of period {period}")
        return real(periods, n_pairs, positions, *dtype)

    monkeypatch.setattr(rotary, "periodic_tables", tables)


def test_a_run_that_raises_in_a_pack_fails_alone_and_its_pack_mates_end_as_trained_alone(monkeypatch):
    # Regression: one run's MemoryError was recorded as the result of every run of its pack.
    good = [_tiny("rope_p", seed=0, steps=20), _tiny("rope_p", seed=1, lr=1e-3, steps=20)]
    bad = _tiny("rope_p", seed=2, periods=(3,), steps=20)
    alone = [run_pack([config], progress=False)[0][0] for config in good]
    _failing_for_period(monkeypatch, 3)
    trace: list = []
    results, model = run_pack([good[0], bad, good[1]], progress=False,
                              on_step=lambda step, losses: trace.append(losses))
    assert model is None  # no pack model: the runs trained one by one
    assert results[1].status == "failed" and "MemoryError" in results[1].error and "period 3" in results[1].error
    assert results[1].n_star is None and math.isnan(results[1].accuracy)
    for result, solo, config in zip((results[0], results[2]), alone, good):
        assert result.status == "ok" and result.error is None
        # Bit-identical to the pack of one, and recorded as one (so `--pack 1` reproduces it).
        assert (result.final_loss, result.per_length, result.n_star, result.first_failure, result.steps_done) == (
            solo.final_loss, solo.per_length, solo.n_star, solo.first_failure, solo.steps_done)
        assert result.pack_size == 1 and result.pack_id == pack_key([config])
    # on_step still sees one loss per run of the pack: each run's own steps, NaN for the others.
    assert all(len(losses) == 3 for losses in trace) and len(trace) == 2 * 20
    assert all(math.isfinite(losses[0]) and math.isnan(losses[1]) for losses in trace[:20])


def test_a_pack_trained_again_run_by_run_keeps_checkpoints_per_run(monkeypatch, tmp_path):
    from formal_rope.training.trained_classifier import load_checkpoint

    configs = [_tiny("rope_p", seed=0, steps=3), _tiny("rope_p", seed=1, periods=(3,), steps=3)]
    _failing_for_period(monkeypatch, 3)
    paths = [tmp_path / "good.zip", tmp_path / "bad.zip"]
    results, _ = run_pack(configs, progress=False, checkpoint_paths=paths)
    assert [r.status for r in results] == ["ok", "failed"]
    saved = load_checkpoint(paths[0])
    assert saved.config == configs[0] and saved.result.pack_size == 1 and saved.result.status == "ok"


def test_checkpoints_that_name_more_periods_than_pairs_still_load(tmp_path):
    # Files written before extra periods became an error trained the first `pairs` periods only
    # (pair p got period p); loading builds those tables, not an error or other tables.
    import zipfile

    from formal_rope.storage.checkpoints import METADATA_NAME
    from formal_rope.training.trained_classifier import load_checkpoint

    config = _tiny("rope_p", periods=(2, 3, 5, 7), steps=3)
    path = tmp_path / "four.zip"
    run_pack([config], progress=False, checkpoint_paths=[path])
    old = tmp_path / "five.zip"
    with zipfile.ZipFile(path) as source, zipfile.ZipFile(old, "w") as target:
        for item in source.infolist():
            data = source.read(item.filename)
            if item.filename == METADATA_NAME:
                metadata = json.loads(data)
                metadata["periods"] = metadata["config"]["periods"] = [2, 3, 5, 7, 11]
                data = json.dumps(metadata).encode()
            target.writestr(item, data)
    strings = ["ab" * 20, "ab" * 19 + "ba", "a" * 40]
    loaded = load_checkpoint(old)
    assert loaded.model.positional.periods == ((2, 3, 5, 7),)
    assert loaded.classify(strings) == load_checkpoint(path).classify(strings)


def test_a_pack_that_fails_in_evaluation_drops_its_state_and_its_runs_finish_alone(monkeypatch, tmp_path):
    import formal_rope.runs.pack as training
    from formal_rope.storage.training_state import StateOptions, open_state_store

    good, bad = _tiny("rope_p", seed=0, steps=12), _tiny("rope_p", seed=1, periods=(3,), steps=12)
    real = training.evaluate_pack

    def evaluate(model, configs, data, **options):
        if any(config.periods == (3,) for config in configs):
            raise RuntimeError("evaluation exploded")
        return real(model, configs, data, **options)

    monkeypatch.setattr(training, "evaluate_pack", evaluate)
    state = StateOptions(str(tmp_path / "state"), every=5)
    results, _ = run_pack([good, bad], progress=False, state=state)
    assert [r.status for r in results] == ["ok", "failed"] and "evaluation exploded" in results[1].error
    assert results[1].steps_done == 12 and results[0].per_length
    store = open_state_store(state.uri)
    # The pack's state (saved at steps 5 and 10) is gone: its runs no longer train as that pack. The
    # run that failed keeps its own, as any failed run does, for the rerun to resume from.
    assert not store.exists(pack_key([good, bad])) and not store.exists(pack_key([good]))
    assert store.exists(pack_key([bad]))


def test_a_packs_batches_are_walked_together_yet_each_is_its_runs_own():
    """training_batches walks every run's strings in one pass; each batch, and each generator
    afterwards, is exactly what the run's own training_batch call gives (near-misses included)."""
    from formal_rope.training.data import run_data, training_batches
    from formal_rope.training.resolve import resolve_dfa

    configs = [_tiny("rope", seed=s, train_near_miss_fraction=f) for s, f in ((0, 0.0), (1, 0.5), (2, 0.0), (3, 1.0))]
    dfa = resolve_dfa(configs[0])
    data = [run_data(config, dfa) for config in configs]
    together = [np.random.default_rng(seed) for seed in range(4)]
    alone = [np.random.default_rng(seed) for seed in range(4)]
    for _ in range(3):
        batches = training_batches(data, together, 16)
        for run in range(4):
            expected = data[run].training_batch(alone[run], 16)
            for name in ("symbols", "lengths", "labels"):
                assert np.array_equal(getattr(batches[run], name), getattr(expected, name)), (run, name)
    assert [g.bit_generator.state for g in together] == [g.bit_generator.state for g in alone]
