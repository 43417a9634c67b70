"""Progress displays that suit where they go: a live Rich bar on a terminal, plain lines elsewhere.

Off a terminal (output redirected to a file, a pipe, a CI log) a Rich bar draws nothing while it
runs and, at its end, one frame squeezed into 80 columns (`100/… 0:00… eta 0:00:…`). A log wants
the opposite: a complete line per unit of work as it finishes, never cut. `progress_display` gives
the bar on a terminal and a `LineProgress` (the same calls) elsewhere, for every command and for
training, so that their logs read alike.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field

DEFAULT_LINES = 10  # lines per task off a terminal: one per tenth of its total (and none for a total of 0)


def progress_display(*columns, console, label: str, lines: int = DEFAULT_LINES, transient: bool = False):
    """A rich.progress.Progress with `columns` on `console` when it is a terminal; otherwise a
    `LineProgress` printing `lines` plain lines per task, each starting with the task's description
    or `label`."""
    if console.is_terminal:
        from rich.progress import Progress  # function-local: rich loads only where a bar is drawn

        return Progress(*columns, console=console, transient=transient)
    return LineProgress(console, label, lines)


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
