"""The outcome of a training run (`RunResult`) and its per-length accuracies (`LengthResult`), with
the config that made it (`run_config.RunConfig`)."""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field, fields

from formal_rope.run_config import RunConfig
from formal_rope.storage.curves import TrainingCurve


@dataclass(frozen=True)
class LengthResult:
    """The accuracy on the `n` (balanced) test strings of one length, and on the `nnch_n` uniformly
    random strings NNCH's score reads there (`evaluation.nnch`; None and 0 where it reads none).
    `covered`: every class that exists at the length had a test string; a length not covered does
    not count as passed for N*, whatever its accuracy (`sampling.unscored_classes`)."""

    length: int
    accuracy: float
    n: int
    nnch_accuracy: float | None = None
    nnch_n: int = 0
    covered: bool = True


@dataclass(frozen=True)
class RunResult:
    """The outcome of one run: status (ok, diverged, failed), N*, per-length accuracy, and provenance.

    A run that fails while training is recorded (status failed, `error` says why) instead of raising:
    n_star None and accuracy NaN, since nothing was measured. A diverged run (NaN/inf loss) is not
    evaluated: n_star 0 (it stopped learning), accuracy NaN.
    """

    run_id: str
    config: RunConfig
    status: str  # ok | diverged | failed
    n_star: int | None  # None: the run failed (no measurement)
    accuracy: float  # mean over tested lengths
    per_length: tuple[LengthResult, ...] = ()
    first_failure: str | None = None  # the first misclassified test string (shortest failing length)
    final_loss: float | None = None
    steps_done: int = 0
    wall_s: float = 0.0
    versions: dict = field(default_factory=dict)
    commit: str | None = None
    error: str | None = None
    alphabet: tuple[str, ...] | None = None  # the resolved alphabet the model reads
    resolved_periods: tuple[int, ...] | None = None  # periods actually used (periods=None: auto)
    eval_complete: bool = False  # every test length was evaluated (eval_mode nstar may stop early)
    pack_id: str | None = None  # the pack the run trained in (packing.pack_key of its members)
    pack_size: int = 1  # runs in that pack (1: trained alone)
    # NNCH's score (evaluation.nnch): mean accuracy on uniform strings over NNCH's lengths; NaN when not
    # measured (evaluation stopped early, a run on files, nnch_samples 0, a diverged or failed run).
    nnch_accuracy: float = math.nan
    # Worst-case evaluation (`--eval worst-case`, formal_rope.evaluation); None: not searched.
    n_star_worst: int | None = None  # N* over the searched strings (<= n_star)
    worst_failure: str | None = None  # the shortest failing string the search found
    worst_failure_margin: float | None = None  # how far past the decision it lies (logit difference)
    worst_strings_tried: int | None = None  # strings the search scored, all lengths
    # What the run's settings are known to cost (training.context.run_warnings: fp32 phases far off at
    # this base, a partial_rope that rotates every pair); also printed on stderr before training.
    warnings: tuple[str, ...] = ()
    # The training curve (storage.curves: loss and accuracy every log_every steps); None: not logged.
    curve: TrainingCurve | None = None
    # The theory's own counterexamples (runs.blind_spots): for a run predicted not expressible, its
    # language's witness family (text), the family strings scored up to the longest tested length,
    # the shortest length of a misclassified one (None: none was) and that string. None: not tested.
    family: str | None = None
    family_strings_tried: int | None = None
    refuted_at: int | None = None
    family_failure: str | None = None
    # Transitions of the minimal DFA its test strings took, of those a tested length can take (None: not counted).
    test_transitions_covered: int | None = None
    test_transitions: int | None = None

    def to_dict(self) -> dict:
        """JSON-ready dict (config nested, per-length results as a list of dicts)."""
        data = {f.name: getattr(self, f.name) for f in fields(self)}
        data["config"] = self.config.to_dict()
        data["per_length"] = [asdict(r) for r in self.per_length]
        data["alphabet"] = list(self.alphabet) if self.alphabet is not None else None
        data["resolved_periods"] = list(self.resolved_periods) if self.resolved_periods is not None else None
        data["warnings"] = list(self.warnings)
        data["curve"] = self.curve.to_dict() if self.curve is not None else None
        return data

    @classmethod
    def from_dict(cls, data: dict) -> "RunResult":
        data = dict(data)
        data["config"] = RunConfig.from_dict(data["config"], record=True)
        data["per_length"] = tuple(LengthResult(**r) for r in data.get("per_length", ()))
        for name in ("alphabet", "resolved_periods", "warnings"):
            if data.get(name) is not None:
                data[name] = tuple(data[name])
        if data.get("curve") is not None:
            data["curve"] = TrainingCurve.from_dict(data["curve"])
        known = {f.name for f in fields(cls)}
        return cls(**{k: v for k, v in data.items() if k in known})
