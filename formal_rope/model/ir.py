"""An explicit, general description of a (strict-causal, rotary) transformer classifier.

The IR is what the compiler produces and what the evaluator runs; it knows nothing about formulas.

* The residual stream has named coordinates (tracr style: ``const``, ``bos``, ``sym:a`` …, one 0/1
  coordinate per subformula, scratch coordinates for raw attention outputs).
* The embedding maps every vocabulary symbol (the alphabet plus ``<bos>``/``<eos>``) to a residual
  vector.
* Each layer is a list of attention heads followed by an optional ReLU feed-forward block; both
  are added to the residual stream.
* A head projects the residual to queries/keys (``d_head``, even) and values (``d_value``). Every
  2-d pair ``(2p, 2p+1)`` of the query/key space carries its own rotary schedule: ``none``
  (unrotated), ``angle`` (RoPE with frequency g: the realized rotation by g·i) or ``periodic``
  (a lookup table T_m(i mod m), never forming g·i). Attention is strictly causal: position i sees
  keys j < i; position 0 (bos) sees nothing and its head output is zero.
* The readout acts on the eos position: either one named coordinate compared with a threshold or a
  linear map ``w·x + b > 0``.

All arrays are float64 numpy arrays (the evaluator rounds them into the chosen format); the
dataclasses are frozen and the arrays are made read-only.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Mapping, Sequence

import numpy as np

from formal_rope.automata.membership import split_symbols
from formal_rope.errors import FormalRopeError

BOS = "<bos>"
EOS = "<eos>"

ROTARY_KINDS = ("none", "angle", "periodic")


def _frozen_array(values: Any, shape: tuple[int, ...], what: str) -> np.ndarray:
    array = np.array(values, dtype=np.float64, copy=True)
    if array.shape != shape:
        raise ValueError(f"{what} must have shape {shape}, got {array.shape}")
    array.setflags(write=False)
    return array


@dataclass(frozen=True)
class RotaryPair:
    """The rotation applied to one 2-d pair of a head's query/key space.

    ``kind="none"``: identity. ``kind="angle"``: rotation by ``angle``·i (RoPE_NP when
    angle/2π is irrational). ``kind="periodic"``: ``T_period(i mod period)`` with
    ``T_m(s) = Rot(2π·s/m)`` (RoPE_P).
    """

    kind: str = "none"
    angle: float | None = None
    period: int | None = None

    def __post_init__(self) -> None:
        if self.kind not in ROTARY_KINDS:
            raise ValueError(f"unknown rotary kind {self.kind!r}; expected one of {ROTARY_KINDS}")
        if self.kind == "angle" and self.angle is None:
            raise ValueError("an 'angle' rotary pair needs an angle")
        if self.kind == "periodic" and (self.period is None or self.period < 1):
            raise ValueError("a 'periodic' rotary pair needs a period >= 1")

    def describe(self) -> str:
        if self.kind == "angle":
            return f"RoPE_NP g={self.angle:g}"
        if self.kind == "periodic":
            return f"RoPE_P T_{self.period}(i mod {self.period})"
        return "unrotated"

    def to_json(self) -> dict[str, Any]:
        return {"kind": self.kind, "angle": self.angle, "period": self.period}

    @staticmethod
    def from_json(data: Mapping[str, Any]) -> "RotaryPair":
        return RotaryPair(kind=data["kind"], angle=data.get("angle"), period=data.get("period"))


@dataclass(frozen=True, eq=False)
class AttentionHead:
    """One strict-causal attention head; its output ``w_out @ Σ_j α_ij v_j`` is added to the residual.

    Scores are ``score_scale · q_i·k_j`` with ``q_i = R_i(w_query x_i + b_query)`` and
    ``k_j = R_j(w_key x_j + b_key)``.
    """

    name: str
    w_query: np.ndarray  # (d_head, d_model)
    b_query: np.ndarray  # (d_head,)
    w_key: np.ndarray  # (d_head, d_model)
    b_key: np.ndarray  # (d_head,)
    w_value: np.ndarray  # (d_value, d_model)
    b_value: np.ndarray  # (d_value,)
    w_out: np.ndarray  # (d_model, d_value)
    rotary: tuple[RotaryPair, ...]  # d_head // 2 entries
    score_scale: float = 1.0
    description: str = ""

    def __post_init__(self) -> None:
        w_query = np.asarray(self.w_query, dtype=np.float64)
        if w_query.ndim != 2:
            raise ValueError("w_query must be 2-d (d_head, d_model)")
        d_head, d_model = w_query.shape
        if d_head % 2:
            raise ValueError(f"head {self.name!r}: d_head must be even (rotary pairs), got {d_head}")
        w_value = np.asarray(self.w_value, dtype=np.float64)
        if w_value.ndim != 2 or w_value.shape[1] != d_model:
            raise ValueError(f"head {self.name!r}: w_value must have shape (d_value, {d_model})")
        d_value = w_value.shape[0]
        object.__setattr__(self, "w_query", _frozen_array(w_query, (d_head, d_model), "w_query"))
        object.__setattr__(self, "b_query", _frozen_array(self.b_query, (d_head,), "b_query"))
        object.__setattr__(self, "w_key", _frozen_array(self.w_key, (d_head, d_model), "w_key"))
        object.__setattr__(self, "b_key", _frozen_array(self.b_key, (d_head,), "b_key"))
        object.__setattr__(self, "w_value", _frozen_array(w_value, (d_value, d_model), "w_value"))
        object.__setattr__(self, "b_value", _frozen_array(self.b_value, (d_value,), "b_value"))
        object.__setattr__(self, "w_out", _frozen_array(self.w_out, (d_model, d_value), "w_out"))
        rotary = tuple(self.rotary)
        if len(rotary) != d_head // 2:
            raise ValueError(f"head {self.name!r}: needs {d_head // 2} rotary pairs, got {len(rotary)}")
        object.__setattr__(self, "rotary", rotary)

    @property
    def d_head(self) -> int:
        return int(self.w_query.shape[0])

    @property
    def d_value(self) -> int:
        return int(self.w_value.shape[0])

    @property
    def d_model(self) -> int:
        return int(self.w_query.shape[1])


@dataclass(frozen=True, eq=False)
class FeedForward:
    """``x ← x + w_out ReLU(w_in x + b_in) + b_out``."""

    w_in: np.ndarray  # (d_hidden, d_model)
    b_in: np.ndarray  # (d_hidden,)
    w_out: np.ndarray  # (d_model, d_hidden)
    b_out: np.ndarray  # (d_model,)
    description: str = ""

    def __post_init__(self) -> None:
        w_in = np.asarray(self.w_in, dtype=np.float64)
        if w_in.ndim != 2:
            raise ValueError("w_in must be 2-d (d_hidden, d_model)")
        d_hidden, d_model = w_in.shape
        object.__setattr__(self, "w_in", _frozen_array(w_in, (d_hidden, d_model), "w_in"))
        object.__setattr__(self, "b_in", _frozen_array(self.b_in, (d_hidden,), "b_in"))
        object.__setattr__(self, "w_out", _frozen_array(self.w_out, (d_model, d_hidden), "w_out"))
        object.__setattr__(self, "b_out", _frozen_array(self.b_out, (d_model,), "b_out"))

    @property
    def d_hidden(self) -> int:
        return int(self.w_in.shape[0])


@dataclass(frozen=True)
class Layer:
    """One transformer layer: its attention heads (summed into the residual stream), then an optional feed-forward."""

    heads: tuple[AttentionHead, ...] = ()
    feed_forward: FeedForward | None = None

    def __post_init__(self) -> None:
        object.__setattr__(self, "heads", tuple(self.heads))


@dataclass(frozen=True, eq=False)
class Readout:
    """Acceptance at eos: ``x[coordinate] > threshold`` (kind "coordinate") or ``weights·x + bias > 0``."""

    kind: str = "coordinate"
    coordinate: int | None = None
    threshold: float = 0.5
    weights: np.ndarray | None = None
    bias: float = 0.0

    def __post_init__(self) -> None:
        if self.kind not in ("coordinate", "linear"):
            raise ValueError(f"unknown readout kind {self.kind!r}")
        if self.kind == "coordinate" and self.coordinate is None:
            raise ValueError("a coordinate readout needs a coordinate index")
        if self.kind == "linear":
            if self.weights is None:
                raise ValueError("a linear readout needs weights")
            weights = np.array(self.weights, dtype=np.float64, copy=True)
            weights.setflags(write=False)
            object.__setattr__(self, "weights", weights)


@dataclass(frozen=True, eq=False)
class TransformerIR:
    """A complete classifier: embedding, layers, readout, plus descriptive metadata."""

    coordinates: tuple[str, ...]
    vocabulary: tuple[str, ...]  # alphabet symbols then BOS, EOS
    embedding: np.ndarray  # (len(vocabulary), d_model)
    layers: tuple[Layer, ...]
    readout: Readout
    metadata: Mapping[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        coordinates = tuple(self.coordinates)
        vocabulary = tuple(self.vocabulary)
        if len(set(coordinates)) != len(coordinates):
            raise ValueError("coordinate names must be unique")
        if BOS not in vocabulary or EOS not in vocabulary:
            raise ValueError(f"the vocabulary must contain {BOS} and {EOS}")
        if len(set(vocabulary)) != len(vocabulary):
            raise ValueError("vocabulary symbols must be unique")
        d_model = len(coordinates)
        object.__setattr__(self, "coordinates", coordinates)
        object.__setattr__(self, "vocabulary", vocabulary)
        object.__setattr__(self, "embedding", _frozen_array(self.embedding, (len(vocabulary), d_model), "embedding"))
        object.__setattr__(self, "layers", tuple(self.layers))
        object.__setattr__(self, "metadata", dict(self.metadata))
        for index, layer in enumerate(self.layers):
            for head in layer.heads:
                if head.d_model != d_model or head.w_out.shape[0] != d_model:
                    raise ValueError(f"layer {index} head {head.name!r} does not match d_model={d_model}")
            if layer.feed_forward is not None and layer.feed_forward.w_in.shape[1] != d_model:
                raise ValueError(f"layer {index} feed-forward does not match d_model={d_model}")
        if self.readout.kind == "coordinate" and not 0 <= int(self.readout.coordinate) < d_model:
            raise ValueError("readout coordinate out of range")
        if self.readout.kind == "linear" and self.readout.weights.shape != (d_model,):
            raise ValueError(f"readout weights must have shape ({d_model},)")

    @property
    def d_model(self) -> int:
        return len(self.coordinates)

    @property
    def alphabet(self) -> tuple[str, ...]:
        return tuple(symbol for symbol in self.vocabulary if symbol not in (BOS, EOS))

    @property
    def n_heads(self) -> int:
        return sum(len(layer.heads) for layer in self.layers)

    def coordinate_index(self, name: str) -> int:
        try:
            return self.coordinates.index(name)
        except ValueError:
            raise FormalRopeError(f"the model has no residual coordinate named {name!r}") from None

    def read(self, string: str | Sequence[str]) -> tuple[str, ...]:
        """The symbols of an input, read exactly as `formalrope accepts` reads it (a str goes through
        `formal_rope.automata.membership.split_symbols`: one symbol per character, or blank-separated
        and possibly quoted symbols when some symbol is longer than one character); a sequence of
        symbols is taken as is. An unknown symbol raises FormalRopeError naming it."""
        if isinstance(string, str):
            return tuple(split_symbols(string, self.alphabet))
        symbols = tuple(string)
        known = set(self.alphabet)
        unknown = [symbol for symbol in symbols if symbol not in known]
        if unknown:
            raise FormalRopeError(
                f"symbol {unknown[0]!r} of the input {symbols!r} is not in the model's alphabet "
                f"{{{', '.join(self.alphabet)}}}"
            )
        return symbols

    def encode(self, string: str | Sequence[str]) -> np.ndarray:
        """Vocabulary indices of ``bos w1 … wN eos`` (the symbols as `read` gives them)."""
        index = {symbol: position for position, symbol in enumerate(self.vocabulary)}
        return np.array([index[BOS], *(index[s] for s in self.read(string)), index[EOS]], dtype=np.int64)
