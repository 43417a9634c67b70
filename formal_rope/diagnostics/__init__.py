"""Phase diagnostics (SPEC §10, paper 003): per-pair decomposition of rotary attention scores.

`capture_heads(model, string)` reads each rotary head's pre-rotation queries/keys, realized
rotation angles and actual scores; `decompose_head` splits every score into Σ_p ρ_p cos δ_p;
`check_lemma1` checks the paper's Lemma 1 where its hypothesis holds.
"""

from formal_rope.diagnostics.capture import (
    CapturedHeads,
    capture_compiled,
    capture_heads,
    capture_trained,
    compiled_forward,
    load_model_any,
    model_layout,
)
from formal_rope.diagnostics.phases import (
    HeadInputs,
    HeadPhases,
    Lemma1Check,
    check_lemma1,
    decompose_head,
    lemma1_arrays,
    wrap_phase,
)
from formal_rope.diagnostics.report import check_phase_options, check_query, head_summary, phases_summary, resolve_heads

__all__ = [
    "CapturedHeads",
    "HeadInputs",
    "HeadPhases",
    "Lemma1Check",
    "capture_compiled",
    "capture_heads",
    "capture_trained",
    "check_lemma1",
    "check_phase_options",
    "check_query",
    "compiled_forward",
    "decompose_head",
    "head_summary",
    "lemma1_arrays",
    "load_model_any",
    "model_layout",
    "phases_summary",
    "resolve_heads",
    "wrap_phase",
]
