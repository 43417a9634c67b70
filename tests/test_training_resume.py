"""Runs that resume: a run killed at a step and restarted from its saved state ends bit-identical
(on CPU) to the same run left alone — final weights, per-length accuracies, N*, final loss — for
every positional encoding, inside a pack, with the state on a local path, a file:// URI or an
s3:// URI (moto's server on 127.0.0.1), and through `formalrope train --resume` after a SIGKILL."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch

from formal_rope.run_config.config import RunConfig
from formal_rope.run_config.encodings import POSITIONAL_ENCODINGS, is_periodic
from formal_rope.runs import run_pack
from formal_rope.scheduling.packs import pack_key
from formal_rope.storage.training_state import StateOptions, open_state_store
from test_state_store import s3_server, s3_uri  # noqa: F401  (the moto fixture)

REPO = Path(__file__).resolve().parents[1]


def tiny(pe: str = "rope", **changes) -> RunConfig:
    settings = dict(
        language="(ab)*", pe=pe, layers=1, d_model=16, heads=2, steps=40, batch_size=16, lr=3e-3,
        lr_schedule="cosine", warmup_steps=5, train_near_miss_fraction=0.5,
        test_min_length=41, test_max_length=48, n_per_length=8, periods=(2,) if is_periodic(pe) else None,
    )
    settings.update(changes)
    return RunConfig(**settings)


class Killed(BaseException):
    """Stands for the process dying at a step: not an Exception, so nothing records it as a failure."""


def killed_at(kill_step: int):
    def on_step(step, _losses):
        if step == kill_step:
            raise Killed()
    return on_step


def outcome(results, model):
    """What must be identical: per run the result fields, and the pack's final weights."""
    rows = [(r.status, r.n_star, r.accuracy, r.final_loss, r.steps_done, r.first_failure,
             [(x.length, x.accuracy, x.n) for x in r.per_length]) for r in results]
    return rows, {name: tensor.clone() for name, tensor in model.state_dict().items()}


def assert_same(left, right):
    assert left[0] == right[0]
    assert left[1].keys() == right[1].keys()
    for name in left[1]:
        assert torch.equal(left[1][name], right[1][name]), name


def interrupted_then_resumed(configs, state: StateOptions, kill_step: int):
    """Train until the kill at `kill_step`, check a state was left at the last multiple of
    state.every, then run again from it; returns the resumed run's outcome and its first step."""
    with pytest.raises(Killed):
        run_pack(configs, progress=False, state=state, on_step=killed_at(kill_step))
    store = open_state_store(state.uri)
    assert store.exists(pack_key(configs))  # the state of the killed run
    steps_seen = []
    results, model = run_pack(configs, progress=False, state=state, on_step=lambda step, _: steps_seen.append(step))
    assert store.exists(pack_key(configs)) == state.keep  # removed once the run finished, unless kept
    return outcome(results, model), steps_seen[0]


@pytest.mark.parametrize("pe", POSITIONAL_ENCODINGS)
def test_a_killed_run_resumes_bit_identical_for_every_pe(pe, tmp_path):
    config = tiny(pe, base=100.0)
    alone = outcome(*run_pack([config], progress=False))
    resumed, first_step = interrupted_then_resumed([config], StateOptions(str(tmp_path / "state"), every=10), 27)
    assert first_step == 20  # it continued from the state saved after step 20, not from 0
    assert_same(resumed, alone)


def test_a_pack_resumes_bit_identical_with_its_state_behind_a_file_uri(tmp_path):
    pack = [tiny("rope", seed=1), tiny("rope", seed=2, lr=1e-3, base=10.0), tiny("rope", seed=3, lr=5e-3)]
    alone = outcome(*run_pack(pack, progress=False))
    state = StateOptions((tmp_path / "state").as_uri(), every=7)
    resumed, first_step = interrupted_then_resumed(pack, state, 30)
    assert first_step == 28
    assert_same(resumed, alone)


def test_a_run_resumes_from_a_state_on_s3_and_keep_keeps_it(s3_server):  # noqa: F811
    config = tiny("rope_p")
    alone = outcome(*run_pack([config], progress=False))
    state = StateOptions(s3_uri(s3_server, "resume"), every=10, keep=True)
    resumed, first_step = interrupted_then_resumed([config], state, 35)
    assert first_step == 30
    assert_same(resumed, alone)


def test_formalrope_train_resume_after_sigkill_matches_the_run_left_alone(tmp_path):
    env = dict(os.environ, PYTHONPATH=str(REPO))
    args = ["--lang", "(ab)*", "--pe", "rope", "--steps", "400", "--batch-size", "16", "--layers", "1",
            "--d-model", "16", "--heads", "2", "--test-lengths", "41..48", "--n-per-length", "4", "--lr", "3e-3",
            "--no-save", "--json", "--quiet", "--checkpoint-every", "10"]
    command = [sys.executable, "-m", "formal_rope.cli", "train", *args]

    def train(state_dir, *extra):
        done = subprocess.run([*command, "--state-dir", str(state_dir), *extra], capture_output=True, text=True,
                              env=env, timeout=300)
        return done

    alone = train(tmp_path / "alone")
    assert alone.returncode == 0, alone.stderr
    state_dir = tmp_path / "state"
    victim = subprocess.Popen([*command, "--state-dir", str(state_dir)], stdout=subprocess.DEVNULL,
                              stderr=subprocess.DEVNULL, env=env)
    deadline = time.monotonic() + 240
    while not list(state_dir.glob("[!.]*.state")) and victim.poll() is None and time.monotonic() < deadline:
        time.sleep(0.01)
    victim.send_signal(signal.SIGKILL)
    assert victim.wait(timeout=30) == -signal.SIGKILL  # killed mid-run, not finished
    refused = train(state_dir)
    assert refused.returncode == 2 and "--resume" in refused.stderr and "Traceback" not in refused.stderr
    resumed = train(state_dir, "--resume")
    assert resumed.returncode == 0, resumed.stderr
    keys = ("status", "n_star", "accuracy", "final_loss", "steps_done", "per_length", "first_failure")
    first, second = json.loads(alone.stdout), json.loads(resumed.stdout)
    assert {key: first[key] for key in keys} == {key: second[key] for key in keys}
    assert list(state_dir.glob("[!.]*.state")) == []


def interrupting_pack_runner(configs, *, device, threads, state, log: str, kill_step: int | None):
    """The real pack trainer; records each attempt's first step in the folder `log` (attempts may run
    in worker processes) and, when kill_step is set, dies there."""
    import uuid

    first: list[int] = []

    def on_step(step, _losses):
        if not first:
            first.append(step)
            (Path(log) / f"{uuid.uuid4().hex}.step").write_text(f"{len(configs)} {step}")
        if step == kill_step:
            raise Killed()

    return run_pack(configs, progress=False, device=device, threads=threads, state=state, on_step=on_step)[0]


def test_a_rerun_sweep_resumes_its_packs_with_another_number_of_workers(tmp_path):
    import functools

    from formal_rope.sweeps.results import load_results
    from formal_rope.sweeps.runner import run_sweep

    configs = [tiny("rope", seed=seed, lr=lr) for seed in (0, 1) for lr in (3e-3, 1e-3)]
    run_sweep(configs, tmp_path / "alone")
    state = StateOptions(str(tmp_path / "state"), every=10)
    log = tmp_path / "log"
    log.mkdir()
    with pytest.raises(Killed):  # one worker: one pack of four, killed at step 27
        run_sweep(configs, tmp_path / "out", state=state,
                  pack_runner=functools.partial(interrupting_pack_runner, log=str(log), kill_step=27))
    # Two workers would cut the grid into two packs of two; the rerun keeps the recorded pack of
    # four and continues it from its state at step 20.
    summary = run_sweep(configs, tmp_path / "out", workers=2, state=state,
                        pack_runner=functools.partial(interrupting_pack_runner, log=str(log), kill_step=None))
    attempts = sorted(path.read_text() for path in log.glob("*.step"))
    assert attempts == ["4 0", "4 20"] and summary.units == 1 and summary.statuses == {"ok": 4}
    columns = ["run_id", "status", "n_star", "accuracy", "final_loss", "steps_done"]
    alone = load_results(tmp_path / "alone")[0][columns].sort_values("run_id").reset_index(drop=True)
    resumed = load_results(tmp_path / "out")[0][columns].sort_values("run_id").reset_index(drop=True)
    import pandas as pd

    pd.testing.assert_frame_equal(alone, resumed)
