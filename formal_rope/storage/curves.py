"""Training curves: each run's training loss and accuracy every `log_every` steps, as it trains.

A point at step s holds the mean training loss and accuracy over the batches of the steps since the
previous point (every step counts in exactly one point), and the learning rate of step s's update.
Points come from the per-run losses and correct counts the training step has already computed, so
logging adds no forward pass. Logging is a run option, not a RunConfig field: it changes neither a
run's id nor its results. The curve travels with the run's result (`RunResult.curve`), into the
results folder's `curves/` table (`formal_rope.sweeps.curve_table`), the checkpoint's metadata and,
with `--tensorboard`, TensorBoard's event files (`formal_rope.storage.tensorboard_log`).

    recorder = PackCurves(configs, every=20, lr_at=learning_rate)
    recorder.add(step, active_runs, losses, correct, status)   # once per training step
    recorder.curves()                                          # one TrainingCurve per run

Torch-free: the sweeps driver and the results layer read curves without loading torch.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from formal_rope.errors import FormalRopeError

POINTS_PER_RUN = 50  # a quick run (1,000 steps) logs a point every 20 steps
MAX_LOG_EVERY = 1000  # a paper run (10^6 steps) logs 1,000 points, not 50
CURVE_COLUMNS = ("step", "loss", "train_accuracy", "lr")


def default_log_every(steps: int) -> int:
    """The logging interval when none is given: steps // 50 (at least 1), at most 1,000. A quick run
    (1,000 steps) logs 50 points, 10^4-5·10^4 steps 50, 10^5 steps 100 and a paper run (10^6 steps) 1,000."""
    return min(MAX_LOG_EVERY, max(1, steps // POINTS_PER_RUN))


@dataclass(frozen=True)
class CurveOptions:
    """How a run logs its training curve: every `log_every` steps (None: `default_log_every` of its
    steps; 0: no curve) and, with `tensorboard`, TensorBoard event files in that folder as it trains
    (one sub-folder per run). Neither changes a run's id or its numbers."""

    log_every: int | None = None
    tensorboard: str | None = None

    def __post_init__(self) -> None:
        every = self.log_every
        if every is not None and (isinstance(every, bool) or not isinstance(every, int) or every < 0):
            raise FormalRopeError(f"--log-every must be a number of steps (0: no curves), got {every!r}")
        if self.tensorboard is not None and not str(self.tensorboard).strip():
            raise FormalRopeError("--tensorboard needs a folder, got an empty string")
        if self.tensorboard is not None and every == 0:
            raise FormalRopeError("--tensorboard writes the training curves, which --log-every 0 turns off")

    def every(self, steps: int) -> int | None:
        """The interval for runs of `steps` steps, or None when no curve is logged."""
        if self.log_every is None:
            return default_log_every(steps)
        return self.log_every or None


NO_CURVES = CurveOptions(log_every=0)


@dataclass(frozen=True)
class CurvePoint:
    """One point of a curve: steps trained, mean loss and accuracy since the previous point, lr."""

    step: int
    loss: float
    train_accuracy: float
    lr: float


@dataclass(frozen=True)
class TrainingCurve:
    """A run's training curve: parallel columns, one entry per point, steps increasing."""

    step: tuple[int, ...] = ()
    loss: tuple[float, ...] = ()
    train_accuracy: tuple[float, ...] = ()
    lr: tuple[float, ...] = ()

    def __len__(self) -> int:
        return len(self.step)

    def to_dict(self) -> dict:
        """JSON-ready columns (NaN/inf losses of a diverged run stay floats: the writer decides)."""
        return {name: list(getattr(self, name)) for name in CURVE_COLUMNS}

    @classmethod
    def from_dict(cls, data: dict) -> "TrainingCurve":
        # None: a strict-JSON writer's NaN/inf (`train --json`); it reads back as NaN
        return cls(step=tuple(int(s) for s in data["step"]),
                   **{name: tuple(math.nan if v is None else float(v) for v in data[name])
                      for name in CURVE_COLUMNS[1:]})

    @classmethod
    def of_points(cls, points: Sequence[CurvePoint]) -> "TrainingCurve":
        return cls(*(tuple(getattr(point, name) for point in points) for name in CURVE_COLUMNS))


@dataclass
class _Window:
    """The steps of one run since its last point (mutable: added to every step)."""

    loss: float = 0.0
    correct: float = 0.0
    steps: int = 0
    points: list = field(default_factory=list)


class PackCurves:
    """The curves of a pack's runs while it trains (a pack of one for a single run).

    `add` is called once per training step with the per-run values the step computed; a run's point
    is taken every `every` steps, at the last step, and at the step its loss turns NaN/inf (its curve
    ends there, as its training does). `on_point(run, point)` (TensorBoard) sees each point as it is
    taken. `state_dict`/`load_state_dict` carry the points and the open windows through a saved
    training state, so a resumed run continues its curve without gaps or duplicates.
    """

    def __init__(self, configs, every: int, lr_at: Callable, on_point: Callable[[int, CurvePoint], None] | None = None):
        self.configs = list(configs)
        self.every = every
        self.lr_at = lr_at
        self.on_point = on_point
        self.batch_size = self.configs[0].batch_size
        self.steps = self.configs[0].steps
        self.windows = [_Window() for _ in self.configs]

    def add(self, step: int, active_runs: Sequence[int], losses: Sequence[float], correct: Sequence[float],
            status: Sequence[str]) -> None:
        """Step `step` (0-based) trained the `active_runs` with these per-run losses and correct counts;
        `status` is each run's status after the step (not "ok": the run stops here)."""
        done = step + 1
        due = done % self.every == 0 or done == self.steps
        for run in active_runs:
            window = self.windows[run]
            window.loss += losses[run]
            window.correct += correct[run]
            window.steps += 1
            if due or status[run] != "ok":
                point = CurvePoint(done, window.loss / window.steps,
                                   window.correct / (window.steps * self.batch_size),
                                   float(self.lr_at(self.configs[run], step)))
                window.points.append(point)
                window.loss, window.correct, window.steps = 0.0, 0.0, 0
                if self.on_point is not None:
                    self.on_point(run, point)

    def curves(self) -> list[TrainingCurve]:
        """One curve per run, in the pack's order."""
        return [TrainingCurve.of_points(window.points) for window in self.windows]

    def state_dict(self) -> list[dict]:
        """The points and open windows, JSON-ready (floats round-trip exactly through JSON)."""
        return [{"loss": w.loss, "correct": w.correct, "steps": w.steps,
                 "points": [[p.step, p.loss, p.train_accuracy, p.lr] for p in w.points]} for w in self.windows]

    def load_state_dict(self, saved: list[dict] | None) -> None:
        """Continue from `state_dict()`'s output. None (a state saved without curves): the curve starts
        at the resumed step."""
        if saved is None:
            return
        if len(saved) != len(self.windows):
            raise ValueError(f"its curves are those of {len(saved)} run(s), not {len(self.windows)}")
        self.windows = [_Window(float(w["loss"]), float(w["correct"]), int(w["steps"]),
                                [CurvePoint(int(p[0]), *map(float, p[1:])) for p in w["points"]]) for w in saved]
