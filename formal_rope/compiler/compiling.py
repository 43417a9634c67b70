"""The compiler's driver: ``compile_formula`` calls one stage per module, as tracr's compiling.py does.

formula → ``formula_to_dag`` (dag.py) → ``dag_to_schedule`` (schedule.py) → ``choose_y_scale``
(y_scale.py) → ``schedule_to_ir`` (schedule_to_model.py) → the certified lengths of the Y heads
(formal_rope.certify) → a ``CompiledModel`` whose IR carries the compiler's records as metadata.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from typing import Any, Sequence

from formal_rope.certify import certified_range
from formal_rope.compiler.dag import FormulaDag, formula_to_dag
from formal_rope.compiler.schedule import Schedule, dag_to_schedule
from formal_rope.compiler.schedule_to_model import (
    CompileOptions,
    ConstructReport,
    schedule_to_coordinates,
    schedule_to_ir,
)
from formal_rope.compiler.y_scale import YScaleChoice, choose_y_scale
from formal_rope.errors import FormalRopeError
from formal_rope.lang.analysis import max_lookback
from formal_rope.lang.ast import Formula
from formal_rope.lang.parser import parse_ltl
from formal_rope.lang.printer import format_ltl
from formal_rope.model.ir import TransformerIR
from formal_rope.precision import f_large, round_to_format


@dataclass(frozen=True)
class CompiledModel:
    """A compiled formula: the runnable `ir`, every intermediate stage, and a report per attention construct.

    `certified_length` is the longest input on which it is guaranteed exact (None: every length).
    """

    formula: Formula
    formula_text: str
    alphabet: tuple[str, ...]
    options: CompileOptions
    dag: FormulaDag
    schedule: Schedule
    ir: TransformerIR
    constructs: tuple[ConstructReport, ...]
    y_scale: YScaleChoice | None
    language: str | None = None  # the source the formula was built from (compile_formula's `language`)

    @property
    def certified_length(self) -> int | None:
        """min over Y heads of N_max^(k)(g, C, F) and, in formats whose softmax denominator can
        overflow (``precision.ones_sum_overflow``), over P heads; None otherwise (exact at every length)."""
        lengths = [c.certified_length for c in self.constructs if c.certified_length is not None]
        return min(lengths) if lengths else None

    @property
    def certified_length_is_lower_bound(self) -> bool:
        """True when the realized scans of the Y heads attaining the minimum stopped without a
        failure (--certify-max-length): the true certified length is then at least that long."""
        lengths = [c for c in self.constructs if c.certified_length is not None]
        if not lengths:
            return False
        shortest = min(c.certified_length for c in lengths)
        return all(c.certified_is_lower_bound for c in lengths if c.certified_length == shortest)

    def metadata(self) -> dict[str, Any]:
        return {
            "kind": "compiled",
            "formula": self.formula_text,
            **({} if self.language is None else {"language": self.language}),
            "alphabet": list(self.alphabet),
            "format": self.options.fmt.name,
            "f_large": f_large(self.options.fmt),
            "freq": self.options.freq,
            "y_scale": None if self.y_scale is None else self.y_scale.scale,
            "y_scale_chosen_by_compiler": None if self.y_scale is None else self.y_scale.chosen,
            "certified_length": self.certified_length,
            "certified_length_is_lower_bound": self.certified_length_is_lower_bound,
            "constructs": [c.to_json() for c in self.constructs],
        }


def _y_offsets(dag: FormulaDag) -> list[int]:
    return sorted({int(node.offset) for node in dag.nodes if node.kind == "yesterday"})


# Largest model the compiler builds (float64 parameters: 2^26 is 512 MiB of weights).
MAX_MODEL_PARAMETERS = 2**26


def _check_model_size(formula: Formula) -> None:
    """Refuse before building: Y^k is gated by P^k(true), k nested P heads in k layers over a
    residual stream of about 2k coordinates, so its weights grow like k² (about 12·k² parameters
    at least). Y^99999 used to run for minutes and gigabytes before failing."""
    k = max_lookback(formula)
    estimate = 12 * k * k
    if estimate > MAX_MODEL_PARAMETERS:
        largest = math.isqrt(MAX_MODEL_PARAMETERS // 12)
        raise FormalRopeError(
            f"Y^{k} needs a gate of {k} nested P heads: at least {k} layers, a residual stream of about {2 * k} "
            f"coordinates and {estimate:,} parameters, more than the compiler builds ({MAX_MODEL_PARAMETERS:,}); "
            f"offsets up to about k = {largest} compile"
        )


def _check_schedule_size(schedule: Schedule) -> None:
    """The same limit for any formula (deeply nested P or Y): every head holds a few d_model-wide rows
    and feeds two or three feed-forward units, about 10·d_model parameters per head."""
    heads = sum(layer is not None for layer in schedule.head_layer)
    d_model = len(schedule_to_coordinates(schedule))
    estimate = 10 * max(heads, 1) * d_model
    if estimate > MAX_MODEL_PARAMETERS:
        raise FormalRopeError(
            f"the formula needs {schedule.n_layers} layers, {heads} attention heads and a residual stream of {d_model} "
            f"coordinates, about {estimate:,} parameters, more than the compiler builds ({MAX_MODEL_PARAMETERS:,})"
        )


def compile_formula(
    formula: Formula | str,
    alphabet: Sequence[str],
    options: CompileOptions | None = None,
    language: str | None = None,
    **settings,
) -> CompiledModel:
    """Compile an LTL[P,Y,MOD] formula (an AST, or its text: ``"P(a) & MOD_2^0"``, an optional
    ``ltl:`` prefix) into an exact transformer (see docs/compiler.md).

    The settings are `options` (a CompileOptions, checked when it was built) or, from Python, its
    fields as keywords: ``fmt="fp32"``, ``freq``, ``scale``, ``certify_mode``, ``certify_max_length``.
    `language`: the source the formula was built from (a regex, a registry name, a .att path;
    `formal_rope.compiler.language_to_formula`), recorded in the model's metadata so that `attack`
    and the atlas label strings with its DFA rather than building the formula's own automaton.
    """
    if options is None:
        options = CompileOptions(**settings)
    elif settings:
        raise TypeError(f"compile_formula takes options or the keywords {', '.join(settings)}, not both")
    if isinstance(formula, str):
        text = formula.strip()
        formula = parse_ltl(text[4:] if text.lower().startswith("ltl:") else text, tuple(alphabet))
    alphabet = tuple(alphabet)
    if not alphabet:
        raise FormalRopeError("the alphabet is empty; pass the symbols the formula reads (--alphabet / alphabet=)")
    _check_model_size(formula)
    dag = formula_to_dag(formula, alphabet)
    schedule = dag_to_schedule(dag)
    _check_schedule_size(schedule)
    y_choice = _y_scale(dag, options)
    ir, reports = schedule_to_ir(schedule, options, None if y_choice is None else y_choice.scale)
    compiled = CompiledModel(
        formula=formula,
        formula_text=format_ltl(formula),
        alphabet=alphabet,
        options=options,
        dag=dag,
        schedule=schedule,
        ir=ir,
        constructs=tuple(_certify_y_heads(reports, dag, options, y_choice)),
        y_scale=y_choice,
        language=language,
    )
    ir_with_metadata = TransformerIR(
        coordinates=ir.coordinates,
        vocabulary=ir.vocabulary,
        embedding=ir.embedding,
        layers=ir.layers,
        readout=ir.readout,
        metadata=compiled.metadata(),
    )
    return replace(compiled, ir=ir_with_metadata)


def _y_scale(dag: FormulaDag, options: CompileOptions) -> YScaleChoice | None:
    """The Y heads' scale: the given one (checked to fit the format), else the compiler's choice."""
    offsets = _y_offsets(dag)
    if not offsets:
        return None
    if options.scale is None:
        return choose_y_scale(offsets, options.freq, options.fmt, options.certify_max_length)
    stored = float(round_to_format(options.scale, options.fmt))
    if not math.isfinite(stored):
        raise FormalRopeError(f"scale (--scale) {options.scale:g} overflows {options.fmt.name}")
    return YScaleChoice(scale=float(options.scale), chosen=False, candidates=())


def _certify_y_heads(reports: list[ConstructReport], dag: FormulaDag, options: CompileOptions,
                     y_choice: YScaleChoice | None) -> list[ConstructReport]:
    """Every Y head's report completed with its certified length N_max^(k)(g, C, F) (realized or ideal)."""
    certified: list[ConstructReport] = []
    for report in reports:
        if report.construct != "Y":
            certified.append(report)
            continue
        node = next(n for n in dag.nodes if n.kind == "yesterday" and n.text == report.formula)
        k = int(node.offset)
        ideal = certified_range(k, options.freq, y_choice.scale, options.fmt, "ideal")
        if options.certify_mode == "realized":
            cap = min(options.certify_max_length, max(ideal.n_max, k) + 2)
            realized = certified_range(k, options.freq, y_choice.scale, options.fmt, "realized", max_length=cap)
            length, lower_bound, margin = realized.n_max, realized.n_max_is_lower_bound, realized.violation_gap
        else:
            length, lower_bound, margin = ideal.n_max, False, ideal.violation_gap
        certified.append(
            replace(
                report,
                certified_length=int(length),
                certified_mode=options.certify_mode,
                certified_ideal=int(ideal.n_max),
                certified_is_lower_bound=bool(lower_bound),
                margin=None,
                detail=report.detail
                + f"; N_max^({k}) = {length}{'+' if lower_bound else ''} "
                f"({options.certify_mode}), ideal {ideal.n_max}, "
                f"paper bound C·δ_L >= f_large up to {ideal.paper_sufficient_bound}"
                + ("" if margin is None else f"; first failing gap {margin:.6g} < f_large"),
            )
        )
    return certified
