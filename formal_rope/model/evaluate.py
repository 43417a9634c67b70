"""Run a TransformerIR on strings, natively in a torch dtype or emulating a floating-point format.

The two arithmetics are the forward passes of ``formal_rope.model.forward``: ``native`` (torch in
fp64/fp32/bf16/fp16) and ``emulated`` (every elementary operation rounded into the format, left to
right sums). Strings are grouped by length and each group is run as a batch. Every result carries
the model's certificate in the format and mode it ran in (``formal_rope.model.certificate``).
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass
from typing import Callable, Sequence

import numpy as np

from formal_rope.errors import FormalRopeError
from formal_rope.model.certificate import ModelCertificate, model_certificate
from formal_rope.model.forward import EmulatedForward, NativeForward, check_mode, check_parameters_fit
from formal_rope.model.ir import BOS, EOS, TransformerIR
from formal_rope.precision import FloatFormat, parse_format

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
    certificate: ModelCertificate | None = None
    beyond_certified_length: np.ndarray | None = None  # bool (n_strings,)

    def to_list(self) -> list[bool]:
        return [bool(value) for value in self.accepted]

    @property
    def n_beyond_certified(self) -> int:
        """How many verdicts lie beyond the certified length."""
        return 0 if self.beyond_certified_length is None else int(self.beyond_certified_length.sum())


# ------------------------------------------------------------------------------------ interface
def attention_scores(
    model: TransformerIR, string, layer: int, head: int, fmt: FloatFormat | str = "fp32"
) -> np.ndarray:
    """The emulated, unmasked score matrix S[i, j] of head ``head`` in layer ``layer`` (0-based) on
    ``string`` (positions bos..eos), exactly as the evaluator computes it in ``fmt``."""
    runner = EmulatedForward(model, parse_format(fmt))
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


def readout_scores(
    model: TransformerIR, symbols: np.ndarray, *, fmt: FloatFormat | str = "fp32", mode: str = "emulated"
) -> np.ndarray:
    """Accept scores, float64 (n,), of n strings of one length given as symbol indices (n, L) into
    ``model.alphabet``: the readout value minus the threshold it is compared with, so the model
    accepts exactly where the score is > 0 (NaN: rejected), as `evaluate` decides. The score's size
    is the string's distance from the decision (the worst-case search, `formal_rope.evaluation`,
    climbs it). No certificate is computed here; `evaluate` gives one."""
    fmt = parse_format(fmt)
    check_mode(mode)
    check_parameters_fit(model, fmt)
    symbols = np.asarray(symbols, dtype=np.int64)
    if symbols.ndim != 2:
        raise FormalRopeError(f"readout_scores takes symbols of shape (n, length), got {symbols.shape}")
    index = {symbol: position for position, symbol in enumerate(model.vocabulary)}
    vocabulary_of = np.array([index[symbol] for symbol in model.alphabet], dtype=np.int64)
    n, length = symbols.shape
    tokens = np.empty((n, length + 2), dtype=np.int64)
    tokens[:, 0], tokens[:, -1] = index[BOS], index[EOS]
    tokens[:, 1:-1] = vocabulary_of[symbols]
    runner = EmulatedForward(model, fmt) if mode == "emulated" else NativeForward(model, fmt)
    threshold = model.readout.threshold if model.readout.kind == "coordinate" else 0.0
    scores = np.empty(n, dtype=np.float64)
    chunk = max(1, _SCORE_BUDGET // ((length + 2) * (length + 2)))
    for start in range(0, n, chunk):
        with np.errstate(over="ignore", invalid="ignore", divide="ignore"):  # the format's IEEE semantics
            final = runner.run(tokens[start: start + chunk])
            scores[start: start + chunk] = readout_values(model, final[:, -1, :]) - threshold
    return scores


def evaluate(
    model: TransformerIR,
    strings: Sequence[str | tuple[str, ...]],
    *,
    fmt: FloatFormat | str = "fp32",
    mode: str = "emulated",
    trace: bool = False,
    on_progress: Callable[[int], None] | None = None,
) -> EvaluationResult:
    """Classify ``strings`` with ``model`` in format ``fmt``; results keep the input order.

    The result carries the model's certificate in (fmt, mode) and flags every verdict on an input
    longer than its certified length (``beyond_certified_length``). ``trace=True`` also returns each
    string's final residual stream (positions bos..eos).
    ``on_progress(k)`` is called after every batch with the number of strings it finished.
    """
    fmt = parse_format(fmt)
    check_mode(mode)
    check_parameters_fit(model, fmt)
    encoded = [model.encode(string) for string in strings]
    lengths = np.array([len(tokens) - 2 for tokens in encoded], dtype=np.int64)
    certificate = model_certificate(model, fmt, mode, up_to=int(lengths.max(initial=0)))
    runner = EmulatedForward(model, fmt) if mode == "emulated" else NativeForward(model, fmt)
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
