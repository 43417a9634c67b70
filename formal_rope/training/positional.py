"""The names `training.setup` imports from the encodings, under their former module.

The positional encodings live in the package `training.encodings` (registry, phases, periods, one
module per family, composites, builders). This alias stays only until setup.py names the package
itself; nothing else imports it.
"""

from __future__ import annotations

from formal_rope.training.encodings.builders import PositionalSpec, build_positional
from formal_rope.training.encodings.periods import check_period_count, validate_periods
from formal_rope.training.encodings.phases import check_partial_pairs
from formal_rope.training.encodings.registry import HYBRID_ENCODINGS

__all__ = ["HYBRID_ENCODINGS", "PositionalSpec", "build_positional", "check_partial_pairs", "check_period_count",
           "validate_periods"]
