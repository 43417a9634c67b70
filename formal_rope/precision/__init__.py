"""Finite-precision arithmetic: formats, exact rounding, f_large, emulated/native arithmetic, rotations.

Importing this package does not import torch: the torch-based names (Emulated, Native,
make_arithmetic, correctly_rounded, the rotary helpers) load on first access.
"""

from __future__ import annotations

from formal_rope._lazy import lazy_exports
from formal_rope.precision.formats import (
    FloatFormat,
    f_large,
    f_large_threshold,
    is_representable,
    native_dtype,
    parse_format,
    round_mpf_to_format,
    round_to_format,
    valid_format_names,
)

_LAZY = {
    "Emulated": "formal_rope.precision.arith",
    "Native": "formal_rope.precision.arith",
    "make_arithmetic": "formal_rope.precision.arith",
    "correctly_rounded": "formal_rope.precision.arith",
    "realized_angle_rotation": "formal_rope.precision.rotary",
    "periodic_rotation_table": "formal_rope.precision.rotary",
    "periodic_rotation_entries": "formal_rope.precision.rotary",
    "offset_query_bias": "formal_rope.precision.rotary",
    "realized_offset_scores": "formal_rope.precision.rotary",
    "rotate_pair": "formal_rope.precision.rotary",
}

__all__ = [
    "FloatFormat",
    "f_large",
    "f_large_threshold",
    "is_representable",
    "native_dtype",
    "parse_format",
    "round_mpf_to_format",
    "round_to_format",
    "valid_format_names",
    *_LAZY,
]


__getattr__, __dir__ = lazy_exports(__name__, _LAZY, globals())
