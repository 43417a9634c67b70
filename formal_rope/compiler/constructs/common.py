"""What every compiler construct shares: the residual coordinates they name, the context of one
compilation they build in, and the pieces they return (an attention head, feed-forward units, a
report).

Invariant kept by every construct: a subformula coordinate is exactly 0 or 1 at every string
position and at eos, and exactly 0 at bos (Boolean blocks are gated by the ``true`` coordinate,
which is 1 everywhere except at bos). Attention heads therefore never need to mask bos out of
their values.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from formal_rope.model.ir import AttentionHead, RotaryPair
from formal_rope.precision import FloatFormat, round_mpf_to_format, round_to_format

ONE = "const:1"
BOS_FLAG = "flag:bos"
FIRST_RAW = "raw:first"
TRUE = "true"


@dataclass(frozen=True)
class ConstructReport:
    """One attention construct: where it sits and its realized score margin against f_large."""

    construct: str  # P, MOD, Y, first
    formula: str
    layer: int
    head: str
    scale: float | None
    margin: float | None  # smallest realized winner-vs-loser score gap (None: not a hard-selection head)
    f_large: float
    detail: str = ""
    # Y heads: N_max^(k)(g, C, F); P heads in narrow formats (precision.ones_sum_overflow)
    certified_length: int | None = None
    certified_mode: str | None = None
    certified_ideal: int | None = None
    certified_is_lower_bound: bool = False

    def to_json(self) -> dict[str, Any]:
        return dict(self.__dict__)


@dataclass
class Hidden:
    """One feed-forward unit: ReLU(Σ inputs·coordinates + bias), added to the output coordinates."""

    inputs: dict[str, float]
    bias: float
    outputs: dict[str, float]


@dataclass(frozen=True)
class Placement:
    """Where one temporal node's construct goes and what it is called: its layer (1-based), head
    name, output coordinate and raw scratch coordinate."""

    layer: int
    name: str
    out: str
    raw: str


@dataclass(frozen=True)
class BuildContext:
    """What the constructs of one compilation read: the format and its f_large, the residual layout
    (`index`: coordinate -> position), each DAG node's coordinate, the Y heads' frequency and scale."""

    fmt: FloatFormat
    large: float
    index: dict[str, int]
    node_coord: list[str]
    freq: float
    y_scale: float | None

    @property
    def d_model(self) -> int:
        return len(self.index)


@dataclass(frozen=True)
class Built:
    """A construct's pieces: its head, the feed-forward units that snap its raw output, its report."""

    head: AttentionHead
    hidden: tuple[Hidden, ...]
    report: ConstructReport


def round_in(value: float, fmt: FloatFormat) -> float:
    return float(round_to_format(value, fmt))


def round_up_in(value: float, fmt: FloatFormat) -> float:
    return round_mpf_to_format(value, fmt, direction="up")  # a float converts to mpmath exactly


def head(name: str, context: BuildContext, *, query_bias, key_weights, key_bias, value_coord: str,
         out_coord: str, rotary: tuple[RotaryPair, ...], description: str) -> AttentionHead:
    """An attention head with zero query weights: `query_bias`, keys from `key_weights`
    ((row, coordinate) -> weight) plus `key_bias`, the value one coordinate, written to one."""
    d_model, index = context.d_model, context.index
    d_head = len(query_bias)
    w_key = np.zeros((d_head, d_model))
    for (row, coord), weight in key_weights.items():
        w_key[row, index[coord]] = weight
    w_value = np.zeros((1, d_model))
    w_value[0, index[value_coord]] = 1.0
    w_out = np.zeros((d_model, 1))
    w_out[index[out_coord], 0] = 1.0
    return AttentionHead(
        name=name,
        w_query=np.zeros((d_head, d_model)),
        b_query=np.array(query_bias, dtype=np.float64),
        w_key=w_key,
        b_key=np.array(key_bias, dtype=np.float64),
        w_value=w_value,
        b_value=np.zeros(1),
        w_out=w_out,
        rotary=rotary,
        description=description,
    )
