"""The least positional machinery a compiled model uses: which layers and heads need a rotary table.

The core paper's constructions (appendices C-D) put position into attention in only two ways: a
MOD_m head compares T_m(i mod m) rotations (RoPE_P with period m), and a Yᵏ head rotates by an
angle g·i so that the target i − k scores highest (an offset rotation, RoPE_NP). P heads, the
i = 1 detector and the Boolean feed-forward blocks need no position at all. Reading this from the
compiled IR (not from the formula) makes it a statement about the model that runs, so a user sees
which layers could be NoPE layers in a hybrid and which need which table.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from formal_rope.model.ir import TransformerIR

# What a head needs, from the kinds of its rotary pairs (any non-identity pair makes it positional).
NEEDS_NONE = "none"
NEEDS_PERIODIC = "periodic"  # RoPE_P tables T_m
NEEDS_OFFSET = "offset"  # a rotation by g·i (RoPE_NP), Yᵏ heads
NEEDS_BOTH = "periodic+offset"


@dataclass(frozen=True)
class HeadNeeds:
    """One head's positional machinery: its layer (1-based), name, and what its rotary pairs need."""

    layer: int
    head: str
    needs: str  # NEEDS_NONE | NEEDS_PERIODIC | NEEDS_OFFSET | NEEDS_BOTH
    periods: tuple[int, ...] = ()  # the RoPE_P periods of its pairs
    angles: tuple[float, ...] = ()  # the offset rotations' angles g

    def describe(self) -> str:
        parts = []
        if self.periods:
            parts.append("RoPE_P period " + ", ".join(str(p) for p in self.periods))
        if self.angles:
            parts.append("offset rotation g = " + ", ".join(f"{g:g}" for g in self.angles))
        return "; ".join(parts) or "no rotary table"

    def to_json(self) -> dict[str, Any]:
        return {"layer": self.layer, "head": self.head, "needs": self.needs, "periods": list(self.periods),
                "angles": list(self.angles)}


@dataclass(frozen=True)
class PositionalNeeds:
    """Per head what it needs, and the summary a user reads: the layers that need no rotary table
    at all (a NoPE layer would do) and the periods and angles the whole model uses."""

    heads: tuple[HeadNeeds, ...]
    layers: int

    @property
    def positional_layers(self) -> tuple[int, ...]:
        return tuple(sorted({head.layer for head in self.heads if head.needs != NEEDS_NONE}))

    @property
    def position_free_layers(self) -> tuple[int, ...]:
        return tuple(layer for layer in range(1, self.layers + 1) if layer not in self.positional_layers)

    @property
    def periods(self) -> tuple[int, ...]:
        return tuple(sorted({period for head in self.heads for period in head.periods}))

    @property
    def angles(self) -> tuple[float, ...]:
        return tuple(sorted({angle for head in self.heads for angle in head.angles}))

    def summary(self) -> str:
        """One line: the least positional machinery, e.g. "layer 1: RoPE_P period 2 (1 head), offset
        rotation g = 1 (1 head); layer 2: none (NoPE would do)"."""
        parts = []
        for layer in range(1, self.layers + 1):
            heads = [head for head in self.heads if head.layer == layer and head.needs != NEEDS_NONE]
            if not heads:
                parts.append(f"layer {layer}: none (NoPE would do)")
                continue
            periodic = [head for head in heads if head.periods]
            offset = [head for head in heads if head.angles]
            needs = []
            if periodic:
                periods = sorted({p for head in periodic for p in head.periods})
                needs.append(f"RoPE_P period {', '.join(map(str, periods))} ({_heads(len(periodic))})")
            if offset:
                angles = sorted({g for head in offset for g in head.angles})
                needs.append(f"offset rotation g = {', '.join(f'{g:g}' for g in angles)} ({_heads(len(offset))})")
            parts.append(f"layer {layer}: " + ", ".join(needs))
        return "; ".join(parts)

    def to_json(self) -> dict[str, Any]:
        return {
            "position_free_layers": list(self.position_free_layers),
            "positional_layers": list(self.positional_layers),
            "periods": list(self.periods),
            "angles": list(self.angles),
            "summary": self.summary(),
            "heads": [head.to_json() for head in self.heads],
        }


def _heads(count: int) -> str:
    return f"{count} head" + ("" if count == 1 else "s")


def positional_needs(model: TransformerIR) -> PositionalNeeds:
    """What positional machinery each head of `model` uses, read from its rotary pairs."""
    heads = []
    for layer_index, layer in enumerate(model.layers, start=1):
        for head in layer.heads:
            periods = tuple(sorted({pair.period for pair in head.rotary if pair.kind == "periodic"}))
            angles = tuple(sorted({float(pair.angle) for pair in head.rotary if pair.kind == "angle"}))
            needs = (NEEDS_BOTH if periods and angles else NEEDS_PERIODIC if periods
                     else NEEDS_OFFSET if angles else NEEDS_NONE)
            heads.append(HeadNeeds(layer=layer_index, head=head.name, needs=needs, periods=periods, angles=angles))
    return PositionalNeeds(heads=tuple(heads), layers=len(model.layers))
