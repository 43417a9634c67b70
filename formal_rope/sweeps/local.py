"""The local backend: units of work in this process (1 worker) or in a pool of worker processes."""

from __future__ import annotations

from concurrent.futures import FIRST_COMPLETED, ProcessPoolExecutor, wait
from concurrent.futures.process import BrokenProcessPool
from typing import Callable, Sequence

from formal_rope.sweeps.runner import WORKER_DIED, Capacity, Unit, UnitTask, WorkerDied, failed_result


class LocalBackend:
    """`workers` processes on this machine; a unit whose worker dies is run again (in a fresh pool)
    up to `max_retries` times. Which unit killed a pool is unknown, so every unit in flight when it
    broke is charged one retry."""

    def __init__(self, workers: int = 1, max_retries: int = 3):
        self.workers = workers
        self.max_retries = max_retries

    def open(self, on_note: Callable[[str], None]) -> Capacity:
        return Capacity(slots=self.workers)

    def close(self) -> None:
        pass

    def run(self, units: Sequence[Unit], task: UnitTask, key_of: Callable[[Unit], str],
            on_unit: Callable[..., None]) -> None:
        if self.workers <= 1:
            for unit in units:
                on_unit("start", unit)
                on_unit("done", unit, task(unit))
            return None
        attempts = {id(unit): 0 for unit in units}
        queue = list(units)
        pool = ProcessPoolExecutor(max_workers=self.workers)
        futures: dict = {}
        try:
            while queue or futures:
                while queue and len(futures) < self.workers:
                    try:
                        future = pool.submit(task, queue[0])
                    except BrokenProcessPool:
                        break  # the units in flight report the breakage below
                    unit = queue.pop(0)
                    on_unit("start" if attempts[id(unit)] == 0 else "retry", unit)
                    futures[future] = unit
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
                            results = [failed_result(c, WorkerDied(WORKER_DIED)) for c in unit]
                        except Exception as error:  # e.g. a result that cannot be pickled back
                            results = [failed_result(c, error) for c in unit]
                        on_unit("done", unit, results)
                if broken:
                    pool.shutdown(wait=False, cancel_futures=True)
                    pool = ProcessPoolExecutor(max_workers=self.workers)
            pool.shutdown(wait=True)
        except KeyboardInterrupt:
            for future in futures:
                future.cancel()
            raise
        finally:
            pool.shutdown(wait=False, cancel_futures=True)  # no-op after a normal end
        return None
