"""Worst-case evaluation of a saved model: search each test length for misclassified strings.

    from formal_rope.evaluation import worst_case
    result = worst_case(model=load_runnable("model.zip"), dfa=None, lengths=range(41, 501), budget=256, seed=0)
    result.n_star_worst, result.failure, result.failure_margin, result.tried

`model` is a trained classifier (a checkpoint from `load_checkpoint`/`load_runnable`, or a
single-run `Classifier`) or a compiled model (`CompiledRunnable`, or a `TransformerIR`); a pack
of runs goes through `worst_case_pack`. Scores (what the search climbs, `engine.Scorer`): for a
trained model logit(accept) − logit(reject) in fp32; for a compiled model the readout value minus
its threshold, in the model's format and evaluation mode (emulated or native). The search itself
is `formal_rope.evaluation.engine`.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Sequence

import numpy as np
import torch

from formal_rope.automata import language_dfa
from formal_rope.compiler.compiling import CompiledModel
from formal_rope.errors import FormalRopeError
from formal_rope.evaluation.engine import DEFAULT_BUDGET, LengthSearch, SearchSettings, WorstCase, search
from formal_rope.evaluation.length_generalization import pack_scores
from formal_rope.lang.source import resolve_language
from formal_rope.model.evaluate import readout_scores
from formal_rope.model.io import CompiledRunnable
from formal_rope.model.ir import TransformerIR
from formal_rope.sampling.datasets import test_sets
from formal_rope.training.data import is_data_language
from formal_rope.training.model import Classifier
from formal_rope.training.trained_classifier import TrainedClassifier

START_SYMBOL_BUDGET = 1 << 21  # start-set symbols sampled per block of lengths
DEFAULT_START = 16  # start strings per length when no test sets are given (the quick scale's test sets)


class PackScorer:
    """A trained pack as a `engine.Scorer`: each asked run's logit(accept) − logit(reject), in the
    packed evaluator's batched passes (`length_generalization.pack_scores`; `threads()`:
    the torch threads of each pass, None: torch's setting)."""

    def __init__(self, model: Classifier, device: str | torch.device = "cpu", threads=None) -> None:
        self.model = model.eval()
        self.runs = model.runs
        self.n_symbols = model.n_symbols
        self.device = device
        self.threads = threads
        self._selected: dict[tuple[int, ...], Classifier] = {tuple(range(model.runs)): self.model}

    def scores(self, symbols: np.ndarray, runs: Sequence[int]) -> np.ndarray:
        key = tuple(int(run) for run in runs)
        if key not in self._selected:
            self._selected[key] = self.model.select_runs(list(key)).eval()
        return pack_scores(self._selected[key], symbols, device=self.device, threads=self.threads)[1]


class CompiledScorer:
    """A compiled model as a `engine.Scorer` (one run): readout value minus threshold in `fmt` and
    `mode` (`model.evaluate.readout_scores`), so the score is > 0 exactly where `evaluate` accepts."""

    runs = 1

    def __init__(self, model: TransformerIR, fmt: str, mode: str) -> None:
        self.model = model
        self.n_symbols = len(model.alphabet)
        self.fmt = fmt
        self.mode = mode

    def scores(self, symbols: np.ndarray, runs: Sequence[int]) -> np.ndarray:
        return readout_scores(self.model, symbols, fmt=self.fmt, mode=self.mode)[None, :]


def _runnable(model):
    """A compiler's result (`compile_formula`) stands for its `ir`; every other model as given."""
    return model.ir if isinstance(model, CompiledModel) else model


def model_alphabet(model) -> tuple[str, ...]:
    """The symbols a model reads, in its token order."""
    model = _runnable(model)
    if isinstance(model, (TrainedClassifier, CompiledRunnable, TransformerIR)):
        return tuple(model.alphabet)
    raise FormalRopeError(f"no alphabet known for a {type(model).__name__}; pass the DFA over its symbols")


def model_language(model) -> str:
    """The language a model was trained on (its config) or compiled from (the source it recorded,
    else `ltl:` + its formula)."""
    model = _runnable(model)
    if isinstance(model, TrainedClassifier):
        return model.config.language
    ir = model.model if isinstance(model, CompiledRunnable) else model
    if not isinstance(ir, (TransformerIR, Classifier)):
        raise FormalRopeError(f"no language known for a {type(model).__name__}: expected a trained checkpoint "
                              "(load_checkpoint), a compiled model (compile_formula, load_runnable) or a TransformerIR")
    if isinstance(ir, TransformerIR) and ir.metadata.get("language"):
        return str(ir.metadata["language"])  # compiled from a regex, a registry name or a .att file
    formula = ir.metadata.get("formula") if isinstance(ir, TransformerIR) else None
    if not formula:
        what = "a bare Classifier" if isinstance(ir, Classifier) else "a TransformerIR without the compiler's formula"
        raise FormalRopeError(f"the model records no language ({what}): pass the language yourself, "
                              "model_dfa(model, language) or worst_case(..., dfa=...) (on the command line: --lang)")
    return f"ltl:{formula}"


def model_dfa(model, language: str | None = None):
    """The DFA labelling the search's strings: of `language` (default: the model's own), over the
    model's alphabet in its order (so symbol i of the DFA is token i of the model)."""
    text = model_language(model) if language is None else language
    if is_data_language(text):
        raise FormalRopeError(f"the model was trained on data files without a language ({text}): its labels have no "
                              "DFA to search with; pass the language, model_dfa(model, language) (on the command "
                              "line: --lang)")
    return language_dfa(resolve_language(text, model_alphabet(model)))


def scorer_for(model, *, fmt: str | None = None, mode: str | None = None, device: str | torch.device = "cpu"):
    """The `engine.Scorer` of a single model: trained (checkpoint, single-run Classifier) or
    compiled (CompiledRunnable, TransformerIR, CompiledModel; `fmt` and `mode` default to the model's own)."""
    model = _runnable(model)
    if isinstance(model, TrainedClassifier):
        model = model.model
    if isinstance(model, Classifier):
        if model.runs != 1:
            raise FormalRopeError(f"worst_case takes a single model; this pack has {model.runs} runs "
                                  "(use worst_case_pack)")
        if fmt not in (None, "fp32") or mode not in (None, "native"):
            raise FormalRopeError("a trained model is searched in fp32 (its own arithmetic); --format and --mode "
                                  "apply to compiled models")
        return PackScorer(model, device)
    if isinstance(model, CompiledRunnable):
        return CompiledScorer(model.model, fmt or model.default_format, mode or model.mode)
    if isinstance(model, TransformerIR):
        return CompiledScorer(model, fmt or str(model.metadata.get("format", "fp32")), mode or "emulated")
    raise FormalRopeError(f"cannot search a {type(model).__name__}: expected a trained or a compiled model")


def sampled_start_sets(
    dfa, lengths: Iterable[int], n_per_length: int, seed: int, near_miss_fraction: float = 0.5
) -> Iterator:
    """The balanced test sets (`sampling.test_sets`) of `lengths`, sampled lazily in blocks."""
    block: list[int] = []
    size = 0
    for length in lengths:
        block.append(int(length))
        size += max(1, int(length)) * max(1, n_per_length)
        if size >= START_SYMBOL_BUDGET:
            yield from test_sets(dfa, block, n_per_length, seed, near_miss_fraction)
            block, size = [], 0
    if block:
        yield from test_sets(dfa, block, n_per_length, seed, near_miss_fraction)


def _checked_lengths(lengths: Iterable[int]) -> list[int]:
    lengths = [int(length) for length in lengths]
    if not lengths:
        raise FormalRopeError("the worst-case search needs at least one length")
    if min(lengths) < 0 or any(b <= a for a, b in zip(lengths, lengths[1:])):
        raise FormalRopeError("the worst-case search takes non-negative lengths in increasing order")
    return lengths


def worst_case(
    *,
    model,
    dfa=None,
    lengths: Iterable[int],
    budget: int = DEFAULT_BUDGET,
    seed: int = 0,
    n_start: int | None = None,
    start_sets: Iterable | None = None,
    settings: SearchSettings | None = None,
    fmt: str | None = None,
    mode: str | None = None,
    device: str | torch.device = "cpu",
    on_length: Callable[[LengthSearch], None] | None = None,
) -> WorstCase:
    """Search `model` for misclassified strings at each of `lengths` (increasing), labelled by `dfa`
    (None: the model's own language over its alphabet, `model_dfa`).

    budget: strings per length beyond the start set; seed: every draw of the search (and of the
    start sets it samples). Start sets: `start_sets` (LabeledSets in length order), else `n_start`
    sampled strings per length (default: a trained model's own test sets, its n_per_length and
    eval_seed, so the search starts where its N* was measured; 16 for a compiled model).
    settings: the search's other knobs (`SearchSettings`; its budget and seed are replaced by these).
    fmt/mode: a compiled model's format and evaluation mode (default: its own). on_length sees each
    searched length."""
    lengths = _checked_lengths(lengths)
    dfa = model_dfa(model) if dfa is None else dfa
    scorer = scorer_for(model, fmt=fmt, mode=mode, device=device)
    if start_sets is None:
        count, start_seed, near_misses = DEFAULT_START, seed, 0.5
        if isinstance(model, TrainedClassifier) and model.config.data is None:
            config = model.config
            count, start_seed, near_misses = config.n_per_length, config.eval_seed, config.test_near_miss_fraction
        start_sets = sampled_start_sets(dfa, lengths, count if n_start is None else n_start, start_seed, near_misses)
    base = settings or SearchSettings()
    settings = SearchSettings(**{**base.__dict__, "budget": int(budget), "seed": int(seed)})
    callback = None if on_length is None else (lambda run, entry: on_length(entry))
    alphabet = model_alphabet(model) if not isinstance(model, Classifier) else tuple(dfa.alphabet)
    return search(scorer, dfa, start_sets, settings=settings, alphabet=alphabet, on_length=callback)[0]


def worst_case_pack(
    *,
    model: Classifier,
    dfa,
    start_sets: Iterable,
    settings: SearchSettings = SearchSettings(),
    last_lengths: Sequence[int | None] | None = None,
    device: str | torch.device = "cpu",
    on_length: Callable[[int, LengthSearch], None] | None = None,
    threads=None,
) -> list[WorstCase]:
    """Every run of a trained pack searched in the same batched passes (what `train --eval
    worst-case` runs after the sampled evaluation): start sets are the runs' shared test sets,
    run r is searched up to last_lengths[r] (its first sampled failure; None: every length).
    threads(): the torch threads of each batched pass (`PackScorer`)."""
    return search(PackScorer(model, device, threads), dfa, start_sets, settings=settings, last_lengths=last_lengths,
                  on_length=on_length)
