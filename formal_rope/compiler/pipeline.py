"""The compiler pipeline: formula → DAG → schedule → coordinates/weights → IR, plus the Y-head scale.

``compile_formula`` is the one entry point; each stage is a pure function in its own module.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from typing import Any, Sequence

from formal_rope.compiler.build import CompileOptions, ConstructReport, schedule_to_ir
from formal_rope.compiler.dag import FormulaDag, formula_to_dag
from formal_rope.compiler.schedule import Schedule, dag_to_schedule
from formal_rope.errors import FormalRopeError
from formal_rope.lang.ast import Formula
from formal_rope.lang.printer import format_ltl
from formal_rope.model.ir import TransformerIR


@dataclass(frozen=True)
class YScaleChoice:
    """The score scale C of the Y heads: picked for the longest certified length, or given by the caller."""

    scale: float
    chosen: bool  # True: picked by the compiler, False: given by --scale
    candidates: tuple[tuple[float, int], ...]  # (C, ideal N_max) scanned


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

    @property
    def certified_length(self) -> int | None:
        """min over Y heads of N_max^(k)(g, C, F) and, in formats whose softmax denominator can
        overflow (``ones_sum_overflow``), over P heads; None otherwise (exact at every length)."""
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
        from formal_rope.precision.formats import f_large

        return {
            "kind": "compiled",
            "formula": self.formula_text,
            "alphabet": list(self.alphabet),
            "format": self.options.fmt,
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


def choose_y_scale(offsets: Sequence[int], freq: float, fmt: str, max_length: int) -> YScaleChoice:
    """A scale C for the Y heads: among powers of two from 2·f_large up to 2^(M+9) (and below
    max_finite/4), the one with the largest *realized* certified range for the smallest offset.
    Formats too narrow for that range (2·f_large > max_finite/4) scan the powers of two and their
    1.5 multiples in (f_large/2, max_finite] instead.

    Ideal ranges (cheap) are computed for every candidate; realized ranges (brute force) are
    computed in order of decreasing ideal range (smaller C first among ties), at most six times,
    stopping at the first candidate whose realized range reaches its ideal one.
    """
    from formal_rope.certify import certified_range
    from formal_rope.precision.formats import f_large, parse_format

    fmt_obj = parse_format(fmt)
    large = f_large(fmt_obj)
    k = min(offsets)
    low = math.ceil(math.log2(2 * large))
    high = min(fmt_obj.mantissa_bits + 9, math.floor(math.log2(fmt_obj.max_finite)) - 2)
    candidates = [float(2**exponent) for exponent in range(low, high + 1)]
    if not candidates:
        # Narrow exponent ranges (e3m4, e4m20, …): 2·f_large does not fit under max_finite/4. Fall
        # back to the powers of two and their 1.5 multiples that can still win (C > f_large/2) and
        # are finite in F: with so few finite values the coarser grid often misses every good C.
        top = math.floor(math.log2(fmt_obj.max_finite))
        candidates = sorted(
            scale
            for exponent in range(math.floor(math.log2(large / 2)), top + 1)
            for scale in (float(2**exponent), 1.5 * 2**exponent)
            if large / 2 < scale <= fmt_obj.max_finite
        )
        if not candidates:
            raise FormalRopeError(
                f"no Y scale C with f_large/2 < C <= max_finite fits {fmt_obj.describe()}; pass one (--scale / scale=)"
            )
    scanned = [(scale, certified_range(k, freq, scale, fmt_obj, "ideal").n_max) for scale in candidates]
    best_scale, best_realized = scanned[0][0], -1
    for evaluated, (scale, ideal) in enumerate(sorted(scanned, key=lambda item: (-item[1], item[0]))):
        if evaluated >= 6 or ideal <= best_realized:
            break
        cap = min(max_length, max(ideal, k) + 2)
        realized = certified_range(k, freq, scale, fmt_obj, "realized", max_length=cap).n_max
        if realized > best_realized:
            best_scale, best_realized = scale, realized
        if realized >= ideal:
            break
    return YScaleChoice(scale=best_scale, chosen=True, candidates=tuple(scanned))


# Largest model the compiler builds (float64 parameters: 2^26 is 512 MiB of weights).
MAX_MODEL_PARAMETERS = 2**26


def _check_model_size(formula: Formula) -> None:
    """Refuse before building: Y^k is gated by P^k(true), k nested P heads in k layers over a
    residual stream of about 2k coordinates, so its weights grow like k² (about 12·k² parameters
    at least). Y^99999 used to run for minutes and gigabytes before failing."""
    from formal_rope.lang.analysis import max_lookback

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
    from formal_rope.compiler.build import schedule_to_coordinates

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
    *,
    fmt: str = "fp32",
    freq: float = 1.0,
    scale: float | None = None,
    certify_mode: str = "realized",
    certify_max_length: int = 4096,
) -> CompiledModel:
    """Compile an LTL[P,Y,MOD] formula (an AST, or its text: ``"P(a) & MOD_2^0"``, an optional
    ``ltl:`` prefix) into an exact transformer for ``fmt`` (see docs/compiler.md)."""
    if isinstance(formula, str):
        from formal_rope.lang.parser import parse_ltl

        text = formula.strip()
        formula = parse_ltl(text[4:] if text.lower().startswith("ltl:") else text, tuple(alphabet))
    from formal_rope.certify import certified_range
    from formal_rope.precision.formats import f_large, parse_format

    fmt_obj = parse_format(fmt)
    f_large(fmt_obj)  # raises for formats without a finite f_large
    if not (math.isfinite(freq) and freq > 0):
        raise FormalRopeError(f"freq (--freq) must be a positive finite angle in radians (got {freq})")
    if scale is not None and not (math.isfinite(scale) and scale > 0):
        raise FormalRopeError(f"scale (--scale) must be a positive finite number (got {scale})")
    if certify_mode not in ("realized", "ideal"):
        raise FormalRopeError(f"unknown certify mode {certify_mode!r}; use realized or ideal")
    alphabet = tuple(alphabet)
    if not alphabet:
        raise FormalRopeError("the alphabet is empty; pass the symbols the formula reads (--alphabet / alphabet=)")
    _check_model_size(formula)
    options = CompileOptions(fmt=fmt_obj.name, freq=float(freq), scale=scale, certify_mode=certify_mode,
                             certify_max_length=certify_max_length)
    dag = formula_to_dag(formula, alphabet)
    schedule = dag_to_schedule(dag)
    _check_schedule_size(schedule)
    offsets = _y_offsets(dag)
    y_choice = None
    if offsets:
        if scale is None:
            y_choice = choose_y_scale(offsets, freq, fmt_obj.name, certify_max_length)
        else:
            from formal_rope.precision.formats import round_to_format

            stored = float(round_to_format(scale, fmt_obj))
            if not math.isfinite(stored):
                raise FormalRopeError(f"scale (--scale) {scale:g} overflows {fmt_obj.name}")
            y_choice = YScaleChoice(scale=float(scale), chosen=False, candidates=())
    ir, reports = schedule_to_ir(schedule, options, None if y_choice is None else y_choice.scale)

    certified: list[ConstructReport] = []
    for report in reports:
        if report.construct != "Y":
            certified.append(report)
            continue
        node = next(n for n in dag.nodes if n.kind == "yesterday" and n.text == report.formula)
        k = int(node.offset)
        ideal = certified_range(k, freq, y_choice.scale, fmt_obj, "ideal")
        if certify_mode == "realized":
            cap = min(certify_max_length, max(ideal.n_max, k) + 2)
            realized = certified_range(k, freq, y_choice.scale, fmt_obj, "realized", max_length=cap)
            length, lower_bound, margin = realized.n_max, realized.n_max_is_lower_bound, realized.violation_gap
        else:
            length, lower_bound, margin = ideal.n_max, False, ideal.violation_gap
        certified.append(
            replace(
                report,
                certified_length=int(length),
                certified_mode=certify_mode,
                certified_ideal=int(ideal.n_max),
                certified_is_lower_bound=bool(lower_bound),
                margin=None,
                detail=report.detail
                + f"; N_max^({k}) = {length}{'+' if lower_bound else ''} ({certify_mode}), ideal {ideal.n_max}, "
                f"paper bound C·δ_L >= f_large up to {ideal.paper_sufficient_bound}"
                + ("" if margin is None else f"; first failing gap {margin:.6g} < f_large"),
            )
        )
    compiled = CompiledModel(
        formula=formula,
        formula_text=format_ltl(formula),
        alphabet=alphabet,
        options=options,
        dag=dag,
        schedule=schedule,
        ir=ir,
        constructs=tuple(certified),
        y_scale=y_choice,
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
