"""The flat fields of a RunConfig: their order, types, defaults, sections and id-neutral values,
how a value is coerced to its field's type (`coerce_field`) and read from text (`parse_field_text`).

The flat order is the order of `RunConfig.to_dict()`, of the runs Parquet's config columns and of
`RunConfig(...)`'s positional arguments: it is the order of the fields before the config had
sections, and never changes (a new field goes last). Torch-free.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass

from formal_rope.errors import FormalRopeError
from formal_rope.lang.source import parse_alphabet
from formal_rope.numbers import float_text, int_text
from formal_rope.run_config.objective import FINAL
from formal_rope.run_config.sections import SECTIONS
from formal_rope.run_config.text import lengths_fields, parse_layer_pe, parse_window

# Every field's name in the flat order.
FIELD_NAMES: tuple[str, ...] = (
    "language", "alphabet", "pe", "base", "periods", "rope_fraction", "phase_precision", "attention", "seed", "lr",
    "steps", "batch_size", "layers", "d_model", "heads", "ffn_mult", "weight_decay", "grad_clip", "train_min_length",
    "train_max_length", "test_min_length", "test_max_length", "n_per_length", "nnch_samples", "eval_mode", "eval_seed",
    "lr_schedule", "warmup_steps", "train_near_miss_fraction", "test_near_miss_fraction", "test_lengths", "data",
    "data_hash", "layer_pe", "window", "init_from", "sampling", "objective",
)

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


@dataclass(frozen=True)
class FieldSpec:
    """One flat field: its name, its section (an attribute of RunConfig), its kind (what
    `coerce_field` accepts: str, int, float, symbols, integers, optional_str, window) and default
    (`dataclasses.MISSING` for the language, which every config names)."""

    name: str
    section: str
    kind: str
    default: object


def _field_specs() -> tuple[FieldSpec, ...]:
    found = {}
    for section, cls in SECTIONS.items():
        for spec in dataclasses.fields(cls):
            found[spec.name] = FieldSpec(spec.name, section, _KINDS[spec.type], spec.default)
    if set(found) != set(FIELD_NAMES):  # a field added to a section must also get its place in the flat order
        raise AssertionError(f"sections and FIELD_NAMES disagree: {sorted(set(found) ^ set(FIELD_NAMES))}")
    return tuple(found[name] for name in FIELD_NAMES)


RUN_FIELDS: tuple[FieldSpec, ...] = _field_specs()
FIELDS_BY_NAME: dict[str, FieldSpec] = {spec.name: spec for spec in RUN_FIELDS}


def field_kind(name: str) -> str:
    """'str', 'int', 'float', 'symbols' (tuple of strings) or 'integers' (tuple of ints) for a
    RunConfig field; FormalRopeError for an unknown field."""
    spec = FIELDS_BY_NAME.get(name)
    if spec is not None:
        return spec.kind
    raise FormalRopeError(f"unknown run setting {name!r}; RunConfig fields are {', '.join(FIELD_NAMES)}")


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


