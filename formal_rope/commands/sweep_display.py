"""What `sweep`, `reproduce` and `report` print, shared by the three: a line per run, the progress
display of a sweep, a results folder's report (its table model printed with Rich, or as JSON), the
runs of a dry run, and what a Ctrl-C keeps."""

from __future__ import annotations

import json
import sys
from pathlib import Path

from rich.markup import escape
from rich.measure import Measurement

from formal_rope.commands.terminal import json_ready
from formal_rope.errors import Interrupted
from formal_rope.progress import progress_display, work_columns
from formal_rope.run_config.encodings import hybrid_label

# The module, not its functions: run_sweep is looked up when called (tests replace its trainer).
from formal_rope.sweeps import runner
from formal_rope.sweeps.plan import swept_fields
from formal_rope.sweeps.report import (
    ReportRequest,
    build_report,
    cell_text,
    comparison_table,
    failure_lines,
    number,
    rich_table,
)
from formal_rope.sweeps.results import finished_run_ids

# How `print_report` prints: the table and notes, the JSON document, or nothing (the caller prints).
TABLE, JSON, QUIET = "table", "json", "quiet"


def note(text: str) -> None:
    print(f"note: {text}", file=sys.stderr)


def print_json(payload) -> None:
    print(json.dumps(json_ready(payload), indent=2, allow_nan=False))


def describe_config(config, axes=()) -> str:
    """'(ab)* rope β=10000 seed=0 lr=0.005', plus the values of the grid's further axes that apply."""
    base = f" β={config.base:g}" if config.applies("base") else ""
    extra = "".join(f" {name}={cell_text(name, getattr(config, name))}" for name in axes
                    if name not in ("base", "seed", "lr") and config.applies(name))
    if config.is_hybrid():
        extra += f" [{hybrid_label(config.pe, config.layer_pe, config.window)}]"
    if config.init_from is not None:
        extra += f" from={config.init_from}"
    return f"{config.language} {config.pe}{base} seed={config.seed} lr={config.lr:g}{extra}"


def _done_line(config, result, axes) -> str:
    """The line of a finished run: its status, what it is, N* (and the worst case's), accuracy, time."""
    status = result.status
    colour = {"ok": "green", "diverged": "yellow"}.get(status, "red")
    n_star = "–" if result.n_star is None else str(result.n_star)  # None: failed, nothing measured
    if result.n_star_worst is not None:
        n_star += f"/{result.n_star_worst}"
    return (f"[{colour}]{status:8s}[/] {describe_config(config, axes):48s} N*={n_star:<4s}"
            + (" (sampled/worst-case)" if result.n_star_worst is not None else "") + " "
            f"acc={number(result.accuracy, 3)} {result.wall_s:6.1f}s"
            + (f"  ({result.error})" if result.error else ""))


def run_with_progress(configs, out: Path, console, axes=(), **run_options):
    """run_sweep with a Rich progress display: a line per finished run, the runs in flight. Off a
    terminal (a log), a line per run as it starts and one as it finishes, and no bar.
    run_options: run_sweep's (`resolved=`: the runs as the grid check resolved them)."""
    live = console.is_terminal
    with progress_display(
        *work_columns("sweep", "{task.description}"),
        console=console,
        label="sweep",
        lines=0,  # the lines below say what each run does
    ) as progress:
        task = progress.add_task("", total=len(configs))
        running: dict[str, str] = {}
        failed = [0]

        def on_event(kind, config, result):
            run_id = config.run_id()
            if kind == "skip":
                progress.advance(task)
            elif kind in ("start", "retry"):
                running[run_id] = describe_config(config, axes)
                if kind == "start" and not live:  # a log sees work begin, not only end (a pack can take minutes)
                    progress.console.print(f"started  {running[run_id]}", markup=False, highlight=False,
                                           soft_wrap=True)
                if kind == "retry":
                    progress.console.print(
                        f"[yellow]retry   [/] {describe_config(config, axes)} (its worker died; resumes "
                        "from its last saved state, if any)"
                    )
            elif kind == "done":
                running.pop(run_id, None)
                progress.advance(task)
                failed[0] += result.status == "failed"
                progress.console.print(_done_line(config, result, axes), soft_wrap=True)
            counts = f"{len(running)} running" + (f", {failed[0]} failed" if failed[0] else "")
            shown = f"{counts}: " + "; ".join(running.values()) if running else (counts if failed[0] else "")
            progress.update(task, description=shown[:100])

        return runner.run_sweep(list(configs), out, on_event=on_event,
                                on_note=lambda text: progress.console.print(f"[dim]{text}[/]"), **run_options)


def print_wide(console, table) -> None:
    """Tables are wider than the 80 columns Rich assumes off a terminal; never squeeze their cells:
    print at the table's natural width (measured with room to spare)."""
    narrow = console.width
    console.width = max(narrow, 1000)
    console.width = max(narrow, Measurement.get(console, console.options, table).maximum)
    console.print(table)
    console.width = narrow


def print_report(request: ReportRequest, console, mode: str = TABLE) -> dict:
    """Report the results folder of `request` (`sweeps.report.build_report`): print its table and
    notes (mode TABLE), its JSON document (JSON) or nothing (QUIET); return the JSON document."""
    report = build_report(request, on_note=note)
    payload = report.payload
    if mode != TABLE:
        if mode == JSON:
            print_json(payload)
        return payload
    print_wide(console, rich_table(report.table))
    console.print(f"[dim]{payload['intervals']}[/]", highlight=False, soft_wrap=True)
    if payload["comparisons"]:
        print_wide(console, comparison_table(payload["comparisons"], report.by))
    for text in report.notes:
        console.print(f"[yellow]note:[/] {escape(text)}", highlight=False, soft_wrap=True)
    lines = failure_lines(report.runs, report.by)
    if lines:
        console.print("[dim]first failing strings (shortest failing length) per run:[/]")
        for line in lines:
            console.print(f"  {line}", style="dim", highlight=False, markup=False, soft_wrap=True)
    if request.plot is not None:
        console.print(f"plot written to {payload['plot']}")
    return payload


def dry_run_lines(configs, console) -> None:
    """A line per run: its id, what tells it apart (every swept field) and its steps."""
    swept = [name for name in swept_fields(configs) if name != "steps"]
    for c in configs:
        console.print(f"{c.run_id()}  {describe_config(c, swept)}  steps={c.steps}", highlight=False, soft_wrap=True)


def interrupted(configs, out: Path) -> Interrupted:
    """What a Ctrl-C during a sweep keeps: every finished run, and the saved training states."""
    ids = {config.run_id() for config in configs}
    finished = len(ids & finished_run_ids(out))
    return Interrupted(
        f"{finished} of {len(ids)} runs finished and are kept in {out}; run the same command again to continue "
        "(finished runs are skipped, runs with a saved training state resume from it)"
    )
