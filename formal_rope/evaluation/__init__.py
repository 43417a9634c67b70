"""Evaluation stage: worst-case evaluation of saved models (trained or compiled) against a language.

`engine.search` is the model-agnostic search for misclassified strings (a `Scorer` gives accept scores,
the DFA gives labels); `worst_case` runs it on a model: a checkpoint, a compiled model, or a pack
(`worst_case_pack`, what `train --eval worst-case` runs). docs/evaluation.md describes both.

The names load on first use (`worst_case` imports torch).
"""

from __future__ import annotations

from formal_rope._lazy import lazy_exports

_MODULES = {
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
