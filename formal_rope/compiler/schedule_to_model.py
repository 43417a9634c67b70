"""Stages 3–4, the scheduled DAG → the model: ``schedule_to_coordinates`` (residual layout) and
``schedule_to_ir`` (the weights, as a TransformerIR, with one ConstructReport per attention construct).

The constructs (P, MOD, Y, the first-position flag, Boolean nodes) are one module each in
``compiler/constructs/``, with their invariant and margins; ``schedule_to_ir`` lays out the
residual stream and the embedding, places each temporal node's construct in its layer (dispatched
on the node kind through ``constructs.HEAD_CONSTRUCTS``) and assembles the layers' feed-forwards.
"""

from __future__ import annotations

import math
import numbers
from dataclasses import dataclass, field

import numpy as np

from formal_rope.compiler.constructs import HEAD_CONSTRUCTS
from formal_rope.compiler.constructs.boolean import boolean_units
from formal_rope.compiler.constructs.common import (
    BOS_FLAG,
    FIRST_RAW,
    ONE,
    TRUE,
    BuildContext,
    ConstructReport,
    Hidden,
    Placement,
)
from formal_rope.compiler.constructs.first import build_first
from formal_rope.compiler.dag import BOOLEAN_KINDS, TEMPORAL_KINDS, FormulaDag
from formal_rope.compiler.schedule import Schedule
from formal_rope.errors import FormalRopeError
from formal_rope.lang.ast import Atom
from formal_rope.lang.printer import format_ltl
from formal_rope.model.ir import BOS, EOS, AttentionHead, FeedForward, Layer, Readout, TransformerIR
from formal_rope.precision import FloatFormat, f_large, parse_format

CERTIFY_MODES = ("realized", "ideal")


@dataclass(frozen=True)
class CompileOptions:
    """The settings of one compilation: format, MOD/Y frequency, Y scale, certification mode and cap.

    Checked on construction (FormalRopeError naming the argument and its option), so a caller can
    refuse bad values before any work; a format name is parsed here, once, into a FloatFormat.
    """

    fmt: FloatFormat = parse_format("fp32")
    freq: float = 1.0
    scale: float | None = None  # Y heads; None = choose for the format
    certify_mode: str = "realized"  # realized where feasible, else ideal
    certify_max_length: int = 4096  # realized scans of the Y heads stop at this length

    def __post_init__(self) -> None:
        fmt = parse_format(self.fmt)
        f_large(fmt)  # raises for formats without a finite f_large
        if not (math.isfinite(self.freq) and self.freq > 0):
            raise FormalRopeError(f"freq (--freq) must be a positive finite angle in radians (got {self.freq})")
        if self.scale is not None and not (math.isfinite(self.scale) and self.scale > 0):
            raise FormalRopeError(f"scale (--scale) must be a positive finite number (got {self.scale})")
        if self.certify_mode not in CERTIFY_MODES:
            raise FormalRopeError(f"unknown certify mode {self.certify_mode!r}; use realized or ideal")
        limit = self.certify_max_length
        if isinstance(limit, bool) or not isinstance(limit, numbers.Integral) or limit < 1:
            raise FormalRopeError(
                f"certify_max_length (--certify-max-length) must be a positive integer, got {limit!r}"
            )
        object.__setattr__(self, "fmt", fmt)
        object.__setattr__(self, "freq", float(self.freq))


@dataclass
class _LayerPlan:
    heads: list[AttentionHead] = field(default_factory=list)
    hidden: list[Hidden] = field(default_factory=list)


# ------------------------------------------------------------------------------- coordinates
def coordinate_name(dag: FormulaDag, index: int) -> str:
    node = dag.nodes[index]
    if node.kind == "atom":
        return format_ltl(Atom(node.symbol))
    return node.text


def schedule_to_coordinates(schedule: Schedule) -> tuple[str, ...]:
    """Residual layout: constant, bos flag, ``true``, one per symbol, one per subformula, raw scratch."""
    dag = schedule.dag
    names = [ONE, BOS_FLAG, TRUE]
    names += [format_ltl(Atom(symbol)) for symbol in dag.alphabet]
    for index, node in enumerate(dag.nodes):
        name = coordinate_name(dag, index)
        if name not in names:
            names.append(name)
    if schedule.needs_first_flag:
        names.append(FIRST_RAW)
    for index, node in enumerate(dag.nodes):
        if node.kind in TEMPORAL_KINDS:
            names.append(f"raw:{node.text}")
    if len(set(names)) != len(names):
        raise FormalRopeError("a symbol name collides with an internal coordinate name; rename the symbol")
    return tuple(names)


# ---------------------------------------------------------------------------------- embedding
def _symbol_truth(dag: FormulaDag, symbol: str | None) -> dict[int, bool]:
    """Truth of every embedding-ready node at a position holding ``symbol`` (None = eos)."""
    values: dict[int, bool] = {}
    for index, node in enumerate(dag.nodes):
        if node.kind == "atom":
            values[index] = node.symbol == symbol
        elif node.kind == "true":
            values[index] = True
        elif node.kind == "false":
            values[index] = False
        elif node.kind in BOOLEAN_KINDS and all(child in values for child in node.children):
            args = [values[child] for child in node.children]
            values[index] = {
                "not": lambda: not args[0],
                "and": lambda: args[0] and args[1],
                "or": lambda: args[0] or args[1],
                "implies": lambda: (not args[0]) or args[1],
                "iff": lambda: args[0] == args[1],
            }[node.kind]()
    return values


def _embedding(schedule: Schedule, vocabulary: tuple[str, ...], context: BuildContext) -> np.ndarray:
    """Constant, bos flag, `true`, symbol one-hots, and every embedding-ready node, per token."""
    dag, index = schedule.dag, context.index
    embedding = np.zeros((len(vocabulary), context.d_model))
    embedding[:, index[ONE]] = 1.0
    for row, symbol in enumerate(vocabulary):
        if symbol == BOS:
            embedding[row, index[BOS_FLAG]] = 1.0
            continue  # every subformula coordinate is 0 at bos
        truth = _symbol_truth(dag, None if symbol == EOS else symbol)
        embedding[row, index[TRUE]] = 1.0
        if symbol != EOS:
            embedding[row, index[format_ltl(Atom(symbol))]] = 1.0
        for node_index in schedule.nodes_in_embedding():
            if truth.get(node_index):
                embedding[row, index[context.node_coord[node_index]]] = 1.0
    return embedding


def _feed_forward(plan: _LayerPlan, index: dict[str, int]) -> FeedForward | None:
    """One layer's feed-forward from its units (None without units)."""
    if not plan.hidden:
        return None
    d_model = len(index)
    w_in = np.zeros((len(plan.hidden), d_model))
    b_in = np.zeros(len(plan.hidden))
    w_out = np.zeros((d_model, len(plan.hidden)))
    for unit, hidden in enumerate(plan.hidden):
        for coord, weight in hidden.inputs.items():
            w_in[unit, index[coord]] += weight
        b_in[unit] = hidden.bias
        for coord, weight in hidden.outputs.items():
            w_out[index[coord], unit] += weight
    return FeedForward(w_in, b_in, w_out, np.zeros(d_model))


# ----------------------------------------------------------------------------------- build IR
def schedule_to_ir(
    schedule: Schedule, options: CompileOptions, y_scale: float | None
) -> tuple[TransformerIR, list[ConstructReport]]:
    """Stage 4: the weights of every head and feed-forward, as a TransformerIR, with one report per construct.

    `y_scale` is the score scale C of the Y heads (None when the formula has none).
    """
    dag = schedule.dag
    coordinates = schedule_to_coordinates(schedule)
    context = BuildContext(
        fmt=options.fmt, large=f_large(options.fmt), index={name: i for i, name in enumerate(coordinates)},
        node_coord=[coordinate_name(dag, i) for i in range(len(dag.nodes))], freq=options.freq, y_scale=y_scale,
    )
    vocabulary = tuple(dag.alphabet) + (BOS, EOS)
    plans = [_LayerPlan() for _ in range(schedule.n_layers)]
    built = []  # (layer, construct) in the order heads and units are laid out
    if schedule.needs_first_flag:
        built.append((1, build_first(context)))
    for node_index, node in enumerate(dag.nodes):
        layer = schedule.head_layer[node_index]
        if layer is not None:
            at = Placement(layer, f"L{layer}.{node.kind}:{node.text}", context.node_coord[node_index],
                           f"raw:{node.text}")
            built.append((layer, HEAD_CONSTRUCTS[node.kind](node, at, context)))
    for layer, construct in built:
        plans[layer - 1].heads.append(construct.head)
        plans[layer - 1].hidden.extend(construct.hidden)
    for node_index, node in enumerate(dag.nodes):
        if node.kind in BOOLEAN_KINDS and schedule.ready[node_index] != 0:
            plan = plans[schedule.ready[node_index] // 2 - 1]
            plan.hidden.extend(boolean_units(dag, node_index, schedule.support[node_index], context.node_coord))

    layers = tuple(Layer(heads=tuple(plan.heads), feed_forward=_feed_forward(plan, context.index)) for plan in plans)
    readout = Readout(kind="coordinate", coordinate=context.index[context.node_coord[dag.root]], threshold=0.5)
    model = TransformerIR(coordinates=coordinates, vocabulary=vocabulary,
                          embedding=_embedding(schedule, vocabulary, context), layers=layers, readout=readout)
    return model, [construct.report for _, construct in built]
