"""A trained classifier rebuilt from its checkpoint (`formal_rope.storage.checkpoints`, the archive):
the model with its config and result, and a string classifier (`formalrope run` on a trained model).

    load_checkpoint(path).classify(["abab"])     # accept / reject per string
"""

from __future__ import annotations

import copy
import warnings
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch

from formal_rope.automata import encode_strings
from formal_rope.errors import FormalRopeError
from formal_rope.precision import native_dtype, parse_format
from formal_rope.run_config.config import RunConfig
from formal_rope.run_config.rules import period_pairs
from formal_rope.storage.checkpoints import (
    CHECKPOINT_KIND,
    METADATA_NAME,
    STATE_NAME,
    checkpoint_problem,
    read_metadata,
    read_weights,
)
from formal_rope.training.model import Classifier, encode_fixed_length
from formal_rope.training.run_result import RunResult
from formal_rope.training.setup import build_model

CLASSIFY_FORMATS = ("fp32", "bf16", "fp16")  # native formats a trained (fp32) model classifies in


class UnhealthyCheckpointWarning(UserWarning):
    """A checkpoint whose run diverged or failed, or whose weights hold NaN/inf: its verdicts mean nothing."""


def checkpoint_health(model: Classifier, result: RunResult | None) -> str | None:
    """Why a checkpoint's verdicts cannot be trusted (None when nothing is known to be wrong).

    A diverged run is saved with the weights it was frozen at, so a checkpoint can classify
    strings although its training went to NaN; `run` must say so instead of printing verdicts
    as if they came from a trained model.
    """
    problems = []
    if result is not None and result.status != "ok":
        if result.status == "diverged":
            problems.append(f"its run diverged (its loss became NaN/inf at step {result.steps_done})")
        else:
            problems.append(f"its run {result.status}: {result.error or 'no error recorded'}")
    with torch.no_grad():
        bad = sum(int((~torch.isfinite(tensor)).sum()) for tensor in model.state_dict().values()
                  if tensor.is_floating_point())
    if bad:
        problems.append(f"{bad} of its weights are NaN or infinite")
    if not problems:
        return None
    return "; ".join(problems) + "; its verdicts are not a trained model's"


@dataclass
class TrainedClassifier:
    """A loaded checkpoint: the model, its config and result, and a string classifier."""

    model: Classifier
    config: RunConfig
    result: RunResult | None
    alphabet: tuple[str, ...]
    metadata: dict

    @property
    def health(self) -> str | None:
        """Why this checkpoint's verdicts cannot be trusted (its run diverged or failed, or NaN/inf
        weights), or None; `classify` warns with it (UnhealthyCheckpointWarning)."""
        return checkpoint_health(self.model, self.result)

    def classify(self, strings: Sequence[str], fmt: str | None = None) -> list[bool]:
        """Accept (True) / reject for each string, computing in fp32 (None), bf16 or fp16.

        A checkpoint whose run diverged or failed, or whose weights are not finite, gives an
        UnhealthyCheckpointWarning (the verdicts are still returned). Strings are split into symbols
        as everywhere else (single characters, or whitespace-separated names when the alphabet has
        multi-character symbols); unknown symbols raise FormalRopeError.
        """
        name = "fp32" if fmt is None else parse_format(fmt).name  # aliases (e8m23) read as everywhere
        if name not in CLASSIFY_FORMATS:
            raise FormalRopeError(f"unknown number format {fmt!r} for a trained model; expected fp32, bf16 or fp16")
        problem = self.health
        if problem is not None:
            warnings.warn(problem, UnhealthyCheckpointWarning, stacklevel=2)
        if len(strings) == 0:
            return []
        symbols, lengths = encode_strings(list(strings), self.alphabet)
        model = self._model_in(native_dtype(name))
        decisions = np.empty(len(lengths), dtype=bool)
        with torch.no_grad():
            for length in np.unique(lengths):
                rows = np.flatnonzero(lengths == length)
                tokens, readout = encode_fixed_length(symbols[rows, :length], len(self.alphabet))
                logits = model(tokens, readout).float()
                decisions[rows] = (logits[:, 1] > logits[:, 0]).numpy()
        return decisions.tolist()

    def _model_in(self, dtype: torch.dtype) -> Classifier:
        """The network in `dtype`; learned frequencies stay float64 (phases are not the network's format)."""
        if dtype == torch.float32:
            return self.model.eval()
        model = copy.deepcopy(self.model).to(dtype).eval()
        if isinstance(getattr(self.model.positional, "frequencies", None), torch.nn.Parameter):
            model.positional.frequencies = torch.nn.Parameter(self.model.positional.frequencies.detach().clone())
        return model


def _check_learned_frequencies(path, config: RunConfig, model: Classifier, state: dict) -> None:
    """FormalRopeError for a jof_learned checkpoint written when its frequencies were shared by the
    heads ((runs, layers, head_dim/2) instead of paper 000's per-head (runs, layers, heads, head_dim/2))."""
    stored = state.get("positional.frequencies")
    expected = getattr(model.positional, "frequencies", None)
    if config.pe != "jof_learned" or not isinstance(stored, torch.Tensor) or expected is None:
        return
    if tuple(stored.shape) != tuple(expected.shape):
        shared = stored.dim() == 3
        raise FormalRopeError(
            f"checkpoint {str(path)!r}: its jof_learned frequencies have shape {tuple(stored.shape)} (runs, layers, "
            f"pairs){' shared by every head' if shared else ''}, but jof_learned now learns one vector per layer "
            f"and head, shape {tuple(expected.shape)} (runs, layers, heads, pairs; paper 000 §3.2). "
            "This checkpoint predates that change: retrain it"
        )


def load_checkpoint(path: str | Path) -> TrainedClassifier:
    """The trained classifier saved at `path` (by `run_training(checkpoint_path=)` or `train --out`).

    Its `.classify(strings)` is what `formalrope run` prints; `.config` and `.result` are the run's.
    """
    metadata = read_metadata(path)
    if not isinstance(metadata, dict) or metadata.get("kind") != CHECKPOINT_KIND:
        kind = metadata.get("kind") if isinstance(metadata, dict) else None
        raise FormalRopeError(f"{str(path)!r} holds a {kind!r} model, not a trained classifier")
    with checkpoint_problem(path, f"its {METADATA_NAME} does not describe a model (config, alphabet, periods)"):
        config = RunConfig.from_dict(metadata["config"], record=True)
        alphabet = tuple(metadata["alphabet"])
        periods = tuple(metadata["periods"]) if metadata.get("periods") is not None else None
        periodic = config.periodic_row()
        if periodic is not None and periods is not None:
            # Files written before more periods than pairs became an error trained the first
            # `pairs` periods only (pair p got period p); those are the tables the weights belong to.
            periods = periods[: period_pairs(periodic, config.d_model, config.heads)]
        model = build_model(config, len(alphabet), periods)
    state = read_weights(path, metadata)
    _check_learned_frequencies(path, config, model, state)
    with checkpoint_problem(path, f"its weights ({STATE_NAME}) do not match its config ({METADATA_NAME})"):
        model.load_state_dict(state)
    model.eval()
    result = RunResult.from_dict(metadata["result"]) if metadata.get("result") else None
    return TrainedClassifier(model=model, config=config, result=result, alphabet=alphabet, metadata=metadata)
