"""Units of work: the runs one worker trains together (a pack), what a worker does with one
(`UnitTask`), and the plan of a sweep's units that a rerun finds again (OUT/packs.json)."""

from __future__ import annotations

import json
import time
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from functools import partial
from pathlib import Path
from typing import Callable, Sequence

from formal_rope.errors import FormalRopeError
from formal_rope.files import read_bounded, write_bytes_atomically
from formal_rope.run_config.config import RunConfig
from formal_rope.scheduling.packs import default_threads, group_packs, pack_key
from formal_rope.storage.curves import CurveOptions
from formal_rope.storage.training_state import StateOptions
from formal_rope.sweeps.backends.base import Unit
from formal_rope.sweeps.backends.cores import CoreShare
from formal_rope.training.init_from import is_run_id
from formal_rope.training.run_result import RunResult


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


def pack_runner_in_process(configs: Sequence, *, device: str, threads: int,
                           state: StateOptions | None, threads_alone: int | None = None,
                           worst_case=None, checkpoint_paths=None, init_dir: str | None = None,
                           eval_threads=None, curve_options: CurveOptions | None = None) -> list[RunResult]:
    """Train and evaluate a pack of compatible runs (RunConfigs, or ResolvedRuns: trained as
    resolved) in this process (the default pack runner).
    threads_alone: the threads of each run trained again alone when the pack raises (default
    `threads`; `run_pack`). worst_case: the worst-case search's settings (`--eval worst-case`).
    checkpoint_paths, init_dir: as for `run_pack` (a staged sweep's checkpoints, OUT/models).
    eval_threads: as for `run_pack` (the evaluation's threads, asked before each pass).
    curve_options: the runs' training curves and TensorBoard files (None: the default curves)."""
    from formal_rope.runs.pack import run_pack  # function-local: torch, only where a unit trains

    return run_pack(configs, progress=False, device=device, threads=threads, threads_alone=threads_alone,
                    state=state, worst_case=worst_case, checkpoint_paths=checkpoint_paths, init_dir=init_dir,
                    eval_threads=eval_threads, curve_options=curve_options or CurveOptions())[0]


def default_runner(config: RunConfig) -> RunResult:
    """Train and evaluate one run in this process (single-threaded torch): a pack of one."""
    return pack_runner_in_process((config,), device="cpu", threads=1, state=None)[0]


@dataclass(frozen=True)
class UnitTask:
    """What a worker does with a unit: train its runs and return one result per run, in order.

    `runner` (one RunConfig -> RunResult) runs the unit's configs one by one, each failure recorded
    on its own run; otherwise `pack_runner(configs, device=, threads=, state=)` trains the unit at
    once (None: `pack_runner_in_process`); `worst_case` (the worst-case search's settings, `--eval
    worst-case`) is passed to it as worst_case= when set. When the pack runner raises for a unit of several runs,
    each run is given to it again alone, so one run's failure is never recorded as its pack-mates'
    result. Exceptions that are not `Exception` (KeyboardInterrupt) propagate.
    """

    runner: Callable[[RunConfig], RunResult] | None = None
    pack_runner: Callable[..., Sequence[RunResult]] | None = None
    device: str = "cpu"
    threads: int | None = None  # None: packing.default_threads for the unit's size and `workers`
    workers: int = 1
    state: StateOptions | None = None
    worst_case: object | None = None  # evaluation.engine.SearchSettings (`--eval worst-case`)
    # A staged sweep (RunConfig.init_from naming run ids): the folder of checkpoints by run id
    # (OUT/models), where the runs in `keep_models` (other runs' sources) save theirs and continued
    # runs find their source's. Used by the default pack runner only.
    models_dir: str | None = None
    keep_models: frozenset = frozenset()
    # A local pool's count of units in flight (`backends.cores`): the default pack runner's
    # evaluation then takes the threads of idle workers too (same results at any thread count).
    cores: CoreShare | None = None
    # Each run's training curve and TensorBoard files (`storage.curves`), written where it trains.
    curves: CurveOptions = CurveOptions()
    # Runs resolved by the grid check (`sweeps.checks.resolve_grid`), by run id: the default pack
    # runner trains a unit whose runs are all here as they are, without resolving them again.
    resolved: Mapping = field(default_factory=dict)

    def sharing_cores(self, share: CoreShare) -> "UnitTask":
        """This task, its evaluations sharing the pool's idle cores through `share`."""
        return replace(self, cores=share)

    def computes_on_threads(self, units) -> bool:
        """Whether this task runs torch on more than one thread for some of `units` (its default pack
        runner with more than one thread per unit): a worker forked from a process whose torch has
        already used several threads would hang there (`backends.cores`)."""
        return self.runner is None and self.pack_runner is None and any(
            self.threads_for(len(unit)) > 1 for unit in units)

    def threads_for(self, size: int) -> int:
        """The torch threads of a unit of `size` runs."""
        return self.threads or default_threads(size, self.workers)

    def __call__(self, unit: Unit, device: str | None = None) -> list[RunResult]:
        if self.runner is not None:
            return [self._run_one(config) for config in unit]
        start = time.perf_counter()
        try:
            results = list(self._train(tuple(unit), device or self.device))
            if [r.run_id for r in results] != [c.run_id() for c in unit]:
                raise RuntimeError(f"the pack runner returned {len(results)} results for {len(unit)} runs, "
                                   "or out of order")
            return results
        except Exception as error:  # a failing unit is recorded, the sweep goes on
            if len(unit) == 1:
                return [failed_result(unit[0], error, time.perf_counter() - start)]
            # Which run raised is unknown: train each alone, so that each records its own outcome.
            return [self((config,), device)[0] for config in unit]

    def failed(self, unit: Unit, error: BaseException | str) -> list[RunResult]:
        """Every run of `unit` failed with `error` (its worker died for good, its result was lost)."""
        return [failed_result(config, error) for config in unit]

    def _train(self, unit: Unit, device: str) -> Sequence[RunResult]:
        threads = self.threads_for(len(unit))
        extra = {} if self.worst_case is None else {"worst_case": self.worst_case}
        if self.pack_runner is not None:
            return self.pack_runner(unit, device=device, threads=threads, state=self.state, **extra)
        # A pack that raises is trained again run by run (run_pack); each run then gets the threads
        # of a unit of one, as the same run trained alone (--pack 1) does: with the pack's threads
        # its loss and gradient sums would round differently (one partial sum per thread).
        if self.models_dir is not None:
            extra["init_dir"] = self.models_dir
            extra["checkpoint_paths"] = [
                str(Path(self.models_dir) / f"{config.run_id()}.zip") if config.run_id() in self.keep_models else None
                for config in unit
            ]
        if self.cores is not None and str(device).startswith("cpu"):
            extra["eval_threads"] = partial(self.cores.evaluation_threads, threads)
        runs = [self.resolved.get(config.run_id()) for config in unit]
        return pack_runner_in_process(unit if None in runs else runs, device=device, threads=threads,
                                      threads_alone=self.threads_for(1), state=self.state, curve_options=self.curves,
                                      **extra)

    def _run_one(self, config: RunConfig) -> RunResult:
        start = time.perf_counter()
        try:
            return self.runner(config)
        except Exception as error:
            return failed_result(config, error, time.perf_counter() - start)


def stage_waves(configs: Sequence[RunConfig]) -> list[list[RunConfig]]:
    """`configs` in waves that train one after another: a run whose init_from names the id of
    another run among `configs` comes in a later wave than that run (a staged recipe's stage after
    its source); everything else in the first. Order within a wave is kept; one wave without stages."""
    waves, remaining = [], list(configs)
    while remaining:
        pending = {config.run_id() for config in remaining}
        wave = [c for c in remaining if not (is_run_id(c.init_from) and c.init_from in pending)]
        if not wave:  # impossible (an id hashes its source's id), but never loop forever
            raise FormalRopeError("the runs' init_from sources form a cycle")
        waves.append(wave)
        chosen = {config.run_id() for config in wave}
        remaining = [config for config in remaining if config.run_id() not in chosen]
    return waves


def unit_key(unit: Unit) -> str:
    """The name of a unit: the key of its training state and its task name on Ray."""
    return pack_key(unit)


def group_units(configs: Sequence[RunConfig], pack, *, slots: int, memory_bytes: int | None,
                per_run: bool) -> list[Unit]:
    """Units of work: packs of compatible runs (`pack` as `--pack`, spread over `slots` concurrent
    units within `memory_bytes`), or single runs for a per-run runner."""
    if per_run:
        return [(config,) for config in configs]
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
        recorded = json.loads(read_bounded(path, "MAX_CONFIG_BYTES", "the pack plan"))
        known = [list(members) for members in recorded["packs"]] if recorded.get("pack") == str(pack) else []
    except (OSError, ValueError, KeyError, TypeError, FormalRopeError):  # a missing or unusable plan: a new one
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
        write_bytes_atomically(path, (json.dumps(plan) + "\n").encode(), "the pack plan")
    order = {config.run_id(): index for index, config in enumerate(configs)}
    return sorted(units + fresh, key=lambda unit: order[unit[0].run_id()])
