"""Stages 3–4, the scheduled DAG → the model: ``schedule_to_coordinates`` (residual layout) and
``schedule_to_ir`` (the weights, as a TransformerIR, with one ConstructReport per attention construct).

Invariant kept by every construct: a subformula coordinate is exactly 0 or 1 at every string
position and at eos, and exactly 0 at bos (Boolean blocks are gated by the ``true`` coordinate,
which is 1 everywhere except at bos). Attention heads therefore never need to mask bos out of
their values.

Constructs (margins are reported in ``ConstructReport``):

* Boolean node over support s₁…s_n: minterm expansion ``Σ_a ReLU(Σ_i (2a_i−1)s_i − |a| + true)``
  over the satisfying assignments a (or ``true − Σ`` over the falsifying ones, whichever is
  shorter). Exact on 0/1 inputs with small-integer weights.
* P(ψ) (Li & Cotterell): query bias 1, key ``f_large·(ψ_j + bos_j − 1)``: score 0 at bos and where
  ψ holds, −f_large elsewhere; value ψ (0 at bos). bos always ties at the maximum, so with c ψ-positions
  the output is ``c/(c+1)`` — 0 when c = 0 (all weight on bos, whose value is 0) and ≥ 1/2 otherwise,
  whatever the length — instead of an average that must be resolved from a vanishing fraction.
  The feed-forward snaps it back to 0/1: ``true − ReLU(true − 4·raw)``.
* MODₘʳ (appendix C.3): pair 0 periodic T_m(i mod m) against the bos key ``(C, 0)``, query bias
  ``(cos 2πr/m, −sin 2πr/m)``; pair 1 unrotated, query ``(1, 0)``, key ``C·b_m`` at non-bos
  positions; value = bos flag. C ≥ 2·f_large/δ_m, raised until the *realized* margin in the format
  is ≥ f_large. The first position (only bos visible, so the head always reads 1 there) is
  flagged by a uniform head (output 1/i, value = bos flag) and MODₘʳ(1) is a compile-time constant:
  ``true − ReLU(true − 2·raw) − [1 ≢ r]·ReLU(2·first − 1)``.
* Yᵏψ (appendix D): one RoPE_NP pair with frequency g, query bias C(cos kg, −sin kg) (rounded
  once, ``offset_query_bias``), key bias (1, 0), value ψ; snapped and gated by Pᵏ⊤ (k ≥ 2) or by
  ``true`` (k = 1: at i = 1 only bos, value 0, is visible): ``gate − ReLU(gate − 2·raw)``.
"""

from __future__ import annotations

import math
import numbers
from dataclasses import dataclass, field
from itertools import product
from typing import Any

import numpy as np

from formal_rope import precision
from formal_rope.compiler.dag import BOOLEAN_KINDS, TEMPORAL_KINDS, FormulaDag
from formal_rope.compiler.schedule import Schedule
from formal_rope.errors import FormalRopeError
from formal_rope.lang.ast import Atom
from formal_rope.lang.printer import format_ltl
from formal_rope.model.ir import BOS, EOS, AttentionHead, FeedForward, Layer, Readout, RotaryPair, TransformerIR
from formal_rope.precision import (
    FloatFormat,
    f_large,
    make_rounder,
    ones_sum_overflow,
    parse_format,
    round_mpf_to_format,
    round_to_format,
)

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
class _Hidden:
    inputs: dict[str, float]
    bias: float
    outputs: dict[str, float]


@dataclass
class _LayerPlan:
    heads: list[AttentionHead] = field(default_factory=list)
    hidden: list[_Hidden] = field(default_factory=list)


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


# ---------------------------------------------------------------------------------- helpers
def _boolean_truth(
    dag: FormulaDag, index: int, support: tuple[int, ...], assignment: dict[int, np.ndarray]
) -> np.ndarray:
    """Truth table of node ``index`` as a function of its support variables (vectorized)."""
    memo = dict(assignment)

    def value(current: int) -> np.ndarray:
        if current in memo:
            return memo[current]
        node = dag.nodes[current]
        args = [value(child) for child in node.children]
        if node.kind == "not":
            result = ~args[0]
        elif node.kind == "and":
            result = args[0] & args[1]
        elif node.kind == "or":
            result = args[0] | args[1]
        elif node.kind == "implies":
            result = ~args[0] | args[1]
        elif node.kind == "iff":
            result = args[0] == args[1]
        else:
            raise AssertionError(f"{node.kind} reached outside the support")
        memo[current] = result
        return result

    return value(index)


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


def _round(value: float, fmt: FloatFormat) -> float:
    return float(round_to_format(value, fmt))


def _round_up(value: float, fmt: FloatFormat) -> float:
    return round_mpf_to_format(value, fmt, direction="up")  # a float converts to mpmath exactly


def _head(name: str, d_model: int, index: dict[str, int], *, query_bias, key_weights, key_bias, value_coord: str,
          out_coord: str, rotary: tuple[RotaryPair, ...], description: str) -> AttentionHead:
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


# -------------------------------------------------------------------------------- MOD scale
def mod_parameters(m: int, r: int, fmt: FloatFormat) -> dict[str, float]:
    """Stored parameters of the MODₘʳ head in ``fmt`` and its realized margin (winner − loser ≥ …).

    C starts at 2·f_large/δ_m (rounded up into F) and grows by 1/8 until the realized scores of all
    m residues separate bos from the baseline by at least f_large; overflow is an error.
    """
    R = make_rounder(fmt)
    margin_needed = f_large(fmt)
    delta = 1.0 - math.cos(2.0 * math.pi / m)
    cos_table, sin_table = precision.periodic_rotation_entries(m, fmt)  # (precision's rotary names load torch)
    q0, q1 = float(cos_table[r]), -float(sin_table[r])
    scale = _round_up(2.0 * margin_needed / delta, fmt)
    residues = np.arange(m)
    for _ in range(64):
        if not math.isfinite(scale):
            break
        baseline = _round(scale * (1.0 - delta / 2.0), fmt)
        # The evaluator's op order: rotate the query bias, then q·k with k = (C, 0) at bos.
        c, s = cos_table[residues], sin_table[residues]
        rotated0 = R(R(c * q0) - R(s * q1))
        bos_scores = R(rotated0 * scale)
        winners = (residues - r) % m == 0  # residue of i; bos must win exactly when i ≡ r
        gaps = np.where(winners, bos_scores - baseline, baseline - bos_scores)
        margin = float(gaps.min())
        if margin >= margin_needed and math.isfinite(baseline):
            return {"scale": scale, "baseline": baseline, "q0": q0, "q1": q1, "margin": margin, "delta": delta}
        scale = _round_up(scale * 1.125, fmt)
    raise FormalRopeError(
        f"MOD_{m}^{r}: no scale C in {fmt.name} gives a realized margin >= f_large = {margin_needed:g} "
        f"(needs C >= {2 * margin_needed / delta:.6g} before rounding; the format overflows or its "
        "rotation table is too coarse for this modulus)"
    )


# ----------------------------------------------------------------------------------- build IR
def schedule_to_ir(
    schedule: Schedule, options: CompileOptions, y_scale: float | None
) -> tuple[TransformerIR, list[ConstructReport]]:
    """Stage 4: the weights of every head and feed-forward, as a TransformerIR, with one report per construct.

    `y_scale` is the score scale C of the Y heads (None when the formula has none).
    """
    fmt = options.fmt
    large = f_large(fmt)
    dag = schedule.dag
    coordinates = schedule_to_coordinates(schedule)
    index = {name: position for position, name in enumerate(coordinates)}
    d_model = len(coordinates)
    node_coord = [coordinate_name(dag, i) for i in range(len(dag.nodes))]

    # Embedding: constant, bos flag, `true`, symbol one-hots, and every embedding-ready node.
    vocabulary = tuple(dag.alphabet) + (BOS, EOS)
    embedding = np.zeros((len(vocabulary), d_model))
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
                embedding[row, index[node_coord[node_index]]] = 1.0

    plans = [_LayerPlan() for _ in range(schedule.n_layers)]
    reports: list[ConstructReport] = []
    if schedule.needs_first_flag:
        plans[0].heads.append(
            _head("first", d_model, index, query_bias=(0.0, 0.0), key_weights={}, key_bias=(0.0, 0.0),
                  value_coord=BOS_FLAG, out_coord=FIRST_RAW, rotary=(RotaryPair("none"),),
                  description="uniform over j < i, value = bos flag: output 1/i (1 only at i = 1)")
        )
        reports.append(ConstructReport("first", "i = 1", 1, "first", None, None, large,
                                       "uniform attention; output 1/i, thresholded at 1/2"))

    for node_index, node in enumerate(dag.nodes):
        layer = schedule.head_layer[node_index]
        if layer is None:
            continue
        plan = plans[layer - 1]
        out = node_coord[node_index]
        raw = f"raw:{node.text}"
        name = f"L{layer}.{node.kind}:{node.text}"
        if node.kind == "past":
            child = node_coord[node.children[0]]
            plan.heads.append(
                _head(name, d_model, index, query_bias=(1.0, 0.0),
                      key_weights={(0, child): large, (0, BOS_FLAG): large}, key_bias=(-large, 0.0),
                      value_coord=child, out_coord=raw, rotary=(RotaryPair("none"),),
                      description=f"P: score 0 at bos and where {child} holds, -f_large elsewhere; value {child}")
            )
            plan.hidden.append(_Hidden({TRUE: 1.0}, 0.0, {out: 1.0}))
            plan.hidden.append(_Hidden({TRUE: 1.0, raw: -4.0}, 0.0, {out: -1.0}))
            overflow = ones_sum_overflow(fmt)
            if overflow is None:
                reports.append(ConstructReport("P", node.text, layer, name, large, large, large,
                                               "scores 0 / -f_large; output c/(c+1) snapped at 1/4"))
            else:
                # bos and up to N ψ-positions tie at score 0: their count N+1 must stay below `overflow`.
                reports.append(ConstructReport(
                    "P", node.text, layer, name, large, large, large,
                    f"scores 0 / -f_large; output c/(c+1) snapped at 1/4; the softmax denominator (up to N+1 "
                    f"ones) overflows {fmt.name} at {overflow}, so exact up to N = {overflow - 2}",
                    certified_length=overflow - 2, certified_mode="exact", certified_ideal=overflow - 2,
                ))
        elif node.kind == "mod":
            m, r = node.modulus, node.residue
            params = mod_parameters(m, r, fmt)
            plan.heads.append(
                _head(
                    name, d_model, index, query_bias=(params["q0"], params["q1"], 1.0, 0.0),
                    key_weights={(0, BOS_FLAG): params["scale"], (2, TRUE): params["baseline"]},
                    key_bias=(0.0, 0.0, 0.0, 0.0), value_coord=BOS_FLAG, out_coord=raw,
                    rotary=(RotaryPair("periodic", period=m), RotaryPair("none")),
                    description=f"MOD: T_{m}(i mod {m}) vs bos key C={params['scale']:g}, "
                    f"baseline C·b_m={params['baseline']:g}",
                )
            )
            first_value = 1.0 if (1 - r) % m == 0 else 0.0
            plan.hidden.append(_Hidden({TRUE: 1.0}, 0.0, {out: 1.0}))
            plan.hidden.append(_Hidden({TRUE: 1.0, raw: -2.0}, 0.0, {out: -1.0}))
            if first_value == 0.0:
                plan.hidden.append(_Hidden({FIRST_RAW: 2.0}, -1.0, {out: -1.0}))
            reports.append(ConstructReport(
                "MOD", node.text, layer, name, params["scale"], params["margin"], large,
                f"delta_m={params['delta']:.6g}, C >= 2 f_large/delta_m = {2 * large / params['delta']:.6g}; "
                f"MOD_{m}^{r}(1) = {bool(first_value)} by construction",
            ))
        elif node.kind == "yesterday":
            child = node_coord[node.children[0]]
            gate = TRUE if node.gate is None else node_coord[node.gate]
            k = int(node.offset)
            if y_scale is None:
                raise AssertionError("a Y head needs a scale")
            bias0, bias1 = precision.offset_query_bias(k, options.freq, y_scale, fmt)
            plan.heads.append(
                _head(name, d_model, index, query_bias=(bias0, bias1), key_weights={}, key_bias=(1.0, 0.0),
                      value_coord=child, out_coord=raw, rotary=(RotaryPair("angle", angle=float(options.freq)),),
                      description=f"Y^{k}: RoPE_NP g={options.freq:g}, C={y_scale:g}, target i-{k}")
            )
            plan.hidden.append(_Hidden({gate: 1.0}, 0.0, {out: 1.0}))
            plan.hidden.append(_Hidden({gate: 1.0, raw: -2.0}, 0.0, {out: -1.0}))
            reports.append(ConstructReport("Y", node.text, layer, name, y_scale, None, large,
                                           f"offset k={k}, gate {gate}"))

    for node_index, node in enumerate(dag.nodes):
        if node.kind not in BOOLEAN_KINDS or schedule.ready[node_index] == 0:
            continue
        support = schedule.support[node_index]
        plan = plans[schedule.ready[node_index] // 2 - 1]
        plan.hidden.extend(_boolean_units(dag, node_index, support, node_coord))

    layers = []
    for plan in plans:
        feed_forward = None
        if plan.hidden:
            w_in = np.zeros((len(plan.hidden), d_model))
            b_in = np.zeros(len(plan.hidden))
            w_out = np.zeros((d_model, len(plan.hidden)))
            for unit, hidden in enumerate(plan.hidden):
                for coord, weight in hidden.inputs.items():
                    w_in[unit, index[coord]] += weight
                b_in[unit] = hidden.bias
                for coord, weight in hidden.outputs.items():
                    w_out[index[coord], unit] += weight
            feed_forward = FeedForward(w_in, b_in, w_out, np.zeros(d_model))
        layers.append(Layer(heads=tuple(plan.heads), feed_forward=feed_forward))

    readout = Readout(kind="coordinate", coordinate=index[node_coord[dag.root]], threshold=0.5)
    model = TransformerIR(coordinates=coordinates, vocabulary=vocabulary, embedding=embedding, layers=tuple(layers),
                          readout=readout)
    return model, reports


def _boolean_units(dag: FormulaDag, node_index: int, support: tuple[int, ...], node_coord: list[str]) -> list[_Hidden]:
    n = len(support)
    assignments = np.array(list(product((False, True), repeat=n)), dtype=bool).reshape(-1, n)
    variables = {s: assignments[:, position] for position, s in enumerate(support)}
    truth = _boolean_truth(dag, node_index, support, variables)
    out = node_coord[node_index]
    use_true_rows = int(truth.sum()) <= len(truth) - int(truth.sum())
    rows = assignments[truth] if use_true_rows else assignments[~truth]
    units = []
    if not use_true_rows:
        units.append(_Hidden({TRUE: 1.0}, 0.0, {out: 1.0}))
    for row in rows:
        inputs = {TRUE: 1.0}
        for position, s in enumerate(support):
            coord = node_coord[s]
            inputs[coord] = inputs.get(coord, 0.0) + (1.0 if row[position] else -1.0)
        units.append(_Hidden(inputs, -float(row.sum()), {out: 1.0 if use_true_rows else -1.0}))
    return units
