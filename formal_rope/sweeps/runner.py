"""Running a grid: skip finished runs, run the rest (in worker processes), persist each atomically."""

from __future__ import annotations

import time
from concurrent.futures import FIRST_COMPLETED, ProcessPoolExecutor, wait
from concurrent.futures.process import BrokenProcessPool
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

from formal_rope.sweeps.results import ensure_results_dir, finished_run_ids, git_commit, write_run
from formal_rope.training.config import RunConfig, RunResult


WORKER_DIED = "a worker process died while this run was in flight (killed for memory or crashed); rerun the sweep to retry it"


class WorkerDied(RuntimeError):
    """Recorded as the error of the runs in flight when a worker process dies."""


@dataclass(frozen=True)
class SweepSummary:
    """What `run_sweep` did: runs in the grid, skipped (already done), completed, count per status."""

    total: int
    skipped: int
    completed: int
    statuses: dict
    wall_s: float


def default_runner(config: RunConfig) -> RunResult:
    """Train and evaluate one run in this process (single-threaded torch)."""
    import torch

    torch.set_num_threads(1)
    from formal_rope.training.train import run_training

    result = run_training(config, progress=False)
    return result[0] if isinstance(result, tuple) else result


def _failed_result(config: RunConfig, error: BaseException, wall_s: float) -> RunResult:
    return RunResult(
        run_id=config.run_id(),
        config=config,
        status="failed",
        n_star=0,
        accuracy=float("nan"),
        wall_s=wall_s,
        error=f"{type(error).__name__}: {error}",
    )


def _run_safely(runner: Callable[[RunConfig], RunResult], config: RunConfig) -> RunResult:
    start = time.perf_counter()
    try:
        return runner(config)
    except Exception as error:  # a failing run is recorded, the sweep goes on
        return _failed_result(config, error, time.perf_counter() - start)


def run_sweep(
    configs: list[RunConfig],
    out: str | Path,
    *,
    workers: int = 1,
    runner: Callable[[RunConfig], RunResult] = default_runner,
    on_event: Callable[[str, RunConfig, RunResult | None], None] | None = None,
) -> SweepSummary:
    """Run every config not already finished in `out`; each result is written as soon as it ends.

    Interrupting (Ctrl-C) loses at most the runs in flight; so does a worker process dying (its runs
    in flight are recorded as failed, a fresh pool runs the rest). Failed runs count as unfinished:
    the next call reruns them (ok and diverged runs are skipped). on_event(kind, config, result) is called
    with kind in {"skip", "start", "done"} for progress display.
    """
    start = time.perf_counter()
    out = ensure_results_dir(out)
    done = finished_run_ids(out)
    pending = [c for c in configs if c.run_id() not in done]
    skipped = len(configs) - len(pending)
    notify = on_event or (lambda *_: None)
    for config in configs:
        if config.run_id() in done:
            notify("skip", config, None)
    commit = git_commit()
    statuses: dict[str, int] = {}

    def record(config: RunConfig, result: RunResult) -> None:
        if result.commit is None and commit is not None:
            from dataclasses import replace

            result = replace(result, commit=commit)
        write_run(out, config, result)
        statuses[result.status] = statuses.get(result.status, 0) + 1
        notify("done", config, result)

    if workers <= 1:
        for config in pending:
            notify("start", config, None)
            record(config, _run_safely(runner, config))
    else:
        pool = ProcessPoolExecutor(max_workers=workers)
        futures = {}
        queue = list(pending)
        try:
            while queue or futures:
                while queue and len(futures) < workers:
                    try:
                        future = pool.submit(_run_safely, runner, queue[0])
                    except BrokenProcessPool:
                        break  # the runs in flight report the breakage below
                    config = queue.pop(0)
                    notify("start", config, None)
                    futures[future] = config
                broken = not futures
                if futures:
                    finished, _ = wait(list(futures), return_when=FIRST_COMPLETED)
                    for future in finished:
                        config = futures.pop(future)
                        try:
                            result = future.result()
                        except BrokenProcessPool:
                            # A worker died (killed for memory, crashed): every run in flight is lost
                            # with it, and which one killed it is unknown.
                            broken = True
                            result = _failed_result(config, WorkerDied(WORKER_DIED), 0.0)
                        except Exception as error:
                            result = _failed_result(config, error, 0.0)
                        record(config, result)
                if broken:
                    pool.shutdown(wait=False, cancel_futures=True)
                    pool = ProcessPoolExecutor(max_workers=workers)
            pool.shutdown(wait=True)
        except KeyboardInterrupt:
            for future in futures:
                future.cancel()
            raise
        finally:
            pool.shutdown(wait=False, cancel_futures=True)  # no-op after a normal end
    return SweepSummary(
        total=len(configs),
        skipped=skipped,
        completed=sum(statuses.values()),
        statuses=statuses,
        wall_s=time.perf_counter() - start,
    )
