"""The run configuration: the schema every stage reads (training, sweeps, atlas, reports, CLI).

    config = RunConfig("(ab)*", pe="rope_p", steps=200)   # flat fields, checked once when built
    config.encoding.periods, config.model.d_model           # the frozen sections (`sections`)
    config.pe, config.run_id(), config.to_dict()            # flat reads, the id, the record

  config    `RunConfig`: the sections, built canonical from flat fields; run ids
  sections  the sections (task, encoding, model, optimisation, training data, evaluation), each
            with the rules of its own fields
  fields    the flat fields: order, kinds, defaults, id-neutral values, coercion, text values
  applies   which fields apply to which run: the one rule the config, `train`, `sweep` and the
            notes read
  rules     the encodings' number rules (periods, rotated pairs) the config and the builders share
  encodings the registry of positional encodings (one row each; torch-free)
  objective the `objective` setting, parsed
  text      option texts that become fields (`rope*5,nope`, `32*4,global`, `41..500`)

Importing this package imports nothing else: every name loads from its module on first access
(the CLI's start-up reads `run_config.encodings` alone).
"""

from __future__ import annotations

from formal_rope._lazy import lazy_exports

_LAZY = {
    "RunConfig": "formal_rope.run_config.config",
    "DATA_LANGUAGE_PREFIX": "formal_rope.run_config.config",
    "LAYER_PE_SELF": "formal_rope.run_config.config",
    "config_hash": "formal_rope.run_config.config",
    "legacy_run_id": "formal_rope.run_config.config",
    "FIELD_NAMES": "formal_rope.run_config.fields",
    "RUN_FIELDS": "formal_rope.run_config.fields",
    "ID_NEUTRAL": "formal_rope.run_config.fields",
    "NONE_WORDS": "formal_rope.run_config.fields",
    "coerce_field": "formal_rope.run_config.fields",
    "field_kind": "formal_rope.run_config.fields",
    "parse_field_text": "formal_rope.run_config.fields",
    "FIELD_APPLIES_TO": "formal_rope.run_config.applies",
    "SAMPLING_FIELDS": "formal_rope.run_config.applies",
    "MAYBE_UNUSED": "formal_rope.run_config.applies",
    "DEFAULT_NNCH_SAMPLES": "formal_rope.run_config.sections",
    "FIELD_CHOICES": "formal_rope.run_config.sections",
    "POSITIONAL_ENCODINGS": "formal_rope.run_config.encodings",
    "lengths_fields": "formal_rope.run_config.text",
}

__all__ = [*_LAZY]


__getattr__, __dir__ = lazy_exports(__name__, _LAZY, globals())
