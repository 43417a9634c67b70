"""How long the atlas takes on this machine: a calibration measured here, scaled to the planned runs.

A run's time is modelled as  fixed + steps · per_step + lengths · per_length : training costs the same
per step whatever the language, and evaluation (the balanced test strings, NNCH's uniform strings
and the worst-case search, all per test length) costs per tested length. Three short runs of the
atlas's own model and recipe (`sweeps.units.pack_runner_in_process`, one thread, in this process)
measure the three numbers, after one warm-up run whose time is dropped (first-call costs):

  A: `CALIBRATION_STEPS[0]` steps on `SAMPLE_LENGTHS[0]` test lengths spread over the run's range
  B: `CALIBRATION_STEPS[1]` steps, the same lengths          -> per_step   = (B − A) / Δsteps
  C: `CALIBRATION_STEPS[0]` steps on `SAMPLE_LENGTHS[1]` ... -> per_length = (C − A) / Δlengths

each the fastest of REPEATS timings (load from other processes only adds time), and
fixed = A − steps_A · per_step − lengths_A · per_length. The lengths are spread evenly over the
run's test range, so their mean cost is the range's mean cost (long strings cost more). The
estimate is core-hours = runs · (fixed + steps · per_step + lengths · per_length) / 3600: one core
per run, each trained alone. Packs (several runs trained as one computation) only make it shorter;
wall time is about core-hours / workers on an otherwise idle machine.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, replace

from formal_rope.errors import FormalRopeError
from formal_rope.sweeps.units import pack_runner_in_process
from formal_rope.training.config import RunConfig

CALIBRATION_STEPS = (10, 40)
SAMPLE_LENGTHS = (2, 10)
REPEATS = 2  # each calibration run is timed this often and the fastest kept: other load only adds time


@dataclass(frozen=True)
class Calibration:
    """Seconds a run of this machine spends: fixed, per training step, per tested length."""

    fixed_s: float
    per_step_s: float
    per_length_s: float
    language: str
    measured_s: float  # what calibrating took

    def run_seconds(self, config: RunConfig) -> float:
        """The modelled seconds of one run of `config` (trained alone, one thread)."""
        lengths = len(config.tested_lengths())
        return self.fixed_s + config.steps * self.per_step_s + lengths * self.per_length_s

    def to_dict(self) -> dict:
        return {"fixed_s": self.fixed_s, "per_step_s": self.per_step_s, "per_length_s": self.per_length_s,
                "language": self.language, "measured_s": self.measured_s}


@dataclass(frozen=True)
class Estimate:
    """The planned runs and their modelled cost."""

    runs: int
    seconds_per_run: float
    calibration: Calibration

    @property
    def core_hours(self) -> float:
        return self.runs * self.seconds_per_run / 3600

    def wall_hours(self, workers: int) -> float:
        return self.core_hours / max(1, int(workers))

    def to_dict(self, workers: int = 1) -> dict:
        return {"runs": self.runs, "seconds_per_run": self.seconds_per_run, "core_hours": self.core_hours,
                "workers": workers, "wall_hours": self.wall_hours(workers), "calibration": self.calibration.to_dict()}


def spread_lengths(config: RunConfig, count: int) -> tuple[int, ...]:
    """`count` test lengths spread evenly over the run's tested lengths (first and last included)."""
    lengths = list(config.tested_lengths())
    if count >= len(lengths):
        return tuple(lengths)
    if count == 1:
        return (lengths[len(lengths) // 2],)
    return tuple(dict.fromkeys(lengths[round(i * (len(lengths) - 1) / (count - 1))] for i in range(count)))


def _timed(config: RunConfig, worst_case, repeats: int = REPEATS) -> float:
    """The fastest of `repeats` timings of one run trained and evaluated in this process."""
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        (result,) = pack_runner_in_process((config,), device="cpu", threads=1, state=None, worst_case=worst_case)
        if result.status == "failed":
            raise FormalRopeError(f"the calibration run on {config.language!r} failed: {result.error}")
        times.append(time.perf_counter() - start)
    return min(times)


def calibrate(template: RunConfig, worst_case=None) -> Calibration:
    """Measure this machine on three short runs shaped like `template` (see the module docstring)."""
    began = time.perf_counter()
    few, more = (spread_lengths(template, count) for count in SAMPLE_LENGTHS)
    low, high = CALIBRATION_STEPS
    warmup = min(low, template.warmup_steps)
    shaped = {"warmup_steps": warmup, "test_lengths": few, "test_min_length": min(few), "test_max_length": max(few)}
    _timed(replace(template, steps=low, **shaped), worst_case, repeats=1)  # warm-up: first-call costs (imports, caches)
    a = _timed(replace(template, steps=low, **shaped), worst_case)
    b = _timed(replace(template, steps=high, **shaped), worst_case)
    c = _timed(replace(template, steps=low, **{**shaped, "test_lengths": more, "test_min_length": min(more),
                                                "test_max_length": max(more)}), worst_case)
    per_step = max(0.0, (b - a) / (high - low))
    per_length = max(0.0, (c - a) / max(1, len(more) - len(few)))
    fixed = max(0.0, a - low * per_step - len(few) * per_length)
    return Calibration(fixed, per_step, per_length, template.language, time.perf_counter() - began)


def estimate(configs, calibration: Calibration, runs: int | None = None) -> Estimate:
    """The cost of `configs` (or of `runs` runs shaped like the first of them)."""
    configs = list(configs)
    seconds = sum(calibration.run_seconds(config) for config in configs) / max(1, len(configs))
    return Estimate(len(configs) if runs is None else int(runs), seconds, calibration)
