"""Model stage: the explicit transformer IR, its evaluator (native torch / emulated format) and compiled
model files (any model file, trained too: `formal_rope.evaluation.load_runnable`).

Importing this package does not import torch (the evaluator imports it lazily in native mode).
"""

from formal_rope.model.evaluate import EvaluationResult, evaluate
from formal_rope.model.forward import MODES
from formal_rope.model.io import load_model, read_metadata, save_model
from formal_rope.model.ir import BOS, EOS, AttentionHead, FeedForward, Layer, Readout, RotaryPair, TransformerIR

__all__ = [
    "BOS",
    "EOS",
    "AttentionHead",
    "EvaluationResult",
    "FeedForward",
    "MODES",
    "Layer",
    "Readout",
    "RotaryPair",
    "TransformerIR",
    "evaluate",
    "load_model",
    "read_metadata",
    "save_model",
]
