"""What a sweep backend is: the contract between the driver (`formal_rope.sweeps.runner.run_sweep`,
the only writer of the results folder) and the place where units of work run.

A backend is two classes, registered together as one row of `formal_rope.sweeps.backends.BACKENDS`:

- its options, a frozen `BackendOptions` (the `sweep`/`reproduce` run flags) whose `check` refuses,
  when the options are built, every value this backend cannot honour (a FormalRopeError naming the
  flag), so that a dry run checks what a real run checks;
- the backend, built from those options: `open` (connect, start workers; returns its `Capacity`),
  `run` (run a task on every unit, reporting back in the driver process), `close`.

A unit is a tuple of RunConfigs trained together (a pack; one run with --pack 1); the task given to
`run` is a picklable `UnitRunner` (`formal_rope.sweeps.units.UnitTask`), so a backend never builds
a result itself. This module imports nothing heavy: the command line reads the registry (and with
it every backend module) when it starts; for the same reason a backend's options subclass
`BackendOptions` without a @dataclass of their own (they add no field, only checks), and the small
values are NamedTuples (defining a frozen dataclass costs a millisecond, ten times as much).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, NamedTuple, Protocol, Sequence

from formal_rope.errors import EXIT_NODE_LOST, FormalRopeError

WORKER_DIED = (
    "a worker process died while this run was in flight (killed for memory, lost node or crashed) and "
    "retries were used up; rerun the sweep to retry it"
)

Unit = tuple  # tuple[RunConfig, ...]: the runs one worker trains together (a pack; one run with --pack 1)


class WorkerDied(RuntimeError):
    """Recorded as the error of the runs in flight when a worker process dies for good."""


class NodeLost(RuntimeError):
    """Raised by a backend's `run` when the machine it runs the work on is gone for good (the Ray
    node of the driver: its raylet died), so no unit in flight or queued can finish. The message
    says what died; `run_sweep` turns it into a `SweepStopped` naming the runs kept."""


class SweepStopped(FormalRopeError):
    """The sweep stopped before its end because the place its runs execute failed (not the user's
    input): one `error:` paragraph saying what happened and which runs are kept, exit code 3, so a
    script can tell it from bad input (2) and rerun (finished runs are skipped)."""

    exit_code = EXIT_NODE_LOST


class Capacity(NamedTuple):
    """What a backend offers once open: how many units run at once, the memory they share (None:
    this machine's, as packing reads it) and the URL of a dashboard showing the work, if any."""

    slots: int
    memory_bytes: int | None = None
    dashboard_url: str | None = None


class UnitRunner(Protocol):
    """What a backend runs on each unit (picklable: it travels to worker processes)."""

    def __call__(self, unit: Unit, device: str | None = None) -> list:
        """Train the unit's runs on `device` (None: the task's own); one RunResult per run, in order.
        A run that raises is recorded failed on its own; only non-Exceptions (Ctrl-C) propagate."""

    def failed(self, unit: Unit, error: BaseException | str) -> list:
        """The results of a unit that could not run (its worker died for good): each run failed."""

    # Optional: `sharing_cores(share)` -> the same task, its evaluations taking the cores of idle
    # workers (`backends.cores.CoreShare`); the local pool calls it where the task has it.


class Backend(Protocol):
    """Runs units of work somewhere and reports back to the driver (local processes, Ray)."""

    def open(self, on_note: Callable[[str], None]) -> Capacity:
        """Get ready (connect, start an instance); FormalRopeError when that cannot be done."""

    def run(self, units: Sequence[Unit], task: UnitRunner, key_of: Callable[[Unit], str],
            on_unit: Callable[..., None]) -> None:
        """Run `task` on every unit. In the driver process, call on_unit("start", unit) when a unit
        starts, on_unit("retry", unit) when it starts again after its worker died, and exactly once
        per unit on_unit("done", unit, results) with one RunResult per run (`task.failed(unit, …)`
        when the retries ran out). Ctrl-C (KeyboardInterrupt) stops the work in flight and propagates."""

    def close(self) -> None:
        """Release what `open` took (shut down an instance started there); also after errors."""


@dataclass(frozen=True)
class BackendOptions:
    """The run flags of `sweep` and `reproduce`, checked when built (`check`).

    workers: --workers, concurrent units (local processes, or the size of a local Ray instance);
    cpus_per_run: --cpus-per-run, CPUs and torch threads per unit (None: the backend's default);
    gpus_per_run: --gpus-per-run; max_retries: --max-retries, runs of a unit whose worker died;
    address: --address, a cluster to join.
    """

    workers: int = 1
    cpus_per_run: float | None = None
    gpus_per_run: float = 0
    max_retries: int = 3
    address: str | None = None

    def __post_init__(self) -> None:
        self.check()

    def check(self) -> None:
        """FormalRopeError naming the flag for a value no backend can honour. A backend's options
        extend it (calling it first) with what that backend refuses."""
        if self.workers < 1:
            raise FormalRopeError(f"--workers must be at least 1, got {self.workers}")
        if self.cpus_per_run is not None and not self.cpus_per_run > 0:
            raise FormalRopeError(f"--cpus-per-run must be > 0, got {self.cpus_per_run:g}")
        if self.gpus_per_run < 0:
            raise FormalRopeError(f"--gpus-per-run must be >= 0, got {self.gpus_per_run:g}")
        if self.max_retries < 0:
            raise FormalRopeError(f"--max-retries must be >= 0, got {self.max_retries}")

    @property
    def threads(self) -> int | None:
        """torch threads per unit: --cpus-per-run rounded (at least 1), or None for the packing
        default (the machine's cores shared by the workers for packs, 1 for single runs)."""
        return None if self.cpus_per_run is None else max(1, round(self.cpus_per_run))

    def check_available(self) -> None:
        """FormalRopeError when this backend cannot run here (a package it needs is missing).
        Contacts nothing, so a dry run can ask too."""

    @property
    def other_machines(self) -> bool:
        """Whether units may run on other machines than this one (a cluster), which then must reach
        the training state's folder to resume a unit retried there."""
        return False
