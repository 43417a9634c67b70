"""CLI: `formalrope phases` — per-pair phase decomposition of rotary attention scores (paper 003)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Optional

import typer
from rich import box
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, TextColumn
from rich.table import Table

from formal_rope.commands.terminal import stdout_console
from formal_rope.diagnostics import (
    capture_heads,
    check_phase_options,
    check_query,
    load_model_any,
    model_layout,
    phases_summary,
    resolve_heads,
)
from formal_rope.precision import parse_format
from formal_rope.progress import progress_display

_DEFAULT_TOP = 5


def phases_command(
    model_path: Path = typer.Argument(
        ..., help="Model file: compiled (`formalrope compile --out`) or a trained checkpoint."
    ),
    string: str = typer.Argument(..., help="Input string w (the model reads bos w eos); '' is the empty string."),
    layer: Optional[int] = typer.Option(None, "--layer", "-l", help="Layer to show, 1-based (default: every layer)."),
    head: Optional[str] = typer.Option(
        None,
        "--head",
        "-H",
        help="Head to show: a 1-based number, or a head name or unique part of one (compiled heads, e.g. 'mod'). "
        "Default: every head that rotates a pair.",
    ),
    query: Optional[int] = typer.Option(
        None, "--query", "-q", help="Query position i (0 = bos, N+1 = eos; default: the readout position N+1)."
    ),
    top: Optional[int] = typer.Option(
        None, "--top", "-n",
        help=f"Show the N keys with the highest scores (table default {_DEFAULT_TOP}; --json default: all keys).",
    ),
    epsilon: float = typer.Option(
        0.25, "--epsilon", "-e",
        help="Lemma 1 phase tolerance ε in radians: checks S ≥ (1−ε²/2)·S_max where every |δ_p| ≤ ε.",
    ),
    format_name: Optional[str] = typer.Option(
        None,
        "--format",
        "-F",
        help="Compiled models: native dtype of the scores, fp64/fp32/bf16/fp16 (default: the model's format). "
        "Trained models run in fp32.",
    ),
    json_output: bool = typer.Option(False, "--json", help="Print one JSON object with every number."),
) -> None:
    """Decompose each rotary head's scores S_ij = scale·Σ_p ρ_p cos δ_p and check them against the model.

    ρ_p = |q_p||k_p| (pre-rotation pair vectors), δ_p = content phase angle(q_p) − angle(k_p) plus
    position phase φ_p(i) − φ_p(j) (the realized rotation angles), wrapped to (−π, π]. Also checks
    Lemma 1 of paper 003 at every (i, j) where all contributing |δ_p| ≤ ε.
    """
    check_phase_options(top, epsilon)
    fmt = None if format_name is None else parse_format(format_name)
    model = load_model_any(model_path)
    heads = resolve_heads(model_layout(model), layer, head)
    captured = capture_heads(model, string, heads=heads, fmt=fmt)
    query = check_query(captured, query)  # before the progress bar, so a bad --query leaves none behind
    shown = top if (top is not None or json_output) else _DEFAULT_TOP
    if json_output or len(captured.heads) < 2:
        summary = phases_summary(captured, query, epsilon, shown)
    else:
        # Each head is decomposed for every (i, j): O(T²·pairs) work, seconds per head at T ~ 500.
        with progress_display(TextColumn("decomposing heads"), BarColumn(), MofNCompleteColumn(), transient=True,
                              console=Console(stderr=True), label="decomposing heads") as bar:
            task = bar.add_task("", total=len(captured.heads))
            summary = phases_summary(captured, query, epsilon, shown,
                                     on_head=lambda done: bar.update(task, completed=done))
    summary = {"model": str(model_path), **summary}
    if captured.beyond_certified_length:
        typer.echo(
            f"note: the input ({captured.length - 2} symbols) is longer than the model's certified length "
            f"{captured.certificate.describe()}; its heads' selections there are not guaranteed",
            err=True,
        )
    if json_output:
        print(json.dumps(summary, ensure_ascii=False))
        return
    _render(summary)


def _fmt(value: float | None, digits: int = 4) -> str:
    if value is None:
        return "—"
    text = f"{value:.{digits}g}"
    return "0" if text == "-0" else text


def _token(token: str) -> str:
    return {"<bos>": "bos", "<eos>": "eos"}.get(token, token)


def _render(summary: dict) -> None:
    console = stdout_console()
    positions = summary["positions"]
    epsilon = summary["epsilon"]
    console.print(
        f"[bold]{summary['model']}[/bold] ({summary['kind']}: {summary['description']}), "
        f"input {summary['string']!r}: {len(positions)} positions (0 = bos … {len(positions) - 1} = eos), "
        f"scores in {summary['dtype']}"
    )
    for head in summary["heads"]:
        query = head["query"]
        visible = head["visible_entries"]
        seen = "j < i" if head["window"] is None else f"i − {head['window']} ≤ j < i (window {head['window']})"
        rotations: dict[str, list[int]] = {}
        for pair in head["pairs"]:
            rotations.setdefault(pair["rotation"], []).append(pair["pair"])
        schedule = "; ".join(f"pair {','.join(map(str, p))}: {kind}" for kind, p in rotations.items())
        table = Table(
            title=(
                f"{head['name']} (layer {head['layer']}, head {head['head']}): query i = {query['position']} "
                f"({_token(query['token'])}), top {query['keys_shown']} of {query['keys_total']} keys"
                + ("" if head["window"] is None else f" inside its window of {head['window']}")
            ),
            caption=f"{schedule}; score = {head['scale']:.4g}·Σ ρ cos δ; α−β content phase, Δφ = φ(i)−φ(j) position "
            "phase, δ = their sum, radians in (−π, π]",
            box=box.SIMPLE_HEAD,
            pad_edge=False,
        )
        for name in ("j", "pair", "ρ", "α−β", "Δφ", "δ", "ρ cos δ", "score", "actual", "|error|",
                     f"L1 ε={epsilon:g}"):
            table.add_column(name, justify="left" if name in ("j", "pair") or name.startswith("L1") else "right",
                             no_wrap=True)
        for key in query["keys"]:
            for index, pair in enumerate(key["pairs"]):
                table.add_row(
                    f"{key['key']} {_token(key['token'])}" if index == 0 else "",
                    str(pair["pair"]),
                    _fmt(pair["rho"]),
                    _fmt(pair["content_phase"], 3),
                    _fmt(pair["position_phase"], 3),
                    _fmt(pair["delta"], 3),
                    _fmt(pair["term"]),
                )
            lemma = key["lemma1"]
            if not lemma["hypothesis"]:
                verdict = "n/a"
            elif lemma["holds"]:
                verdict = f"≥ {lemma['bound']:.4g} ✓"
            else:
                verdict = f"[red]< {lemma['bound']:.4g} ✗[/red]"
            table.add_row(
                "", "Σ", "", "", "", "", "",
                _fmt(key["score"], 7), _fmt(key["actual"], 7), f"{key['abs_error']:.1e}", verdict,
                end_section=True,
            )
        console.print(table)
        lemma = head["lemma1"]
        hypothesis = lemma["hypothesis_count"]
        if hypothesis:
            verdict = (
                f"the bound holds at all of them (min slack {lemma['min_slack']:.3g}·S_max)"
                if lemma["all_hold"]
                else f"[red]the bound fails at {lemma['violations']}[/red]"
            )
        else:
            verdict = "nothing to check"
        recompute = (
            ""
            if head["recompute_error"] is None
            else "\n  hook check: the layer's attention output recomputed from the captured q, k, v differs "
            f"by {head['recompute_error']:.1e}"
        )
        console.print(
            f"  reconstruction, all {visible} (i, j) with {seen}: max |error| {head['max_abs_error']:.2e}, "
            f"relative to scale·Σρ {head['max_rel_error']:.2e}{recompute}\n"
            f"  Lemma 1 (ε = {lemma['epsilon']:g}): all contributing |δ_p| ≤ ε at {hypothesis} of {visible} (i, j); "
            f"{verdict}\n"
        )

