"""Training curves (`storage.curves`): a point every log_every steps holding the mean loss and accuracy
since the previous one, per run inside a pack, unchanged results, a resumed run's curve bit-identical to
the run left alone, the results folder's curves/ table and the checkpoint, `report --plot-curves`, and
TensorBoard's event files read back with TensorBoard's own reader."""

from __future__ import annotations

import importlib.util

import numpy as np
import pytest

from formal_rope.errors import FormalRopeError
from formal_rope.run_config.config import RunConfig
from formal_rope.runs import run_pack
from formal_rope.storage.checkpoints import read_metadata
from formal_rope.storage.curves import NO_CURVES, CurveOptions, default_log_every
from formal_rope.storage.tensorboard_log import run_folder_name
from formal_rope.storage.training_state import StateOptions
from formal_rope.training.run_result import RunResult
from formal_rope.training.train import learning_rate
from sweeps_support import cli


def tiny(**changes) -> RunConfig:
    settings = dict(language="(ab)*", pe="rope", layers=1, d_model=16, heads=2, steps=40, batch_size=16, lr=3e-3,
                    lr_schedule="cosine", warmup_steps=5, test_min_length=41, test_max_length=44, n_per_length=4,
                    nnch_samples=0)
    settings.update(changes)
    return RunConfig(**settings)


def test_the_default_interval_gives_a_quick_run_50_points_and_a_paper_run_1000():
    assert default_log_every(1000) == 20 and 1000 // default_log_every(1000) == 50
    assert 10**6 // default_log_every(10**6) == 1000
    assert default_log_every(30) == 1 and default_log_every(10**4) == 200
    assert CurveOptions().every(1000) == 20 and CurveOptions(log_every=7).every(1000) == 7
    assert NO_CURVES.every(1000) is None
    with pytest.raises(FormalRopeError, match="--log-every"):
        CurveOptions(log_every=-1)
    with pytest.raises(FormalRopeError, match="--log-every 0"):
        CurveOptions(log_every=0, tensorboard="tb")


def test_a_point_is_the_mean_since_the_previous_one_and_logging_changes_no_result():
    config = tiny()
    losses: list[float] = []
    (result,), _ = run_pack([config], progress=False, curve_options=CurveOptions(log_every=6),
                            on_step=lambda step, values: losses.append(values[0]))
    curve = result.curve
    assert curve.step == (6, 12, 18, 24, 30, 36, 40)  # every 6 steps and the last
    edges = [0, *curve.step]
    for index, (start, end) in enumerate(zip(edges, edges[1:])):
        assert curve.loss[index] == sum(losses[start:end]) / (end - start)
        assert curve.lr[index] == learning_rate(config, end - 1)
        assert 0 <= curve.train_accuracy[index] <= 1
    (silent,), _ = run_pack([config], progress=False, curve_options=NO_CURVES)
    assert silent.curve is None
    assert (silent.final_loss, silent.per_length, silent.n_star) == (result.final_loss, result.per_length,
                                                                     result.n_star)


def test_each_run_of_a_pack_gets_its_own_curve_equal_to_the_run_alone():
    configs = [tiny(seed=1), tiny(seed=2, lr=1e-3)]
    packed, _ = run_pack(configs, progress=False, curve_options=CurveOptions(log_every=10))
    for result, config in zip(packed, configs):
        (alone,), _ = run_pack([config], progress=False, curve_options=CurveOptions(log_every=10))
        assert result.curve.step == alone.curve.step == (10, 20, 30, 40)
        np.testing.assert_allclose(result.curve.loss, alone.curve.loss, rtol=1e-4)  # packs round as they do
        assert result.curve.lr == alone.curve.lr
    assert packed[0].curve != packed[1].curve


class Killed(BaseException):
    """The process dying at a step (not an Exception: nothing records it as a failed run)."""


def test_a_resumed_pack_continues_its_curves_bit_identically(tmp_path):
    configs = [tiny(seed=1), tiny(seed=2, lr=1e-3)]
    options = CurveOptions(log_every=6)  # the state at step 20 holds an open window (steps 19-20)
    alone, _ = run_pack(configs, progress=False, curve_options=options)
    state = StateOptions(str(tmp_path / "state"), every=10)

    def kill(step, _losses):
        if step == 27:
            raise Killed()

    with pytest.raises(Killed):
        run_pack(configs, progress=False, state=state, on_step=kill, curve_options=options)
    resumed, _ = run_pack(configs, progress=False, state=state, curve_options=options)
    for left, right in zip(alone, resumed):
        assert right.curve == left.curve  # no gap, no duplicate, same bits
        assert right.final_loss == left.final_loss


def test_a_sweep_writes_curves_beside_runs_and_a_checkpoint_keeps_them(tmp_path, capsys):
    from formal_rope.sweeps.curve_table import read_curves
    from formal_rope.sweeps.results import read_results
    from formal_rope.sweeps.runner import run_sweep

    configs = [tiny(seed=0, steps=20), tiny(seed=0, steps=20, pe="nope")]
    run_sweep(configs, tmp_path / "out", curves=CurveOptions(log_every=5))
    runs = read_results(tmp_path / "out").runs
    curves = read_curves(tmp_path / "out", runs)
    assert list(curves.columns) == ["run_id", "step", "loss", "train_accuracy", "lr"]
    assert sorted(set(curves["run_id"])) == sorted(c.run_id() for c in configs)
    assert curves.groupby("run_id")["step"].apply(list).tolist() == [[5, 10, 15, 20]] * 2
    (alone,), _ = run_pack([configs[0]], progress=False, checkpoint_paths=[tmp_path / "model.zip"],
                           curve_options=CurveOptions(log_every=5), threads=1)
    stored = curves[curves["run_id"] == configs[0].run_id()]
    assert stored["loss"].tolist() == list(alone.curve.loss)  # the sweep's run is this run (one thread)
    saved = RunResult.from_dict(read_metadata(tmp_path / "model.zip")["result"])
    assert saved.curve == alone.curve

    code, out, err = cli(capsys, ["report", str(tmp_path / "out"), "--plot-curves", str(tmp_path / "curves"),
                                  "--color-by", "pe"])
    assert code == 0, err
    assert (tmp_path / "curves.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    code, _, err = cli(capsys, ["report", str(tmp_path / "out"), "--plot-curves", str(tmp_path / "c.png"),
                                "--color-by", "nonsense"])
    assert code == 2 and "--color-by" in err


@pytest.mark.skipif(importlib.util.find_spec("tensorboard") is None, reason="tensorboard is not installed")
def test_tensorboard_files_hold_the_curves_hparams_and_n_star(tmp_path):
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    configs = [tiny(seed=1), tiny(seed=2, lr=1e-3)]
    board = tmp_path / "tb"
    options = CurveOptions(log_every=5, tensorboard=str(board))
    state = StateOptions(str(tmp_path / "state"), every=10)

    def kill(step, _losses):
        if step == 27:
            raise Killed()

    with pytest.raises(Killed):  # the killed attempt wrote points up to step 25; the state is at step 20
        run_pack(configs, progress=False, state=state, on_step=kill, curve_options=options)
    results, _ = run_pack(configs, progress=False, state=state, curve_options=options)
    assert sorted(path.name for path in board.iterdir()) == sorted(run_folder_name(c) for c in configs)
    for config, result in zip(configs, results):
        events = EventAccumulator(str(board / run_folder_name(config))).Reload()
        for tag, column in (("train/loss", "loss"), ("train/accuracy", "train_accuracy"), ("train/lr", "lr")):
            scalars = events.Scalars(tag)
            assert [s.step for s in scalars] == list(result.curve.step)  # the orphaned step 25 once
            assert [s.value for s in scalars] == [float(np.float32(v)) for v in getattr(result.curve, column)]
        (n_star,) = events.Scalars("hparams/n_star")
        assert n_star.value == result.n_star and n_star.step == config.steps
        assert "hparams" in events.Tags()["tensors"] or events.PluginTagToContent("hparams")


def test_tensorboard_without_its_package_is_a_clear_error(monkeypatch, capsys, tmp_path):
    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == "tensorboard" else real(name, *a))
    code, _, err = cli(capsys, ["train", "--lang", "(ab)*", "--steps", "2", "--layers", "1", "--d-model", "8",
                                "--heads", "2", "--no-save", "--tensorboard", str(tmp_path / "tb")])
    assert code == 2 and "pip install" in err and "tensorboard" in err
