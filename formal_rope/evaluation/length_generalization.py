"""Length-generalisation evaluation: per-length accuracy, N* and the first failing string (SPEC §8),
and NNCH's score (`evaluation.nnch`).

Each test length is one balanced, seeded set from the sampler. Its strings share a length, so the
set is one padded-free batch; duplicate strings (common for small alphabets: over {a} every string
of a length is the same) are classified once. The uniformly random strings NNCH's score reads at a
length join that length's batch, so they cost no forward pass of their own. Batches are split into
chunks whose attention score matrices stay under a fixed element budget, so memory is bounded at
length 500 and beyond.

Evaluation may use more torch threads than training (`threads`: asked before each batch, e.g. a
sweep worker taking the cores of workers that have finished, `sweeps.backends.cores`): every op of
a forward pass computes each output element in one thread in a fixed order (GEMMs split rows and
columns across threads, never the inner sum; attention splits queries and heads; norms split rows),
so the logits, and every verdict, are the same bits at any thread count (tested:
tests/test_eval_threads.py). Training is different: its loss and weight gradients are full
reductions over the batch, split into one partial sum per thread.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass

import numpy as np
import torch

from formal_rope.errors import FormalRopeError
from formal_rope.evaluation.nnch import nnch_score
from formal_rope.sampling.datasets import unscored_classes
from formal_rope.training.model import Classifier, encode_fixed_length
from formal_rope.training.run_result import LengthResult

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
    nnch_accuracy: float = math.nan  # NNCH's score (evaluation.nnch); NaN unless complete with uniform strings


def n_star(lengths: Sequence[int], accuracies: Sequence[float], covered: Sequence[bool] | None = None) -> int:
    """The largest N with accuracy 1 at every tested length from the first through N; 0 if the first fails.

    lengths must be increasing (the tested lengths in order). covered[i] False: some class that exists
    at lengths[i] had no test string, so that length is not passed either (None: every length covered).
    """
    best = 0
    covered = [True] * len(lengths) if covered is None else covered
    for length, accuracy, tested in zip(lengths, accuracies, covered):
        if not (tested and accuracy >= 1.0):
            break
        best = int(length)
    return best


def passed(result: LengthResult) -> bool:
    """Whether a tested length counts toward N*: every test string right, and every class there tested."""
    return result.covered and result.accuracy >= 1.0


def chunk_size(batch: int, heads: int, tokens: int, budget: int | None = None) -> int:
    """Strings per forward pass so that batch * heads * tokens^2 attention scores fit the budget."""
    budget = SCORE_ELEMENT_BUDGET if budget is None else budget
    return max(1, min(batch, budget // max(1, heads * tokens * tokens)))


Threads = Callable[[], int]  # how many torch threads a batch of evaluation may use now


def predict_pack(
    model: Classifier, symbols: np.ndarray, *, device: str | torch.device = "cpu", threads: Threads | None = None
) -> np.ndarray:
    """Accept/reject (bool array (R, n)) of every run of a pack for symbols (n, L) of one length.

    Every run reads the same strings; duplicates are run once. threads(): the torch threads to
    compute with (asked once per call; None: torch's setting), restored afterwards.
    """
    return _forward_pack(model, symbols, device=device, scores=False, threads=threads)[0]


def pack_scores(
    model: Classifier, symbols: np.ndarray, *, device: str | torch.device = "cpu", threads: Threads | None = None
) -> tuple[np.ndarray, np.ndarray]:
    """(Decisions, bool (R, n); accept scores, float64 (R, n): logit(accept) − logit(reject)) of every
    run of a pack for symbols (n, L) of one length, in the same batched passes as `predict_pack`.

    A run accepts exactly where its decision is True (the logits compared as `predict_pack` compares
    them); the score says how far from the decision boundary the run is (the worst-case search,
    `formal_rope.evaluation`, climbs it). threads: as for `predict_pack`."""
    return _forward_pack(model, symbols, device=device, scores=True, threads=threads)


@torch.no_grad()
def _forward_pack(model: Classifier, symbols: np.ndarray, *, device, scores: bool,
                  threads: Threads | None = None) -> tuple[np.ndarray, np.ndarray]:
    if threads is None:
        return _forward_pack_now(model, symbols, device=device, scores=scores)
    previous, wanted = torch.get_num_threads(), max(1, int(threads()))
    if wanted == previous:
        return _forward_pack_now(model, symbols, device=device, scores=scores)
    torch.set_num_threads(wanted)
    try:
        return _forward_pack_now(model, symbols, device=device, scores=scores)
    finally:
        torch.set_num_threads(previous)


def _forward_pack_now(model: Classifier, symbols: np.ndarray, *, device, scores: bool) -> tuple[np.ndarray, np.ndarray]:
    symbols = np.asarray(symbols, dtype=np.int64)
    runs = model.runs
    if symbols.shape[0] == 0:
        return np.zeros((runs, 0), dtype=bool), np.zeros((runs, 0), dtype=np.float64)
    unique, inverse = np.unique(symbols, axis=0, return_inverse=True)
    tokens, readout = encode_fixed_length(unique, model.n_symbols)
    heads = model.blocks[0].heads if len(model.blocks) else 1
    step = chunk_size(len(unique), runs * heads, tokens.shape[1])
    decisions = np.empty((runs, len(unique)), dtype=bool)
    margins = np.empty((runs, len(unique) if scores else 0), dtype=np.float64)
    for start in range(0, len(unique), step):
        chunk = slice(start, start + step)
        chunk_tokens = tokens[chunk].to(device)
        count = chunk_tokens.shape[0]
        logits = model(
            chunk_tokens[None].expand(runs, count, -1), readout[chunk].to(device)[None].expand(runs, count)
        )
        decisions[:, chunk] = (logits[..., 1] > logits[..., 0]).cpu().numpy()
        if scores:
            margins[:, chunk] = (logits[..., 1].double() - logits[..., 0].double()).cpu().numpy()
    order = np.asarray(inverse).reshape(-1)
    return decisions[:, order], margins[:, order] if scores else margins


def predict_fixed_length(
    model: Classifier, symbols: np.ndarray, *, dtype: torch.dtype | None = None, device: str | torch.device = "cpu"
) -> np.ndarray:
    """Accept/reject (bool array) of a single-run model for symbols (n, L) of one length."""
    if model.runs != 1:
        raise FormalRopeError(f"predict_fixed_length takes a single run; this pack has {model.runs} (use predict_pack)")
    return predict_pack(model, symbols, device=device)[0]


def evaluate_pack_sets(
    model: Classifier,
    sets: Iterable,
    *,
    decode: Callable[[np.ndarray], str],
    modes: Sequence[str],
    device: str | torch.device = "cpu",
    on_length: Callable[[int, LengthResult], None] | None = None,
    uniform_sets: Callable[[int], object | None] | None = None,
    threads: Threads | None = None,
) -> list[Evaluation]:
    """Evaluate every run of a pack on labelled sets (.length, .symbols (n, L), .labels (n,)) in
    increasing length, all runs in the same forward passes.

    A length passes (counts toward N*) when every string is right and every class that exists there
    has a string (`.exists`, when the sets carry it: `sampling.unscored_classes`; else one string).
    modes[r] "nstar" stops run r at its first length not passed (enough to know its N*): the pack
    then shrinks to the runs still going, and sampling stops once no run needs further lengths.
    on_length(run, result) is called for each run and length. uniform_sets(length): the uniformly
    random labelled strings NNCH's score reads at that length (None: none), classified in the same
    forward passes; they give each LengthResult its nnch_accuracy and the Evaluation NNCH's score,
    and never N*, accuracy or the first failure. threads(): the torch threads of each length's
    passes (asked per length; the results do not depend on it, see the module docstring).
    """
    for mode in modes:
        if mode not in EVAL_MODES:
            raise FormalRopeError(f"unknown eval mode {mode!r}; expected one of {', '.join(EVAL_MODES)}")
    if len(modes) != model.runs:
        raise FormalRopeError(f"need one eval mode per run ({model.runs}), got {len(modes)}")
    was_training = model.training
    model.eval()
    results: list[list[LengthResult]] = [[] for _ in modes]
    first_failures: list[str | None] = [None for _ in modes]
    stopped = [False for _ in modes]
    going = list(range(len(modes)))  # runs still evaluated, in the order of `current`'s runs
    current = model
    try:
        for labelled in sets:
            labels = np.asarray(labelled.labels, dtype=bool)
            n = len(labels)
            uniform = uniform_sets(int(labelled.length)) if uniform_sets is not None else None
            uniform_labels = np.asarray(uniform.labels, dtype=bool) if uniform is not None else labels[:0]
            symbols = np.asarray(labelled.symbols)
            if len(uniform_labels):
                symbols = np.concatenate([symbols, np.asarray(uniform.symbols)])
            predictions = predict_pack(current, symbols, device=device, threads=threads)
            covered = not unscored_classes(getattr(labelled, "exists", None), labels)
            finished = []
            for position, run in enumerate(going):
                wrong = np.flatnonzero(predictions[position, :n] != labels)
                accuracy = 1.0 - len(wrong) / n if n else 1.0
                nnch = float(np.mean(predictions[position, n:] == uniform_labels)) if len(uniform_labels) else None
                result = LengthResult(length=int(labelled.length), accuracy=float(accuracy), n=int(n),
                                      nnch_accuracy=nnch, nnch_n=len(uniform_labels), covered=covered)
                results[run].append(result)
                if on_length is not None:
                    on_length(run, result)
                if len(wrong) and first_failures[run] is None:
                    first_failures[run] = decode(np.asarray(labelled.symbols)[wrong[0]])
                if not passed(result) and modes[run] == "nstar":
                    stopped[run] = True
                    finished.append(position)
            if finished:
                keep = [position for position in range(len(going)) if position not in finished]
                going = [going[position] for position in keep]
                if not going:
                    break  # no run needs a longer length: stop before sampling it
                current = current.select_runs(keep)
    finally:
        model.train(was_training)
    evaluations = []
    for run in range(len(modes)):
        lengths = [r.length for r in results[run]]
        accuracies = [r.accuracy for r in results[run]]
        covered = [r.covered for r in results[run]]
        evaluations.append(
            Evaluation(
                per_length=tuple(results[run]),
                n_star=n_star(lengths, accuracies, covered),
                accuracy=float(np.mean(accuracies)) if accuracies else math.nan,
                first_failure=first_failures[run],
                complete=not stopped[run],
                nnch_accuracy=math.nan if stopped[run] else nnch_score(results[run]),
            )
        )
    return evaluations


def evaluate_sets(
    model: Classifier,
    sets: Iterable,
    *,
    decode: Callable[[np.ndarray], str],
    mode: str = "full",
    device: str | torch.device = "cpu",
    on_length: Callable[[LengthResult], None] | None = None,
    uniform_sets: Callable[[int], object | None] | None = None,
) -> Evaluation:
    """Evaluate a single-run model on labelled sets (objects with .length, .symbols (n, L), .labels (n,))
    in increasing length (a pack of one through `evaluate_pack_sets`).

    mode "nstar" stops at the first length not passed (enough to know N*); "full" tests every length.
    uniform_sets: as for `evaluate_pack_sets` (NNCH's strings).
    """
    if mode not in EVAL_MODES:
        raise FormalRopeError(f"unknown eval mode {mode!r}; expected one of {', '.join(EVAL_MODES)}")
    if model.runs != 1:
        raise FormalRopeError(f"evaluate_sets takes a single run; this pack has {model.runs} (use evaluate_pack_sets)")
    callback = None if on_length is None else (lambda run, result: on_length(result))
    return evaluate_pack_sets(model, sets, decode=decode, modes=[mode], device=device, on_length=callback,
                              uniform_sets=uniform_sets)[0]
