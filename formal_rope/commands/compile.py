"""CLI: `formalrope compile` (formula → exact transformer, verified against the DFA) and `formalrope run`."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import List, Optional

import typer

from formal_rope.commands.output import stdout_console

from formal_rope.errors import FormalRopeError

_MODE_HELP = (
    "emulated: round every elementary operation into the format, left-to-right sums (any format). "
    "native: torch arithmetic in the format's dtype (fp64/fp32/bf16/fp16)."
)


def compile_command(
    formula: str = typer.Argument(..., help="LTL[P,Y,MOD] formula, e.g. 'P(a) & MOD_2^0' (an 'ltl:' prefix is optional)."),
    alphabet: Optional[str] = typer.Option(
        None, "--alphabet", "-a", help="Alphabet, e.g. 'ab' or 'a,b' (default: the symbols the formula mentions)."
    ),
    format_name: str = typer.Option("fp32", "--format", "-F", help="Number format: fp32, bf16, fp16, fp64, fp8e4m3, fp8e5m2 or eXmY."),
    freq: float = typer.Option(1.0, "--freq", "-g", help="RoPE_NP angle g (radians per position) of the Y^k heads."),
    scale: Optional[float] = typer.Option(
        None, "--scale", "-C", help="Score scale C of the Y^k heads (default: chosen for the format, reported)."
    ),
    out: Optional[Path] = typer.Option(None, "--out", "-o", help="Write the model to this file (a zip with metadata.json + weights.npz)."),
    verify_to: int = typer.Option(2000, "--verify-to", help="Longest sampled string length of the verification (0: exhaustive part only)."),
    exhaustive: int = typer.Option(10, "--exhaustive", help="Check every string up to this length (lowered for large alphabets)."),
    per_length: int = typer.Option(8, "--per-length", help="Sampled strings per length (half in L, half outside)."),
    mode: str = typer.Option("emulated", "--mode", help=_MODE_HELP),
    certify_mode: str = typer.Option(
        "realized", "--certify", help="How Y^k certified lengths are computed: realized (the model's own rounded scores) or ideal."
    ),
    certify_max_length: int = typer.Option(
        4096, "--certify-max-length", help="Realized certification scans query positions up to this length (O(L²))."
    ),
    seed: int = typer.Option(0, "--seed", help="Seed of the sampled verification strings."),
    max_states: int = typer.Option(
        10**6, "--max-states", min=1,
        help="Refuse to build the formula's DFA (for the verification labels) with more states than this.",
    ),
    json_output: bool = typer.Option(False, "--json", help="Print one JSON object."),
) -> None:
    """Compile a formula into an exact finite-precision transformer and verify it against the DFA.

    Exit status 1 when the model disagrees with the DFA on a string inside its certified range.
    """
    from formal_rope.compiler import compile_formula
    from formal_rope.lang.source import resolve_language
    from formal_rope.model.evaluate import check_mode
    from formal_rope.model.io import save_model

    if verify_to < 0 or exhaustive < 0 or per_length < 0 or certify_max_length < 1:
        raise FormalRopeError(
            "--verify-to, --exhaustive and --per-length must be non-negative and --certify-max-length positive"
        )
    check_mode(mode, format_name)  # before compiling, which can take a while
    if out is not None and (out.is_dir() or not out.parent.is_dir()):
        problem = "is a directory" if out.is_dir() else f"is in a folder that does not exist ({out.parent})"
        raise FormalRopeError(f"cannot write model file {out}: it {problem}")
    language = resolve_language(formula, alphabet, force_kind="ltl")
    if language.detected:  # a registry entry brought its alphabet: say which
        print(f"note: {formula!r} {language.detected}", file=sys.stderr)
    compiled = compile_formula(language.ast, language.alphabet, fmt=format_name, freq=freq, scale=scale,
                               certify_mode=certify_mode, certify_max_length=certify_max_length)
    verification = _verify(compiled, mode, exhaustive, verify_to, per_length, seed, max_states,
                           show_progress=not json_output)
    if out is not None:
        save_model(compiled.ir, out)
    if json_output:
        print(json.dumps(_json_report(compiled, verification, out), ensure_ascii=False))
    else:
        _print_report(compiled, verification, out)
    if not verification.ok:
        raise typer.Exit(1)


def _verify(compiled, mode, exhaustive, verify_to, per_length, seed, max_states, show_progress: bool):
    from formal_rope.compiler.verify import verify_compiled

    if not show_progress:
        return verify_compiled(compiled, mode=mode, exhaustive_up_to=exhaustive, verify_to=verify_to,
                               per_length=per_length, seed=seed, max_states=max_states)
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeRemainingColumn

    bar = Progress(TextColumn("verifying against the DFA"), BarColumn(), MofNCompleteColumn(), TimeRemainingColumn(),
                   transient=True, console=_stderr_console())
    task = bar.add_task("verify", total=None)

    def on_total(total: int) -> None:
        # Started once the strings are known, so errors before that (DFA too large) leave no bar behind.
        bar.start()
        bar.update(task, total=total)

    try:
        return verify_compiled(
            compiled, mode=mode, exhaustive_up_to=exhaustive, verify_to=verify_to, per_length=per_length, seed=seed,
            max_states=max_states, on_total=on_total, on_progress=lambda done: bar.advance(task, done),
        )
    finally:
        bar.stop()


def _stderr_console():
    from rich.console import Console

    return Console(stderr=True)


def _json_report(compiled, verification, out: Path | None) -> dict:
    from formal_rope.precision.formats import f_large

    model = compiled.ir
    return {
        "formula": compiled.formula_text,
        "alphabet": list(compiled.alphabet),
        "format": compiled.options.fmt,
        "f_large": f_large(compiled.options.fmt),
        "layers": len(model.layers),
        "heads": model.n_heads,
        "d_model": model.d_model,
        "coordinates": list(model.coordinates),
        "freq": compiled.options.freq,
        "y_scale": None if compiled.y_scale is None else compiled.y_scale.scale,
        "certified_length": compiled.certified_length,
        "certified_length_is_lower_bound": compiled.certified_length_is_lower_bound,
        "constructs": [c.to_json() for c in compiled.constructs],
        "mode": verification.mode,
        "verified_strings": verification.verified_strings,
        "verified_max_length": verification.verified_max_length,
        "exhaustive_up_to": verification.exhaustive_up_to,
        "sampled_lengths": list(verification.sampled_lengths),
        "disagreements": verification.disagreements,
        "first_disagreement": None
        if verification.first_disagreement is None
        else {k: v for k, v in verification.first_disagreement.to_json().items()},
        "first_disagreement_inside_certified_range": None
        if verification.first_disagreement_inside is None
        else verification.first_disagreement_inside.to_json(),
        "ok": verification.ok,
        "model_file": None if out is None else str(out),
    }


def _print_report(compiled, verification, out: Path | None) -> None:
    from rich.table import Table

    from formal_rope.model.io import model_table
    from formal_rope.precision.formats import f_large

    console = stdout_console()
    model = compiled.ir
    large = f_large(compiled.options.fmt)
    console.print(
        f"[bold]{compiled.formula_text}[/bold] over {{{', '.join(compiled.alphabet)}}} in {compiled.options.fmt} "
        f"(f_large = {large:.9g}): {len(model.layers)} layers, {model.n_heads} heads, d_model = {model.d_model}"
    )
    console.print(model_table(model))
    constructs = Table(title="constructs: score margins vs f_large")
    for column in ("construct", "formula", "layer", "scale C", "margin", "margin / f_large", "certified length"):
        constructs.add_column(column, overflow="fold")  # never cut a number short
    for c in compiled.constructs:
        certified = "" if c.certified_length is None else f"{c.certified_length}{'+' if c.certified_is_lower_bound else ''} {c.certified_mode}"
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
        how = "chosen by the compiler: best realized range among the candidate scales" if compiled.y_scale.chosen else "given by --scale"
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


def run_command(
    model_path: Path = typer.Argument(..., help="Model file (compiled by `formalrope compile --out`, or a trained checkpoint)."),
    strings: Optional[List[str]] = typer.Argument(None, help="Strings to classify (default: one per line from stdin; an empty line is the empty string)."),
    format_name: Optional[str] = typer.Option(None, "--format", "-F", help="Number format (default: the model's)."),
    mode: str = typer.Option("emulated", "--mode", help=_MODE_HELP + " (compiled models)"),
    trace: bool = typer.Option(False, "--trace", help="Show every subformula coordinate at every position of one string."),
    json_output: bool = typer.Option(False, "--json", help="Print a JSON array of booleans in input order."),
) -> None:
    """Classify strings with a saved model."""
    from formal_rope.model.io import load_model, load_runnable, read_metadata

    if strings is None or len(strings) == 0:
        if sys.stdin.isatty():
            raise FormalRopeError("give strings as arguments or one per line on stdin")
        strings = [line.rstrip("\r\n") for line in sys.stdin.read().splitlines()]
    metadata = read_metadata(model_path)
    if trace:
        if metadata["kind"] != "compiled":
            raise FormalRopeError("--trace needs a compiled model (its coordinates are subformulas)")
        if len(strings) != 1:
            raise FormalRopeError(f"--trace shows one string; got {len(strings)}")
        _trace(load_model(model_path), strings[0], format_name, mode, json_output)
        return
    runnable = load_runnable(model_path, mode=mode)
    verdicts = runnable.classify(list(strings), fmt=format_name)
    _note_beyond_certified(metadata, strings, getattr(runnable, "model", None))
    if json_output:
        print(json.dumps([bool(v) for v in verdicts]))
        return
    from rich.table import Table

    if metadata["kind"] == "compiled":  # SPEC §5: say which mode and format produced the verdicts
        how = f"{mode} {format_name or metadata.get('format', 'fp32')}"
    else:
        how = f"torch {format_name or 'fp32'}"
    table = Table(title=f"{model_path} ({metadata.get('formula', metadata['kind'])})", caption=how)
    table.add_column("string")
    table.add_column("accepted")
    for string, verdict in zip(strings, verdicts):
        table.add_row(repr(string), "yes" if verdict else "no")
    stdout_console().print(table)


def _note_beyond_certified(metadata: dict, strings: list[str], model) -> None:
    """Y heads are exact only up to the certified length (appendix D): say so on stderr."""
    certified = metadata.get("certified_length") if metadata.get("kind") == "compiled" else None
    if certified is None or model is None or metadata.get("certified_length_is_lower_bound"):
        return
    # Lengths in symbols (multi-character symbols count once), as the model reads them: bos w eos.
    beyond = sum(len(model.encode(string)) - 2 > certified for string in strings)
    if beyond:
        print(
            f"note: {beyond} of {len(strings)} strings are longer than the model's certified length {certified} "
            f"in {metadata.get('format', 'fp32')}; verdicts there are not guaranteed",
            file=sys.stderr,
        )


def _trace(model, string: str, format_name: str | None, mode: str, json_output: bool) -> None:
    import numpy as np

    from formal_rope.model.evaluate import evaluate

    fmt = format_name or str(model.metadata.get("format", "fp32"))
    result = evaluate(model, [string], fmt=fmt, mode=mode, trace=True)
    residual = result.residuals[0]
    symbols = ["bos", *list(string), "eos"]
    shown = [(i, name) for i, name in enumerate(model.coordinates) if not name.startswith(("const:", "flag:"))]
    if json_output:
        print(json.dumps({
            "string": string, "accepted": bool(result.accepted[0]), "format": fmt, "mode": mode,
            "positions": symbols,
            # JSON has no NaN/inf (overflowed scores): those values are null.
            "coordinates": {name: [float(v) if np.isfinite(v) else None for v in residual[:, i]] for i, name in shown},
        }, ensure_ascii=False))
        return
    from rich.table import Table

    def cell(value: float) -> str:
        return str(int(value)) if value in (0.0, 1.0) else f"{value:.4g}"

    console = stdout_console()
    title = f"trace of {string!r} ({mode} {fmt}): accepted = {bool(result.accepted[0])}"
    # One column per position is readable for short strings; beyond the console width the columns
    # would be squeezed to single characters, so long strings get one row per position instead.
    widths = [max(len(str(position)), len(symbol), 6) + 3 for position, symbol in enumerate(symbols)]
    name_width = max(len(name) for _, name in shown) + 4 if shown else 12
    if name_width + sum(widths) <= console.width or len(shown) + 1 >= len(symbols):
        table = Table(title=title)
        table.add_column("coordinate")
        for position, symbol in enumerate(symbols):
            table.add_column(f"{position}\n{symbol}", justify="right")
        for i, name in shown:
            table.add_row(name, *(cell(value) for value in residual[:, i]))
    else:
        table = Table(title=title)
        table.add_column("i", justify="right", no_wrap=True)
        table.add_column("w_i", no_wrap=True)
        for _, name in shown:
            table.add_column(name, justify="right", overflow="fold")  # long names fold, values stay whole
        for position, symbol in enumerate(symbols):
            table.add_row(str(position), symbol, *(cell(residual[position, i]) for i, _ in shown))
    console.print(table)


def register(app: typer.Typer) -> None:
    app.command("compile")(compile_command)
    app.command("run")(run_command)
