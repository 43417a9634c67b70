"""CLI: `formalrope compile` — formula → exact transformer, verified against the DFA."""

from __future__ import annotations

import json
import sys
from contextlib import contextmanager
from pathlib import Path
from typing import Optional

import typer
from rich.console import Console, Group
from rich.progress import BarColumn, MofNCompleteColumn, TextColumn, TimeRemainingColumn
from rich.table import Table

from formal_rope.commands.run_options import MODE_HELP
from formal_rope.commands.terminal import prepare_out, stdout_console
from formal_rope.compiler import CompileOptions, VerificationOptions, compile_formula, compile_report, verify_compiled
from formal_rope.compiler.formula_search import SearchOptions
from formal_rope.compiler.language_to_formula import (
    DEFAULT_MAX_SIZE,
    DEFAULT_TIME_LIMIT,
    describe_method,
    formula_json,
    language_to_formula,
)
from formal_rope.compiler.verify import EXHAUSTIVE_BUDGET, EXHAUSTIVE_SYMBOL_BUDGET
from formal_rope.lang.source import resolve_formula_first, stored_language
from formal_rope.model.forward import check_mode
from formal_rope.model.io import save_model
from formal_rope.model.positional_needs import positional_needs
from formal_rope.progress import progress_display


def compile_command(
    formula: str = typer.Argument(
        ..., metavar="LANGUAGE",
        help="An LTL[P,Y,MOD] formula ('P(a) & MOD_2^0'; an 'ltl:' prefix is optional), or any language in "
        "LTL[P,MOD]: a regex ('(ab)*', 're:' optional), a registry name or a .att automaton, compiled through "
        "the formula `formalrope formula` prints (the automaton construction, or the search for MOD).",
    ),
    alphabet: Optional[str] = typer.Option(
        None, "--alphabet", "-a", help="Alphabet, e.g. 'ab' or 'a,b' (default: the symbols the formula mentions)."
    ),
    format_name: str = typer.Option(
        "fp32", "--format", "-F", help="Number format: fp32, bf16, fp16, fp64, fp8e4m3, fp8e5m2 or eXmY."
    ),
    freq: Optional[float] = typer.Option(
        None, "--freq", "-g", help="RoPE_NP angle g (radians per position) of the Y^k heads (default 1)."
    ),
    scale: Optional[float] = typer.Option(
        None, "--scale", "-C", help="Score scale C of the Y^k heads (default: chosen for the format, reported)."
    ),
    out: Optional[Path] = typer.Option(
        None, "--out", "-o", help="Write the model to this file (a zip with metadata.json + weights.npz)."
    ),
    verify_to: int = typer.Option(
        2000, "--verify-to", help="Longest sampled string length of the verification (0: exhaustive part only; at "
        "most 1,000,000, and --per-length × the sampled lengths at most 256,000,000 symbols)."
    ),
    exhaustive: int = typer.Option(
        10, "--exhaustive",
        help="Check every string up to this length (lowered, with a note, to stay within 4,096 strings and 45,056 "
        "symbols: 11 for two symbols, 299 for one).",
    ),
    per_length: Optional[int] = typer.Option(
        None, "--per-length", help="Sampled strings per length (half in L, half outside; default 8)."
    ),
    mode: str = typer.Option("emulated", "--mode", help=MODE_HELP),
    certify_mode: Optional[str] = typer.Option(
        None, "--certify",
        help="How Y^k certified lengths are computed: realized (the model's own rounded scores, default) or ideal.",
    ),
    certify_max_length: Optional[int] = typer.Option(
        None, "--certify-max-length",
        help="Realized certification scans query positions up to this length (O(L²); default 4096).",
    ),
    seed: Optional[int] = typer.Option(None, "--seed", help="Seed of the sampled verification strings (default 0)."),
    max_size: int = typer.Option(
        DEFAULT_MAX_SIZE, "--max-size", min=1,
        help="Largest formula the search for an LTL[P,MOD] \\ LTL[P] language tries, in nodes of its tree "
        "(a Boolean combination of atoms and MOD counts as one leaf; exit 1 when none is found).",
    ),
    time_limit: float = typer.Option(
        DEFAULT_TIME_LIMIT, "--time-limit", min=0.1,
        help="Seconds the search for an LTL[P,MOD] \\ LTL[P] language may take.",
    ),
    max_states: Optional[int] = typer.Option(
        None, "--max-states", min=1,
        help="Refuse to build the formula's DFA (labels of the sampled verification strings) with more states "
        "than this (default 10^6).",
    ),
    json_output: bool = typer.Option(False, "--json", help="Print one JSON object."),
) -> None:
    """Compile a formula or any LTL[P,MOD] language into an exact finite-precision transformer, checked on its DFA.

    Exit status 1 when the model disagrees with the DFA on a string inside its certified range, or
    when the search finds no formula; 2 for a language outside LTL[P,MOD] (with the decider's witness).
    """
    # Options left at None were not given: the library's defaults apply, and options that cannot
    # act on this formula or this verification are named in a note rather than silently ignored.
    y_options = _given(freq=freq, scale=scale, certify_mode=certify_mode, certify_max_length=certify_max_length)
    sampling_options = _given(per_length=per_length, seed=seed, max_states=max_states)
    verify_options = VerificationOptions(
        mode=mode, exhaustive_up_to=exhaustive, verify_to=verify_to, **sampling_options
    )
    compile_options = CompileOptions(fmt=format_name, **y_options)
    check_mode(mode, compile_options.fmt)  # before compiling, which can take a while
    if out is not None:
        prepare_out(out, "model file")  # before compiling, which can take a while
    language = resolve_formula_first(formula, alphabet)
    if language.detected:  # a registry entry brought its alphabet: say which
        print(f"note: {formula!r} {language.detected}", file=sys.stderr)
    built = None
    if language.kind == "ltl":  # compiled as written, whatever its fragment (the compiler names what it lacks)
        compiled = compile_formula(language.ast, language.alphabet, compile_options)
    else:
        built = language_to_formula(language, search=SearchOptions(max_size=max_size, time_limit=time_limit))
        if not json_output:
            print(f"note: {language.label} compiled through {describe_method(built)}", file=sys.stderr)
        compiled = compile_formula(built.formula, built.alphabet, compile_options, language=stored_language(language))
    if y_options and compiled.y_scale is None:
        print(
            f"note: {', '.join(_flags(y_options))} set the Y^k heads, and {compiled.formula_text} has none: no effect",
            file=sys.stderr,
        )
    with _verification_progress(not json_output) as (on_total, on_progress):
        verification = verify_compiled(compiled, verify_options, on_total=on_total, on_progress=on_progress,
                                       dfa=None if built is None else built.dfa)
    if verification.exhaustive_up_to < exhaustive:
        print(f"note: --exhaustive {exhaustive} lowered to {verification.exhaustive_up_to}: every string up to length "
              f"{exhaustive} over {len(compiled.alphabet)} symbol(s) is more than EXHAUSTIVE_BUDGET = "
              f"{EXHAUSTIVE_BUDGET:,} strings or EXHAUSTIVE_SYMBOL_BUDGET = {EXHAUSTIVE_SYMBOL_BUDGET:,} symbols "
              "(longer strings are sampled up to --verify-to)", file=sys.stderr)
    if sampling_options and not verification.sampled_lengths:
        print(f"note: {', '.join(_flags(sampling_options))} set the sampled verification strings (and their DFA), and "
              f"--verify-to {verify_to} samples none (only the exhaustive part up to length "
              f"{verification.exhaustive_up_to}): no effect", file=sys.stderr)
    if out is not None:
        save_model(compiled.ir, out)
    if json_output:
        report = compile_report(compiled, verification, out)
        if built is not None:
            report["language"] = {"source": language.spec, "kind": language.kind, **formula_json(built)}
        print(json.dumps(report, ensure_ascii=False))
    else:
        _print_report(compiled, verification, out)
    if not verification.ok:
        raise typer.Exit(1)


def _given(**options) -> dict:
    """The options the user gave (Typer leaves the others at None), in declaration order."""
    return {name: value for name, value in options.items() if value is not None}


_FLAGS = {"certify_mode": "--certify"}  # the one keyword whose flag is not its name


def _flags(options: dict) -> list[str]:
    """The command-line flags of library keyword arguments: certify_max_length → --certify-max-length."""
    return [_FLAGS.get(name, "--" + name.replace("_", "-")) for name in options]


@contextmanager
def _verification_progress(show: bool):
    """(on_total, on_progress) for `verify_compiled`: a progress bar on stderr, or (None, None)."""
    if not show:
        yield None, None
        return
    bar = progress_display(TextColumn("verifying against the DFA"), BarColumn(), MofNCompleteColumn(),
                           TimeRemainingColumn(), transient=True, console=Console(stderr=True),
                           label="verifying against the DFA")
    task = bar.add_task("", total=None)

    def on_total(total: int) -> None:
        # Started once the strings are known, so errors before that (DFA too large) leave no bar behind.
        bar.start()
        bar.update(task, total=total)

    try:
        yield on_total, lambda done: bar.advance(task, done)
    finally:
        bar.stop()


def _print_report(compiled, verification, out: Path | None) -> None:
    console = stdout_console()
    model = compiled.ir
    large = model.metadata["f_large"]  # what the compiler recorded for its format
    console.print(
        f"[bold]{compiled.formula_text}[/bold] over {{{', '.join(compiled.alphabet)}}} in {compiled.options.fmt.name} "
        f"(f_large = {large:.9g}): {len(model.layers)} layers, {model.n_heads} heads, d_model = {model.d_model}"
    )
    console.print(_model_table(model))
    console.print("positional machinery needed: " + positional_needs(model).summary(), markup=False, highlight=False)
    constructs = Table(title="constructs: score margins vs f_large")
    for column in ("construct", "formula", "layer", "scale C", "margin", "margin / f_large", "certified length"):
        constructs.add_column(column, overflow="fold")  # never cut a number short
    for c in compiled.constructs:
        certified = (
            ""
            if c.certified_length is None
            else f"{c.certified_length}{'+' if c.certified_is_lower_bound else ''} {c.certified_mode}"
        )
        constructs.add_row(
            c.construct, c.formula, str(c.layer), "" if c.scale is None else f"{c.scale:.7g}",
            "" if c.margin is None else f"{c.margin:.7g}", "" if c.margin is None else f"{c.margin / large:.4f}",
            certified,
        )
    console.print(constructs)
    # The notes (certificates, scale rules) are long: one line each below the table stays readable
    # in 80 columns, where an eighth column was squeezed to a few characters.
    for c in compiled.constructs:
        console.print(f"  {c.construct} {c.formula}: {c.detail}", markup=False, highlight=False)
    if compiled.y_scale is not None:
        how = (
            "chosen by the compiler: best realized range among the candidate scales"
            if compiled.y_scale.chosen
            else "given by --scale"
        )
        console.print(f"Y heads: g = {compiled.options.freq:g}, C = {compiled.y_scale.scale:g} ({how})")
    certified = compiled.certified_length
    if certified is None:
        certified_text = "unbounded (no Y heads: exact at every length)"  # and no P head can overflow
    elif compiled.certified_length_is_lower_bound:
        certified_text = (f">= {certified} (the realized scan, capped at min(--certify-max-length, ideal N_max + 2), "
                          "found no failure)")
    else:
        certified_text = f"{certified}"
    console.print("certified length: " + certified_text)
    console.print(
        f"verification ({verification.mode} {verification.format}): {verification.verified_strings} strings, all up to "
        f"length {verification.exhaustive_up_to}, sampled at {len(verification.sampled_lengths)} lengths up to "
        f"{verification.verified_max_length}: {verification.disagreements} disagreements"
    )
    if verification.certified_length != compiled.certified_length:
        console.print(f"certified length in {verification.mode} {verification.format} arithmetic (used for the "
                      f"verification): {verification.certified_length}")
    first = verification.first_disagreement
    if first is not None:
        shown = first.string if len(first.string) <= 80 else first.string[:38] + "…" + first.string[-38:]
        place = "INSIDE" if first.inside_certified_range else "outside"
        console.print(
            f"first disagreement: length {first.length}, expected {first.expected}, got {first.got} ({place} the "
            f"certified range): {shown!r}"
        )
    if out is not None:
        console.print(f"model written to {out}")


def _model_table(model, title: str | None = None):
    """A Rich renderable: layers, heads (rotary schedules, dims), feed-forward widths, coordinates."""
    layers = Table(title=title or "layers", show_lines=False)
    layers.add_column("layer", justify="right")
    layers.add_column("head")
    layers.add_column("d_head×d_v", justify="right")
    layers.add_column("rotary pairs")
    layers.add_column("what")
    for number, layer in enumerate(model.layers, start=1):
        for head in layer.heads:
            layers.add_row(
                str(number),
                head.name,
                f"{head.d_head}×{head.d_value}",
                ", ".join(pair.describe() for pair in head.rotary),
                head.description,
            )
        hidden = 0 if layer.feed_forward is None else layer.feed_forward.d_hidden
        layers.add_row(str(number), "FFN", f"{hidden} hidden", "", "ReLU block (snaps, Boolean connectives)")
    coords = Table(title=f"residual coordinates (d_model = {model.d_model})")
    coords.add_column("#", justify="right")
    coords.add_column("coordinate")
    for position, name in enumerate(model.coordinates):
        marker = "  ← readout" if model.readout.kind == "coordinate" and model.readout.coordinate == position else ""
        coords.add_row(str(position), name + marker)
    return Group(layers, coords)
