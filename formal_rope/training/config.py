"""Run configuration and result values for training (shared by trainer, sweeps and reports).

A run is fully described by its RunConfig; its id is a hash of the canonical JSON of the config.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import asdict, dataclass, field, fields, replace

from formal_rope.errors import FormalRopeError


POSITIONAL_ENCODINGS = (
    "nope",
    "sipe",
    "sipe_p",
    "rope",
    "rope_p",
    "partial_rope",
    "jof_fixed",
    "jof_learned",
    "jof_projected",
)


@dataclass(frozen=True)
class RunConfig:
    """Everything that determines one training run (language, positional encoding, model, optimiser, tests).

    Equal configs give the same `run_id()`; a rerun sweep skips ids that already have a result (unless failed).
    """

    language: str  # registry name, ltl:/re: expression, bare expression, or .att path
    alphabet: tuple[str, ...] | None = None  # None: the language's own alphabet
    pe: str = "rope"
    base: float = 1e4  # rope/sipe/partial_rope/jof_* base beta
    periods: tuple[int, ...] | None = None  # rope_p / sipe_p periods per rotary pair (None: resolved "auto")
    rope_fraction: float = 0.5  # partial_rope: fraction of rotated pairs
    phase_precision: str = "fp64"  # fp64: theta*i reduced mod 2pi in float64 then cast; fp32: naive
    attention: str = "auto"  # auto | triton | torch
    seed: int = 0
    lr: float = 3e-4
    steps: int = 1000
    batch_size: int = 128
    layers: int = 5
    d_model: int = 64
    heads: int = 8
    ffn_mult: int = 4
    weight_decay: float = 0.01
    grad_clip: float = 1.0
    train_min_length: int = 0
    train_max_length: int = 40
    test_min_length: int = 41
    test_max_length: int = 500
    n_per_length: int = 512
    eval_mode: str = "full"  # full | nstar (stop once N* is known)
    eval_seed: int = 0  # test sets depend on this only, so runs with different seeds share them
    lr_schedule: str = "constant"  # constant | cosine (decay to 10% of lr)
    warmup_steps: int = 0  # linear learning-rate warm-up
    train_near_miss_fraction: float = 0.0  # share of training negatives replaced by near-misses

    def to_dict(self) -> dict:
        data = asdict(self)
        data["alphabet"] = list(self.alphabet) if self.alphabet is not None else None
        data["periods"] = list(self.periods) if self.periods is not None else None
        return data

    @classmethod
    def from_dict(cls, data: dict) -> "RunConfig":
        """Inverse of `to_dict` (lists become tuples); unknown keys or a missing language are a FormalRopeError."""
        known = {f.name for f in fields(cls)}
        unknown = sorted(set(data) - known)
        if unknown:
            raise FormalRopeError(
                f"unknown RunConfig keys: {', '.join(unknown)}; expected some of {', '.join(f.name for f in fields(cls))}"
            )
        if "language" not in data:
            raise FormalRopeError("a RunConfig needs a 'language' (registry name, expression or .att path)")
        data = dict(data)
        if data.get("alphabet") is not None:
            data["alphabet"] = tuple(data["alphabet"])
        if data.get("periods") is not None:
            data["periods"] = tuple(int(p) for p in data["periods"])
        return cls(**data)

    def run_id(self) -> str:
        canonical = json.dumps(self.to_dict(), sort_keys=True, separators=(",", ":"))
        return hashlib.sha256(canonical.encode()).hexdigest()[:16]

    def with_(self, **changes) -> "RunConfig":
        return replace(self, **changes)


@dataclass(frozen=True)
class LengthResult:
    """The accuracy on the `n` test strings of one length."""

    length: int
    accuracy: float
    n: int


@dataclass(frozen=True)
class RunResult:
    """The outcome of one run: status (ok, diverged, failed), N*, per-length accuracy, and provenance.

    A run that fails while training is recorded (status failed, `error` says why) instead of raising;
    a diverged run (NaN/inf loss) is not evaluated: n_star 0, accuracy NaN.
    """

    run_id: str
    config: RunConfig
    status: str  # ok | diverged | failed
    n_star: int
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

    def to_dict(self) -> dict:
        """JSON-ready dict (config nested, per-length results as a list of dicts)."""
        data = {f.name: getattr(self, f.name) for f in fields(self)}
        data["config"] = self.config.to_dict()
        data["per_length"] = [asdict(r) for r in self.per_length]
        data["alphabet"] = list(self.alphabet) if self.alphabet is not None else None
        data["resolved_periods"] = list(self.resolved_periods) if self.resolved_periods is not None else None
        return data

    @classmethod
    def from_dict(cls, data: dict) -> "RunResult":
        data = dict(data)
        data["config"] = RunConfig.from_dict(data["config"])
        data["per_length"] = tuple(LengthResult(**r) for r in data.get("per_length", ()))
        for name in ("alphabet", "resolved_periods"):
            if data.get(name) is not None:
                data[name] = tuple(data[name])
        known = {f.name for f in fields(cls)}
        return cls(**{k: v for k, v in data.items() if k in known})
