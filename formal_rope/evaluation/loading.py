"""Any model file as something that classifies strings: `load_runnable` dispatches on its kind.

A model file's ``metadata.json`` names its ``"kind"`` (`formal_rope.model.io.read_metadata`):
``"compiled"`` (a TransformerIR, `model.io.load_model`, wrapped as `model.io.CompiledRunnable`) or
``"trained"`` (a trainer checkpoint, rebuilt by `training.load_checkpoint`). Both have
``classify(strings, fmt=None) -> list[bool]``; `formalrope run MODEL` and `attack MODEL` load here.
The loader sits above both the IR (`model`) and the trainer (`training`), so neither imports the
other; a compiled model loads without torch.
"""

from __future__ import annotations

from pathlib import Path
from typing import Protocol, Sequence

from formal_rope.errors import FormalRopeError
from formal_rope.model.io import CompiledRunnable, load_model, read_metadata


class Runnable(Protocol):
    """A loaded model of either kind: its alphabet and a verdict per string."""

    kind: str
    alphabet: tuple[str, ...]

    def classify(self, strings: Sequence[str], fmt: str | None = None) -> list[bool]: ...


def load_runnable(path: str | Path, mode: str = "emulated") -> Runnable:
    """Load any model file, dispatching on ``metadata.json``'s ``kind`` (compiled or trained)."""
    metadata = read_metadata(path)
    kind = metadata["kind"]
    if kind == "compiled":
        return CompiledRunnable(load_model(path), mode=mode)
    if kind == "trained":
        try:  # the trainer imports torch: loaded only for a trained checkpoint
            from formal_rope.training.trained_classifier import load_checkpoint
        except ImportError as error:
            raise FormalRopeError(
                f"{path} is a trained checkpoint, but the trainer is not available: {error}"
            ) from None
        return load_checkpoint(path)
    raise FormalRopeError(f"{path}: unknown model kind {kind!r} (expected 'compiled' or 'trained')")
