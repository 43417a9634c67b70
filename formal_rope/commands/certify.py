"""CLI: `formalrope certify` — certified range N_max^(k)(g, C, F) of a fixed-offset RoPE head.

Ideal mode never imports torch; realized mode does (it evaluates the scores in emulated F).
"""

from __future__ import annotations

import json
import math
import sys
from typing import Optional

import typer
from rich.console import Console
from rich.panel import Panel
from rich.progress import BarColumn, TextColumn, TimeRemainingColumn
from rich.table import Table

from formal_rope.certify import certified_range, scale_overflows
from formal_rope.commands.terminal import stdout_console
from formal_rope.errors import FormalRopeError
from formal_rope.precision import parse_format
from formal_rope.progress import progress_display


def certify_command(
    offset: int = typer.Option(1, "--offset", "-k", help="Offset k >= 1 of the head (it attends to position i-k)."),
    freq: float = typer.Option(1.0, "--freq", "-g", help="Rotation angle g in radians per position (> 0)."),
    scale: float = typer.Option(..., "--scale", "-C", help="Score scale C (> f_large/2); scores are C·cos(g(i-k-j))."),
    format_name: str = typer.Option(
        "fp32", "--format", "-F", help="Number format: fp32, bf16, fp16, fp8e4m3, fp8e5m2, fp64 or eXmY."
    ),
    mode: str = typer.Option(
        "ideal",
        "--mode",
        help="ideal: exact scores, continued fractions, any length. realized: the scores the compiled model "
        "computes in the format, brute force up to --max-length.",
    ),
    max_length: Optional[int] = typer.Option(
        None,
        "--max-length",
        help="Realized mode: longest string length L to scan (O(L²) work; default 4096). An error in ideal mode.",
    ),
    json_output: bool = typer.Option(False, "--json", help="Print one JSON object instead of a panel."),
) -> None:
    """Certify the length up to which a k-offset RoPE head picks its target by a margin of f_large (eq. 10)."""
    if mode == "ideal" and max_length is not None:
        raise FormalRopeError(
            "--max-length bounds the realized scan; --mode ideal computes N_max exactly at any length"
        )
    fmt = parse_format(format_name)
    # Checked before the overflow note, which would otherwise describe a range that is never printed.
    if not (math.isfinite(scale) and scale > 0):
        raise FormalRopeError(f"--scale must be a positive finite number (got {scale:g})")
    if mode == "ideal" and scale_overflows(scale, fmt):
        print(
            f"note: the scale C = {scale:g} overflows {fmt.name} (max finite {fmt.max_finite:g}), so no {fmt.name} "
            "model can store it; the ideal range below assumes the exact C",
            file=sys.stderr,
        )
    if mode == "realized" and not json_output:
        bar = progress_display(
            TextColumn("scanning query positions"), BarColumn(), TextColumn("{task.completed}/{task.total}"),
            TimeRemainingColumn(), transient=True, console=Console(stderr=True),  # stdout holds only the result
            label="scanning query positions",
        )
        task = bar.add_task("", total=None)
        started = []

        def report(done: int, total: int) -> None:
            # Started on the first report, so argument errors raised before the scan leave no bar behind.
            if not started:
                bar.start()
                started.append(True)
            bar.update(task, completed=done, total=total)

        try:
            result = certified_range(offset, freq, scale, fmt, mode=mode, max_length=max_length, progress=report)
        finally:
            bar.stop()
    else:
        result = certified_range(offset, freq, scale, fmt, mode=mode, max_length=max_length)

    if json_output:
        print(json.dumps(result.to_dict()))
        return
    _render(result)


def _render(result) -> None:
    table = Table.grid(padding=(0, 2))
    table.add_column(style="bold")
    table.add_column()
    bound = f"{'>= ' if result.n_max_is_lower_bound else ''}{result.n_max:,}"
    rows = [
        ("offset k", str(result.offset)),
        ("freq g", repr(result.freq)),
        ("scale C", repr(result.scale)),
        ("format", result.format),
        ("f_large", repr(result.f_large)),
        ("mode", result.mode + (f" (scan up to L = {result.max_length:,})" if result.mode == "realized" else "")),
        ("N_max", bound),
        ("paper bound (C·δ_L ≥ f_large)", f"{result.paper_sufficient_bound:,}"),
        ("first ideal violation n*", f"{result.first_ideal_violation:,}"),
    ]
    for label, value in rows:
        table.add_row(label, value)
    console = stdout_console(highlight=False)
    console.print(Panel(table, title="certified range N_max^(k)(g, C, F)", expand=False))
    console.print(result.explanation(), markup=False)

