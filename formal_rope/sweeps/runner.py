"""Running a grid: skip finished runs, hand the rest to a backend, persist each result atomically.

The driver (this module, in the process that called `run_sweep`) is the only writer of OUT/runs and
OUT/evals: backends (`formal_rope.sweeps.backends`) run units of work (packs of compatible runs,
`formal_rope.sweeps.units`) wherever they run them — worker processes on this machine, or Ray tasks
anywhere on a cluster — and return the results, which the driver writes. So the results folder
needs no shared filesystem, and a unit retried after a lost worker is written once.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, fields, replace
from pathlib import Path
from typing import Callable, Sequence

from formal_rope.errors import FormalRopeError
from formal_rope.files import acquire_lock
from formal_rope.run_config.config import RunConfig
from formal_rope.storage.curves import CurveOptions
from formal_rope.storage.provenance import source_commit
from formal_rope.storage.tensorboard_log import check_tensorboard
from formal_rope.storage.training_state import (
    StateOptions,
    absolute_location,
    check_state_dir,
    is_uri,
    open_state_store,
    read_saved_state,
)
from formal_rope.sweeps.backends import BACKENDS, BackendOptions, backend_options, make_backend, options_row
from formal_rope.sweeps.backends.base import NodeLost, SweepStopped, WorkerDied
from formal_rope.sweeps.results import ensure_results_dir, finished_run_ids, write_run
from formal_rope.sweeps.units import (
    Unit,
    UnitTask,
    default_runner,
    failed_result,
    pack_runner_in_process,
    plan_units,
    stage_waves,
    unit_key,
)
from formal_rope.training.init_from import SWEEP_MODELS_DIR, is_run_id
from formal_rope.training.run_result import RunResult

SWEEP_LOCK = ".formal-rope-sweep.lock"  # in the results folder, held while a sweep runs there
EventCallback = Callable[[str, RunConfig, "RunResult | None"], None]


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

    def to_dict(self) -> dict:
        """The summary's fields in order (the `sweep --json` document's "sweep" entry, after its name)."""
        return {field.name: getattr(self, field.name) for field in fields(self)}


_FLAG_DEFAULTS = {field.name: field.default for field in fields(BackendOptions)}


def resolve_backend(backend: str | BackendOptions, **flags) -> BackendOptions:
    """The options a sweep runs with: `backend` itself when it is options already (the run flags
    must then be left at their defaults), else the named backend's options from the flags."""
    if not isinstance(backend, BackendOptions):
        return backend_options(backend, **flags)
    given = sorted(name for name, value in flags.items() if value != _FLAG_DEFAULTS[name])
    if given:
        raise FormalRopeError(f"run_sweep got backend options and {', '.join(given)}: give the run options once, "
                              "in the backend's options")
    return backend


def run_sweep(
    configs: list[RunConfig],
    out: str | Path,
    *,
    workers: int = 1,
    pack="auto",
    backend: str | BackendOptions = "local",
    address: str | None = None,
    cpus_per_run: float | None = None,
    gpus_per_run: float = 0,
    max_retries: int = 3,
    state: StateOptions | None = None,
    runner: Callable[[RunConfig], RunResult] | None = None,
    pack_runner: Callable[..., Sequence[RunResult]] | None = None,
    on_event: EventCallback | None = None,
    on_note: Callable[[str], None] | None = None,
    worst_case=None,
    curves: CurveOptions = CurveOptions(),
    resolved: Sequence = (),
) -> SweepSummary:
    """Run every config not already finished in `out`; each result is written as soon as it ends.

    Runs are grouped into units (packs of compatible runs, `pack` as `--pack`: "auto" or a size)
    and run by `backend`, a name in `backends.BACKENDS` with the run flags as keywords, or a
    backend's options (`backends.backend_options(name, workers=…)`, then the keywords stay unset):
    "local" (`workers` processes on this machine; in this process when workers is 1) or "ray" (Ray
    tasks needing `cpus_per_run` CPUs and `gpus_per_run` GPUs each, on the cluster at `address` —
    "auto" for the one `ray start` runs here — or on a local Ray instance of `workers` ×
    `cpus_per_run` CPUs; a Ray connection already open in this process is used as it is; a task
    that gets a GPU trains on cuda). Each unit trains with `cpus_per_run` torch threads (default on
    Ray: 1; locally: the machine's cores shared by the workers for packs, 1 for single runs). A unit
    whose worker dies (killed for memory, lost node) is run again up to `max_retries` times, then its
    runs are recorded failed. With `state`, units save their training state every `state.every`
    steps into `state.uri` (checked writable before anything starts) and a unit started again
    continues from it.

    Interrupting (Ctrl-C) loses at most each unit's progress since its last state: finished runs
    are on disk, Ray tasks are cancelled and a Ray instance started here is shut down. Failed runs
    count as unfinished: the next call reruns them (ok and diverged runs are skipped).
    on_event(kind, config, result) is called with kind in {"skip", "start", "retry", "done"} for
    progress display; on_note(text) receives one-line notes (the Ray dashboard URL, warnings).
    `runner` (RunConfig -> RunResult) or `pack_runner(configs, device=, threads=, state=)` replace
    the trainer (tests, custom experiments); both must be importable by the workers.
    worst_case: the worst-case search's settings (`evaluation.engine.SearchSettings`, `--eval
    worst-case`): every run is also searched for misclassified strings, and a finished run without
    a worst-case result counts as unfinished (it is trained again; the packs OUT/packs.json records
    are reused, so its numbers are the same). A custom pack_runner then gets worst_case= too.
    curves: each run's training curve (OUT/curves, `--log-every`) and TensorBoard event files
    (`--tensorboard`, written by the worker that trains the run), with the default pack runner.
    resolved: runs resolved in advance (`sweeps.checks.resolve_grid(configs).runs`); the default
    pack runner trains these as they are, without resolving them again (each run resolved once).
    """
    start = time.perf_counter()
    options = resolve_backend(backend, workers=workers, address=address, cpus_per_run=cpus_per_run,
                              gpus_per_run=gpus_per_run, max_retries=max_retries)
    if runner is not None and pack_runner is not None:
        raise FormalRopeError("pass runner (one run) or pack_runner (a pack), not both")
    if state is not None:
        state = replace(state, uri=absolute_location(state.uri))
        check_state_dir(state.uri)
    out = ensure_results_dir(out)
    # One sweep at a time in a results folder: a second one would train every pending run again.
    if curves.tensorboard is not None:
        check_tensorboard()  # before any run starts, as a missing package is the user's to fix
        curves = replace(curves, tensorboard=absolute_location(curves.tensorboard))  # workers may run elsewhere
    lock = acquire_lock(out / SWEEP_LOCK, "the results folder", out)
    try:
        return _run_locked(configs, out, options, state=state, runner=runner, pack_runner=pack_runner,
                           on_event=on_event, on_note=on_note, pack=pack, start=start, worst_case=worst_case,
                           curves=curves, resolved=resolved)
    finally:
        lock.release()


def _run_locked(configs, out: Path, options: BackendOptions, *, state, runner, pack_runner, on_event, on_note, pack,
                start: float, worst_case, curves: CurveOptions = CurveOptions(), resolved=()) -> SweepSummary:
    done = finished_run_ids(out, worst_case=worst_case is not None)
    pending = [c for c in configs if c.run_id() not in done]
    notify = on_event or (lambda *_: None)
    note = on_note or (lambda _text: None)
    models_dir, sources = staged_models(out, configs, pending)
    for config in configs:
        if config.run_id() in done:
            notify("skip", config, None)
    pending_ids = {config.run_id() for config in pending}
    # Only the pending runs travel with the task to the workers (the others are done).
    ready = {run.config.run_id(): run for run in resolved if run.config.run_id() in pending_ids}
    task = UnitTask(runner=runner, pack_runner=pack_runner, threads=options.threads, workers=options.workers,
                    state=state, worst_case=worst_case, models_dir=models_dir, keep_models=sources, curves=curves,
                    resolved=ready)
    commit = source_commit()
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
        if options.other_machines and state is not None and not is_uri(state.uri):
            note(f"the state folder {state.uri} is on this machine's disk: a run retried on another node starts "
                 "over (use a folder every node reaches: s3://…, gs://…, a shared filesystem)")
        executor = make_backend(options)
        try:
            capacity = executor.open(note)
            dashboard_url = capacity.dashboard_url
            # A staged recipe's runs train in waves, each after the runs it continues from (stage_waves).
            waves = [plan_units(out, wave, pack, slots=capacity.slots, memory_bytes=capacity.memory_bytes,
                                per_run=runner is not None) for wave in stage_waves(pending)]
            units = [unit for wave in waves for unit in wave]
            if state is not None:
                check_saved_states(state.uri, units)
            for wave in waves:
                executor.run(wave, task, unit_key, unit_event)
        except NodeLost as lost:
            raise SweepStopped(stopped_message(str(lost), out, configs, done, written)) from None
        finally:
            executor.close()
    return SweepSummary(
        total=len(configs),
        skipped=len(configs) - len(pending),
        completed=sum(statuses.values()),
        statuses=statuses,
        wall_s=time.perf_counter() - start,
        backend=options_row(options).name,
        units=len(units),
        retries=counts["retries"],
        dashboard_url=dashboard_url,
    )


def staged_models(out: Path, configs: Sequence[RunConfig],
                  pending: Sequence[RunConfig]) -> tuple[str | None, frozenset]:
    """(The folder of a staged sweep's checkpoints, OUT/models, or None without stages; the run ids
    whose checkpoints other runs continue from). FormalRopeError (exit 2, before anything runs) for a
    pending run whose source is neither pending here nor has a checkpoint there."""
    sources = frozenset(c.init_from for c in configs if is_run_id(c.init_from))
    if not sources:
        return None, sources
    models = Path(out) / SWEEP_MODELS_DIR
    waiting = {config.run_id() for config in pending}
    for config in pending:
        source = config.init_from
        if is_run_id(source) and source not in waiting and not (models / f"{source}.zip").is_file():
            raise FormalRopeError(
                f"run {config.run_id()} continues from run {source} (init_from), which is not pending in this sweep "
                f"and has no checkpoint {models / (source + '.zip')}: it finished before its checkpoint was kept, or "
                f"the checkpoint was removed; delete {source}'s result from {Path(out) / 'runs'} to train it again"
            )
    return str(models), sources


def check_saved_states(uri: str, units: Sequence[Unit]) -> None:
    """TrainingStateError (exit 2) for the first unit whose saved state cannot be resumed (damaged, of
    an earlier format that could run code, of other runs), before any unit starts: a state folder is
    the user's input, and one bad state must not cost the sweep a unit's work or be recorded as a
    failed run. Each state is read and its header checked; its tensors are read by the unit."""
    store = open_state_store(uri)
    saved = set(store.keys())
    for unit in units:
        key = unit_key(unit)
        if key in saved:
            read_saved_state(store, key, [config.run_id() for config in unit])


def stopped_message(what: str, out: Path, configs: Sequence[RunConfig], done: set[str], written: set[str],
                    shown: int = 10) -> str:
    """The `error:` paragraph of a sweep whose backend was lost: what happened, which runs are kept
    (finished before or during this sweep, each a file in OUT/runs), how many are not, what to do."""
    kept = [config for config in configs if config.run_id() in written]
    earlier = sum(config.run_id() in done for config in configs)
    missing = len(configs) - len(kept) - earlier
    lines = [f"the sweep stopped: {what}; the runs in flight or queued there are lost. Kept in {out / 'runs'}: "
             f"{len(kept)} run(s) finished by this sweep" + (f" and {earlier} finished before" if earlier else "")
             + (":" if kept else ".")]
    for config in kept[:shown]:
        lines.append(f"  {config.run_id()}  {config.language} {config.pe} seed={config.seed} lr={config.lr:g}")
    if len(kept) > shown:
        lines.append(f"  … and {len(kept) - shown} more")
    lines.append(f"  Not run: {missing}. Rerun the same command to run them (finished runs are skipped; a run that "
                 "saved its training state, --checkpoint-every, resumes from it).")
    return "\n".join(lines)


# Names that lived here before the backends had their own package (kept for existing imports).
__all__ = ["BACKENDS", "SweepSummary", "UnitTask", "WorkerDied", "default_runner", "failed_result", "make_backend",
           "pack_runner_in_process", "resolve_backend", "run_sweep"]
