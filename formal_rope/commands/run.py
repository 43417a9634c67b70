"""CLI: `formalrope run` — classify strings with a saved model (compiled or trained)."""

from __future__ import annotations

import json
import math
import sys
import warnings
from pathlib import Path
from typing import List, Optional

import typer
from rich.table import Table

from formal_rope.automata.membership import split_symbols
from formal_rope.commands.run_options import MODE_HELP
from formal_rope.commands.terminal import input_strings, stdout_console
from formal_rope.errors import FormalRopeError
from formal_rope.evaluation.loading import load_runnable
from formal_rope.model.evaluate import evaluate
from formal_rope.model.forward import check_mode
from formal_rope.model.io import load_model, read_metadata
from formal_rope.precision import parse_format


def run_command(
    model_path: Path = typer.Argument(
        ..., help="Model file (compiled by `formalrope compile --out`, or a trained checkpoint)."
    ),
    strings: Optional[List[str]] = typer.Argument(
        None,
        help="Strings to classify, read as `accepts` reads them (default: one per line from stdin; an "
        "empty line is the empty string).",
    ),
    format_name: Optional[str] = typer.Option(
        None, "--format", "-F",
        help="Number format (default: the model's). A compiled model's certified length is recomputed for it.",
    ),
    mode: Optional[str] = typer.Option(
        None, "--mode",
        help=MODE_HELP + " Compiled models only (default emulated); a trained model always runs natively.",
    ),
    trace: bool = typer.Option(
        False, "--trace", help="Show every subformula coordinate at every position of one string."
    ),
    json_output: bool = typer.Option(
        False, "--json",
        help="Print one JSON object: format, mode, certified length, and per string its verdict and whether it "
        "lies beyond the certified length.",
    ),
) -> None:
    """Classify strings with a saved model.

    A compiled model's verdicts are guaranteed only up to its certified length in the format and mode
    it runs in (recomputed when they are not the ones it was compiled for): longer inputs are flagged.
    """
    strings = input_strings(strings)
    metadata = read_metadata(model_path)
    if metadata["kind"] != "compiled":
        if trace:
            raise FormalRopeError("--trace needs a compiled model (its coordinates are subformulas)")
        if mode is not None:
            raise FormalRopeError(
                f"--mode {mode} applies to compiled models (emulated or native arithmetic); {model_path} is a "
                f"{metadata['kind']} model, which always runs natively in torch (choose its "
                "dtype with --format fp32/bf16/fp16)"
            )
        # function-local: training.trained_classifier imports torch, which a compiled model's run does without
        from formal_rope.training.trained_classifier import UnhealthyCheckpointWarning

        runnable = load_runnable(model_path)
        health = runnable.health
        if health is not None:  # a diverged run's frozen weights still classify: say what they are
            print(f"warning: {model_path}: {health}", file=sys.stderr)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", UnhealthyCheckpointWarning)  # said once above
            verdicts = runnable.classify(list(strings), fmt=format_name)
        if json_output:
            lengths = [len(split_symbols(string, runnable.alphabet)) for string in strings]
            payload = _run_json(model_path, "trained", format_name or "fp32", "native", strings, lengths,
                                verdicts, [None] * len(strings), None)
            payload["warning"] = health
            print(json.dumps(payload, ensure_ascii=False))
            return
        _print_verdicts(model_path, runnable.metadata, strings, verdicts, None, f"torch {format_name or 'fp32'}")
        return
    mode = mode or "emulated"
    fmt = parse_format(format_name or str(metadata.get("format", "fp32")))
    check_mode(mode, fmt)
    model = load_model(model_path)
    if trace:
        if len(strings) != 1:
            raise FormalRopeError(f"--trace shows one string; got {len(strings)}")
        _trace(model, strings[0], evaluate(model, strings[:1], fmt=fmt, mode=mode, trace=True), json_output)
        return
    result = evaluate(model, strings, fmt=fmt, mode=mode)
    _note_beyond_certified(result, metadata)
    if json_output:
        print(json.dumps(_run_json(model_path, "compiled", result.format, mode, strings, result.lengths.tolist(),
                                   result.to_list(), result.beyond_certified_length.tolist(), result.certificate),
                         ensure_ascii=False))
        return
    # SPEC §5: say which mode and format produced the verdicts
    caption = (
        f"{mode} {result.format}; certified length {result.certificate.describe()}"
        if result.certificate.available
        else f"{mode} {result.format}"
    )
    _print_verdicts(model_path, metadata, strings, result.to_list(), result.beyond_certified_length.tolist(), caption)


def _run_json(model_path, kind, fmt, mode, strings, lengths, verdicts, beyond, certificate) -> dict:
    """`run --json`: how the verdicts were produced, then one object per input string."""
    return {
        "model": str(model_path),
        "kind": kind,
        "format": fmt,
        "mode": mode,
        "certified_length": None if certificate is None else certificate.certified_length,
        "certified_length_is_lower_bound": None if certificate is None else certificate.is_lower_bound,
        "certificate_recomputed": None if certificate is None else certificate.recomputed,
        "warning": None,  # a trained checkpoint's: its run diverged or failed, or its weights are not finite
        "results": [
            {"string": string, "length": int(length), "accepted": bool(verdict),
             "beyond_certified_length": None if flag is None else bool(flag)}
            for string, length, verdict, flag in zip(strings, lengths, verdicts, beyond)
        ],
    }


def _print_verdicts(model_path, metadata, strings, verdicts, beyond, caption: str) -> None:
    table = Table(title=f"{model_path} ({metadata.get('formula', metadata['kind'])})")
    table.add_column("string")
    table.add_column("accepted")
    flagged = beyond is not None and any(beyond)
    if flagged:
        table.add_column("guaranteed")
    for index, (string, verdict) in enumerate(zip(strings, verdicts)):
        cells = [repr(string), "yes" if verdict else "no"]
        if flagged:
            cells.append("no: beyond the certified length" if beyond[index] else "yes")
        table.add_row(*cells)
    console = stdout_console()
    console.print(table)
    console.print(caption, markup=False, highlight=False)  # a caption would wrap to the table's width


def _note_beyond_certified(result, metadata: dict) -> None:
    """Y heads (and P heads in narrow formats) are exact only up to the certified length in the format
    and mode the model runs in (appendix D): say on stderr how many verdicts lie beyond it."""
    certificate = result.certificate
    if certificate is None or not result.n_beyond_certified:
        return
    where = certificate.describe()
    if certificate.recomputed:
        compiled = metadata.get("certified_length")
        as_compiled = (
            "unbounded"
            if compiled is None
            else f"{'>= ' if metadata.get('certified_length_is_lower_bound') else ''}{compiled}"
        )
        where += (f", recomputed for this format and mode (compiled for {metadata.get('format')}: {as_compiled};"
                  f" {certificate.reason})")
    print(
        f"note: {result.n_beyond_certified} of {len(result.accepted)} strings are longer than the model's "
        f"certified length {where}; verdicts there are not guaranteed",
        file=sys.stderr,
    )


def _trace(model, string: str, result, json_output: bool) -> None:
    """`run --trace`: every shown coordinate of `result` (an evaluation of `string` with trace=True)."""
    mode = result.mode
    _note_beyond_certified(result, model.metadata)
    residual = result.residuals[0]
    symbols = ["bos", *model.read(string), "eos"]  # read as `accepts` reads it (multi-character symbols)
    shown = [(i, name) for i, name in enumerate(model.coordinates) if not name.startswith(("const:", "flag:"))]
    beyond = bool(result.beyond_certified_length[0])
    if json_output:
        certificate = result.certificate
        print(json.dumps({
            "string": string, "accepted": bool(result.accepted[0]), "format": result.format, "mode": mode,
            "length": int(result.lengths[0]),
            "certified_length": certificate.certified_length if certificate.available else None,
            "beyond_certified_length": beyond,
            "positions": symbols,
            # JSON has no NaN/inf (overflowed scores): those values are null.
            "coordinates": {name: [float(v) if math.isfinite(v) else None for v in residual[:, i]]
                            for i, name in shown},
        }, ensure_ascii=False))
        return

    def cell(value: float) -> str:
        return str(int(value)) if value in (0.0, 1.0) else f"{value:.4g}"

    console = stdout_console()
    title = f"trace of {string!r} ({mode} {result.format}): accepted = {bool(result.accepted[0])}"
    if beyond:
        title += f" (beyond the certified length {result.certificate.describe()}: not guaranteed)"
    # One column per position is readable for short strings; beyond the console width the columns
    # would be squeezed to single characters, so long strings get one row per position instead
    # (piped output has no width: it keeps to a screen's worth of columns).
    width = console.width if console.is_terminal else 160
    widths = [max(len(str(position)), len(symbol), 6) + 3 for position, symbol in enumerate(symbols)]
    name_width = max(len(name) for _, name in shown) + 4 if shown else 12
    if name_width + sum(widths) <= width or len(shown) + 1 >= len(symbols):
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
