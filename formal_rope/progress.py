"""Progress displays that suit where they go: a live Rich bar on a terminal, plain lines elsewhere.

Off a terminal (output redirected to a file, a pipe, a CI log) a Rich bar draws nothing while it
runs and, at its end, one frame squeezed into 80 columns (`100/… 0:00… eta 0:00:…`). A log wants
the opposite: a complete line per unit of work as it finishes, never cut. `progress_display` gives
the bar on a terminal and a `LineProgress` (the same calls) elsewhere, for every command and for
training, so that their logs read alike. A run's stages (train, eval, worst-case search) report
`TrainingProgress` events; `RunProgress` draws them (or hands them to a callback), and the columns of
a bar with a count, times and a text field are `work_columns`, shared by runs and sweeps.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field

from rich.console import Console
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    TextColumn,
    TimeElapsedColumn,
    TimeRemainingColumn,
)

DEFAULT_LINES = 10  # lines per task off a terminal: one per tenth of its total (and none for a total of 0)


def progress_display(*columns, console, label: str, lines: int = DEFAULT_LINES, transient: bool = False):
    """A rich.progress.Progress with `columns` on `console` when it is a terminal; otherwise a
    `LineProgress` printing `lines` plain lines per task, each starting with the task's description
    or `label`."""
    if console.is_terminal:

        return Progress(*columns, console=console, transient=transient)
    return LineProgress(console, label, lines)


def work_columns(title: str, detail: str) -> tuple:
    """The columns of a bar over units of work: bold `title`, the bar, done/total, the text
    `detail` (a Rich format string over the task), elapsed time and the time left."""

    return (TextColumn(f"[bold]{title}"), BarColumn(), MofNCompleteColumn(), TextColumn(detail),
            TimeElapsedColumn(), TextColumn("eta"), TimeRemainingColumn())


@dataclass(frozen=True)
class TrainingProgress:
    """What a progress callback receives: stage "train" (per logging interval), "eval" (per length)
    or "search" (per length of the worst-case search, `--eval worst-case`)."""

    stage: str
    done: int
    total: int
    loss: float | None = None
    accuracy: float | None = None
    info: dict = field(default_factory=dict)


ProgressArg = bool | Callable[[TrainingProgress], None]


class RunProgress:
    """A run's (or a pack's) progress: a Rich bar (True), a user callback, or nothing (False)."""

    def __init__(self, progress: ProgressArg, description: str) -> None:
        self.callback = progress if callable(progress) else None
        self.bar = None
        if progress is True:

            # stderr keeps stdout clean for --json output; off a terminal, a plain line per tenth of a stage.
            self.bar = progress_display(*work_columns("{task.description}", "{task.fields[info]}"),
                                        console=Console(stderr=True), label=description)
            self.bar.start()
        self.description = description
        self.task = None

    def stage(self, name: str, total: int) -> None:
        if self.bar is not None:
            if self.task is not None:
                self.bar.stop_task(self.task)
            self.task = self.bar.add_task(f"{self.description} {name}", total=total, info="")

    def update(self, event: TrainingProgress) -> None:
        if self.callback is not None:
            self.callback(event)
        if self.bar is not None and self.task is not None:
            self.bar.update(self.task, completed=event.done, info=_describe(event))

    def close(self) -> None:
        if self.bar is not None:
            self.bar.stop()


def _describe(event: TrainingProgress) -> str:
    """The bar's text for one event: loss and accuracy while training, N* so far afterwards."""
    if event.stage == "train":
        runs = event.info.get("runs", 1)
        pack = f" ({event.info.get('active', runs)}/{runs} runs)" if runs > 1 else ""
        return (f"loss {event.loss:.4f} acc {event.accuracy:.3f} "
                f"{event.info.get('steps_per_s', 0):.0f} steps/s{pack}")
    if event.stage == "search":
        return (f"len {event.info.get('length')} worst-case N* so far {event.info.get('n_star_worst')} "
                f"({event.info.get('tried')} strings)")
    return f"len {event.info.get('length')} acc {event.accuracy:.3f} N* so far {event.info.get('n_star')}"


@dataclass
class _Task:
    description: str
    total: float | None
    fields: dict
    completed: float = 0
    started: float = field(default_factory=time.perf_counter)
    marks: int = 0  # lines printed so far
    done: bool = False


class LineProgress:
    """The calls of rich.progress.Progress the commands make (a context manager; start, stop,
    add_task, update, advance, stop_task, console), printing one plain, unwrapped line each time a
    task passes another 1/`lines` of its total, and at its end: description, done/total, percent,
    the task's text fields (`info`), elapsed time and an estimate of the time left. `lines` 0 prints
    nothing (a caller that prints its own line per unit of work)."""

    def __init__(self, console, label: str, lines: int = DEFAULT_LINES) -> None:
        self.console = console
        self.label = label
        self.lines = lines
        self.tasks: list[_Task] = []

    def __enter__(self) -> "LineProgress":
        return self

    def __exit__(self, *exc) -> None:
        self.stop()

    def start(self) -> None:
        pass

    def stop(self) -> None:
        pass

    def add_task(self, description: str, total: float | None = 100.0, **fields) -> int:
        self.tasks.append(_Task(description, total, dict(fields)))
        return len(self.tasks) - 1

    def stop_task(self, task_id: int) -> None:
        self.tasks[task_id].done = True

    def advance(self, task_id: int, advance: float = 1) -> None:
        self.update(task_id, advance=advance)

    def update(self, task_id: int, *, total: float | None = None, completed: float | None = None,
               advance: float | None = None, description: str | None = None, **fields) -> None:
        task = self.tasks[task_id]
        if total is not None:
            task.total = total
        if completed is not None:
            task.completed = completed
        if advance is not None:
            task.completed += advance
        if description is not None:
            task.description = description
        task.fields.update(fields)
        if not self.lines or not task.total or task.done:
            return
        reached = min(self.lines, int(self.lines * task.completed / task.total + 1e-9))
        if reached > task.marks:
            task.marks = reached
            self.console.print(self.line(task), markup=False, highlight=False, soft_wrap=True)

    def line(self, task: _Task) -> str:
        """'train: 300/1000 (30%) loss 0.6931 acc 0.512 …, 0:00:04 elapsed, about 0:00:09 left'."""
        elapsed = time.perf_counter() - task.started
        done, total = task.completed, task.total
        parts = [f"{task.description or self.label}: {_count(done)}/{_count(total)} ({100 * done / total:.0f}%)"]
        parts += [str(value) for value in task.fields.values() if isinstance(value, str) and value]
        timing = f"{_clock(elapsed)} elapsed"
        if 0 < done < total:
            timing += f", about {_clock(elapsed * (total - done) / done)} left"
        return " ".join(parts) + ", " + timing


def _count(value: float) -> str:
    return f"{value:,.0f}" if float(value).is_integer() else f"{value:,.1f}"


def _clock(seconds: float) -> str:
    seconds = int(round(seconds))
    return f"{seconds // 3600}:{seconds // 60 % 60:02d}:{seconds % 60:02d}"
