"""Run a TransformerIR on strings, natively in a torch dtype or emulating a floating-point format.

* ``native``: torch arithmetic in fp64/fp32/bf16/fp16 (torch decides summation order and
  accumulation width inside matmul/softmax, as a deployed model would).
* ``emulated``: every elementary operation (product, sum, difference, exp, division, rotation
  entry) is rounded into the format; sums run left to right over the contraction index (input
  coordinates for linear maps, pair coordinates for scores, key positions for the softmax
  denominator and the value average); the softmax is the stable form of the core paper's eq. (2)
  (subtract the row maximum, exponentiate, divide by the sum) followed by ``Σ_j α_ij v_j``.

Strings are grouped by length and each group is run as a batch (vectorized over batch and
positions; Python loops only over contraction indices). Rotary cos/sin come from
``formal_rope.precision.rotary`` so that ``certify --mode realized`` sees the same numbers.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass
from typing import TYPE_CHECKING, Callable, Sequence

import numpy as np

from formal_rope.errors import FormalRopeError
from formal_rope.model.ir import AttentionHead, FeedForward, RotaryPair, TransformerIR

if TYPE_CHECKING:
    from formal_rope.model.certificate import ModelCertificate

MODES = ("emulated", "native")

# Upper bound on batch·T·T score entries held at once (float64: 8 bytes each).
_SCORE_BUDGET = 8_000_000


@dataclass(frozen=True, eq=False)
class EvaluationResult:
    """Acceptances in input order, with the mode and format that produced them.

    `certificate` is the model's certified length *in this format and mode* (recomputed when they
    differ from the compile format with emulated arithmetic; see formal_rope.model.certificate), and
    `beyond_certified_length[i]` flags a verdict on an input longer than it: not guaranteed.
    """

    accepted: np.ndarray  # bool (n_strings,)
    readout: np.ndarray  # float64 (n_strings,): the readout value compared at eos
    mode: str
    format: str
    residuals: tuple[np.ndarray, ...] | None = None  # per string (T, d_model) final residual stream
    lengths: np.ndarray | None = None  # int (n_strings,): input lengths in symbols
    certificate: "ModelCertificate | None" = None
    beyond_certified_length: np.ndarray | None = None  # bool (n_strings,)

    def to_list(self) -> list[bool]:
        return [bool(value) for value in self.accepted]

    @property
    def n_beyond_certified(self) -> int:
        """How many verdicts lie beyond the certified length."""
        return 0 if self.beyond_certified_length is None else int(self.beyond_certified_length.sum())


# ------------------------------------------------------------------------------------ rounding
def _quiet_cast(x, dtype) -> np.ndarray:
    """float64 → dtype with IEEE rounding; overflow to ±inf is the intended result, not a warning."""
    with np.errstate(over="ignore"):
        return np.asarray(x, dtype=np.float64).astype(dtype)


def make_rounder(fmt) -> Callable[[np.ndarray], np.ndarray]:
    """A fast exact float64 → format rounding function (values stay float64).

    fp64 is the identity; fp32/fp16 use numpy's correctly rounded casts; other formats round the
    float64 bit pattern to M stored bits (ties to even) and defer subnormal/overflow elements to
    ``formal_rope.precision.round_to_format``. Cross-checked against it in the tests.
    """
    from formal_rope.precision.formats import parse_format, round_to_format

    fmt = parse_format(fmt)
    if fmt.is_binary64:
        return lambda x: np.asarray(x, dtype=np.float64)
    if (fmt.exponent_bits, fmt.mantissa_bits) == (8, 23):
        return lambda x: _quiet_cast(x, np.float32).astype(np.float64)
    if (fmt.exponent_bits, fmt.mantissa_bits) == (5, 10):
        return lambda x: _quiet_cast(x, np.float16).astype(np.float64)

    drop = 52 - fmt.mantissa_bits
    low_mask = np.int64((1 << drop) - 1)
    half_minus_one = np.int64((1 << (drop - 1)) - 1)
    min_normal, max_finite = fmt.min_normal, fmt.max_finite

    def rounder(x: np.ndarray) -> np.ndarray:
        x = np.ascontiguousarray(x, dtype=np.float64)
        bits = x.view(np.int64)
        lsb = (bits >> drop) & 1
        rounded = ((bits + half_minus_one + lsb) & ~low_mask).view(np.float64)
        magnitude = np.abs(x)
        special = (magnitude < min_normal) & (magnitude != 0)
        if special.any():
            rounded = rounded.copy()
            rounded[special] = round_to_format(x[special], fmt)
        with np.errstate(invalid="ignore"):
            overflow = np.abs(rounded) > max_finite
        if overflow.any():
            rounded = np.where(overflow & np.isfinite(x) | np.isinf(x), np.copysign(np.inf, x), rounded)
        nan = np.isnan(x)
        if nan.any():
            rounded = np.where(nan, x, rounded)
        return rounded

    return rounder


# -------------------------------------------------------------------------------- rotary tables
def rotary_cos_sin(pair: RotaryPair, length: int, fmt, mode: str):
    """Realized (cos, sin) of one rotary pair at positions 0..length-1, as float64 arrays.

    Delegates to formal_rope.precision.rotary, which defines the realized rotation shared with
    certify: RoPE_NP forms the phase g·i in the format, RoPE_P indexes the rounded table T_m.
    """
    from formal_rope.precision import rotary

    positions = np.arange(length, dtype=np.int64)
    arith = _arithmetic(fmt, mode)
    if pair.kind == "angle":
        cos, sin = rotary.realized_angle_rotation(pair.angle, positions, arith)
    elif pair.kind == "periodic":
        cos, sin = rotary.periodic_rotation_table(pair.period, positions, arith)
    else:
        raise ValueError("an unrotated pair has no cos/sin table")
    return _to_numpy(cos), _to_numpy(sin)


def _arithmetic(fmt, mode: str):
    from formal_rope import precision

    if mode == "emulated":
        return precision.Emulated(fmt)
    return precision.Native(_torch_dtype(fmt))


def _to_numpy(values) -> np.ndarray:
    if hasattr(values, "detach"):
        import torch

        return values.detach().to(torch.float64).cpu().numpy()
    return np.asarray(values, dtype=np.float64)


def check_mode(mode: str, fmt=None) -> None:
    """FormalRopeError for an unknown evaluation mode, or for native mode in a format without a
    torch dtype (checked before slow work: compiling, building the verification DFA)."""
    if mode not in MODES:
        raise FormalRopeError(f"unknown evaluation mode {mode!r}; expected one of {', '.join(MODES)}")
    if mode == "native" and fmt is not None:
        _torch_dtype(fmt)


def _torch_dtype(fmt):
    from formal_rope.precision.formats import native_dtype, parse_format

    fmt = parse_format(fmt)
    dtype = native_dtype(fmt)
    if dtype is None:
        raise FormalRopeError(
            f"format {fmt.name} has no native torch dtype; use --mode emulated (native supports fp64, fp32, bf16, fp16)"
        )
    return dtype


# ------------------------------------------------------------------------------ emulated forward
_NUMPY_FORMATS = {(11, 52): np.float64, (8, 23): np.float32, (5, 10): np.float16}


def _float32_bit_rounder(mantissa_bits: int):
    """Round float32 values to ``mantissa_bits`` stored bits, ties to even, on the bit pattern.

    Valid for formats with fp32's exponent range: subnormals share fp32's linear bit layout and a
    carry out of the largest binade produces the bit pattern of inf, as IEEE overflow requires.
    """
    drop = np.uint32(23 - mantissa_bits)
    half_minus_one = np.uint32((1 << (23 - mantissa_bits - 1)) - 1)
    keep = np.uint32(~((1 << (23 - mantissa_bits)) - 1) & 0xFFFFFFFF)
    one = np.uint32(1)

    def rounder(x: np.ndarray) -> np.ndarray:
        x = np.ascontiguousarray(x, dtype=np.float32)
        bits = x.view(np.uint32)
        rounded = ((bits + half_minus_one + ((bits >> drop) & one)) & keep).view(np.float32)
        return np.where(np.isnan(x), x, rounded)

    return rounder


class _FormatOps:
    """Correctly rounded elementwise ops and left-to-right sums in a format.

    fp64/fp32/fp16 run directly in the numpy dtype: IEEE +, −, ×, ÷ in that dtype are correctly
    rounded (numpy's float16 ops go through float32, whose 24 bits make the double rounding
    innocuous: 24 ≥ 2·11 + 2), and ``np.cumsum`` accumulates strictly left to right with a rounding
    per addition. Other formats carry float64 values and round after every operation.
    """

    def __init__(self, fmt) -> None:
        self.fmt = fmt
        self.dtype = _NUMPY_FORMATS.get((fmt.exponent_bits, fmt.mantissa_bits))
        self._round = make_rounder(fmt)
        # Formats with fp32's exponent range and M <= 10 (bf16) ride on float32: one IEEE float32
        # operation then a rounding of the float32 bit pattern is a correct rounding (24 >= 2(M+1)+2).
        self._carrier_round = None
        if self.dtype is None and fmt.exponent_bits == 8 and fmt.mantissa_bits <= 10:
            self._carrier_round = _float32_bit_rounder(fmt.mantissa_bits)

    def cast(self, x) -> np.ndarray:
        if self.dtype is not None:
            return _quiet_cast(x, self.dtype)
        rounded = self._round(np.asarray(x, dtype=np.float64))
        return rounded.astype(np.float32) if self._carrier_round is not None else rounded

    def _fix(self, x: np.ndarray) -> np.ndarray:
        if self.dtype is not None:
            return x
        if self._carrier_round is not None:
            return self._carrier_round(x)
        return self._round(x)

    def mul(self, a, b):
        return self._fix(a * b)

    def add(self, a, b):
        return self._fix(a + b)

    def sub(self, a, b):
        return self._fix(a - b)

    def div(self, a, b):
        return self._fix(a / b)

    def exp(self, x: np.ndarray) -> np.ndarray:
        import torch

        from formal_rope.precision.arith import correctly_rounded

        # exp(x) rounds to 0 exactly when x <= -f_large (f_large is the smallest format value with
        # that property), and those inputs are rounding-boundary cases that would need the slow
        # exact path: settle them (and ±inf) directly, run the correctly rounded exp on the rest.
        from formal_rope.precision.formats import f_large

        x = np.asarray(x)
        values = np.zeros(x.shape, dtype=np.float64)
        values[x == np.inf] = np.inf
        values[x == 0] = 1.0  # the row maxima: exp(0) = 1 exactly
        needed = np.isfinite(x) & (x > -f_large(self.fmt)) & (x != 0)
        if needed.any():
            distinct, inverse = np.unique(x[needed].astype(np.float64), return_inverse=True)
            exact = correctly_rounded("exp", torch.from_numpy(distinct), self.fmt).numpy()
            values[needed] = exact[inverse.reshape(-1)]
        return self.cast(values)

    def causal_key_sum(self, x: np.ndarray) -> np.ndarray:
        """``Σ_j x[:, i, j, ...]`` left to right over keys j, for x that is exactly 0 where j >= i.

        Equals ``sequential_sum(x, axis=2)`` (adding the trailing exact zeros changes nothing);
        the loop path only touches the rows i > j that key j can reach.
        """
        if self.dtype is not None:
            return self.sequential_sum(x, axis=2)
        length = x.shape[2]
        total = x[:, :, 0].copy()
        for j in range(1, length - 1):
            total[:, j + 1 :] = self._fix(total[:, j + 1 :] + x[:, j + 1 :, j])
        return total

    def sequential_sum(self, x: np.ndarray, axis: int) -> np.ndarray:
        """Left-to-right sum along ``axis`` with a rounding after every addition."""
        if self.dtype is not None:
            return np.take(np.cumsum(x, axis=axis, dtype=self.dtype), -1, axis=axis)
        moved = np.moveaxis(x, axis, 0)
        total = moved[0].copy()
        for index in range(1, moved.shape[0]):
            total = self._fix(total + moved[index])
        return total


class _EmulatedForward:
    """Exactly rounded forward pass over a batch of equal-length token sequences."""

    def __init__(self, model: TransformerIR, fmt) -> None:
        from formal_rope.precision.formats import parse_format

        self.model = model
        self.fmt = parse_format(fmt)
        self.ops = _FormatOps(self.fmt)
        self._tables: dict[tuple[RotaryPair, int], tuple[np.ndarray, np.ndarray]] = {}
        self._params: dict[int, np.ndarray] = {}

    def param(self, array: np.ndarray) -> np.ndarray:
        key = id(array)
        if key not in self._params:
            self._params[key] = self.ops.cast(array)
        return self._params[key]

    def linear(self, x: np.ndarray, weight: np.ndarray, bias: np.ndarray | None) -> np.ndarray:
        """Left-to-right ``Σ_c x_c·W[:, c]`` (+ bias last), every product and partial sum rounded."""
        ops = self.ops
        stored = self.param(weight)
        acc: np.ndarray | None = None
        for column in range(stored.shape[1]):
            w = stored[:, column]
            x_c = x[..., column : column + 1]
            # A zero weight times a finite input adds an exact zero: skipping it changes nothing.
            if not w.any() and np.isfinite(x_c).all():
                continue
            term = ops.mul(x_c, w)
            acc = term if acc is None else ops.add(acc, term)
        if acc is None:
            acc = ops.cast(np.zeros(x.shape[:-1] + (stored.shape[0],)))
        if bias is not None:
            acc = ops.add(acc, self.param(bias))
        return acc

    def rotate(self, vectors: np.ndarray, head: AttentionHead) -> np.ndarray:
        ops = self.ops
        length = vectors.shape[1]
        out = vectors.copy()
        for index, pair in enumerate(head.rotary):
            if pair.kind == "none":
                continue
            key = (pair, length)
            if key not in self._tables:
                cos, sin = rotary_cos_sin(pair, length, self.fmt, "emulated")
                self._tables[key] = (ops.cast(cos)[None, :], ops.cast(sin)[None, :])
            cos, sin = self._tables[key]
            a, b = vectors[..., 2 * index], vectors[..., 2 * index + 1]
            out[..., 2 * index] = ops.sub(ops.mul(a, cos), ops.mul(b, sin))
            out[..., 2 * index + 1] = ops.add(ops.mul(a, sin), ops.mul(b, cos))
        return out

    def scores(self, x: np.ndarray, head: AttentionHead, rows: slice | None = None) -> np.ndarray:
        """Realized scores S[b, i, j] = score_scale·q_i·k_j (before masking); `rows` picks the
        query positions i (all by default), so a long scan can be done in blocks of rows."""
        ops = self.ops
        batch = x.shape[0]
        query = self.rotate(self.linear(x, head.w_query, head.b_query), head)
        key = self.rotate(self.linear(x, head.w_key, head.b_key), head)
        if rows is not None:
            query = query[:, rows]
        length = query.shape[1]
        scores = None
        for d in range(head.d_head):
            q_d, k_d = query[:, :, None, d], key[:, None, :, d]
            term = ops.mul(q_d, k_d)
            scores = term if scores is None else ops.add(scores, term)
        if scores is None:
            scores = ops.cast(np.zeros((batch, length, key.shape[1])))
        if head.score_scale != 1.0:
            scores = ops.mul(scores, ops.cast(head.score_scale))
        return scores

    def attention(self, x: np.ndarray, head: AttentionHead) -> np.ndarray:
        ops = self.ops
        batch, length, _ = x.shape
        scores = self.scores(x, head)
        value = self.linear(x, head.w_value, head.b_value)
        visible = np.tri(length, length, -1, dtype=bool)[None]  # key j < query i
        masked = np.where(visible, scores, -np.inf)
        row_max = masked.max(axis=2, keepdims=True)
        row_max = np.where(np.isfinite(row_max), row_max, 0).astype(scores.dtype)
        with np.errstate(invalid="ignore", over="ignore"):
            shifted = np.where(visible, ops.sub(scores, row_max), -np.inf)
        exps = ops.exp(shifted)
        denominator = ops.causal_key_sum(exps)
        denominator[:, 0] = 1  # bos sees no key; its output is defined as zero below
        weights = ops.div(exps, denominator[:, :, None])
        output = ops.causal_key_sum(ops.mul(weights[:, :, :, None], value[:, None, :, :]))
        output[:, 0, :] = 0
        return output

    def feed_forward(self, x: np.ndarray, block: FeedForward) -> np.ndarray:
        hidden = np.maximum(self.linear(x, block.w_in, block.b_in), 0)
        return self.linear(hidden, block.w_out, block.b_out)

    def run(self, tokens: np.ndarray, stop_before: int | None = None) -> np.ndarray:
        ops = self.ops
        x = self.param(self.model.embedding)[tokens]
        for number, layer in enumerate(self.model.layers):
            if number == stop_before:
                return x
            if layer.heads:
                total = None
                for head in layer.heads:
                    projected = self.linear(self.attention(x, head), head.w_out, None)
                    total = projected if total is None else ops.add(total, projected)
                x = ops.add(x, total)
            if layer.feed_forward is not None:
                x = ops.add(x, self.feed_forward(x, layer.feed_forward))
        return x.astype(np.float64)


# -------------------------------------------------------------------------------- native forward
class _NativeForward:
    def __init__(self, model: TransformerIR, fmt) -> None:
        import torch

        from formal_rope.precision.formats import parse_format

        self.torch = torch
        self.model = model
        self.fmt = parse_format(fmt)
        self.dtype = _torch_dtype(self.fmt)
        self._tables: dict[tuple[RotaryPair, int], tuple] = {}

    def tensor(self, array: np.ndarray):
        return self.torch.as_tensor(np.array(array, dtype=np.float64)).to(self.dtype)

    def rotate(self, vectors, head: AttentionHead):
        length = vectors.shape[1]
        out = vectors.clone()
        for index, pair in enumerate(head.rotary):
            if pair.kind == "none":
                continue
            key = (pair, length)
            if key not in self._tables:
                cos, sin = rotary_cos_sin(pair, length, self.fmt, "native")
                self._tables[key] = (self.tensor(cos)[None], self.tensor(sin)[None])
            cos, sin = self._tables[key]
            a, b = vectors[..., 2 * index], vectors[..., 2 * index + 1]
            out[..., 2 * index] = cos * a - sin * b
            out[..., 2 * index + 1] = sin * a + cos * b
        return out

    def scores(self, x, head: AttentionHead, rows: slice | None = None):
        """Scores S[b, i, j] = score_scale·q_i·k_j in the dtype (before masking), query rows `rows`."""
        query = self.rotate(x @ self.tensor(head.w_query).T + self.tensor(head.b_query), head)
        key = self.rotate(x @ self.tensor(head.w_key).T + self.tensor(head.b_key), head)
        if rows is not None:
            query = query[:, rows]
        scores = query @ key.transpose(1, 2)
        if head.score_scale != 1.0:
            scores = scores * self.tensor(np.array(head.score_scale))
        return scores

    def attention(self, x, head: AttentionHead):
        torch = self.torch
        length = x.shape[1]
        value = x @ self.tensor(head.w_value).T + self.tensor(head.b_value)
        scores = self.scores(x, head)
        visible = torch.ones(length, length, dtype=torch.bool).tril(-1)
        scores = scores.masked_fill(~visible, float("-inf"))
        weights = torch.softmax(scores[:, 1:, :], dim=-1)
        rows = weights @ value
        return torch.cat((torch.zeros_like(rows[:, :1, :]), rows), dim=1)

    def run(self, tokens: np.ndarray) -> np.ndarray:
        torch = self.torch
        with torch.no_grad():
            x = self.tensor(self.model.embedding)[torch.as_tensor(tokens)]
            for layer in self.model.layers:
                if layer.heads:
                    total = None
                    for head in layer.heads:
                        projected = self.attention(x, head) @ self.tensor(head.w_out).T
                        total = projected if total is None else total + projected
                    x = x + total
                block = layer.feed_forward
                if block is not None:
                    hidden = torch.relu(x @ self.tensor(block.w_in).T + self.tensor(block.b_in))
                    x = x + (hidden @ self.tensor(block.w_out).T + self.tensor(block.b_out))
            return x.to(torch.float64).numpy()


# ------------------------------------------------------------------------------------ interface
def _named_parameters(model: TransformerIR):
    yield "embedding", model.embedding
    for number, layer in enumerate(model.layers, start=1):
        for head in layer.heads:
            for name in ("w_query", "b_query", "w_key", "b_key", "w_value", "b_value", "w_out"):
                yield f"{head.name}.{name}", getattr(head, name)
            yield f"{head.name}.score_scale", np.asarray(head.score_scale)
        if layer.feed_forward is not None:
            for name in ("w_in", "b_in", "w_out", "b_out"):
                yield f"layer {number} FFN {name}", getattr(layer.feed_forward, name)
    if model.readout.weights is not None:
        yield "readout weights", model.readout.weights


def check_parameters_fit(model: TransformerIR, fmt) -> None:
    """FormalRopeError when a stored parameter overflows ``fmt``.

    An overflowed weight becomes ±inf, and inf·0 = NaN then spreads through every later sum, so the
    model would print NaN traces and read "rejected" everywhere: a format problem, not a verdict.
    This happens when a model compiled for a wide format (a Y scale 2²² for fp32) runs in a narrow
    one (fp16, max 65504).
    """
    from formal_rope.precision.formats import parse_format

    fmt = parse_format(fmt)
    if fmt.is_binary64:
        return
    rounder = make_rounder(fmt)
    for name, values in _named_parameters(model):
        magnitude = float(np.max(np.abs(values), initial=0.0))
        if np.isfinite(magnitude) and np.isinf(rounder(np.asarray([magnitude]))[0]):
            compiled_for = model.metadata.get("format")
            if compiled_for and compiled_for != fmt.name:
                hint = f"; the model was compiled for {compiled_for}, compile it again with --format {fmt.name}"
            else:  # compiled for this very format: the construction itself needs a wider one
                hint = (f"; the construction needs values up to {magnitude:g}, which {fmt.name} cannot hold: use a "
                        "format with a wider exponent range")
            hint = hint if compiled_for else ""
            raise FormalRopeError(
                f"the model's parameters do not fit in {fmt.describe()}: {name} holds {magnitude:g}, which "
                f"overflows to inf (max finite {fmt.max_finite:g}), so every score it touches would be NaN{hint}"
            )


def attention_scores(model: TransformerIR, string, layer: int, head: int, fmt="fp32") -> np.ndarray:
    """The emulated, unmasked score matrix S[i, j] of head ``head`` in layer ``layer`` (0-based) on
    ``string`` (positions bos..eos), exactly as the evaluator computes it in ``fmt``."""
    from formal_rope.precision.formats import parse_format

    runner = _EmulatedForward(model, parse_format(fmt))
    tokens = model.encode(string)[None, :]
    x = runner.run(tokens, stop_before=layer)
    return np.asarray(runner.scores(runner.ops.cast(x), model.layers[layer].heads[head])[0], dtype=np.float64)


def readout_values(model: TransformerIR, final_eos: np.ndarray) -> np.ndarray:
    """The number compared at eos: a coordinate, or ``w·x + b`` for a linear readout."""
    readout = model.readout
    if readout.kind == "coordinate":
        return final_eos[:, int(readout.coordinate)]
    return final_eos @ readout.weights + readout.bias


def accepts_from_readout(model: TransformerIR, values: np.ndarray) -> np.ndarray:
    readout = model.readout
    threshold = readout.threshold if readout.kind == "coordinate" else 0.0
    return values > threshold


def evaluate(
    model: TransformerIR,
    strings: Sequence[str | tuple[str, ...]],
    *,
    fmt="fp32",
    mode: str = "emulated",
    trace: bool = False,
    on_progress: Callable[[int], None] | None = None,
) -> EvaluationResult:
    """Classify ``strings`` with ``model`` in format ``fmt``; results keep the input order.

    The result carries the model's certificate in (fmt, mode) and flags every verdict on an input
    longer than its certified length (``beyond_certified_length``). ``trace=True`` also returns each string's final residual stream (positions bos..eos).
    ``on_progress(k)`` is called after every batch with the number of strings it finished.
    """
    from formal_rope.precision.formats import parse_format

    from formal_rope.model.certificate import model_certificate

    fmt = parse_format(fmt)
    check_mode(mode)
    check_parameters_fit(model, fmt)
    encoded = [model.encode(string) for string in strings]
    lengths = np.array([len(tokens) - 2 for tokens in encoded], dtype=np.int64)
    certificate = model_certificate(model, fmt, mode, up_to=int(lengths.max(initial=0)))
    runner = _EmulatedForward(model, fmt) if mode == "emulated" else _NativeForward(model, fmt)
    by_length: dict[int, list[int]] = defaultdict(list)
    for index, tokens in enumerate(encoded):
        by_length[len(tokens)].append(index)
    values = np.zeros(len(encoded))
    residuals: list[np.ndarray | None] = [None] * len(encoded)
    for length in sorted(by_length):
        indices = by_length[length]
        chunk = max(1, _SCORE_BUDGET // (length * length))
        for start in range(0, len(indices), chunk):
            batch_indices = indices[start : start + chunk]
            tokens = np.stack([encoded[i] for i in batch_indices])
            # Overflow to ±inf and the NaNs it breeds are the format's IEEE semantics, not warnings.
            with np.errstate(over="ignore", invalid="ignore", divide="ignore"):
                final = runner.run(tokens)
            values[batch_indices] = readout_values(model, final[:, -1, :])
            if trace:
                for row, index in enumerate(batch_indices):
                    residuals[index] = final[row]
            if on_progress is not None:
                on_progress(len(batch_indices))
    return EvaluationResult(
        accepted=accepts_from_readout(model, values),
        readout=values,
        mode=mode,
        format=fmt.name,
        residuals=tuple(residuals) if trace else None,  # type: ignore[arg-type]
        lengths=lengths,
        certificate=certificate,
        beyond_certified_length=certificate.beyond(lengths),
    )
