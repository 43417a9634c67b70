"""Training stage: RunConfig -> trained classifier: the model, the positional encodings, the loop
that trains a pack, its optimiser and its data (a whole run, `formalrope train`, is
`formal_rope.runs.run_training`; evaluating it, `formal_rope.evaluation`; what it stores,
`formal_rope.storage`; which runs share a pack, `formal_rope.scheduling`).

    config = RunConfig("(ab)*", pe="rope_p", **scale_overrides("quick"))   # formal_rope.run_config
    result, model = runs.run_training(config, progress=False)   # result.n_star, result.per_length
    evaluation.evaluate_model(model, config.with_(test_max_length=1000), resolve_dfa(config))  # re-evaluate
    load_checkpoint(path).classify(["abab"])                 # what `formalrope run` does for checkpoints

Importing this package does not import torch: every name loads on first access (the scale values
without torch, which the sweeps stage and the CLI use without training). The config and the
encodings' registry are `formal_rope.run_config`'s.
"""

from __future__ import annotations

from formal_rope._lazy import lazy_exports

# name -> module it lives in, imported on first access: the torch-based names because they import
# torch, the others so that importing a submodule (the CLI reads `training.encodings` at start-up)
# costs no more than that submodule.
_LAZY = {
    "LengthResult": "formal_rope.training.run_result",
    "RunResult": "formal_rope.training.run_result",
    "context_notes": "formal_rope.training.context",
    "QUICK_SHRINKS": "formal_rope.training.scales",
    "SCALES": "formal_rope.training.scales",
    "apply_scale": "formal_rope.training.scales",
    "scale_overrides": "formal_rope.training.scales",
    "TrainingProgress": "formal_rope.progress",
    "check_device": "formal_rope.training.setup",
    "resolve_dfa": "formal_rope.training.resolve",
    "resolve_periods": "formal_rope.training.resolve",
    "resolve_runs": "formal_rope.training.resolve",
    "ResolvedRun": "formal_rope.training.resolve",
    "check_trainable": "formal_rope.training.resolve",
    "build_model": "formal_rope.training.setup",
    "train_model": "formal_rope.training.train",
    "nnch_set": "formal_rope.training.data",
    "is_nnch_length": "formal_rope.training.data",
    "Classifier": "formal_rope.training.model",
    "PositionalSpec": "formal_rope.training.encodings.builders",
    "build_positional": "formal_rope.training.encodings.builders",
    "TrainedClassifier": "formal_rope.training.trained_classifier",
    "load_checkpoint": "formal_rope.training.trained_classifier",
}

__all__ = [*_LAZY]


__getattr__, __dir__ = lazy_exports(__name__, _LAZY, globals())
