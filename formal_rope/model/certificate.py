"""The certified length of a compiled model in the format and mode it actually runs in.

`compile` certifies its attention constructs for the format it compiles for, in emulated
arithmetic: Y heads by a realized scan (N_max^(k)(g, C, F)), P heads by the softmax denominator in
narrow formats. A model run in another format, or natively (torch's own matmul and softmax), does
not inherit those numbers: `Y(a)` compiled for fp32 is certified to 709, but in bf16 its head
picks the wrong key from length 44 on. `model_certificate(model, fmt, mode, up_to)` recomputes
the certificate for (fmt, mode) from the model's own numbers:

* Y heads (query and key read only the constant coordinates, so their scores depend on positions
  alone): the realized scores S[i, j] of the head, computed by the evaluator's own forward pass in
  (fmt, mode), scanned query by query: the target key i−k must lead every other visible key by
  f_large(fmt) (decided exactly, TwoSum); N = first failing query − 2.
* MOD heads: the same realized scores; at i ≡ r (mod m) the bos key must lead the others by
  f_large, elsewhere trail them by f_large. The rotation is periodic, so the queries 2..m+1 (every
  residue) settle every length.
* P heads: the realized losing-key gap g = round(f_large of the compile format) into fmt. With
  g ≥ f_large(fmt) the losing keys get weight exactly 0 and only the softmax denominator (N+1
  ones, `ones_sum_overflow`) limits the length; with g < f_large(fmt) (an fp16 model run in fp32)
  each losing key keeps weight w = e^(−g), and the head stays above its 1/4 threshold while
  N·w ≤ 1 (c ≥ 1 selected keys give c/(c+1+N·w) ≥ 1/3), so N = ⌊1/w⌋.

In the compile format with emulated arithmetic the stored certificate is returned unchanged.
A Y-head scan goes as far as the compiler's (ideal N_max + 2, at most `max_length`) and at least to
`up_to`, the longest input being classified; reaching its end without a failure gives a lower bound.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from typing import Any, Sequence

import numpy as np

from formal_rope.certify import certified_range
from formal_rope.errors import FormalRopeError
from formal_rope.lang.parser import parse_ltl
from formal_rope.model.forward import EmulatedForward, NativeForward, check_mode, check_parameters_fit
from formal_rope.model.ir import BOS, EOS, TransformerIR
from formal_rope.precision import FloatFormat, f_large, ones_sum_overflow, parse_format, round_to_format

DEFAULT_MAX_LENGTH = 4096
# Query rows per block of a realized scan (block × length float64 scores at a time).
_BLOCK_ROWS = 256
# Coordinates that are the same at every non-bos position whatever the symbol (the compiler's
# constant, bos flag and `true`): a head reading only these has position-only scores.
_POSITION_ONLY_INPUTS = ("const:1", "flag:bos", "true")


class BeyondCertifiedLengthWarning(UserWarning):
    """Some verdicts of a compiled model lie beyond its certified length in the format and mode it
    ran in (the Python counterpart of `formalrope run`'s stderr note)."""


@dataclass(frozen=True)
class ConstructCertificate:
    """One attention construct's certified length in a format and mode (None: every length)."""

    construct: str  # Y, MOD, P
    formula: str
    head: str
    certified_length: int | None
    is_lower_bound: bool
    detail: str

    def to_json(self) -> dict[str, Any]:
        return dict(self.__dict__)


@dataclass(frozen=True)
class ModelCertificate:
    """The longest input length on which a compiled model is guaranteed exact in (format, mode).

    `certified_length` None means every length; `available` is False for models without the
    compiler's construct records (hand-built IRs), which carry no certificate at all.
    `recomputed` is False when this is the certificate `compile` stored (its own format, emulated).
    """

    format: str
    mode: str
    certified_length: int | None
    is_lower_bound: bool
    recomputed: bool
    compiled_format: str | None
    available: bool = True
    constructs: tuple[ConstructCertificate, ...] = ()

    def beyond(self, lengths: Sequence[int] | np.ndarray) -> np.ndarray:
        """For each input length N, whether its verdict lies outside the certificate (N > length)."""
        lengths = np.asarray(lengths, dtype=np.int64)
        if not self.available or self.certified_length is None:
            return np.zeros(lengths.shape, dtype=bool)
        return lengths > self.certified_length

    def describe(self) -> str:
        """'43', '>= 4096' or 'unbounded', followed by the format and mode."""
        if self.certified_length is None:
            length = "unbounded"
        else:
            # A soft-margin P head can certify ~1e40 symbols: digits would only hide the magnitude.
            shown = f"{self.certified_length:.3g}" if self.certified_length >= 10**12 else str(self.certified_length)
            length = f"{'>= ' if self.is_lower_bound else ''}{shown}"
        return f"{length} in {self.format} ({self.mode})"

    @property
    def reason(self) -> str:
        """Why the certified length is what it is: the binding construct and its detail."""
        binding = [
            c for c in self.constructs if c.certified_length is not None and c.certified_length == self.certified_length
        ]
        return "; ".join(f"{c.construct} {c.formula}: {c.detail}" for c in binding)

    def to_json(self) -> dict[str, Any]:
        return {
            "format": self.format,
            "mode": self.mode,
            "certified_length": self.certified_length,
            "certified_length_is_lower_bound": self.is_lower_bound,
            "recomputed": self.recomputed,
            "compiled_format": self.compiled_format,
            "available": self.available,
            "constructs": [c.to_json() for c in self.constructs],
        }


def model_certificate(
    model: TransformerIR,
    fmt: FloatFormat | str | None = None,
    mode: str = "emulated",
    up_to: int | None = None,
    max_length: int = DEFAULT_MAX_LENGTH,
) -> ModelCertificate:
    """The certificate of `model` run in `fmt` (default: its compile format) and `mode`.

    `up_to`: the longest input that will be classified; scans need not look further. See the
    module docstring for how each construct is certified.
    """
    metadata = model.metadata
    compiled_format = metadata.get("format")
    fmt = parse_format(fmt if fmt is not None else (compiled_format or "fp32"))
    check_mode(mode, fmt)
    constructs = metadata.get("constructs")
    if not isinstance(constructs, list):
        return ModelCertificate(fmt.name, mode, None, False, False, compiled_format, available=False)
    if fmt.name == compiled_format and mode == "emulated":
        stored = tuple(
            ConstructCertificate(c["construct"], c["formula"], c["head"], c.get("certified_length"),
                                 bool(c.get("certified_is_lower_bound")), c.get("detail", ""))
            for c in constructs if c.get("construct") != "first"
        )
        return ModelCertificate(fmt.name, mode, metadata.get("certified_length"),
                                bool(metadata.get("certified_length_is_lower_bound")), False, compiled_format,
                                constructs=stored)
    if up_to is not None and up_to < 0:
        raise FormalRopeError(f"up_to must be a non-negative length, got {up_to}")
    if max_length < 1:
        raise FormalRopeError(f"max_length must be at least 1, got {max_length}")
    check_parameters_fit(model, fmt)  # an overflowed weight makes every score NaN: refuse, as evaluate does
    heads = {
        head.name: (number, index)
        for number, layer in enumerate(model.layers)
        for index, head in enumerate(layer.heads)
    }
    certified: list[ConstructCertificate] = []
    for construct in constructs:
        kind, formula, name = construct.get("construct"), construct.get("formula", ""), construct.get("head", "")
        if kind == "first" or name not in heads:
            continue  # the uniform first-position head has no margin to lose
        layer, index = heads[name]
        if kind == "Y":
            length, lower, detail = _offset_head(model, layer, index, formula, fmt, mode, up_to, max_length)
        elif kind == "MOD":
            length, lower, detail = _mod_head(model, layer, index, formula, fmt, mode, up_to)
        elif kind == "P":
            length, lower, detail = _past_head(model, layer, index, fmt)
        else:
            continue
        certified.append(ConstructCertificate(kind, formula, name, length, lower, detail))
    bounded = [c for c in certified if c.certified_length is not None]
    if not bounded:
        return ModelCertificate(fmt.name, mode, None, False, True, compiled_format, constructs=tuple(certified))
    shortest = min(c.certified_length for c in bounded)
    lower = all(c.is_lower_bound for c in bounded if c.certified_length == shortest)
    return ModelCertificate(fmt.name, mode, shortest, lower, True, compiled_format, constructs=tuple(certified))


# ------------------------------------------------------------------------------------ helpers
# A construct's text names its subformula; a long one is written over its children, a long child as
# #index (its node in the compiler's DAG, formal_rope.compiler.dag). The certificate reads only the
# head's own k (Y^k) or m, r (MOD), so a #index reads as a placeholder atom.
_NODE_REFERENCE = re.compile(r"#(\d+)")


def construct_subformula(text: str):
    """The subformula a construct record names (its #index children as placeholder atoms)."""
    return parse_ltl(_NODE_REFERENCE.sub(r"'#\1'", text))


def _subformula(text: str):
    return construct_subformula(text)


def at_least(a: np.ndarray, b: np.ndarray, bound: float) -> np.ndarray:
    """Elementwise a − b >= bound for float64 a, b, decided exactly (TwoSum error of fl(a − b));
    False where either is not finite."""
    negated = -b
    with np.errstate(invalid="ignore", over="ignore"):
        difference = a + negated
        virtual = difference - a
        error = (a - (difference - virtual)) + (negated - virtual)
        decided = (difference > bound) | ((difference == bound) & (error >= 0))
    return decided & np.isfinite(a) & np.isfinite(b)


def position_scores(model: TransformerIR, layer: int, head: int, length: int, fmt: FloatFormat, mode: str,
                    rows: slice | None = None) -> np.ndarray:
    """Realized scores S[i, j] (positions 0..length+1) of a head whose query and key read only the
    constant coordinates, computed by the evaluator's forward pass in (fmt, mode); `rows` picks
    the query positions. The embedding stands in for the layer's input: those coordinates are
    never written by any layer."""
    target = model.layers[layer].heads[head]
    allowed = {model.coordinates.index(name) for name in _POSITION_ONLY_INPUTS if name in model.coordinates}
    read = set(np.flatnonzero(np.any(target.w_query != 0, axis=0) | np.any(target.w_key != 0, axis=0)).tolist())
    if not read <= allowed:
        raise ValueError(f"head {target.name} reads symbol-dependent coordinates; its scores are not position-only")
    index = {symbol: position for position, symbol in enumerate(model.vocabulary)}
    filler = index[model.alphabet[0]]
    tokens = np.array([[index[BOS], *([filler] * length), index[EOS]]], dtype=np.int64)
    runner = EmulatedForward(model, fmt) if mode == "emulated" else NativeForward(model, fmt)
    with np.errstate(over="ignore", invalid="ignore"):
        return runner.head_scores(runner.embed(tokens), target, rows)[0]


def _offset_head(model, layer, head, formula, fmt: FloatFormat, mode, up_to, max_length) -> tuple[int, bool, str]:
    node = _subformula(formula)
    k = int(node.k)
    # As far as the compiler scans (just past the ideal range, at most max_length), and at least
    # as far as the longest input, whose verdict must be known to be covered or not.
    freq = float(model.metadata.get("freq", 1.0))
    scale = float(model.metadata.get("y_scale") or 1.0)
    ideal = certified_range(k, freq, scale, fmt, "ideal").n_max
    scan_to = max(min(max_length, max(ideal, k) + 2), up_to or 0)
    margin = f_large(fmt)
    for start in range(k + 1, scan_to + 2, _BLOCK_ROWS):
        stop = min(start + _BLOCK_ROWS, scan_to + 2)
        scores = position_scores(model, layer, head, scan_to, fmt, mode, slice(start, stop))
        queries = np.arange(start, stop)
        targets = queries - k
        keys = np.arange(scores.shape[1])
        competitors = (keys[None, :] < queries[:, None]) & (keys[None, :] != targets[:, None])
        best = np.where(competitors, scores, -np.inf).max(axis=1)
        ok = at_least(scores[np.arange(len(queries)), targets], best, margin)
        if not ok.all():
            query = int(queries[np.flatnonzero(~ok)[0]])
            return query - 2, False, (
                f"realized scan in {fmt.name} ({mode}): at query i = {query} the target i-{k} leads by less than "
                f"f_large = {margin:.6g}"
            )
    return max(scan_to, k - 1), True, f"realized scan in {fmt.name} ({mode}) found no failure up to length {scan_to}"


def _mod_head(model, layer, head, formula, fmt: FloatFormat, mode, up_to) -> tuple[int | None, bool, str]:
    node = _subformula(formula)
    m, r = int(node.m), int(node.r)
    # Query i = 1 sees only bos (the compiler fixes MOD(1) by construction); i = 2..m+1 meet
    # every residue, and the rotation is periodic, so nothing longer can fail differently.
    last_query = m + 1
    if last_query < 2:
        return None, False, "MOD_1 holds everywhere; its head never decides"
    scores = position_scores(model, layer, head, last_query - 1, fmt, mode, slice(2, last_query + 1))
    margin = f_large(fmt)
    for row, query in enumerate(range(2, last_query + 1)):
        bos, others = scores[row, 0], scores[row, 1:query].max()
        wins = query % m == r % m
        ok = at_least(np.array([bos if wins else others]), np.array([others if wins else bos]), margin)[0]
        if not ok:
            return query - 2, False, (
                f"realized scores in {fmt.name} ({mode}): at query i = {query} the bos key "
                f"{'leads' if wins else 'trails'} by less than f_large = {margin:.6g}"
            )
    return None, False, f"realized scores in {fmt.name} ({mode}) separate every residue mod {m} by f_large"


def _past_head(model, layer, head, fmt: FloatFormat) -> tuple[int | None, bool, str]:
    target = model.layers[layer].heads[head]
    gap = -float(round_to_format(float(target.b_key[0]), fmt))  # losing keys score −gap, the others 0
    margin = f_large(fmt)
    lengths: list[tuple[int, str]] = []
    overflow = ones_sum_overflow(fmt)
    if overflow is not None:
        lengths.append((overflow - 2, f"the softmax denominator (up to N+1 ones) overflows {fmt.name} at {overflow}"))
    if not gap >= margin:
        weight = math.exp(-gap) if math.isfinite(gap) else 1.0
        lengths.append((max(0, math.floor(1.0 / weight)),
                        f"losing keys trail by {gap:.6g} < f_large = {margin:.6g}, weight e^-gap = {weight:.3g} each"))
    if not lengths:
        return None, False, f"losing keys trail by {gap:.6g} >= f_large = {margin:.6g}; no denominator overflow"
    length, detail = min(lengths)
    return length, False, detail
