"""Compiler: LTL[P,Y,MOD] formulas → exact transformers (TransformerIR), tracr-style stages.

formula_to_dag → dag_to_schedule → schedule_to_coordinates → schedule_to_ir, driven by
``compile_formula``; ``verify.verify_compiled`` checks a compiled model against the formula's DFA.
"""

from formal_rope.compiler.build import CompileOptions, ConstructReport, schedule_to_coordinates, schedule_to_ir
from formal_rope.compiler.dag import DagNode, FormulaDag, formula_to_dag
from formal_rope.compiler.pipeline import CompiledModel, YScaleChoice, choose_y_scale, compile_formula
from formal_rope.compiler.schedule import Schedule, dag_to_schedule
from formal_rope.compiler.verify import Disagreement, VerificationResult, verify_compiled

__all__ = [
    "CompileOptions",
    "CompiledModel",
    "ConstructReport",
    "DagNode",
    "Disagreement",
    "FormulaDag",
    "Schedule",
    "VerificationResult",
    "YScaleChoice",
    "choose_y_scale",
    "compile_formula",
    "dag_to_schedule",
    "formula_to_dag",
    "schedule_to_coordinates",
    "schedule_to_ir",
    "verify_compiled",
]
