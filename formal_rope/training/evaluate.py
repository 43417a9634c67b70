"""Length-generalisation evaluation: per-length accuracy, N* and the first failing string (SPEC §8).

Each test length is one balanced, seeded set from the sampler. Its strings share a length, so the
set is one padded-free batch; duplicate strings (common for small alphabets: over {a} every string
of a length is the same) are classified once. Batches are split into chunks whose attention score
matrices stay under a fixed element budget, so memory is bounded at length 500 and beyond.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass

import numpy as np
import torch

from formal_rope.errors import FormalRopeError
from formal_rope.training.config import LengthResult
from formal_rope.training.model import Classifier, encode_fixed_length

EVAL_MODES = ("full", "nstar")
SCORE_ELEMENT_BUDGET = 1 << 23  # attention scores per chunk (batch * heads * T * T), ~32 MB in fp32


@dataclass(frozen=True)
class Evaluation:
    """Per-length accuracies of one model, their N* and mean, and the first misclassified string."""

    per_length: tuple[LengthResult, ...]
    n_star: int
    accuracy: float  # mean of per-length accuracies over the evaluated lengths
    first_failure: str | None  # a misclassified string of the shortest imperfect length
    complete: bool  # every requested length was evaluated (False when nstar mode stopped early)


def n_star(lengths: Sequence[int], accuracies: Sequence[float]) -> int:
    """The largest N with accuracy 1 at every tested length from the first through N; 0 if the first fails.

    lengths must be increasing (the tested lengths in order).
    """
    best = 0
    for length, accuracy in zip(lengths, accuracies):
        if accuracy < 1.0:
            break
        best = int(length)
    return best


def chunk_size(batch: int, heads: int, tokens: int, budget: int | None = None) -> int:
    """Strings per forward pass so that batch * heads * tokens^2 attention scores fit the budget."""
    budget = SCORE_ELEMENT_BUDGET if budget is None else budget
    return max(1, min(batch, budget // max(1, heads * tokens * tokens)))


@torch.no_grad()
def predict_fixed_length(
    model: Classifier, symbols: np.ndarray, *, dtype: torch.dtype | None = None, device: str | torch.device = "cpu"
) -> np.ndarray:
    """Accept/reject (bool array) for symbols (n, L) of one length; duplicates are run once."""
    symbols = np.asarray(symbols, dtype=np.int64)
    if symbols.shape[0] == 0:
        return np.zeros(0, dtype=bool)
    unique, inverse = np.unique(symbols, axis=0, return_inverse=True)
    tokens, readout = encode_fixed_length(unique, model.n_symbols)
    heads = model.blocks[0].heads if len(model.blocks) else 1
    step = chunk_size(len(unique), heads, tokens.shape[1])
    decisions = np.empty(len(unique), dtype=bool)
    for start in range(0, len(unique), step):
        chunk = slice(start, start + step)
        logits = model(tokens[chunk].to(device), readout[chunk].to(device))
        decisions[chunk] = (logits[:, 1] > logits[:, 0]).cpu().numpy()
    return decisions[np.asarray(inverse).reshape(-1)]


def evaluate_sets(
    model: Classifier,
    sets: Iterable,
    *,
    decode: Callable[[np.ndarray], str],
    mode: str = "full",
    device: str | torch.device = "cpu",
    on_length: Callable[[LengthResult], None] | None = None,
) -> Evaluation:
    """Evaluate labelled sets (objects with .length, .symbols (n, L), .labels (n,)) in increasing length.

    mode "nstar" stops at the first imperfect length (enough to know N*); "full" tests every length.
    """
    if mode not in EVAL_MODES:
        raise FormalRopeError(f"unknown eval mode {mode!r}; expected one of {', '.join(EVAL_MODES)}")
    was_training = model.training
    model.eval()
    results: list[LengthResult] = []
    first_failure: str | None = None
    stopped = False
    try:
        for labelled in sets:
            labels = np.asarray(labelled.labels, dtype=bool)
            predictions = predict_fixed_length(model, labelled.symbols, device=device)
            wrong = np.flatnonzero(predictions != labels)
            n = len(labels)
            accuracy = 1.0 - len(wrong) / n if n else 1.0
            result = LengthResult(length=int(labelled.length), accuracy=float(accuracy), n=int(n))
            results.append(result)
            if on_length is not None:
                on_length(result)
            if len(wrong) and first_failure is None:
                first_failure = decode(np.asarray(labelled.symbols)[wrong[0]])
            if len(wrong) and mode == "nstar":
                stopped = True
                break
    finally:
        model.train(was_training)
    lengths = [r.length for r in results]
    accuracies = [r.accuracy for r in results]
    mean = float(np.mean(accuracies)) if accuracies else math.nan
    return Evaluation(
        per_length=tuple(results),
        n_star=n_star(lengths, accuracies),
        accuracy=mean,
        first_failure=first_failure,
        complete=not stopped,
    )
