"""The local backend: units of work in this process (1 worker) or in a pool of worker processes."""

from __future__ import annotations

import os
from typing import Callable, Sequence

from formal_rope import limits
from formal_rope.errors import FormalRopeError
from formal_rope.processes import become_worker, stop_children
from formal_rope.sweeps.backends.base import WORKER_DIED, BackendOptions, Capacity, Unit, UnitRunner, WorkerDied
from formal_rope.sweeps.backends.cores import BusyUnits, forked_workers_may_widen


class LocalOptions(BackendOptions):
    """`--backend local`: `workers` processes on this machine; the flags that need Ray are refused."""

    def check(self) -> None:
        super().check()
        cores = os.cpu_count() or 1
        if self.workers > limits.MAX_WORKERS_PER_CORE * cores:
            raise FormalRopeError(
                f"--workers {self.workers}: at most {limits.MAX_WORKERS_PER_CORE * cores} local worker processes on "
                f"this machine of {cores} CPU core(s) ({limits.describe('MAX_WORKERS_PER_CORE')} per core); each "
                "imports torch and trains its own pack, so more would only share the same cores"
            )
        if self.address is not None:
            raise FormalRopeError("--address joins a Ray cluster: use it with --backend ray")
        if self.gpus_per_run > 0:
            raise FormalRopeError("--gpus-per-run schedules runs on GPUs through Ray: use it with --backend ray")


class LocalBackend:
    """`workers` processes on this machine; a unit whose worker dies is run again (in a fresh pool)
    up to `max_retries` times. Which unit killed a pool is unknown, so every unit in flight when it
    broke is charged one retry."""

    def __init__(self, options: LocalOptions = LocalOptions()):
        self.workers = options.workers
        self.max_retries = options.max_retries

    def open(self, on_note: Callable[[str], None]) -> Capacity:
        return Capacity(slots=self.workers)

    def close(self) -> None:
        pass

    def run(self, units: Sequence[Unit], task: UnitRunner, key_of: Callable[[Unit], str],
            on_unit: Callable[..., None]) -> None:
        if self.workers <= 1:
            for unit in units:
                on_unit("start", unit)
                on_unit("done", unit, task(unit))
            return None
        return self._run_in_pool(units, task, on_unit)

    def _run_in_pool(self, units: Sequence[Unit], task: UnitRunner, on_unit: Callable[..., None]) -> None:
        # function-local: the pool (multiprocessing, logging) loads only for a pool of workers; the
        # command line reads this module (LocalOptions) at start-up.
        import multiprocessing
        from concurrent.futures import FIRST_COMPLETED, ProcessPoolExecutor, wait
        from concurrent.futures.process import BrokenProcessPool

        attempts = {id(unit): 0 for unit in units}
        queue = list(units)
        workers = min(self.workers, len(units))  # never more processes than units of work
        # The workers' evaluations take the cores of workers left idle (backends.cores); a task
        # that cannot share them (a custom UnitRunner without `sharing_cores`) runs as given, and so
        # does every task where forked workers could not run torch on several threads.
        # Asked again for every pool: its workers are forked from this process as it is then. Where
        # forked workers could not compute on several threads (this process's torch already has),
        # units that train on several threads get fresh (spawned) workers instead, and the others
        # keep their own threads.
        busy = BusyUnits(self.workers)
        sharing = getattr(task, "sharing_cores", None)
        threaded = getattr(task, "computes_on_threads", None)
        needs_threads = threaded is not None and threaded(queue)

        def new_pool():
            # Each worker dies with this process and leaves Ctrl-C to it (formal_rope.processes).
            forkable = forked_workers_may_widen()
            context = None if forkable or not needs_threads else multiprocessing.get_context("spawn")
            pool = ProcessPoolExecutor(max_workers=workers, initializer=become_worker, initargs=(os.getpid(),),
                                       mp_context=context)
            widen = sharing is not None and (forkable or context is not None)
            return pool, (sharing(busy.share) if widen else task)

        pool, pool_task = new_pool()
        futures: dict = {}
        try:
            while queue or futures:
                while queue and len(futures) < workers:
                    try:
                        future = pool.submit(pool_task, queue[0])
                    except BrokenProcessPool:
                        break  # the units in flight report the breakage below
                    unit = queue.pop(0)
                    on_unit("start" if attempts[id(unit)] == 0 else "retry", unit)
                    futures[future] = unit
                busy.set(len(futures))
                broken = not futures
                if futures:
                    finished, _ = wait(list(futures), return_when=FIRST_COMPLETED)
                    for future in finished:
                        unit = futures.pop(future)
                        try:
                            results = future.result()
                        except BrokenProcessPool:
                            # A worker died (killed for memory, crashed): every unit in flight is lost.
                            broken = True
                            attempts[id(unit)] += 1
                            if attempts[id(unit)] <= self.max_retries:
                                queue.insert(0, unit)
                                continue
                            results = task.failed(unit, WorkerDied(WORKER_DIED))
                        except Exception as error:  # e.g. a result that cannot be pickled back
                            results = task.failed(unit, error)
                        on_unit("done", unit, results)
                    busy.set(len(futures))  # before a new unit starts: the others may widen for a batch
                if broken:
                    pool.shutdown(wait=False, cancel_futures=True)
                    pool, pool_task = new_pool()
            pool.shutdown(wait=True)
        except KeyboardInterrupt:
            for future in futures:
                future.cancel()
            stop_children()  # the units in flight are dropped (their saved states are kept)
            raise
        finally:
            pool.shutdown(wait=False, cancel_futures=True)  # no-op after a normal end
            busy.close()
        return None
