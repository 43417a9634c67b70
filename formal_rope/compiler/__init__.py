"""Compiler: LTL[P,Y,MOD] formulas → exact transformers (TransformerIR), tracr-style stages.

One module per stage, each a pure function named after what it turns into what:
``formula_to_dag`` (dag.py) → ``dag_to_schedule`` (schedule.py) → ``choose_y_scale`` (y_scale.py) →
``schedule_to_coordinates`` / ``schedule_to_ir`` (schedule_to_model.py), driven by
``compile_formula`` (compiling.py); ``verify_compiled`` (verify.py) checks a compiled model against
the formula's DFA and ``compile_report`` is the JSON object of `formalrope compile`;
``language_to_formula`` (language_to_formula.py) turns any LTL[P,MOD] language into a verified formula
(`formalrope formula`).
"""

from formal_rope.compiler.compiling import CompiledModel, compile_formula
from formal_rope.compiler.dag import DagNode, FormulaDag, formula_to_dag
from formal_rope.compiler.language_to_formula import LanguageFormula, NoFormulaFound, formula_json, language_to_formula
from formal_rope.compiler.schedule import Schedule, dag_to_schedule
from formal_rope.compiler.schedule_to_model import (
    CompileOptions,
    ConstructReport,
    schedule_to_coordinates,
    schedule_to_ir,
)
from formal_rope.compiler.verify import (
    Disagreement,
    VerificationOptions,
    VerificationResult,
    compile_report,
    verify_compiled,
)
from formal_rope.compiler.y_scale import YScaleChoice, choose_y_scale

__all__ = [
    "CompileOptions",
    "CompiledModel",
    "ConstructReport",
    "DagNode",
    "Disagreement",
    "FormulaDag",
    "LanguageFormula",
    "NoFormulaFound",
    "Schedule",
    "VerificationOptions",
    "VerificationResult",
    "YScaleChoice",
    "choose_y_scale",
    "compile_formula",
    "compile_report",
    "dag_to_schedule",
    "formula_json",
    "formula_to_dag",
    "language_to_formula",
    "schedule_to_coordinates",
    "schedule_to_ir",
    "verify_compiled",
]
