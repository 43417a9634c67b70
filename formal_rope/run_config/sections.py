"""The sections of a RunConfig: frozen values, one per concern, each holding its fields' rules.

    TaskSettings          what is learnt: the language, its alphabet, the objective
    EncodingSettings      the positional encoding: pe, base, periods, rotated fraction, phases,
                          per-layer encodings and sliding windows
    ModelSettings         the transformer: layers, widths, attention implementation, initial weights
    OptimisationSettings  the optimiser and its schedule: seed, lr, steps, batch, decay, clipping
    DataSettings          the training strings: training lengths, files or sampler, near-misses
    EvaluationSettings    the tests: test lengths, strings per length, NNCH's samples, eval mode

A section is built by `RunConfig` from canonical values (coerced to their types, a field that does
not apply reset: `run_config.config`), and `check()` holds the rules of its own fields; RunConfig
calls it once when it builds the section, and `RunConfig.check_across` the rules that read two
sections (rotary pairs from the model's widths against the encoding's periods and fraction, one
per-layer entry per layer). Torch-free.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from formal_rope.errors import FormalRopeError
from formal_rope.run_config.encodings import HYBRID_ENCODINGS, POSITIONAL_ENCODINGS, encoding
from formal_rope.run_config.objective import FINAL
from formal_rope.run_config.rules import GLOBAL_WINDOW, MAX_LENGTH_LIST, check_periods

# Uniform strings per test length for NNCH's score: few, so that `reproduce table2` (quick scale: 16
# balanced strings per length) takes about 3% longer than without them, its slowest run ((ab)*: all of
# a length's positives are one string) about 4% (bench/nnch_overhead.py). 2 x 459 lengths put the
# score's standard error below 1.7 points. It is also the field's id-neutral value, so every run id
# written before the score existed is unchanged.
DEFAULT_NNCH_SAMPLES = 2

# The values of the fields that name one of a few choices, checked when a section is built (also for
# a run's record, `RunConfig.from_dict(record=True)`), so a value no run can use is refused there,
# not by `run_training` later.
FIELD_CHOICES: dict[str, tuple[str, ...]] = {
    "phase_precision": ("fp64", "fp32"),
    "attention": ("auto", "triton", "torch"),
    "eval_mode": ("full", "nstar"),
    "lr_schedule": ("constant", "cosine"),
    "sampling": ("uniform", "coverage"),
}
_CHOICE_WORDS = {"phase_precision": "phase precision", "attention": "attention implementation",
                 "eval_mode": "eval mode", "lr_schedule": "lr schedule",
                 "sampling": "sampling mode"}


def check_choice(name: str, value: str) -> None:
    """FormalRopeError when field `name` of FIELD_CHOICES holds a value no run can use (the
    worst-case search is no eval_mode: `run_training(config, worst_case=SearchSettings(...))`)."""
    choices = FIELD_CHOICES[name]
    if value in choices:
        return
    hint = ""
    if name == "eval_mode" and "worst" in value:
        hint = ("; the worst-case search is not an eval mode in Python: pass "
                "run_training(config, worst_case=evaluation.SearchSettings(...)) (the CLI's --eval worst-case)")
    raise FormalRopeError(f"unknown {_CHOICE_WORDS[name]} {value!r}; expected "
                          f"{', '.join(choices[:-1])} or {choices[-1]}{hint}")


def _non_negative(section, *names: str) -> None:
    for name in names:
        if getattr(section, name) < 0:
            raise FormalRopeError(f"{name} must be non-negative, got {getattr(section, name)}")


def _positive(section, *names: str) -> None:
    for name in names:
        if getattr(section, name) <= 0:
            raise FormalRopeError(f"{name} must be positive, got {getattr(section, name)}")


def _finite(section, *names: str) -> None:
    for name in names:
        if not math.isfinite(getattr(section, name)):
            raise FormalRopeError(f"{name} must be a finite number, got {getattr(section, name)}")


def _fraction(section, name: str) -> None:
    if not 0.0 <= getattr(section, name) <= 1.0:
        raise FormalRopeError(f"{name} must lie in [0, 1], got {getattr(section, name)}")


@dataclass(frozen=True)
class TaskSettings:
    """What the run learns: the language (registry name, ltl:/re: expression, bare expression, .att
    path, or data:PATH for files without a language), its alphabet (None: the language's own, also
    when given equal to it) and the objective in canonical spelling (`run_config.objective`)."""

    language: str
    alphabet: tuple[str, ...] | None = None
    objective: str = FINAL

    def check_choices(self) -> None:
        """No field of the task names one of a few choices."""

    def check(self) -> None:
        """Nothing beyond types: the language is resolved where the run is (`training.setup`), the
        objective was parsed into its canonical spelling when the section was built."""


@dataclass(frozen=True)
class EncodingSettings:
    """The positional encoding of every layer (`pe`), or one per layer (`layer_pe`; `pe` is then
    the one most layers use), its numbers (base, periods, rotated fraction, phase precision) and
    the layers' sliding windows (None: global; an int: every layer; per layer, GLOBAL_WINDOW: a
    global layer)."""

    pe: str = "rope"
    base: float = 1e4  # sipe/rope/partial_rope/jof_* base beta
    periods: tuple[int, ...] | None = None  # rope_p / sipe_p periods per rotary pair (None: resolved "auto")
    rope_fraction: float = 0.5  # partial_rope: fraction of rotated pairs
    phase_precision: str = "fp64"  # fp64: theta*i reduced mod 2pi in float64 then cast; fp32: naive
    layer_pe: tuple[str, ...] | None = None
    window: int | tuple[int, ...] | None = None

    def check_choices(self) -> None:
        """The names: every encoding a registry row, the phase precision one of FIELD_CHOICES."""
        if self.layer_pe is not None:
            for name in dict.fromkeys(self.layer_pe):
                if name not in POSITIONAL_ENCODINGS:
                    raise FormalRopeError(f"layer_pe: unknown positional encoding {name!r}; expected one of "
                                          f"{', '.join(POSITIONAL_ENCODINGS)}")
        encoding(self.pe)  # FormalRopeError naming the known encodings
        check_choice("phase_precision", self.phase_precision)

    def check(self) -> None:
        """Per-layer encodings a hybrid can hold, windows of at least one key, a positive finite
        base, periods in 1..MAX_PERIOD, a finite rotated fraction in [0, 1]."""
        if self.layer_pe is not None:
            refused = [name for name in dict.fromkeys(self.layer_pe) if name not in HYBRID_ENCODINGS]
            if refused:
                why = " ".join(
                    f"{name} is additive (a table added once to the embeddings, not a per-layer rotation): use it "
                    "in every layer (--pe) or not at all." for name in refused
                )
                raise FormalRopeError(f"layer_pe: {', '.join(refused)} cannot be one layer's encoding among others. "
                                      f"{why} Layers of a hybrid take {', '.join(HYBRID_ENCODINGS)}")
        if isinstance(self.window, int) and self.window < 1:
            raise FormalRopeError(f"window must be at least 1 (keys each query sees), got {self.window}; "
                                  "none (the default) attends globally")
        if isinstance(self.window, tuple):
            bad = [w for w in self.window if w < 1 and w != GLOBAL_WINDOW]
            if bad:
                raise FormalRopeError(f"window: {bad[0]} is no window; per layer give a window of at least 1, or "
                                      f"{GLOBAL_WINDOW} (global) for a layer without one")
        if not (self.base > 0 and math.isfinite(self.base)):
            raise FormalRopeError(f"the base must be a positive finite number, got {self.base!r}")
        if self.periods is not None:
            check_periods(self.periods)
        _finite(self, "rope_fraction")
        if not 0.0 <= self.rope_fraction <= 1.0:  # the default 0.5 where it does not apply
            raise FormalRopeError(f"{self.pe}: the rotated fraction must lie in [0, 1], got {self.rope_fraction}")


@dataclass(frozen=True)
class ModelSettings:
    """The transformer's shape, the attention implementation (auto | triton | torch), and the
    weights it continues from (`init_from`: a checkpoint path or a run id; None: fresh)."""

    layers: int = 5
    d_model: int = 64
    heads: int = 8
    ffn_mult: int = 4
    attention: str = "auto"
    init_from: str | None = None

    def check_choices(self) -> None:
        check_choice("attention", self.attention)

    def check(self) -> None:
        """Positive sizes; d_model splitting into heads of even dimension (rotary pairs)."""
        _positive(self, "layers", "d_model", "heads", "ffn_mult")
        if self.d_model % self.heads or (self.d_model // self.heads) % 2:
            raise FormalRopeError(
                f"d_model ({self.d_model}) must split into {self.heads} heads of even dimension (rotary pairs)"
            )

    @property
    def rotary_pairs(self) -> int:
        """Rotary pairs per head: (d_model / heads) / 2."""
        return self.d_model // self.heads // 2


@dataclass(frozen=True)
class OptimisationSettings:
    """The optimiser (AdamW) and its schedule: the seed that draws the weights and the batches,
    learning rate (constant, or cosine decay to 10%, after a linear warm-up), steps, batch size,
    weight decay and gradient clipping (0: none)."""

    seed: int = 0
    lr: float = 3e-4
    steps: int = 1000
    batch_size: int = 128
    weight_decay: float = 0.01
    grad_clip: float = 1.0
    lr_schedule: str = "constant"
    warmup_steps: int = 0

    def check_choices(self) -> None:
        check_choice("lr_schedule", self.lr_schedule)

    def check(self) -> None:
        _non_negative(self, "steps", "warmup_steps", "seed")
        _positive(self, "batch_size")
        _finite(self, "lr", "weight_decay", "grad_clip")
        if not self.lr > 0:
            raise FormalRopeError(f"the learning rate must be positive, got {self.lr}")
        if self.weight_decay < 0 or self.grad_clip < 0:
            raise FormalRopeError("weight_decay and grad_clip must be non-negative (grad_clip 0: no clipping)")


@dataclass(frozen=True)
class DataSettings:
    """The training strings: their lengths, and where they come from. Sampled from the language's
    DFA (`sampling`: uniform, or coverage of the minimal DFA's transitions; a share of the negatives
    near-misses), or read from files (`data`: a FLaRe folder or an MLRegTest language, `data_hash`
    the SHA-256 prefix of the files read; the sampling fields then do not apply)."""

    train_min_length: int = 0
    train_max_length: int = 40
    train_near_miss_fraction: float = 0.0
    sampling: str = "uniform"
    data: str | None = None
    data_hash: str | None = None

    def check_choices(self) -> None:
        check_choice("sampling", self.sampling)

    def check(self) -> None:
        _non_negative(self, "train_min_length")
        _finite(self, "train_near_miss_fraction")
        _fraction(self, "train_near_miss_fraction")
        if self.train_min_length > self.train_max_length:
            raise FormalRopeError("train_min_length must not exceed train_max_length")


@dataclass(frozen=True)
class EvaluationSettings:
    """The tests: lengths test_min_length..test_max_length, or the sparse sorted `test_lengths`
    (then its first and last length), balanced strings per length with a share of near-miss
    negatives drawn with `eval_seed`, NNCH's uniform strings per length (0: not measured), and
    the eval mode (full, or nstar: stop once N* is known)."""

    test_min_length: int = 41
    test_max_length: int = 500
    test_lengths: tuple[int, ...] | None = None
    n_per_length: int = 512
    nnch_samples: int = DEFAULT_NNCH_SAMPLES
    eval_mode: str = "full"
    eval_seed: int = 0
    test_near_miss_fraction: float = 0.5

    def check_choices(self) -> None:
        check_choice("eval_mode", self.eval_mode)

    def check(self) -> None:
        _non_negative(self, "test_min_length", "eval_seed", "nnch_samples")
        _positive(self, "n_per_length")
        _finite(self, "test_near_miss_fraction")
        _fraction(self, "test_near_miss_fraction")
        if self.test_min_length > self.test_max_length:
            raise FormalRopeError("test_min_length must not exceed test_max_length")
        if self.test_lengths is not None and len(self.test_lengths) > MAX_LENGTH_LIST:
            raise FormalRopeError(
                f"test_lengths lists {len(self.test_lengths):,} lengths, more than {MAX_LENGTH_LIST:,}; "
                "use a range (test_min_length..test_max_length) or fewer lengths"
            )

    def tested_lengths(self):
        """The test lengths in increasing order, lazily: a range, or the sparse `test_lengths` tuple."""
        if self.test_lengths is not None:
            return self.test_lengths
        return range(self.test_min_length, self.test_max_length + 1)


# The sections in the order RunConfig holds and checks them: attribute name -> class.
SECTIONS: dict[str, type] = {
    "task": TaskSettings,
    "encoding": EncodingSettings,
    "model": ModelSettings,
    "optimisation": OptimisationSettings,
    "training_data": DataSettings,
    "evaluation": EvaluationSettings,
}
