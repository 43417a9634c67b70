"""Sweeps, the runner: atomic per-run results, skipping finished runs, failures and dead workers,
packs whose run raises.

Training is replaced by deterministic fake runners (the trainer has its own tests); the pack tests
train tiny real runs."""

from __future__ import annotations

import json

import pandas as pd
import pytest

from formal_rope.run_config.config import RunConfig
from formal_rope.sweeps.grid import expand_grid
from formal_rope.sweeps.results import load_results
from formal_rope.sweeps.runner import run_sweep
from formal_rope.training.run_result import RunResult
from sweeps_support import cli as _cli
from sweeps_support import fake_runner, spec


def crashing_runner(config: RunConfig) -> RunResult:
    if config.seed == 1:
        raise RuntimeError("boom")
    return fake_runner(config)


class Interrupt(BaseException):
    pass


def resolving_runner(config: RunConfig) -> RunResult:
    """What the real trainer records: the alphabet and periods it resolved."""
    from dataclasses import replace

    return replace(fake_runner(config), alphabet=("a", "b"), resolved_periods=(2,) if config.pe == "rope_p" else None)


def dying_runner(config: RunConfig) -> RunResult:
    import os

    if config.seed == 1:
        os._exit(3)  # a worker killed (e.g. for memory) mid-run
    return fake_runner(config)


def seed_one_breaks_its_pack(configs, *, device, threads, state):
    """A pack runner that raises whenever the pack holds seed 1 (like a run whose tables cannot be
    allocated), and otherwise returns the fake results."""
    if any(config.seed == 1 for config in configs):
        raise MemoryError("Unable to allocate 745. GiB")
    return [fake_runner(config) for config in configs]


def test_sweep_writes_parquet_and_rerun_skips_finished(tmp_path):
    configs = expand_grid(spec(languages=["(ab)*"], pes=["nope", "rope_p"], bases=[1e4], seeds=2, lrs=[1e-4]))
    summary = run_sweep(configs, tmp_path, runner=fake_runner)
    assert summary.completed == 4 and summary.skipped == 0
    runs, evals = load_results(tmp_path)
    required = {"run_id", "language", "alphabet", "pe", "base", "periods", "seed", "lr", "steps", "batch_size",
                "layers", "d_model", "heads", "n_star", "accuracy", "first_failure", "status", "wall_s",
                "versions", "commit"}
    assert required <= set(runs.columns)
    assert sorted(runs["run_id"]) == sorted(c.run_id() for c in configs)
    assert len(evals) == 4 * 10 and set(evals.columns) >= {"run_id", "length", "accuracy", "n"}
    assert json.loads(runs["versions"].iloc[0]) == {"torch": "x"}

    calls = []

    def counting_runner(config):
        calls.append(config)
        return fake_runner(config)

    more = configs + expand_grid(spec(languages=["(ab)*"], pes=["nope"], bases=[1e4], seeds=[7], lrs=[1e-4]))
    summary = run_sweep(more, tmp_path, runner=counting_runner)
    assert summary.skipped == 4 and [c.seed for c in calls] == [7]
    assert len(load_results(tmp_path)[0]) == 5


def test_interrupted_sweep_keeps_finished_runs_and_no_partial_files(tmp_path):
    configs = expand_grid(spec(languages=["(ab)*"], pes=["nope"], bases=[1e4], seeds=4, lrs=[1e-4]))

    def interrupting_runner(config):
        if config.seed == 2:
            raise Interrupt()
        return fake_runner(config)

    with pytest.raises(Interrupt):
        run_sweep(configs, tmp_path, runner=interrupting_runner)
    runs, _ = load_results(tmp_path)
    assert sorted(runs["seed"]) == [0, 1]
    assert not [p for p in (tmp_path / "runs").iterdir() if not p.name.endswith(".parquet")]


def test_failed_run_is_recorded_and_sweep_goes_on(tmp_path):
    configs = expand_grid(spec(languages=["(ab)*"], pes=["nope"], bases=[1e4], seeds=3, lrs=[1e-4]))
    summary = run_sweep(configs, tmp_path, runner=crashing_runner)
    assert summary.statuses == {"ok": 2, "failed": 1}
    runs, _ = load_results(tmp_path)
    failed = runs[runs["status"] == "failed"].iloc[0]
    assert failed["seed"] == 1 and "boom" in failed["error"]


def test_parallel_workers_give_the_same_rows(tmp_path):
    configs = expand_grid(spec(languages=["(ab)*"], pes=["nope", "rope"], bases=[1.0], seeds=2, lrs=[1e-4]))
    run_sweep(configs, tmp_path / "serial", runner=fake_runner)
    run_sweep(configs, tmp_path / "parallel", runner=fake_runner, workers=2)
    serial = load_results(tmp_path / "serial")[0].sort_values("run_id").reset_index(drop=True)
    parallel = load_results(tmp_path / "parallel")[0].sort_values("run_id").reset_index(drop=True)
    pd.testing.assert_frame_equal(serial[["run_id", "n_star", "accuracy"]], parallel[["run_id", "n_star", "accuracy"]])


def test_results_record_the_resolved_alphabet_and_periods(tmp_path):
    # Regression: with periods "auto" and the language's own alphabet, both columns were null.
    configs = expand_grid(spec(languages=["(ab)*"], pes=["rope_p", "nope"], bases=[1e4], seeds=1, lrs=[1e-4]))
    assert all(c.periods is None and c.alphabet is None for c in configs)
    run_sweep(configs, tmp_path, runner=resolving_runner)
    runs = load_results(tmp_path)[0].set_index("pe")
    assert runs.loc["rope_p", "periods"] == "2" and runs.loc["rope_p", "alphabet"] == "a,b"
    assert pd.isna(runs.loc["nope", "periods"])


def test_failed_runs_are_retried_on_rerun_and_finished_ones_skipped(tmp_path):
    configs = expand_grid(spec(languages=["(ab)*"], pes=["nope"], bases=[1e4], seeds=3, lrs=[1e-4]))
    run_sweep(configs, tmp_path, runner=crashing_runner)
    calls = []

    def counting_runner(config):
        calls.append(config.seed)
        return fake_runner(config)

    summary = run_sweep(configs, tmp_path, runner=counting_runner)
    assert calls == [1] and summary.skipped == 2
    runs = load_results(tmp_path)[0]
    assert len(runs) == 3 and set(runs["status"]) == {"ok"}


def test_a_dead_worker_fails_its_run_and_the_sweep_goes_on(tmp_path):
    # Regression: BrokenProcessPool escaped run_sweep (a traceback) and the rest of the grid never ran.
    configs = expand_grid(spec(languages=["(ab)*"], pes=["nope"], bases=[1e4], seeds=6, lrs=[1e-4]))
    summary = run_sweep(configs, tmp_path, runner=dying_runner, workers=2)
    runs = load_results(tmp_path)[0].set_index("seed")
    assert summary.completed == 6 and len(runs) == 6
    assert runs.loc[1, "status"] == "failed" and "worker process died" in runs.loc[1, "error"]
    failed = runs[runs["status"] == "failed"]
    assert all("worker process died" in error for error in failed["error"])
    # With 2 workers at most one other run was in flight when seed 1's worker died: every other run
    # finished before the crash or ran in the fresh pool.
    assert len(failed) <= 2 and set(runs["status"]) <= {"ok", "failed"}


def test_a_pack_runner_failure_is_charged_to_the_run_that_raises_alone(tmp_path):
    # Regression: an exception from the pack runner was recorded as every run's result.
    configs = expand_grid(spec(languages=["(ab)*"], pes=["nope"], bases=[1e4], seeds=3, lrs=[1e-4]))
    summary = run_sweep(configs, tmp_path, pack="auto", pack_runner=seed_one_breaks_its_pack)
    assert summary.units == 1 and summary.statuses == {"ok": 2, "failed": 1}
    runs = load_results(tmp_path)[0].set_index("seed")
    assert runs.loc[1, "status"] == "failed" and "MemoryError" in runs.loc[1, "error"]
    assert list(runs.loc[[0, 2], "n_star"]) == [41, 61] and runs.loc[[0, 2], "error"].isna().all()


def test_sweep_keeps_the_healthy_run_of_a_pack_whose_other_run_raises(tmp_path, capsys, monkeypatch):
    # Regression (reviewer): `sweep --set periods=2,<huge>` recorded both runs failed with the huge
    # period's MemoryError, and a rerun packed them together and failed both again. Huge periods are
    # refused up front now; any other run that raises inside a pack stands in for it here.
    import formal_rope.training.encodings.rotary as rotary  # where rope_p looks its tables up

    real = rotary.periodic_tables

    def tables(periods, n_pairs, positions, *dtype):
        if 3 in tuple(periods):
            raise MemoryError("Unable to allocate 745. GiB for an array")
        return real(periods, n_pairs, positions, *dtype)

    monkeypatch.setattr(rotary, "periodic_tables", tables)
    tiny = ["--steps", "20", "--layers", "1", "--d-model", "16", "--heads", "2", "--test-lengths", "41..45",
            "--n-per-length", "4", "--seeds", "1", "--lrs", "3e-4", "--workers", "1"]
    argv = ["sweep", "--lang", "(ab)*", "--pe", "rope_p", "--set", "periods=2,3", *tiny, "--json"]
    code, stdout, _ = _cli(capsys, [*argv, "--out", str(tmp_path / "packed")])
    assert code == 0 and json.loads(stdout)["sweep"]["statuses"] == {"ok": 1, "failed": 1}
    code, _, _ = _cli(capsys, [*argv, "--pack", "1", "--out", str(tmp_path / "alone")])
    packed, alone = (load_results(tmp_path / name)[0].set_index("periods") for name in ("packed", "alone"))
    assert packed.loc["3", "status"] == "failed" and "MemoryError" in packed.loc["3", "error"]
    columns = ["run_id", "status", "n_star", "accuracy", "final_loss", "steps_done", "pack_id", "pack_size"]
    assert packed.loc["2", columns].to_dict() == alone.loc["2", columns].to_dict()  # as trained alone
    code, stdout, _ = _cli(capsys, [*argv, "--out", str(tmp_path / "packed")])  # the rerun retries the failed run only
    assert code == 0 and json.loads(stdout)["sweep"]["skipped"] == 1


@pytest.mark.parametrize("fixed, workers", [(None, 1), (None, 2), (3, 1)])
def test_the_runs_of_a_pack_that_raises_are_trained_again_with_the_threads_of_a_run_alone(monkeypatch, fixed, workers):
    # Regression: a pack that raised trained its runs again one by one with the pack's threads
    # (the machine's cores shared by the workers) where a run trained alone (--pack 1) gets 1, so a
    # healthy pack-mate's final loss differed in the last bits from the same run trained alone.
    import formal_rope.runs.pack as train
    from formal_rope.scheduling.packs import default_threads
    from formal_rope.sweeps.units import UnitTask

    calls = []

    def recording_run_pack(configs, **options):
        calls.append((len(configs), options["threads"], options["threads_alone"]))
        return [fake_runner(config) for config in configs], None

    monkeypatch.setattr(train, "run_pack", recording_run_pack)
    configs = tuple(expand_grid(spec(languages=["(ab)*"], pes=["nope"], bases=[1e4], seeds=2, lrs=[1e-4])))
    task = UnitTask(threads=fixed, workers=workers)
    assert task(configs) == [fake_runner(config) for config in configs]
    assert task(configs[:1]) == [fake_runner(configs[0])]
    alone = fixed or 1
    assert calls == [(2, fixed or default_threads(2, workers), alone), (1, alone, alone)]
