"""Finite-precision arithmetic: formats, exact rounding, f_large, the native dtypes, emulated/native
arithmetic (torch and numpy), rotations.

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
    parse_format,
    round_mpf_to_format,
    round_to_format,
    valid_format_names,
)
from formal_rope.precision.native import (
    NATIVE_DTYPES,
    NativeDtype,
    format_of_torch_dtype,
    native_dtype,
    native_format_names,
    native_row,
    numpy_dtype,
    round_once,
)
from formal_rope.precision.numpy_arith import FormatOps, make_rounder, ones_sum_overflow

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
    "NATIVE_DTYPES",
    "FloatFormat",
    "FormatOps",
    "NativeDtype",
    "f_large",
    "f_large_threshold",
    "format_of_torch_dtype",
    "is_representable",
    "make_rounder",
    "native_dtype",
    "native_format_names",
    "native_row",
    "numpy_dtype",
    "ones_sum_overflow",
    "parse_format",
    "round_mpf_to_format",
    "round_once",
    "round_to_format",
    "valid_format_names",
    *_LAZY,
]


__getattr__, __dir__ = lazy_exports(__name__, _LAZY, globals())
