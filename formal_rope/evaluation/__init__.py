"""Evaluation stage: how well trained and compiled models recognise their language.

- Length generalisation of a trained pack on its configs' seeded test sets (`pack_evaluation`:
  `evaluate_pack`, `evaluate_model`; the batched passes, per-length accuracy and N* in
  `length_generalization`) and NNCH's score on uniform strings (`nnch`): what every run reports.
- Worst-case evaluation: `engine.search` is the model-agnostic search for misclassified strings (a
  `Scorer` gives accept scores, the DFA gives labels); `worst_case` runs it on a model: a checkpoint,
  a compiled model, or a pack (`worst_case_pack`, what `train --eval worst-case` runs).
  docs/evaluation.md describes it.

The names load on first use (the trained-model evaluators import torch).
"""

from __future__ import annotations

from formal_rope._lazy import lazy_exports

_MODULES = {
    "formal_rope.evaluation.loading": ["Runnable", "load_runnable"],
    "formal_rope.evaluation.length_generalization": [
        "EVAL_MODES", "Evaluation", "evaluate_pack_sets", "evaluate_sets", "n_star", "predict_fixed_length",
        "predict_pack",
    ],
    "formal_rope.evaluation.nnch": ["nnch_score"],
    "formal_rope.evaluation.pack_evaluation": ["evaluate_model", "evaluate_pack", "first_failing_length"],
    "formal_rope.evaluation.engine": [
        "DEFAULT_BUDGET", "LengthSearch", "Scorer", "SearchSettings", "WorstCase", "mutate", "n_star_of", "search",
    ],
    "formal_rope.evaluation.models": [
        "CompiledScorer", "PackScorer", "model_dfa", "model_language", "sampled_start_sets", "scorer_for",
        "worst_case", "worst_case_pack",
    ],
}
_LAZY = {name: module for module, names in _MODULES.items() for name in names}

__all__ = sorted(_LAZY)
__getattr__, __dir__ = lazy_exports(__name__, _LAZY, globals())
