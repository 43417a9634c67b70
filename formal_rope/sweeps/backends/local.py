"""The local backend: units of work in this process (1 worker) or in a pool of worker processes."""

from __future__ import annotations

# The package, not concurrent.futures.process: its pool (and multiprocessing) load on first use,
# so that the command line, which reads this module at start-up, does not pay for them.
import concurrent.futures
from dataclasses import dataclass
from typing import Callable, Sequence

from formal_rope.errors import FormalRopeError
from formal_rope.sweeps.backends.base import WORKER_DIED, BackendOptions, Capacity, Unit, UnitRunner, WorkerDied


@dataclass(frozen=True)
class LocalOptions(BackendOptions):
    """`--backend local`: `workers` processes on this machine; the flags that need Ray are refused."""

    def check(self) -> None:
        super().check()
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
        attempts = {id(unit): 0 for unit in units}
        queue = list(units)
        pool = concurrent.futures.ProcessPoolExecutor(max_workers=self.workers)
        futures: dict = {}
        try:
            while queue or futures:
                while queue and len(futures) < self.workers:
                    try:
                        future = pool.submit(task, queue[0])
                    except concurrent.futures.BrokenExecutor:  # BrokenProcessPool
                        break  # the units in flight report the breakage below
                    unit = queue.pop(0)
                    on_unit("start" if attempts[id(unit)] == 0 else "retry", unit)
                    futures[future] = unit
                broken = not futures
                if futures:
                    finished, _ = concurrent.futures.wait(list(futures), return_when=concurrent.futures.FIRST_COMPLETED)
                    for future in finished:
                        unit = futures.pop(future)
                        try:
                            results = future.result()
                        except concurrent.futures.BrokenExecutor:
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
                if broken:
                    pool.shutdown(wait=False, cancel_futures=True)
                    pool = concurrent.futures.ProcessPoolExecutor(max_workers=self.workers)
            pool.shutdown(wait=True)
        except KeyboardInterrupt:
            for future in futures:
                future.cancel()
            raise
        finally:
            pool.shutdown(wait=False, cancel_futures=True)  # no-op after a normal end
        return None
