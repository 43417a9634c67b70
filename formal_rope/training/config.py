"""Run configuration and result values for training (shared by trainer, sweeps and reports).

A run is fully described by its RunConfig. Configs are canonical: a field that does not apply to
the run (the base of NoPE, the rotated fraction of anything but partial RoPE, the strings per test
length of a run on data files, ...) is reset to its default, and so is an alphabet equal to the
language's own, so two configs that train the same model are equal. The run id
hashes only the fields that apply and differ from their id-neutral value (`ID_NEUTRAL`), so a field
added later at its neutral value leaves every existing id unchanged.
"""

from __future__ import annotations

import hashlib
import json
import math
from contextvars import ContextVar
from dataclasses import asdict, dataclass, field, fields, replace
from functools import lru_cache

from formal_rope.errors import FormalRopeError
from formal_rope.lang.source import parse_alphabet, resolve_language
from formal_rope.numbers import float_text, int_text
from formal_rope.storage.curves import TrainingCurve
from formal_rope.training.checks import GLOBAL_WINDOW, check_config
from formal_rope.training.encodings import (  # noqa: F401 (POSITIONAL_ENCODINGS: the config's public name)
    BASE_ENCODINGS,
    PERIODIC_ENCODINGS,
    POSITIONAL_ENCODINGS,
    ROPE_FRACTION_ENCODINGS,
    Encoding,
    encoding,
    primary_encoding,
)
from formal_rope.training.objective_spec import FINAL, canonical_objective
from formal_rope.training.option_text import lengths_fields, parse_layer_pe, parse_window

# field -> the encodings it applies to (from the registry's rows); every other field applies to every run.
FIELD_APPLIES_TO: dict[str, tuple[str, ...]] = {
    "base": BASE_ENCODINGS,
    "phase_precision": BASE_ENCODINGS,
    "periods": PERIODIC_ENCODINGS,
    "rope_fraction": ROPE_FRACTION_ENCODINGS,
}
# field -> what it does that files cannot take (`SampledData` reads it, `FileData` cannot): a run on
# data files (`data` set) draws its training batches from the training file and tests on the test
# files' strings, so these fields do not apply to it. Its training and test lengths do apply: they
# select which of the files' strings it trains and tests on (`training.data.fit_to_data`).
SAMPLING_FIELDS: dict[str, str] = {
    "n_per_length": "its test strings are every test-file string of each tested length, not a sample of n per length",
    "eval_seed": "its test strings are read from the test files, not sampled with a seed",
    "train_near_miss_fraction": "its training negatives are the training file's negatives, not sampled near-misses",
    "test_near_miss_fraction": "its test negatives are the test files' negatives, not sampled near-misses",
    "nnch_samples": "NNCH's score reads uniformly random strings labelled by a language's DFA, and the run tests on "
                    "the test files' strings",
    "sampling": "its strings are the files' strings, not drawn from the language's DFA",
}
# Uniform strings per test length for NNCH's score: few, so that `reproduce table2` (quick scale: 16
# balanced strings per length) takes about 3% longer than without them, its slowest run ((ab)*: all of
# a length's positives are one string) about 4% (bench/nnch_overhead.py). 2 x 459 lengths put the
# score's standard error below 1.7 points. It is also the field's id-neutral value, so every run id
# written before the score existed is unchanged.
DEFAULT_NNCH_SAMPLES = 2
# RunConfig.language of a run whose strings come only from files (`train --data DIR` without --lang):
# the language is whatever the labels say, and no DFA exists.
DATA_LANGUAGE_PREFIX = "data:"
# True while RunConfig.from_dict reads a run's record (`record=True`): built without `check_config`.
_READING_RECORD: ContextVar[bool] = ContextVar("reading_run_record", default=False)


@dataclass(frozen=True)
class RunConfig:
    """Everything that determines one training run (language, positional encoding, model, optimiser, tests).

    Equal configs give the same `run_id()`; a rerun sweep skips ids that already have a result (unless failed).
    Construction canonicalises: numbers get their field's type, a field that does not apply to the
    run (see `applies`: to `pe`, or a sampling field of a run on data files) or is None gets its
    default, an alphabet equal to the language's own becomes None, and `test_lengths` is sorted,
    deduplicated, and replaced by the range test_min_length..test_max_length when it is contiguous.
    Values of the wrong type or that no run can use (`check_config`) raise FormalRopeError: built, it is valid.
    """

    language: str  # registry name, ltl:/re: expression, bare expression, or .att path
    alphabet: tuple[str, ...] | None = None  # None: the language's own alphabet (also when given equal to it)
    pe: str = "rope"
    base: float = 1e4  # sipe/rope/partial_rope/jof_* base beta
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
    test_min_length: int = 41  # with test_lengths: its first length
    test_max_length: int = 500  # with test_lengths: its last length
    n_per_length: int = 512
    # Uniformly random strings per length for NNCH's score (training.nnch; NNCH itself draws 512); 0: not measured.
    nnch_samples: int = DEFAULT_NNCH_SAMPLES
    eval_mode: str = "full"  # full | nstar (stop once N* is known)
    eval_seed: int = 0  # test sets depend on this only, so runs with different seeds share them
    lr_schedule: str = "constant"  # constant | cosine (decay to 10% of lr)
    warmup_steps: int = 0  # linear learning-rate warm-up
    train_near_miss_fraction: float = 0.0  # share of training negatives replaced by near-misses
    test_near_miss_fraction: float = 0.5  # share of each test length's negatives that are near-misses (SPEC §4)
    test_lengths: tuple[int, ...] | None = None  # sparse test lengths; None: test_min_length..test_max_length
    # Strings from files instead of the sampler (formal_rope.training.data.FileData): a FLaRe folder
    # or an MLRegTest language, and the SHA-256 prefix of the files read. Neutral (None) for sampled
    # runs, so they keep their ids.
    data: str | None = None
    data_hash: str | None = None
    # Hybrid models (docs/training.md, "Hybrid models"). layer_pe: one registry encoding per layer
    # (None: `pe` in every layer); `pe` is then derived: the encoding most layers use (the earliest on
    # a tie). window: None (global attention), an int w >= 1 (every layer), or one entry per layer:
    # w >= 1 a sliding window of w keys, GLOBAL_WINDOW (-1) a global layer. Neutral (None) for every
    # run written before them, so their ids are unchanged.
    layer_pe: tuple[str, ...] | None = None
    window: int | tuple[int, ...] | None = None
    # Continue from another run's weights (docs/training.md, "Continuing from a checkpoint"): a
    # checkpoint path, or a run id (16 hex digits) resolved in the checkpoint folder of the command
    # (a sweep: OUT/models/ID.zip; train: checkpoints/ID.zip). The weights both models have are
    # loaded (shapes must agree); parameters new in this run keep their own initialisation. Neutral
    # (None) for every run written before it, so their ids are unchanged.
    init_from: str | None = None
    # How the sampler draws strings (`sampling.coverage`): uniform (uniform within each class and
    # length, as the papers do) or coverage (part of every training batch, test set and so the
    # worst-case search's seeds are strings that take chosen transitions of the minimal DFA, so
    # that every transition is visited, rare ones included). Neutral "uniform": ids unchanged.
    sampling: str = "uniform"
    # What the run is trained to predict (`training.objective_spec`): `final` (the label at eos),
    # `prefix`, `next-set`, `lm` or a weighted sum such as final+next-set:0.5, kept in canonical
    # spelling. Every objective is scored by the eos verdict. Neutral ("final") for every run
    # written before it, so their ids are unchanged.
    objective: str = FINAL

    def __post_init__(self) -> None:
        self._canonical_hybrid()
        for spec in fields(self):
            value = getattr(self, spec.name)
            if (value is None or not self.applies(spec.name)) and spec.name != "language":
                value = spec.default
            object.__setattr__(self, spec.name, coerce_field(spec.name, value))
        check_choices(self)
        object.__setattr__(self, "objective", canonical_objective(self.objective))
        if self.alphabet is not None and _is_own_alphabet(self.language, self.alphabet):
            # `-a ab` on (ab)* trains exactly what no -a trains: one config, one run id.
            object.__setattr__(self, "alphabet", None)
        if self.test_lengths is not None:
            lengths = tuple(sorted(set(self.test_lengths)))
            object.__setattr__(self, "test_min_length", lengths[0])
            object.__setattr__(self, "test_max_length", lengths[-1])
            contiguous = lengths[-1] - lengths[0] + 1 == len(lengths)
            object.__setattr__(self, "test_lengths", None if contiguous else lengths)
        if not _READING_RECORD.get():
            check_config(self)

    def _canonical_hybrid(self) -> None:
        """layer_pe and window in canonical form, before the other fields (their `applies` reads
        layer_pe): a layer_pe naming one encoding for every layer is that `pe` (layer_pe None), and
        otherwise sets `pe` to its primary encoding; a per-layer window that is the same for every
        layer is that int (all GLOBAL_WINDOW: None). Lengths that differ from `layers` are kept as
        given, for validation to report."""
        layer_pe = coerce_field("layer_pe", self.layer_pe)
        if layer_pe is not None and LAYER_PE_SELF in layer_pe:
            # `--layer-pe pe*5,nope` over a grid of encodings: each run's own `pe` in those layers.
            layer_pe = tuple(self.pe if name == LAYER_PE_SELF else name for name in layer_pe)
        window = coerce_field("window", self.window)
        layers = self.layers if isinstance(self.layers, int) and not isinstance(self.layers, bool) else None
        if layer_pe is not None:
            if len(set(layer_pe)) == 1 and len(layer_pe) == layers:
                object.__setattr__(self, "pe", layer_pe[0])
                layer_pe = None
            else:
                object.__setattr__(self, "pe", primary_encoding(layer_pe))
        if isinstance(window, tuple) and len(window) == layers and len(set(window)) == 1:
            window = None if window[0] == GLOBAL_WINDOW else window[0]
        object.__setattr__(self, "layer_pe", layer_pe)
        object.__setattr__(self, "window", window)

    def layer_encodings(self) -> tuple[str, ...]:
        """The encoding of each layer: layer_pe, or `pe` in every layer."""
        return self.layer_pe if self.layer_pe is not None else (self.pe,) * self.layers

    def layer_windows(self) -> tuple[int | None, ...]:
        """Each layer's sliding window (None: global attention)."""
        if self.window is None:
            return (None,) * self.layers
        if isinstance(self.window, int):
            return (self.window,) * self.layers
        return tuple(None if w == GLOBAL_WINDOW else w for w in self.window)

    def row_of(self, pe: str) -> Encoding:
        """The registry row of `pe`, one of this run's encodings (looked up when the config was built)."""
        rows = self.__dict__.get("_encoding_rows")
        if rows is None:  # a run's stored record, read without checks: looked up now, once
            rows = {}
            object.__setattr__(self, "_encoding_rows", rows)
        if pe not in rows:
            rows[pe] = encoding(pe)
        return rows[pe]

    @property
    def encoding_row(self) -> Encoding:
        """The registry row of `pe` (`encodings.Encoding`: additive, periodic, takes_base, ...)."""
        return self.row_of(self.pe)

    def periodic_row(self) -> Encoding | None:
        """The registry row of `periodic_encoding()`, or None when no layer is periodic."""
        periodic = self.periodic_encoding()
        return None if periodic is None else self.row_of(periodic)

    def periodic_encoding(self) -> str | None:
        """The periodic encoding (rope_p, sipe_p) some layer uses, whose periods the run resolves;
        None when no layer is periodic."""
        return next((pe for pe in self.layer_encodings() if pe in PERIODIC_ENCODINGS), None)

    def is_hybrid(self) -> bool:
        """Whether the run sets per-layer encodings or sliding windows."""
        return self.layer_pe is not None or self.window is not None

    def applies(self, name: str) -> bool:
        """Whether field `name` has any effect on this run (the base of NoPE does not, nor the
        strings per test length of a run on data files, ...). For a hybrid, a field applies when
        it applies to the encoding of any layer."""
        if name in SAMPLING_FIELDS and self.data is not None:
            return False
        encodings = FIELD_APPLIES_TO.get(name)
        if encodings is None:
            return True
        used = self.layer_pe if isinstance(self.layer_pe, tuple) else (self.pe,)
        return any(pe in encodings for pe in used)

    def tested_lengths(self):
        """The test lengths in increasing order, lazily: a range, or the sparse `test_lengths` tuple."""
        if self.test_lengths is not None:
            return self.test_lengths
        return range(self.test_min_length, self.test_max_length + 1)

    def to_dict(self) -> dict:
        """JSON-ready dict of every field; a field that does not apply to the run is None."""
        data = asdict(self)
        for name in ("alphabet", "periods", "test_lengths", "layer_pe", "window"):
            data[name] = list(data[name]) if isinstance(data[name], tuple) else data[name]
        for name in (*FIELD_APPLIES_TO, *SAMPLING_FIELDS):
            if not self.applies(name):
                data[name] = None
        return data

    @classmethod
    def from_dict(cls, data: dict, *, record: bool = False) -> "RunConfig":
        """Inverse of `to_dict` (lists become tuples, None means the default); unknown keys, a missing
        language or a value of the wrong type are a FormalRopeError. record: a made run's config (a
        checkpoint's, a result's), read without `check_config`, whose checks a file may predate."""
        known = {f.name for f in fields(cls)}
        unknown = sorted(set(data) - known)
        if unknown:
            raise FormalRopeError(
                f"unknown RunConfig keys: {', '.join(unknown)}; expected some of "
                f"{', '.join(f.name for f in fields(cls))}"
            )
        if "language" not in data:
            raise FormalRopeError("a RunConfig needs a 'language' (registry name, expression or .att path)")
        reading = _READING_RECORD.set(record)
        try:
            return cls(**data)
        finally:
            _READING_RECORD.reset(reading)

    def id_fields(self) -> dict:
        """The fields the run id hashes: language, and every field that applies to the run and
        differs from its id-neutral value."""
        data = self.to_dict()
        return {
            name: value
            for name, value in data.items()
            if name == "language" or (self.applies(name) and value != _neutral_json(name))
        }

    def run_id(self) -> str:
        """16 hex digits of the SHA-256 of `id_fields()` as canonical JSON."""
        return config_hash(self.id_fields())

    def with_(self, **changes) -> "RunConfig":
        """A copy with `changes`; setting test_min_length or test_max_length alone replaces a sparse
        test_lengths list by that range."""
        if {"test_min_length", "test_max_length"} & set(changes) and "test_lengths" not in changes:
            changes["test_lengths"] = None
        return replace(self, **changes)


# The value each field takes when the run id leaves it out. Never change an entry: a config at the
# old neutral value would then share its id with a different run. A new field gets an entry equal to
# the value that reproduces the behaviour before the field existed, so no existing id changes.
ID_NEUTRAL: dict = {
    "alphabet": None, "pe": "rope", "base": 1e4, "periods": None, "rope_fraction": 0.5,
    "phase_precision": "fp64", "attention": "auto", "seed": 0, "lr": 3e-4, "steps": 1000,
    "batch_size": 128, "layers": 5, "d_model": 64, "heads": 8, "ffn_mult": 4, "weight_decay": 0.01,
    "grad_clip": 1.0, "train_min_length": 0, "train_max_length": 40, "test_min_length": 41,
    "test_max_length": 500, "n_per_length": 512, "nnch_samples": 2, "eval_mode": "full", "eval_seed": 0,
    "lr_schedule": "constant", "warmup_steps": 0, "train_near_miss_fraction": 0.0, "test_lengths": None,
    "data": None, "data_hash": None, "test_near_miss_fraction": 0.5, "layer_pe": None, "window": None,
    "init_from": None, "sampling": "uniform", "objective": FINAL,
}

# The values of the fields that name one of a few choices. They are checked when a RunConfig is
# built (`check_choices`), so a value no run can use is refused there, not by `run_training` later.
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


def check_choices(config: RunConfig) -> None:
    """FormalRopeError when `pe` or a field of FIELD_CHOICES holds a value no run can use (the
    worst-case search is no eval_mode: `run_training(config, worst_case=SearchSettings(...))`)."""
    if config.layer_pe is not None:
        for name in dict.fromkeys(config.layer_pe):
            if name not in POSITIONAL_ENCODINGS:
                raise FormalRopeError(f"layer_pe: unknown positional encoding {name!r}; expected one of "
                                      f"{', '.join(POSITIONAL_ENCODINGS)}")
    # The registry rows of the run's encodings, looked up here once: every later use reads them from
    # the config (`RunConfig.encoding_row`, `row_of`), so a run consults the registry once per encoding.
    rows = {name: encoding(name) for name in dict.fromkeys((config.pe, *(config.layer_pe or ())))}
    object.__setattr__(config, "_encoding_rows", rows)
    for name, choices in FIELD_CHOICES.items():
        value = getattr(config, name)
        if value in choices:
            continue
        hint = ""
        if name == "eval_mode" and "worst" in value:
            hint = ("; the worst-case search is not an eval mode in Python: pass "
                    "run_training(config, worst_case=evaluation.SearchSettings(...)) (the CLI's --eval worst-case)")
        raise FormalRopeError(f"unknown {_CHOICE_WORDS[name]} {value!r}; expected "
                              f"{', '.join(choices[:-1])} or {choices[-1]}{hint}")


# A layer_pe entry standing for the run's own `pe` (resolved at construction): `pe*5,nope`.
LAYER_PE_SELF = "pe"


@lru_cache(maxsize=1024)
def _is_own_alphabet(language: str, alphabet: tuple[str, ...]) -> bool:
    """Whether `language` over `alphabet` is exactly `language` over its own alphabet (the same
    symbols in the same order: the order fixes the token ids, so `ba` for (ab)* is another run).

    Memoised because configs are built often (grids, results folders) and resolving parses the
    expression; the answer depends only on the two arguments (and, for a .att path, on
    that file's labels, which a run does not change). A language that does not resolve
    (a typo, an alphabet it needs) keeps its alphabet: validation reports it later, with context."""
    if language.startswith(DATA_LANGUAGE_PREFIX):
        return False  # the files' alphabet: `training.data.fit_to_data` canonicalises it
    try:
        own, given = resolve_language(language), resolve_language(language, alphabet)
    except FormalRopeError:
        return False
    return (own.kind, own.expression, own.alphabet) == (given.kind, given.expression, given.alphabet)


def _neutral_json(name: str):
    value = ID_NEUTRAL[name]
    return list(value) if isinstance(value, tuple) else value


def config_hash(id_fields: dict) -> str:
    """The run id of a config given its `id_fields()` (sorted-key compact JSON, SHA-256, 16 hex digits)."""
    canonical = json.dumps(id_fields, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(canonical.encode()).hexdigest()[:16]


def legacy_run_id(config_dict: dict) -> str:
    """The id formal-rope used before run ids left out neutral and inapplicable fields: the hash of
    the full `to_dict()` as written then (results on disk may still carry it as their file name)."""
    return config_hash(config_dict)


# ----------------------------------------------------------------------------------------------
# Field kinds: what `sweep --set`, sweep files and from_dict may give each field


_KINDS = {
    "str": "str",
    "int": "int",
    "float": "float",
    "tuple[str, ...] | None": "symbols",
    "tuple[int, ...] | None": "integers",
    "str | None": "optional_str",
    "int | tuple[int, ...] | None": "window",
}


def field_kind(name: str) -> str:
    """'str', 'int', 'float', 'symbols' (tuple of strings) or 'integers' (tuple of ints) for a
    RunConfig field; FormalRopeError for an unknown field."""
    if name in _FIELD_KINDS:
        return _FIELD_KINDS[name]
    raise FormalRopeError(
        f"unknown run setting {name!r}; RunConfig fields are {', '.join(f.name for f in fields(RunConfig))}"
    )


_FIELD_KINDS = {spec.name: _KINDS[spec.type] for spec in fields(RunConfig)}
_KIND_WORDS = {"str": "a string", "int": "an integer", "float": "a number",
               "symbols": "a list of symbols", "integers": "a list of integers",
               "optional_str": "a string or none",
               "window": "a positive integer, a list of them (-1: a global layer) or none"}


def coerce_field(name: str, value):
    """`value` as field `name`'s type (int for int fields, float for float fields, tuples for lists);
    FormalRopeError naming the field when it has another type."""
    kind = field_kind(name)
    if value is None and kind in ("symbols", "integers", "optional_str", "window"):
        return None
    problem = f"{name} must be {_KIND_WORDS[kind]}, got {value!r}"
    if kind == "window":
        integral_float = isinstance(value, float) and math.isfinite(value) and value == int(value)
        if not isinstance(value, bool) and (isinstance(value, int) or integral_float):
            return int(value)
        kind = "integers"
    if kind in ("str", "optional_str"):
        if not isinstance(value, str):
            raise FormalRopeError(problem)
        return value
    if kind == "int":
        integral_float = isinstance(value, float) and math.isfinite(value) and value == int(value)
        if isinstance(value, bool) or not (isinstance(value, int) or integral_float):
            raise FormalRopeError(problem)
        return int(value)
    if kind == "float":
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise FormalRopeError(problem)
        return float(value)
    if isinstance(value, str) or not isinstance(value, (list, tuple)) or not value:
        raise FormalRopeError(problem + " (non-empty)")
    if kind == "symbols":
        if not all(isinstance(item, str) and item for item in value):
            raise FormalRopeError(problem)
        return tuple(value)
    if not all(isinstance(item, int) and not isinstance(item, bool) for item in value):
        raise FormalRopeError(problem)
    return tuple(int(item) for item in value)


# ----------------------------------------------------------------------------------------------
# Field values written as text (CLI options, `sweep --set FIELD=...`)

NONE_WORDS = ("none", "null", "auto", "default")


def parse_field_text(name: str, text: str):
    """One value of field `name` from text: '2', '3e-4', 'cosine'; for tuple fields '[2,3]', '2'
    (one element), 'ab' / '[a,b]' (alphabet: read like --alphabet), '[41,45,50]' or '41..500'
    (test_lengths); 'auto' / 'none' for None. FormalRopeError naming the field when it does not parse."""
    kind = field_kind(name)
    text = text.strip()
    if kind in ("symbols", "integers", "optional_str", "window") and text.lower() in NONE_WORDS:
        return None
    inner = text[1:-1] if text.startswith("[") and text.endswith("]") else text
    try:
        if kind == "int":
            return int_text(text)
        if kind == "float":
            return float_text(text)
        if kind in ("str", "optional_str"):
            return text
        if name == "layer_pe":
            return parse_layer_pe(inner)
        if kind == "window":
            return parse_window(inner)
        if kind == "symbols":
            return parse_alphabet(inner)
        if name == "test_lengths":
            return lengths_fields(inner, name, as_list=True)["test_lengths"]
        return tuple(int_text(part) for part in inner.split(",") if part.strip()) or None
    except ValueError:
        raise FormalRopeError(f"{name} must be {_KIND_WORDS[kind]}, got {text!r}") from None


@dataclass(frozen=True)
class LengthResult:
    """The accuracy on the `n` (balanced) test strings of one length, and on the `nnch_n` uniformly
    random strings NNCH's score reads there (`training.nnch`; None and 0 where it reads none).
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
    # NNCH's score (training.nnch): mean accuracy on uniform strings over NNCH's lengths; NaN when not
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
    # The training curve (training.curves: loss and accuracy every log_every steps); None: not logged.
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
