"""RunConfig: everything that determines one training run, in frozen sections (`run_config.sections`).

A run is fully described by its RunConfig. Configs are canonical: a field that does not apply to
the run (`run_config.applies`: the base of NoPE, the rotated fraction of anything but partial RoPE,
the strings per test length of a run on data files, ...) is reset to its default, and so is an
alphabet equal to the language's own, so two configs that train the same model are equal. The run
id hashes only the fields that apply and differ from their id-neutral value (`ID_NEUTRAL`), so a
field added later at its neutral value leaves every existing id unchanged.

`RunConfig(language, pe=..., steps=...)` takes the flat fields (`run_config.fields.FIELD_NAMES`)
and builds the sections from their canonical values; every flat field reads as an attribute
(`config.pe` is `config.encoding.pe`). Nothing changes a config once built: `with_` builds another.
"""

from __future__ import annotations

import hashlib
import json
import operator
from dataclasses import dataclass
from functools import lru_cache

from formal_rope.errors import FormalRopeError
from formal_rope.lang.source import resolve_language
from formal_rope.run_config.applies import MAYBE_UNUSED, field_applies
from formal_rope.run_config.encodings import (  # noqa: F401 (POSITIONAL_ENCODINGS: the config's public name)
    PERIODIC_ENCODINGS,
    POSITIONAL_ENCODINGS,
    Encoding,
    encoding,
    primary_encoding,
)
from formal_rope.run_config.fields import FIELD_NAMES, FIELDS_BY_NAME, ID_NEUTRAL, RUN_FIELDS, coerce_field
from formal_rope.run_config.objective import canonical_objective
from formal_rope.run_config.rules import (
    GLOBAL_WINDOW,
    check_partial_pairs,
    check_period_count,
    describe_period_pairs,
    period_pairs,
)
from formal_rope.run_config.sections import (
    SECTIONS,
    DataSettings,
    EncodingSettings,
    EvaluationSettings,
    ModelSettings,
    OptimisationSettings,
    TaskSettings,
)

# RunConfig.language of a run whose strings come only from files (`train --data DIR` without --lang):
# the language is whatever the labels say, and no DFA exists.
DATA_LANGUAGE_PREFIX = "data:"
# A layer_pe entry standing for the run's own `pe` (resolved at construction): `pe*5,nope`.
LAYER_PE_SELF = "pe"


class _FlatKeywords(type):
    """`RunConfig(language, pe=..., ...)` takes the flat fields and builds the sections
    (`canonical_sections`); the dataclass's own constructor, which takes the sections, is reached
    only from there."""

    def __call__(cls, *args, **settings):
        if len(args) > len(FIELD_NAMES):
            raise TypeError(f"RunConfig takes at most {len(FIELD_NAMES)} positional fields")
        for name, value in zip(FIELD_NAMES, args):
            if name in settings:
                raise TypeError(f"RunConfig got field {name!r} twice")
            settings[name] = value
        return super().__call__(**canonical_sections(settings, checked=True))


@dataclass(frozen=True)
class RunConfig(metaclass=_FlatKeywords):
    """Everything that determines one training run (language, positional encoding, model, optimiser, tests).

    Equal configs give the same `run_id()`; a rerun sweep skips ids that already have a result (unless failed).
    Construction canonicalises: numbers get their field's type, a field that does not apply to the run
    (`run_config.applies`: to `pe`, or a sampling field of a run on data files) or is None gets its
    default, an alphabet equal to the language's own becomes None, and `test_lengths` is sorted,
    deduplicated, and replaced by the range test_min_length..test_max_length when it is contiguous.
    Values of the wrong type or that no run can use raise FormalRopeError (each section's `check`,
    then `check_across`): built, it is valid.
    """

    task: TaskSettings
    encoding: EncodingSettings
    model: ModelSettings
    optimisation: OptimisationSettings
    training_data: DataSettings
    evaluation: EvaluationSettings

    def __repr__(self) -> str:
        return f"RunConfig({', '.join(f'{name}={getattr(self, name)!r}' for name in FIELD_NAMES)})"

    def flat(self) -> dict:
        """Every flat field's value, in the flat order (tuples as tuples: `RunConfig(**config.flat())
        == config`)."""
        return {name: getattr(self, name) for name in FIELD_NAMES}

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
        """The registry row of `pe`, one of this run's encodings."""
        return encoding(pe)

    @property
    def encoding_row(self) -> Encoding:
        """The registry row of `pe` (`encodings.Encoding`: additive, periodic, takes_base, ...)."""
        return encoding(self.pe)

    def periodic_row(self) -> Encoding | None:
        """The registry row of `periodic_encoding()`, or None when no layer is periodic."""
        periodic = self.periodic_encoding()
        return None if periodic is None else encoding(periodic)

    def periodic_encoding(self) -> str | None:
        """The periodic encoding (rope_p, sipe_p) some layer uses, whose periods the run resolves;
        None when no layer is periodic."""
        return next((pe for pe in self.layer_encodings() if pe in PERIODIC_ENCODINGS), None)

    def is_hybrid(self) -> bool:
        """Whether the run sets per-layer encodings or sliding windows."""
        return self.layer_pe is not None or self.window is not None

    def applies(self, name: str) -> bool:
        """Whether field `name` has any effect on this run (`run_config.applies`)."""
        return field_applies(name, _used_encodings(self.pe, self.layer_pe), self.data is not None)

    def tested_lengths(self):
        """The test lengths in increasing order, lazily: a range, or the sparse `test_lengths` tuple."""
        return self.evaluation.tested_lengths()

    def to_dict(self) -> dict:
        """JSON-ready dict of every flat field; a field that does not apply to the run is None."""
        data = self.flat()
        for name in ("alphabet", "periods", "test_lengths", "layer_pe", "window"):
            data[name] = list(data[name]) if isinstance(data[name], tuple) else data[name]
        for name in MAYBE_UNUSED:
            if not self.applies(name):
                data[name] = None
        return data

    @classmethod
    def from_dict(cls, data: dict, *, record: bool = False) -> "RunConfig":
        """Inverse of `to_dict` (lists become tuples, None means the default); unknown keys, a missing
        language or a value of the wrong type are a FormalRopeError. record: a made run's config (a
        checkpoint's, a result's), read without the sections' checks, which a file may predate (the
        choices of names are still checked)."""
        unknown = sorted(set(data) - set(FIELD_NAMES))
        if unknown:
            raise FormalRopeError(
                f"unknown RunConfig keys: {', '.join(unknown)}; expected some of {', '.join(FIELD_NAMES)}"
            )
        if "language" not in data:
            raise FormalRopeError("a RunConfig needs a 'language' (registry name, expression or .att path)")
        return super(_FlatKeywords, cls).__call__(**canonical_sections(dict(data), checked=not record))

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
        unknown = sorted(set(changes) - set(FIELD_NAMES))
        if unknown:
            raise TypeError(f"RunConfig has no field {unknown[0]!r}")
        return RunConfig(**{**self.flat(), **changes})


def _flat_property(spec):
    read = operator.attrgetter(f"{spec.section}.{spec.name}")
    return property(read, doc=f"`{spec.section}.{spec.name}` (a flat field)")


for _spec in RUN_FIELDS:  # config.pe reads config.encoding.pe: the flat attributes every caller reads
    setattr(RunConfig, _spec.name, _flat_property(_spec))


def _used_encodings(pe, layer_pe) -> tuple[str, ...]:
    return layer_pe if isinstance(layer_pe, tuple) else (pe,)


def canonical_sections(settings: dict, *, checked: bool) -> dict:
    """The sections of the config the flat `settings` describe, in canonical form (the class
    docstring of RunConfig), each checked (`checked`; always the choices of names), then the rules
    across sections (`check_across`). FormalRopeError for a value of the wrong type or that no run
    can use; TypeError for a name that is no field (as a dataclass would)."""
    unknown = [name for name in settings if name not in FIELDS_BY_NAME]
    if unknown:
        raise TypeError(f"RunConfig got an unexpected field {unknown[0]!r}")
    if "language" not in settings:
        raise TypeError("RunConfig needs a language")
    values = {name: settings.get(name, FIELDS_BY_NAME[name].default) for name in FIELD_NAMES}
    values.update(_canonical_hybrid(values))
    pe = values["pe"] if values["pe"] is not None else FIELDS_BY_NAME["pe"].default
    used, on_files = _used_encodings(pe, values["layer_pe"]), values["data"] is not None
    for spec in RUN_FIELDS:
        value = values[spec.name]
        if spec.name != "language" and (value is None or not field_applies(spec.name, used, on_files)):
            value = spec.default
        values[spec.name] = coerce_field(spec.name, value)
    values["objective"] = canonical_objective(values["objective"])
    if values["alphabet"] is not None and _is_own_alphabet(values["language"], values["alphabet"]):
        values["alphabet"] = None  # `-a ab` on (ab)* trains exactly what no -a trains: one config, one run id
    if values["test_lengths"] is not None:
        lengths = tuple(sorted(set(values["test_lengths"])))
        contiguous = lengths[-1] - lengths[0] + 1 == len(lengths)
        values.update(test_min_length=lengths[0], test_max_length=lengths[-1],
                      test_lengths=None if contiguous else lengths)
    sections = {
        section: cls(**{spec.name: values[spec.name] for spec in RUN_FIELDS if spec.section == section})
        for section, cls in SECTIONS.items()
    }
    for section in sections.values():
        section.check_choices()
    if checked:
        for section in sections.values():
            section.check()
        check_across(sections["encoding"], sections["model"])
    return sections


def check_config(config: RunConfig) -> None:
    """The checks a config makes when it is built (each section's `check`, then `check_across`):
    for a run's record, read without them (`RunConfig.from_dict(record=True)`)."""
    sections = [getattr(config, name) for name in SECTIONS]
    for section in sections:
        section.check()
    check_across(config.encoding, config.model)


def _canonical_hybrid(values: dict) -> dict:
    """layer_pe, window and pe in canonical form, before the other fields (whether they apply reads
    layer_pe): a layer_pe naming one encoding for every layer is that `pe` (layer_pe None), and
    otherwise sets `pe` to its primary encoding; a per-layer window that is the same for every
    layer is that int (all GLOBAL_WINDOW: None). Lengths that differ from `layers` are kept as
    given, for `check_across` to report."""
    pe = values["pe"]
    layer_pe = coerce_field("layer_pe", values["layer_pe"])
    if layer_pe is not None and LAYER_PE_SELF in layer_pe:
        # `--layer-pe pe*5,nope` over a grid of encodings: each run's own `pe` in those layers.
        layer_pe = tuple(pe if name == LAYER_PE_SELF else name for name in layer_pe)
    window = coerce_field("window", values["window"])
    layers = values["layers"]
    layers = layers if isinstance(layers, int) and not isinstance(layers, bool) else None
    if layer_pe is not None:
        if len(set(layer_pe)) == 1 and len(layer_pe) == layers:
            pe, layer_pe = layer_pe[0], None
        else:
            pe = primary_encoding(layer_pe)
    if isinstance(window, tuple) and len(window) == layers and len(set(window)) == 1:
        window = None if window[0] == GLOBAL_WINDOW else window[0]
    return {"pe": pe, "layer_pe": layer_pe, "window": window}


def check_across(encoding_settings: EncodingSettings, model: ModelSettings) -> None:
    """The rules that read the encoding and the model together: one per-layer encoding and window
    per layer, partial RoPE rotating at least one of the head's pairs, no more periods than the
    periodic encoding has pairs to carry them."""
    layer_pe, window, layers = encoding_settings.layer_pe, encoding_settings.window, model.layers
    if layer_pe is not None and len(layer_pe) != layers:
        raise FormalRopeError(
            f"layer_pe names {len(layer_pe)} encoding{'s' if len(layer_pe) != 1 else ''} "
            f"({','.join(layer_pe)}) for {layers} layers; give one per layer"
        )
    if isinstance(window, tuple) and len(window) != layers:
        raise FormalRopeError(f"window lists {len(window)} windows for {layers} layers; give one per "
                              f"layer ({GLOBAL_WINDOW} or global: a global layer) or a single window")
    used = _used_encodings(encoding_settings.pe, layer_pe)
    if field_applies("rope_fraction", used, False):
        check_partial_pairs(encoding_settings.rope_fraction, model.rotary_pairs)
    periodic = next((pe for pe in (layer_pe or (encoding_settings.pe,)) if pe in PERIODIC_ENCODINGS), None)
    if periodic is not None and encoding_settings.periods is not None:
        # Periods are given to pairs one each; a surplus would be dropped without a word.
        row = encoding(periodic)
        check_period_count(encoding_settings.periods, period_pairs(row, model.d_model, model.heads),
                           describe_period_pairs(row, model.d_model, model.heads))


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
