"""nope: no positional information (the base module: no additive table, identity rotation)."""

from __future__ import annotations

from formal_rope.training.encodings.base import PositionalEncoding


def build_nope(specs, n_pairs: int) -> PositionalEncoding:
    return PositionalEncoding(len(specs))

