"""Sweep backends: the registry's rows, each backend's options checking its own flags, the contract
between a backend and the driver, and a backend added by one class pair and one registry row (a
serial in-process backend defined here) running a sweep through the real `run_sweep` and CLI."""

from __future__ import annotations

import dataclasses
import json
import os
import subprocess
import sys

import pytest

from formal_rope.errors import FormalRopeError
from formal_rope.sweeps.backends import (
    BACKENDS,
    RUN_FLAGS,
    WORKER_DIED,
    BackendOptions,
    BackendRow,
    Capacity,
    LocalBackend,
    LocalOptions,
    NodeLost,
    SweepStopped,
    WorkerDied,
    backend_options,
    make_backend,
)
from formal_rope.sweeps.grid import expand_grid
from formal_rope.sweeps.results import load_results
from formal_rope.sweeps.runner import run_sweep
from formal_rope.sweeps.units import UnitTask
from sweeps_support import REPO, fake_runner, spec
from sweeps_support import cli as _cli


class SerialOptions(BackendOptions):
    """The toy backend's flags: one unit at a time, nothing it could do with Ray's."""

    def check(self) -> None:
        super().check()
        if self.workers != 1:
            raise FormalRopeError(f"--workers {self.workers}: the serial backend runs one unit at a time")
        if self.address is not None:
            raise FormalRopeError("--address: the serial backend joins no cluster")


class SerialBackend:
    """Every unit in this process, one after the other; units holding seed 3 are 'lost' (as if their
    worker died for good), to exercise the contract's failure path."""

    def __init__(self, options: SerialOptions):
        self.options = options
        self.events: list[tuple[str, str]] = []

    def open(self, on_note) -> Capacity:
        on_note("serial backend: one unit at a time")
        return Capacity(slots=1)

    def run(self, units, task, key_of, on_unit) -> None:
        for unit in units:
            on_unit("start", unit)
            lost = any(config.seed == 3 for config in unit)
            on_unit("done", unit, task.failed(unit, WorkerDied(WORKER_DIED)) if lost else task(unit))

    def close(self) -> None:
        pass


SERIAL = BackendRow("serial", SerialBackend, SerialOptions, "every unit in this process, one at a time")


@pytest.fixture
def serial_backend(monkeypatch):
    monkeypatch.setitem(BACKENDS, "serial", SERIAL)
    return SERIAL


def test_every_registry_row_names_a_backend_its_options_and_its_help():
    assert {"local", "ray"} <= set(BACKENDS)
    for name, row in BACKENDS.items():
        assert row.name == name and row.help.strip(), row
        assert issubclass(row.options, BackendOptions) and row.options.__dataclass_params__.frozen, row
        assert {field.name for field in dataclasses.fields(row.options)} == set(RUN_FLAGS), row
        for method in ("open", "run", "close"):
            assert callable(getattr(row.backend, method, None)), (row, method)
        options = row.options()
        assert type(make_backend(options)) is row.backend and backend_options(name) == options
        with pytest.raises(dataclasses.FrozenInstanceError):
            options.workers = 2


def test_the_backend_option_lists_the_registry(capsys, serial_backend, monkeypatch):
    import typer

    from formal_rope.cli import app

    for command in ("sweep", "reproduce"):
        params = typer.main.get_command(app).commands[command].params
        help_text = next(param.help for param in params if param.name == "backend").replace("\\[", "[")
        for name, row in BACKENDS.items():
            if name != "serial":  # registered after the CLI read the table: accepted, not listed
                assert f"{name} ({row.help})" in help_text, (command, name)
    code, _, stderr = _cli(capsys, ["sweep", "--lang", "(ab)*", "--dry-run", "--backend", "slurm"])
    assert code == 2 and "--backend must be local, ray or serial, got 'slurm'" in stderr
    with pytest.raises(FormalRopeError, match="unknown backend 'slurm'; expected one of local, ray, serial"):
        backend_options("slurm")


@pytest.mark.parametrize("name", ["local", "ray", "serial"])
@pytest.mark.parametrize(
    "flags, flag",
    [
        ({"workers": 0}, "--workers"),
        ({"cpus_per_run": 0.0}, "--cpus-per-run"),
        ({"cpus_per_run": -1.5}, "--cpus-per-run"),
        ({"gpus_per_run": -1.0}, "--gpus-per-run"),
        ({"max_retries": -1}, "--max-retries"),
    ],
)
def test_every_backends_options_refuse_bad_values_naming_the_flag(name, flags, flag, serial_backend):
    with pytest.raises(FormalRopeError, match=flag):
        backend_options(name, **flags)
    with pytest.raises(FormalRopeError, match=flag):
        BACKENDS[name].options(**flags)  # also when built directly


@pytest.mark.parametrize(
    "name, flags, message",
    [
        ("local", {"address": "auto"}, "--address joins a Ray cluster: use it with --backend ray"),
        ("local", {"gpus_per_run": 0.5}, "--gpus-per-run schedules runs on GPUs through Ray: use it with --backend"),
        ("serial", {"workers": 2}, "--workers 2: the serial backend runs one unit at a time"),
        ("serial", {"address": "auto"}, "--address: the serial backend joins no cluster"),
    ],
)
def test_a_backend_refuses_the_flags_it_cannot_honour(name, flags, message, serial_backend):
    with pytest.raises(FormalRopeError, match=message):
        backend_options(name, **flags)
    backend_options("ray", **flags)  # what Ray can do


def test_each_backend_says_its_threads_and_whether_units_leave_this_machine():
    assert backend_options("local").threads is None  # the packing default
    assert backend_options("ray").threads == 1
    assert backend_options("local", cpus_per_run=2.4).threads == backend_options("ray", cpus_per_run=2.4).threads == 2
    assert backend_options("local", cpus_per_run=0.25).threads == 1
    assert not backend_options("local").other_machines and not backend_options("ray").other_machines
    assert backend_options("ray", address="auto").other_machines


def test_the_local_backend_keeps_the_contract_with_the_driver():
    configs = expand_grid(spec(languages=["(ab)*"], pes=["nope"], bases=[1e4], seeds=3, lrs=[1e-4]))
    units = [(config,) for config in configs]
    events = []
    backend = LocalBackend(LocalOptions(workers=1))
    capacity = backend.open(lambda text: None)
    backend.run(units, UnitTask(runner=fake_runner), lambda unit: unit[0].run_id(),
                lambda kind, unit, results=None: events.append((kind, unit[0].seed, results)))
    backend.close()
    assert capacity.slots == 1
    assert [(kind, seed) for kind, seed, _ in events] == [("start", 0), ("done", 0), ("start", 1), ("done", 1),
                                                          ("start", 2), ("done", 2)]
    assert all(results[0] == fake_runner(unit) for (kind, _, results), unit in zip(events[1::2], configs))


def test_a_backend_added_by_one_row_runs_a_sweep_through_run_sweep(tmp_path, serial_backend):
    configs = expand_grid(spec(languages=["(ab)*"], pes=["nope"], bases=[1e4], seeds=4, lrs=[1e-4]))
    notes, events = [], []
    summary = run_sweep(configs, tmp_path, backend="serial", runner=fake_runner, on_note=notes.append,
                        on_event=lambda kind, config, result: events.append((kind, config.seed)))
    assert summary.backend == "serial" and summary.completed == 4 and summary.statuses == {"ok": 3, "failed": 1}
    assert notes == ["serial backend: one unit at a time"]
    assert events == [(kind, seed) for seed in range(4) for kind in ("start", "done")]
    runs = load_results(tmp_path)[0].set_index("seed")
    assert runs.loc[3, "status"] == "failed" and "worker process died" in runs.loc[3, "error"]
    assert list(runs.loc[[0, 1, 2], "n_star"]) == [41, 51, 61]
    # Options built once (what the CLI does) instead of a name and loose keywords; a rerun skips
    # the finished runs and retries the lost one.
    again = run_sweep(configs, tmp_path, backend=backend_options("serial"), runner=fake_runner)
    assert (again.skipped, again.completed, again.backend) == (3, 1, "serial")
    with pytest.raises(FormalRopeError, match="workers: give the run options once"):
        run_sweep(configs, tmp_path, backend=backend_options("serial"), workers=2, runner=fake_runner)
    with pytest.raises(FormalRopeError, match="--workers 2: the serial backend"):
        run_sweep(configs, tmp_path, backend="serial", workers=2, runner=fake_runner)


def test_a_backend_added_by_one_row_is_a_choice_of_the_command_line(tmp_path, capsys, serial_backend, monkeypatch):
    import formal_rope.sweeps.runner as runner_module

    real_run_sweep = runner_module.run_sweep
    monkeypatch.setattr(runner_module, "run_sweep", lambda *a, **k: real_run_sweep(*a, **{**k, "runner": fake_runner}))
    base = ["sweep", "--lang", "(ab)*", "--pe", "nope", "--seeds", "2"]
    code, _, stderr = _cli(capsys, [*base, "--backend", "serial", "--workers", "2", "--dry-run"])
    assert code == 2 and "--workers 2: the serial backend runs one unit at a time" in stderr
    code, stdout, _ = _cli(capsys, [*base, "--backend", "serial", "--out", str(tmp_path / "s"), "--json"])
    sweep = json.loads(stdout)["sweep"]
    assert code == 0 and (sweep["backend"], sweep["completed"], sweep["statuses"]) == ("serial", 2, {"ok": 2})


class NodeLosingBackend(SerialBackend):
    """The serial backend whose machine is lost (NodeLost) when it reaches a unit holding seed 2."""

    def run(self, units, task, key_of, on_unit) -> None:
        for unit in units:
            if any(config.seed == 2 for config in unit):
                raise NodeLost("the serial machine died (test)")
            on_unit("start", unit)
            on_unit("done", unit, task(unit))


def test_a_lost_node_stops_the_sweep_with_one_paragraph_naming_the_kept_runs(tmp_path, capsys, monkeypatch):
    import formal_rope.sweeps.runner as runner_module

    monkeypatch.setitem(BACKENDS, "serial", BackendRow("serial", NodeLosingBackend, SerialOptions, "loses its node"))
    configs = expand_grid(spec(languages=["(ab)*"], pes=["nope"], bases=[1e4], seeds=4, lrs=[1e-4]))
    run_sweep(configs[:1], tmp_path, backend="serial", pack=1, runner=fake_runner)  # seed 0, finished before
    with pytest.raises(SweepStopped) as stopped:
        run_sweep(configs, tmp_path, backend="serial", pack=1, runner=fake_runner)
    assert stopped.value.exit_code == 3 and isinstance(stopped.value, FormalRopeError)
    message = str(stopped.value)
    assert message.startswith("the sweep stopped: the serial machine died (test); the runs in flight or queued")
    assert "1 run(s) finished by this sweep and 1 finished before:" in message
    assert configs[1].run_id() in message and configs[0].run_id() not in message and "Not run: 2." in message
    assert sorted(load_results(tmp_path)[0]["seed"]) == [0, 1]  # what ran is kept
    real_run_sweep = runner_module.run_sweep
    monkeypatch.setattr(runner_module, "run_sweep", lambda *a, **k: real_run_sweep(*a, **{**k, "runner": fake_runner}))
    code, _, stderr = _cli(capsys, ["sweep", "--lang", "(ab)*", "--pe", "nope", "--seeds", "4", "--pack", "1",
                                    "--backend", "serial", "--out", str(tmp_path / "cli")])
    lines = stderr.strip().splitlines()
    first = next(index for index, line in enumerate(lines) if line.startswith("error: "))
    assert code == 3 and "Traceback" not in stderr and all(line.startswith("  ") for line in lines[first + 1:])
    assert "Kept in" in lines[first] and "Not run: 2." in stderr


def test_the_registry_and_the_command_line_start_without_numpy_or_the_runner():
    # The CLI reads the registry when it starts: the backend modules import neither the runner
    # (no runner <-> backend cycle) nor the training stage (numpy), nor Ray.
    script = (
        "import sys\nimport formal_rope.sweeps.backends\nimport formal_rope.cli\n"
        "loaded = [m for m in ('numpy', 'torch', 'ray', 'pandas', 'formal_rope.sweeps.runner', "
        "'formal_rope.run_config.config',"
        " 'concurrent.futures.process') if m in sys.modules]\n"
        "assert not loaded, loaded\nprint('light')\n"
    )
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120,
                          env=dict(os.environ, PYTHONPATH=str(REPO)))
    assert done.returncode == 0 and "light" in done.stdout, done.stderr
