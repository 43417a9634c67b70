"""The positional encodings of SPEC §8, one module per job:

  registry     the rows: one per encoding, everything the rest of the code asks about it (torch-free)
  phases       the exact phase arithmetic: frequencies, turn limbs, phases mod 2pi (numpy, mpmath)
  periods      periods -> pairs and the periodic lookup tables (numpy)
  base         `PositionalEncoding`, the tables cache, numpy tables -> torch
  nope, sinusoidal, rotary, joformer   one family of encodings each: its modules and builders
  composites   a hybrid's per-layer encodings and a mixed pack's encodings behind one module
  builders     the builder table (`BUILDERS`, one entry per row) and `build_positional`

Importing this package imports the registry only (no torch): the CLI reads it at start-up and the
config stage derives its tuples from it. The torch modules are imported by name where a model is
built (`from formal_rope.training.encodings.builders import build_positional`).
"""

from __future__ import annotations

from formal_rope.training.encodings.registry import (
    BASE_ENCODINGS,
    ENCODINGS,
    EXPORT_KINDS,
    HYBRID_ENCODINGS,
    MIXABLE_ENCODINGS,
    PERIODIC_ENCODINGS,
    POSITIONAL_ENCODINGS,
    ROPE_FRACTION_ENCODINGS,
    Encoding,
    encoding,
    encoding_names,
    hybrid_label,
    in_report_order,
    is_periodic,
    primary_encoding,
    report_labels,
)

__all__ = [
    "BASE_ENCODINGS",
    "ENCODINGS",
    "EXPORT_KINDS",
    "HYBRID_ENCODINGS",
    "MIXABLE_ENCODINGS",
    "PERIODIC_ENCODINGS",
    "POSITIONAL_ENCODINGS",
    "ROPE_FRACTION_ENCODINGS",
    "Encoding",
    "encoding",
    "encoding_names",
    "hybrid_label",
    "in_report_order",
    "is_periodic",
    "primary_encoding",
    "report_labels",
]
