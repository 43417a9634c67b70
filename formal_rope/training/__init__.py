"""Training stage: RunConfig -> trained classifier -> per-length accuracy and N* (what `formalrope train` does).

    config = RunConfig("(ab)*", pe="rope_p", **scale_overrides("quick"))
    result, model = run_training(config, progress=False)   # result.n_star, result.per_length
    evaluate_model(model, config.with_(test_max_length=1000), resolve_dfa(config))   # re-evaluate
    load_checkpoint(path).classify(["abab"])                 # what `formalrope run` does for checkpoints

Importing this package does not import torch: the config and scale values load eagerly (the sweeps
stage uses them without training), the torch-based names load on first access.
"""

from __future__ import annotations

from formal_rope._lazy import lazy_exports
from formal_rope.training.config import (
    FIELD_APPLIES_TO,
    POSITIONAL_ENCODINGS,
    LengthResult,
    RunConfig,
    RunResult,
    legacy_run_id,
    lengths_fields,
    parse_field_text,
)
from formal_rope.training.context import context_notes
from formal_rope.training.scales import QUICK_SHRINKS, SCALES, apply_scale, scale_overrides
from formal_rope.training.workload import Workload, check_workload

# name -> module it lives in; imported on first access because each of these imports torch.
_LAZY = {
    "TrainingProgress": "formal_rope.training.train",
    "validate_config": "formal_rope.training.train",
    "validate_device": "formal_rope.training.train",
    "resolve_dfa": "formal_rope.training.train",
    "resolve_periods": "formal_rope.training.train",
    "build_model": "formal_rope.training.train",
    "train_model": "formal_rope.training.train",
    "evaluate_model": "formal_rope.training.train",
    "run_training": "formal_rope.training.train",
    "EVAL_MODES": "formal_rope.training.evaluate",
    "Evaluation": "formal_rope.training.evaluate",
    "n_star": "formal_rope.training.evaluate",
    "evaluate_sets": "formal_rope.training.evaluate",
    "predict_fixed_length": "formal_rope.training.evaluate",
    "Classifier": "formal_rope.training.model",
    "PositionalSpec": "formal_rope.training.positional",
    "build_positional": "formal_rope.training.positional",
    "TrainedClassifier": "formal_rope.training.checkpoint",
    "load_checkpoint": "formal_rope.training.checkpoint",
    "save_checkpoint": "formal_rope.training.checkpoint",
}

__all__ = [
    "FIELD_APPLIES_TO",
    "LengthResult",
    "POSITIONAL_ENCODINGS",
    "QUICK_SHRINKS",
    "RunConfig",
    "RunResult",
    "SCALES",
    "Workload",
    "apply_scale",
    "check_workload",
    "context_notes",
    "legacy_run_id",
    "lengths_fields",
    "parse_field_text",
    "scale_overrides",
    *_LAZY,
]


__getattr__, __dir__ = lazy_exports(__name__, _LAZY, globals())
