"""The forward passes of a TransformerIR, and the checks made before running one.

* ``EmulatedForward``: every elementary operation (product, sum, difference, exp, division,
  rotation entry) is rounded into the format (`precision.FormatOps`); sums run left to right over
  the contraction index (input coordinates for linear maps, pair coordinates for scores, key
  positions for the softmax denominator and the value average); the softmax is the stable form of
  the core paper's eq. (2) (subtract the row maximum, exponentiate, divide by the sum) followed by
  ``Σ_j α_ij v_j``.
* ``NativeForward``: torch arithmetic in the format's dtype (torch decides summation order and
  accumulation width inside matmul/softmax, as a deployed model would).

Both run a batch of equal-length token sequences (vectorized over batch and positions; Python
loops only over contraction indices) and expose ``scores`` for one head, so that the evaluator
(`model.evaluate`) and the certificate (`model.certificate`) compute the very same numbers. Rotary
cos/sin come from ``formal_rope.precision.rotary``, which ``certify --mode realized`` uses too.
"""

from __future__ import annotations

import numpy as np

from formal_rope import precision
from formal_rope.errors import FormalRopeError
from formal_rope.model.ir import AttentionHead, FeedForward, RotaryPair, TransformerIR
from formal_rope.precision import FloatFormat, FormatOps, make_rounder, native_format_names, native_row, round_once

MODES = ("emulated", "native")


# ------------------------------------------------------------------------------------- checks
def check_mode(mode: str, fmt: FloatFormat | None = None) -> None:
    """FormalRopeError for an unknown evaluation mode, or for native mode in a format without a
    torch dtype (checked before slow work: compiling, building the verification DFA)."""
    if mode not in MODES:
        raise FormalRopeError(f"unknown evaluation mode {mode!r}; expected one of {', '.join(MODES)}")
    if mode == "native" and fmt is not None:
        native_torch_dtype(fmt)


def native_torch_dtype(fmt: FloatFormat):
    """The torch dtype of native mode in `fmt`; FormalRopeError for formats without one."""
    row = native_row(fmt)
    if row is None:
        raise FormalRopeError(
            f"format {fmt.name} has no native torch dtype; use mode emulated (--mode / mode=; native supports "
            f"{', '.join(native_format_names())})"
        )
    return row.torch_dtype()


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


def check_parameters_fit(model: TransformerIR, fmt: FloatFormat) -> None:
    """FormalRopeError when a stored parameter overflows ``fmt``.

    An overflowed weight becomes ±inf, and inf·0 = NaN then spreads through every later sum, so the
    model would print NaN traces and read "rejected" everywhere: a format problem, not a verdict.
    This happens when a model compiled for a wide format (a Y scale 2²² for fp32) runs in a narrow
    one (fp16, max 65504).
    """
    if fmt.is_binary64:
        return
    rounder = make_rounder(fmt)
    for name, values in _named_parameters(model):
        magnitude = float(np.max(np.abs(values), initial=0.0))
        if np.isfinite(magnitude) and np.isinf(rounder(np.asarray([magnitude]))[0]):
            compiled_for = model.metadata.get("format")
            if compiled_for and compiled_for != fmt.name:
                hint = f"; the model was compiled for {compiled_for}, compile it again in {fmt.name} (--format / fmt=)"
            else:  # compiled for this very format: the construction itself needs a wider one
                hint = (f"; the construction needs values up to {magnitude:g}, which {fmt.name} cannot hold: use a "
                        "format with a wider exponent range")
            hint = hint if compiled_for else ""
            raise FormalRopeError(
                f"the model's parameters do not fit in {fmt.describe()}: {name} holds {magnitude:g}, which "
                f"overflows to inf (max finite {fmt.max_finite:g}), so every score it touches would be NaN{hint}"
            )


# -------------------------------------------------------------------------------- rotary tables
def rotary_cos_sin(pair: RotaryPair, length: int, fmt: FloatFormat, mode: str):
    """Realized (cos, sin) of one rotary pair at positions 0..length-1, as float64 arrays.

    Delegates to formal_rope.precision.rotary, which defines the realized rotation shared with
    certify: RoPE_NP forms the phase g·i in the format, RoPE_P indexes the rounded table T_m.
    (`precision`'s rotary names and arithmetics load torch on first use.)
    """
    positions = np.arange(length, dtype=np.int64)
    arith = precision.Emulated(fmt) if mode == "emulated" else precision.Native(native_torch_dtype(fmt))
    if pair.kind == "angle":
        cos, sin = precision.realized_angle_rotation(pair.angle, positions, arith)
    elif pair.kind == "periodic":
        cos, sin = precision.periodic_rotation_table(pair.period, positions, arith)
    else:
        raise ValueError("an unrotated pair has no cos/sin table")
    return _to_numpy(cos), _to_numpy(sin)


def _to_numpy(values) -> np.ndarray:
    if hasattr(values, "detach"):
        return values.detach().double().cpu().numpy()  # a torch tensor (the arithmetic's)
    return np.asarray(values, dtype=np.float64)


# ------------------------------------------------------------------------------ emulated forward
class EmulatedForward:
    """Exactly rounded forward pass over a batch of equal-length token sequences (numpy, `FormatOps`)."""

    def __init__(self, model: TransformerIR, fmt: FloatFormat) -> None:
        self.model = model
        self.fmt = fmt
        self.ops = FormatOps(fmt)
        self._tables: dict[tuple[RotaryPair, int], tuple[np.ndarray, np.ndarray]] = {}
        self._params: dict[int, np.ndarray] = {}

    def param(self, array: np.ndarray) -> np.ndarray:
        key = id(array)
        if key not in self._params:
            self._params[key] = self.ops.cast(array)
        return self._params[key]

    def embed(self, tokens: np.ndarray) -> np.ndarray:
        """The residual stream entering layer 1: the stored embedding rows of `tokens` (batch, T)."""
        return self.param(self.model.embedding)[tokens]

    def head_scores(self, x: np.ndarray, head: AttentionHead, rows: slice | None = None) -> np.ndarray:
        """`scores` as float64 values."""
        return np.asarray(self.scores(x, head, rows), dtype=np.float64)

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

    def query_key(self, x: np.ndarray, head: AttentionHead) -> tuple[np.ndarray, np.ndarray]:
        """The head's rotated queries and keys (batch, T, d_head), each once for all positions."""
        query = self.rotate(self.linear(x, head.w_query, head.b_query), head)
        key = self.rotate(self.linear(x, head.w_key, head.b_key), head)
        return query, key

    def scores(self, x: np.ndarray, head: AttentionHead, rows: slice | None = None) -> np.ndarray:
        """Realized scores S[b, i, j] = score_scale·q_i·k_j (before masking); `rows` picks the
        query positions i (all by default), so a long scan can be done in blocks of rows."""
        query, key = self.query_key(x, head)
        return self.pair_scores(query if rows is None else query[:, rows], key, head)

    def pair_scores(self, query: np.ndarray, key: np.ndarray, head: AttentionHead) -> np.ndarray:
        """``score_scale·Σ_d q_d·k_d`` (left to right over d) for every query row and key given."""
        ops = self.ops
        scores = None
        for d in range(head.d_head):
            q_d, k_d = query[:, :, None, d], key[:, None, :, d]
            term = ops.mul(q_d, k_d)
            scores = term if scores is None else ops.add(scores, term)
        if scores is None:
            scores = ops.cast(np.zeros((query.shape[0], query.shape[1], key.shape[1])))
        if head.score_scale != 1.0:
            scores = ops.mul(scores, ops.cast(head.score_scale))
        return scores

    def attention(self, x: np.ndarray, head: AttentionHead) -> np.ndarray:
        """Strict-causal softmax attention, computed in blocks of query rows (`row_blocks`): a block
        of rows i < stop sees keys j < stop only, so memory is linear in the length. Every row's
        numbers are those of the whole matrix at once (rows are independent; see `_KeyTail`)."""
        ops = self.ops
        batch, length, _ = x.shape
        query, key = self.query_key(x, head)
        value = self.linear(x, head.w_value, head.b_value)
        output = np.empty(value.shape, dtype=value.dtype)
        tail = _KeyTail(value) if ops.dtype is not None else None
        for start, stop in row_blocks(batch, length, value.shape[-1]):
            positions = np.arange(start, stop)
            visible = (np.arange(stop)[None, :] < positions[:, None])[None]  # key j < query i
            scores = self.pair_scores(query[:, start:stop], key[:, :stop], head)
            masked = np.where(visible, scores, -np.inf)
            row_max = masked.max(axis=2, keepdims=True)
            row_max = np.where(np.isfinite(row_max), row_max, 0).astype(scores.dtype)
            with np.errstate(invalid="ignore", over="ignore"):
                shifted = np.where(visible, ops.sub(scores, row_max), -np.inf)
            exps = ops.exp(shifted)
            denominator = ops.causal_key_sum(exps, first_row=start)
            if start == 0:
                denominator[:, 0] = 1  # bos sees no key; its output is defined as zero below
            weights = ops.div(exps, denominator[:, :, None])
            block = ops.causal_key_sum(ops.mul(weights[:, :, :, None], value[:, None, :stop, :]), first_row=start)
            if tail is not None and stop < length:
                block = tail.finish(block, stop)
            output[:, start:stop] = block
        output[:, 0, :] = 0
        return output

    def feed_forward(self, x: np.ndarray, block: FeedForward) -> np.ndarray:
        hidden = np.maximum(self.linear(x, block.w_in, block.b_in), 0)
        return self.linear(hidden, block.w_out, block.b_out)

    def run(self, tokens: np.ndarray, stop_before: int | None = None) -> np.ndarray:
        ops = self.ops
        x = self.embed(tokens)
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


# ---------------------------------------------------------------------------------- row blocks
# Elements of the largest array a block of query rows holds at once (batch × rows × keys × value
# coordinates, float64 or float32): 2^22, 32 MiB in float64, whatever the length.
BLOCK_ELEMENTS = 2**22


def row_blocks(batch: int, length: int, width: int, budget: int = BLOCK_ELEMENTS) -> list[tuple[int, int]]:
    """Consecutive query-row ranges [start, stop) covering 0..length, each holding at most `budget`
    elements of batch × rows × stop × width (at least one row per block)."""
    blocks = []
    start = 0
    while start < length:
        rows = max(1, budget // max(1, batch * length * max(1, width)))
        stop = min(length, start + rows)
        blocks.append((start, stop))
        start = stop
    return blocks


class _KeyTail:
    """What the keys a row block leaves out would add to its value sums in formats with a numpy dtype.

    There ``causal_key_sum`` is a cumulative sum over *every* key, so row i also adds the products
    weight_ij·v_j = (+0)·v_j of the keys j >= i it cannot see: +0 or −0, or NaN where v_j is not
    finite. A block of rows i < stop stops its sums at key stop − 1; the keys from stop on would
    turn a sum into NaN when any of their values is not finite, and a −0 sum into +0 unless every
    one of their products is −0 (v_j < 0 or v_j = −0). `finish` applies exactly that, so blocked
    sums equal the whole matrix's bit for bit, signed zeros and NaNs included."""

    def __init__(self, value: np.ndarray):
        reverse = value[:, ::-1]
        self.nonfinite = np.logical_or.accumulate(~np.isfinite(reverse), axis=1)[:, ::-1]  # any v_j, j >= t
        self.negative = np.logical_and.accumulate(np.signbit(reverse) & np.isfinite(reverse), axis=1)[:, ::-1]

    def finish(self, sums: np.ndarray, stop: int) -> np.ndarray:
        nonfinite = self.nonfinite[:, None, stop, :]
        becomes_positive_zero = (sums == 0) & ~self.negative[:, None, stop, :]
        sums = np.where(becomes_positive_zero, np.zeros((), dtype=sums.dtype), sums)
        return np.where(nonfinite, np.array(np.nan, dtype=sums.dtype), sums)


# -------------------------------------------------------------------------------- native forward
class NativeForward:
    """Forward pass in the format's torch dtype, torch deciding summation order and accumulators."""

    def __init__(self, model: TransformerIR, fmt: FloatFormat) -> None:
        import torch  # the native pass alone needs torch: the emulated one and this module do not

        self.torch = torch
        self.model = model
        self.fmt = fmt
        self.dtype = native_torch_dtype(fmt)
        self._tables: dict[tuple[RotaryPair, int], tuple] = {}

    def tensor(self, array: np.ndarray):
        # Rounded once: torch's float64 -> bf16/fp16 cast goes through float32 and can round twice.
        return round_once(self.torch.as_tensor(np.array(array, dtype=np.float64)), self.dtype)

    def embed(self, tokens: np.ndarray):
        """The residual stream entering layer 1: the embedding rows of `tokens` (batch, T) in the dtype."""
        return self.tensor(self.model.embedding)[self.torch.as_tensor(tokens)]

    def head_scores(self, x, head: AttentionHead, rows: slice | None = None) -> np.ndarray:
        """`scores` as float64 numpy values."""
        with self.torch.no_grad():
            return self.scores(x, head, rows).to(self.torch.float64).numpy()

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
        """Strict-causal softmax attention; above BLOCK_ELEMENTS score entries it runs in blocks of
        query rows against every key (memory linear in the length; each row's softmax and its
        product with the values are the same computation)."""
        torch = self.torch
        batch, length = x.shape[0], x.shape[1]
        value = x @ self.tensor(head.w_value).T + self.tensor(head.b_value)
        query = self.rotate(x @ self.tensor(head.w_query).T + self.tensor(head.b_query), head)
        key = self.rotate(x @ self.tensor(head.w_key).T + self.tensor(head.b_key), head)
        if batch * length * length <= BLOCK_ELEMENTS:
            blocks = [(0, length)]
        else:
            blocks = [(start, stop) for start, stop in row_blocks(batch, length, 1)]
        pieces = []
        for start, stop in blocks:
            scores = query[:, start:stop] @ key.transpose(1, 2)
            if head.score_scale != 1.0:
                scores = scores * self.tensor(np.array(head.score_scale))
            visible = torch.arange(length)[None, :] < torch.arange(start, stop)[:, None]
            scores = scores.masked_fill(~visible, float("-inf"))
            first = 1 if start == 0 else 0  # bos sees no key: its output is zero
            rows = torch.softmax(scores[:, first:, :], dim=-1) @ value
            pieces.append(torch.cat((torch.zeros_like(value[:, :1, :]), rows), dim=1) if first else rows)
        return pieces[0] if len(pieces) == 1 else torch.cat(pieces, dim=1)

    def run(self, tokens: np.ndarray) -> np.ndarray:
        """The final residual stream (batch, T, d_model) as float64 values."""
        return self.forward(tokens).to(self.torch.float64).numpy()

    def forward(self, tokens: np.ndarray, layer_inputs: list | None = None):
        """The final residual stream in the dtype; `layer_inputs`, when given, receives the residual
        stream entering each layer (what `formal_rope.diagnostics` decomposes)."""
        torch = self.torch
        with torch.no_grad():
            x = self.embed(tokens)
            for layer in self.model.layers:
                if layer_inputs is not None:
                    layer_inputs.append(x)
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
            return x
