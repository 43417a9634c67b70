"""Running a grid: skip finished runs, hand the rest to a backend, persist each result atomically.

The driver (this module, in the process that called `run_sweep`) is the only writer of OUT/runs and
OUT/evals: backends run units of work (packs of compatible runs) wherever they run them — worker
processes on this machine, or Ray tasks anywhere on a cluster — and return the results, which the
driver writes. So the results folder needs no shared filesystem, and a unit retried after a lost
worker is written once.
"""

from __future__ import annotations

import json
import os
import time
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Callable, Protocol, Sequence

from formal_rope.errors import FormalRopeError
from formal_rope.sweeps.results import ensure_results_dir, finished_run_ids, git_commit, write_run
from formal_rope.training.config import RunConfig, RunResult
from formal_rope.training.state import StateOptions, absolute_location, check_state_dir, is_uri

BACKENDS = ("local", "ray")

WORKER_DIED = (
    "a worker process died while this run was in flight (killed for memory, lost node or crashed) and "
    "retries were used up; rerun the sweep to retry it"
)

Unit = tuple  # tuple[RunConfig, ...]: the runs one worker trains together (a pack; one run with --pack 1)
EventCallback = Callable[[str, RunConfig, "RunResult | None"], None]


@dataclass(frozen=True)
class Capacity:
    """What a backend offers once open: how many units run at once, the memory they share (None:
    this machine's, as packing reads it) and the URL of a dashboard showing the work, if any."""

    slots: int
    memory_bytes: int | None = None
    dashboard_url: str | None = None


class Backend(Protocol):
    """Runs units of work somewhere and reports back to the driver (local processes, Ray)."""

    def open(self, on_note: Callable[[str], None]) -> Capacity:
        """Get ready (connect, start an instance); FormalRopeError when that cannot be done."""

    def run(self, units: Sequence[Unit], task: UnitTask, key_of: Callable[[Unit], str],
            on_unit: Callable[..., None]) -> None:
        """Run `task` on every unit. In the driver process, call on_unit("start", unit) when a unit
        starts, on_unit("retry", unit) when it starts again after its worker died, and exactly once
        per unit on_unit("done", unit, results) with one RunResult per run (failed results when the
        retries ran out). Ctrl-C (KeyboardInterrupt) stops the work in flight and propagates."""

    def close(self) -> None:
        """Release what `open` took (shut down an instance started there); also after errors."""


class WorkerDied(RuntimeError):
    """Recorded as the error of the runs in flight when a worker process dies for good."""


@dataclass(frozen=True)
class SweepSummary:
    """What `run_sweep` did: runs in the grid, skipped (already done), completed, count per status."""

    total: int
    skipped: int
    completed: int
    statuses: dict
    wall_s: float
    backend: str = "local"
    units: int = 0  # units of work (packs) run
    retries: int = 0  # units started again after a lost worker
    dashboard_url: str | None = None


def failed_result(config: RunConfig, error: BaseException | str, wall_s: float = 0.0) -> RunResult:
    """The record of a run that did not produce a result (an exception, a worker that died)."""
    message = error if isinstance(error, str) else f"{type(error).__name__}: {error}"
    return RunResult(
        run_id=config.run_id(),
        config=config,
        status="failed",
        n_star=None,  # not a measurement: left out of every N* statistic
        accuracy=float("nan"),
        wall_s=wall_s,
        error=message,
    )


def pack_runner_in_process(configs: Sequence[RunConfig], *, device: str, threads: int,
                           state: StateOptions | None) -> list[RunResult]:
    """Train and evaluate a pack of compatible runs in this process (the default pack runner)."""
    from formal_rope.training.train import run_pack

    return run_pack(configs, progress=False, device=device, threads=threads, state=state)[0]


def default_runner(config: RunConfig) -> RunResult:
    """Train and evaluate one run in this process (single-threaded torch): a pack of one."""
    return pack_runner_in_process((config,), device="cpu", threads=1, state=None)[0]


@dataclass(frozen=True)
class UnitTask:
    """What a worker does with a unit: train its runs and return one result per run, in order.

    `runner` (one RunConfig -> RunResult) runs the unit's configs one by one, each failure recorded
    on its own run; otherwise `pack_runner(configs, device=, threads=, state=)` trains the unit at
    once (default `pack_runner_in_process`). When the pack runner raises for a unit of several runs,
    each run is given to it again alone, so one run's failure is never recorded as its pack-mates'
    result. Exceptions that are not `Exception` (KeyboardInterrupt) propagate.
    """

    runner: Callable[[RunConfig], RunResult] | None = None
    pack_runner: Callable[..., Sequence[RunResult]] = pack_runner_in_process
    device: str = "cpu"
    threads: int | None = None  # None: packing.default_threads for the unit's size and `workers`
    workers: int = 1
    state: StateOptions | None = None

    def __call__(self, unit: Unit, device: str | None = None) -> list[RunResult]:
        if self.runner is not None:
            return [self._run_one(config) for config in unit]
        start = time.perf_counter()
        try:
            from formal_rope.training.packing import default_threads

            threads = self.threads or default_threads(len(unit), self.workers)
            results = list(self.pack_runner(tuple(unit), device=device or self.device, threads=threads, state=self.state))
            if [r.run_id for r in results] != [c.run_id() for c in unit]:
                raise RuntimeError(f"the pack runner returned {len(results)} results for {len(unit)} runs, or out of order")
            return results
        except Exception as error:  # a failing unit is recorded, the sweep goes on
            if len(unit) == 1:
                return [failed_result(unit[0], error, time.perf_counter() - start)]
            # Which run raised is unknown: train each alone, so that each records its own outcome.
            return [self((config,), device)[0] for config in unit]

    def _run_one(self, config: RunConfig) -> RunResult:
        start = time.perf_counter()
        try:
            return self.runner(config)
        except Exception as error:
            return failed_result(config, error, time.perf_counter() - start)


def unit_key(unit: Unit) -> str:
    """The name of a unit: the key of its training state and its task name on Ray."""
    from formal_rope.training.packing import pack_key

    return pack_key(unit)


def group_units(configs: Sequence[RunConfig], pack, *, slots: int, memory_bytes: int | None, per_run: bool) -> list[Unit]:
    """Units of work: packs of compatible runs (`pack` as `--pack`, spread over `slots` concurrent
    units within `memory_bytes`), or single runs for a per-run runner."""
    if per_run:
        return [(config,) for config in configs]
    from formal_rope.training.packing import group_packs

    return [tuple(unit) for unit in group_packs(list(configs), pack, workers=slots, memory_bytes=memory_bytes)]


PACK_PLAN = "packs.json"  # in the results folder: the packs this sweep trains, so that a rerun finds their states


def plan_units(out: Path, configs: Sequence[RunConfig], pack, *, slots: int, memory_bytes: int | None,
               per_run: bool) -> list[Unit]:
    """Units for the pending `configs`: the packs an earlier call recorded in OUT/packs.json whose
    runs are all still pending (so a rerun — with another number of workers, on a cluster of
    another size — finds the training states they saved), then new packs for the other runs,
    recorded in turn. A different `pack` option than recorded starts a new plan."""
    if per_run:
        return [(config,) for config in configs]
    path = Path(out) / PACK_PLAN
    try:
        recorded = json.loads(path.read_text())
        known = [list(members) for members in recorded["packs"]] if recorded.get("pack") == str(pack) else []
    except (OSError, ValueError, KeyError, TypeError):
        known = []
    by_id = {config.run_id(): config for config in configs}
    units: list[Unit] = []
    used: set[str] = set()
    for members in known:
        if members and all(run_id in by_id and run_id not in used for run_id in members):
            units.append(tuple(by_id[run_id] for run_id in members))
            used.update(members)
    rest = [config for config in configs if config.run_id() not in used]
    fresh = group_units(rest, pack, slots=slots, memory_bytes=memory_bytes, per_run=False) if rest else []
    if fresh:
        plan = {"format": 1, "pack": str(pack), "packs": known + [[c.run_id() for c in unit] for unit in fresh]}
        temporary = path.with_name(f".{PACK_PLAN}.{os.getpid()}.tmp")
        temporary.write_text(json.dumps(plan) + "\n")
        os.replace(temporary, path)
    order = {config.run_id(): index for index, config in enumerate(configs)}
    return sorted(units + fresh, key=lambda unit: order[unit[0].run_id()])


def check_run_options(backend: str, workers: int, cpus_per_run: float, gpus_per_run: float, max_retries: int,
                      address: str | None) -> None:
    """FormalRopeError for options no backend can honour (before anything starts)."""
    if backend not in BACKENDS:
        raise FormalRopeError(f"unknown backend {backend!r}; expected one of {', '.join(BACKENDS)}")
    if workers < 1:
        raise FormalRopeError(f"--workers must be at least 1, got {workers}")
    if cpus_per_run is not None and not cpus_per_run > 0:
        raise FormalRopeError(f"--cpus-per-run must be > 0, got {cpus_per_run:g}")
    if gpus_per_run < 0:
        raise FormalRopeError(f"--gpus-per-run must be >= 0, got {gpus_per_run:g}")
    if max_retries < 0:
        raise FormalRopeError(f"--max-retries must be >= 0, got {max_retries}")
    if backend == "local" and address is not None:
        raise FormalRopeError("--address joins a Ray cluster: use it with --backend ray")
    if backend == "local" and gpus_per_run > 0:
        raise FormalRopeError("--gpus-per-run schedules runs on GPUs through Ray: use it with --backend ray")


def make_backend(backend: str, *, workers: int, address: str | None, cpus_per_run: float | None,
                 gpus_per_run: float, max_retries: int) -> Backend:
    """The backend named `backend` (Ray is imported only when it is "ray")."""
    if backend == "ray":
        from formal_rope.sweeps.ray_backend import RayBackend

        return RayBackend(address=address, workers=workers, cpus_per_run=cpus_per_run or 1,
                          gpus_per_run=gpus_per_run, max_retries=max_retries)
    from formal_rope.sweeps.local import LocalBackend

    return LocalBackend(workers=workers, max_retries=max_retries)


def run_sweep(
    configs: list[RunConfig],
    out: str | Path,
    *,
    workers: int = 1,
    pack="auto",
    backend: str = "local",
    address: str | None = None,
    cpus_per_run: float | None = None,
    gpus_per_run: float = 0,
    max_retries: int = 3,
    state: StateOptions | None = None,
    runner: Callable[[RunConfig], RunResult] | None = None,
    pack_runner: Callable[..., Sequence[RunResult]] | None = None,
    on_event: EventCallback | None = None,
    on_note: Callable[[str], None] | None = None,
) -> SweepSummary:
    """Run every config not already finished in `out`; each result is written as soon as it ends.

    Runs are grouped into units (packs of compatible runs, `pack` as `--pack`: "auto" or a size)
    and run by `backend`: "local" (`workers` processes on this machine; in this process when
    workers is 1) or "ray" (Ray tasks needing `cpus_per_run` CPUs and `gpus_per_run` GPUs each, on
    the cluster at `address` — "auto" for the one `ray start` runs here — or on a local Ray
    instance of `workers` × `cpus_per_run` CPUs; a Ray connection already open in this process is
    used as it is; a task that gets a GPU trains on cuda). Each unit trains with `cpus_per_run`
    torch threads (default on Ray: 1; locally: the machine's cores shared by the workers for packs,
    1 for single runs). A unit whose worker dies (killed for memory, lost node) is run again up to
    `max_retries` times, then its runs are recorded failed. With `state`, units save their training
    state every `state.every` steps into `state.uri` (checked writable before anything starts) and
    a unit started again continues from it.

    Interrupting (Ctrl-C) loses at most each unit's progress since its last state: finished runs
    are on disk, Ray tasks are cancelled and a Ray instance started here is shut down. Failed runs
    count as unfinished: the next call reruns them (ok and diverged runs are skipped).
    on_event(kind, config, result) is called with kind in {"skip", "start", "retry", "done"} for
    progress display; on_note(text) receives one-line notes (the Ray dashboard URL, warnings).
    `runner` (RunConfig -> RunResult) or `pack_runner(configs, device=, threads=, state=)` replace
    the trainer (tests, custom experiments); both must be importable by the workers.
    """
    start = time.perf_counter()
    check_run_options(backend, workers, cpus_per_run, gpus_per_run, max_retries, address)
    if runner is not None and pack_runner is not None:
        raise FormalRopeError("pass runner (one run) or pack_runner (a pack), not both")
    if state is not None:
        state = replace(state, uri=absolute_location(state.uri))
        check_state_dir(state.uri)
    out = ensure_results_dir(out)
    done = finished_run_ids(out)
    pending = [c for c in configs if c.run_id() not in done]
    notify = on_event or (lambda *_: None)
    note = on_note or (lambda _text: None)
    for config in configs:
        if config.run_id() in done:
            notify("skip", config, None)
    threads = None if cpus_per_run is None else max(1, round(cpus_per_run))
    if backend == "ray" and threads is None:
        threads = 1
    task = UnitTask(runner=runner, pack_runner=pack_runner or pack_runner_in_process, threads=threads,
                    workers=workers, state=state)
    commit = git_commit()
    statuses: dict[str, int] = {}
    written: set[str] = set()
    counts = {"retries": 0}

    def unit_event(kind: str, unit: Unit, results: Sequence[RunResult] | None = None) -> None:
        if kind == "retry":
            counts["retries"] += 1
        if kind != "done":
            for config in unit:
                notify(kind, config, None)
            return
        for config, result in zip(unit, results):
            if config.run_id() in written:
                continue  # never two rows for one run, whatever a backend reports twice
            if result.commit is None and commit is not None:
                result = replace(result, commit=commit)
            write_run(out, config, result)
            written.add(config.run_id())
            statuses[result.status] = statuses.get(result.status, 0) + 1
            notify("done", config, result)

    units: list[Unit] = []
    dashboard_url = None
    if pending:
        if backend == "ray" and state is not None and not is_uri(state.uri) and address is not None:
            note(f"the state folder {state.uri} is on this machine's disk: a run retried on another node starts "
                 "over (use a folder every node reaches: s3://…, gs://…, a shared filesystem)")
        executor = make_backend(backend, workers=workers, address=address, cpus_per_run=cpus_per_run,
                                gpus_per_run=gpus_per_run, max_retries=max_retries)
        try:
            capacity = executor.open(note)
            dashboard_url = capacity.dashboard_url
            units = plan_units(out, pending, pack, slots=capacity.slots, memory_bytes=capacity.memory_bytes,
                               per_run=runner is not None)
            executor.run(units, task, unit_key, unit_event)
        finally:
            executor.close()
    return SweepSummary(
        total=len(configs),
        skipped=len(configs) - len(pending),
        completed=sum(statuses.values()),
        statuses=statuses,
        wall_s=time.perf_counter() - start,
        backend=backend,
        units=len(units),
        retries=counts["retries"],
        dashboard_url=dashboard_url,
    )


__all__ = ["BACKENDS", "SweepSummary", "UnitTask", "WorkerDied", "default_runner", "failed_result", "make_backend",
           "pack_runner_in_process", "run_sweep"]
