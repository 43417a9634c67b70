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
from dataclasses import dataclass

from formal_rope.errors import FormalRopeError
from formal_rope.run_config.config import RunConfig
from formal_rope.sweeps.units import pack_runner_in_process

CALIBRATION_STEPS = (10, 40)
SAMPLE_LENGTHS = (2, 10)
REPEATS = 2  # each calibration run is timed this often and the fastest kept: other load only adds time


@dataclass(frozen=True)
class Calibration:
    """Seconds a run of this machine spends: fixed, per training step, per tested length, and per
    length the worst-case search scores its whole budget at (`per_searched_length_s`: a run that
    learns is searched at every tested length; one that fails stops at its first failing length)."""

    fixed_s: float
    per_step_s: float
    per_length_s: float
    language: str
    measured_s: float  # what calibrating took
    per_searched_length_s: float = 0.0

    def run_seconds(self, config: RunConfig, learned: bool = False) -> float:
        """The modelled seconds of one run of `config` (trained alone, one thread); with `learned`,
        searched at every tested length (the worst case: the longest a run takes)."""
        lengths = len(config.tested_lengths())
        searched = lengths * self.per_searched_length_s if learned else 0.0
        return self.fixed_s + config.steps * self.per_step_s + lengths * self.per_length_s + searched

    def to_dict(self) -> dict:
        return {"fixed_s": self.fixed_s, "per_step_s": self.per_step_s, "per_length_s": self.per_length_s,
                "per_searched_length_s": self.per_searched_length_s, "language": self.language,
                "measured_s": self.measured_s}


@dataclass(frozen=True)
class Estimate:
    """The planned runs and their modelled cost: `seconds_per_run` for a run that never learns,
    `seconds_per_learned_run` for one that learns (searched at every length); core-hours charge
    the latter, the most the runs can take."""

    runs: int
    seconds_per_run: float
    calibration: Calibration
    seconds_per_learned_run: float | None = None

    @property
    def worst_seconds_per_run(self) -> float:
        return self.seconds_per_run if self.seconds_per_learned_run is None else self.seconds_per_learned_run

    @property
    def core_hours(self) -> float:
        """At most this many core-hours: every run charged as one that learns."""
        return self.runs * self.worst_seconds_per_run / 3600

    @property
    def core_hours_if_none_learns(self) -> float:
        return self.runs * self.seconds_per_run / 3600

    def wall_hours(self, workers: int) -> float:
        return self.core_hours / max(1, int(workers))

    def to_dict(self, workers: int = 1) -> dict:
        return {"runs": self.runs, "seconds_per_run": self.seconds_per_run,
                "seconds_per_learned_run": self.worst_seconds_per_run, "core_hours": self.core_hours,
                "core_hours_if_none_learns": self.core_hours_if_none_learns,
                "workers": workers, "wall_hours": self.wall_hours(workers), "calibration": self.calibration.to_dict()}


def duration_text(hours: float) -> str:
    """Hours in units a reader takes in: seconds, minutes or hours (never "0.0 hours")."""
    seconds = hours * 3600
    if seconds < 90:
        return f"{seconds:.0f} s"
    if seconds < 90 * 60:
        return f"{seconds / 60:.0f} min"
    return f"{hours:.1f} h" if hours < 100 else f"{hours:,.0f} h"


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
    _timed(template.with_(steps=low, **shaped), worst_case, repeats=1)  # warm-up: first-call costs (imports, caches)
    a = _timed(template.with_(steps=low, **shaped), worst_case)
    b = _timed(template.with_(steps=high, **shaped), worst_case)
    c = _timed(template.with_(steps=low, **{**shaped, "test_lengths": more, "test_min_length": min(more),
                                                "test_max_length": max(more)}), worst_case)
    per_step = max(0.0, (b - a) / (high - low))
    per_length = max(0.0, (c - a) / max(1, len(more) - len(few)))
    fixed = max(0.0, a - low * per_step - len(few) * per_length)
    searched = 0.0 if worst_case is None else _searched_length_seconds(template, worst_case, few)
    return Calibration(fixed, per_step, per_length, template.language, time.perf_counter() - began, searched)


class _NeverWrong:
    """A scorer that costs what the model costs but is never wrong: each score the model gives, with
    the sign the language's DFA wants, so the search spends its whole budget at every length, as it
    does on a run that learned."""

    def __init__(self, scorer, dfa):
        self.inner, self.dfa = scorer, dfa
        self.runs, self.n_symbols = scorer.runs, scorer.n_symbols

    def scores(self, symbols, runs):
        # function-local: numpy and the membership test load with the calibration only
        import numpy as np

        # function-local, as numpy above: loaded with the calibration only
        from formal_rope.automata.membership import accepts_encoded

        symbols = np.asarray(symbols)
        raw = np.abs(self.inner.scores(symbols, runs)) + 1e-6
        lengths = np.full(symbols.shape[0], symbols.shape[1] if symbols.ndim == 2 else 0, dtype=np.int64)
        return np.where(accepts_encoded(self.dfa, symbols, lengths)[None, :], raw, -raw)


def _searched_length_seconds(template: RunConfig, worst_case, lengths) -> float:
    """Seconds the worst-case search spends at one tested length of a run that learned: the search of
    an untrained model of the run's shape, scored as never wrong, timed over `lengths` (the fastest
    of REPEATS), per length."""
    # function-local: torch and the model load with the calibration only
    from formal_rope.evaluation.engine import search
    from formal_rope.evaluation.models import PackScorer, sampled_start_sets
    from formal_rope.training.resolve import resolve_dfa, resolve_periods  # (numpy: the calibration's only)
    from formal_rope.training.setup import build_model  # (torch, as the two above)

    dfa = resolve_dfa(template)
    model = build_model(template, dfa.n_symbols, resolve_periods(template, dfa))
    scorer = _NeverWrong(PackScorer(model, "cpu", lambda: 1), dfa)
    times = []
    for _ in range(REPEATS):
        start_sets = list(sampled_start_sets(dfa, lengths, template.n_per_length, template.eval_seed,
                                             template.test_near_miss_fraction))
        began = time.perf_counter()
        search(scorer, dfa, start_sets, settings=worst_case)
        times.append(time.perf_counter() - began)
    return min(times) / max(1, len(lengths))


def estimate(configs, calibration: Calibration, runs: int | None = None) -> Estimate:
    """The cost of `configs` (or of `runs` runs shaped like the first of them): per run that never
    learns and per run that learns (searched at every length)."""
    configs = list(configs)
    count = max(1, len(configs))
    seconds = sum(calibration.run_seconds(config) for config in configs) / count
    learned = sum(calibration.run_seconds(config, learned=True) for config in configs) / count
    return Estimate(len(configs) if runs is None else int(runs), seconds, calibration, learned)
