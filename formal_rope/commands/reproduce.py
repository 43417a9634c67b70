"""CLI: `reproduce` — rerun a table of the core paper (or one of our experiments) from its sweep file:
train, evaluate, print the table, write Parquet and a plot."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Optional

import typer
from rich.console import Console

from formal_rope.commands import run_options as ro
from formal_rope.commands.sweep_display import (
    QUIET,
    TABLE,
    dry_run_lines,
    interrupted,
    note,
    print_json,
    print_report,
    run_with_progress,
)
from formal_rope.errors import FormalRopeError
from formal_rope.sweeps.deviations import deviation_lines
from formal_rope.sweeps.grid import variant_run_ids
from formal_rope.sweeps.lc25 import LEFT_OUT, PROTOCOL_NOTES, lc25_payload, lc25_rows
from formal_rope.sweeps.lc25 import SHRINKS as LC25_SHRINKS
from formal_rope.sweeps.plan import check_scale, plan_reproduce, reproduce_tables, swept_fields
from formal_rope.sweeps.report import ReportRequest
from formal_rope.sweeps.results import finished_run_ids
from formal_rope.training.scales import SCALE_SHRINKS


def _dry_run_tables(plans, scale: str, console, json_output: bool) -> None:
    """`reproduce --dry-run`: each table's runs and results folder (JSON: {table: {out, runs}})."""
    if json_output:
        print(json.dumps({plan.name: {"out": str(plan.out), "runs": [{"run_id": c.run_id(), **c.to_dict()}
                                                                      for c in plan.configs]}
                          for plan in plans}, indent=2))
        return
    for plan in plans:
        console.print(f"[bold]{plan.name}[/] → {plan.out}")
        dry_run_lines(plan.configs, console)
    console.print(f"{sum(len(plan.configs) for plan in plans)} runs ({scale} scale)")


@ro.with_option_groups
def reproduce(
    table: str = typer.Argument(
        "table2",
        help="table2, table4, table5, all (the paper's three), or one of our experiments: ablation (each "
        "quick-scale choice undone, Table 2), ablation45 (the same for NoPE and RoPE_NP on (ab)* and Σ*abΣ*, "
        "Tables 4-5), stability (RoPE_P over 5 seeds, periods 2-4), joformer (JoFormer "
        "on the paper's five languages), test_sets (Table 2 with near-miss vs uniform test negatives, "
        "(aa)* over {a} and over {a, b}), recipes (RoPE_P over 5 seeds, periods 2-4, recipes at <= 3x quick), "
        "lc25 (Li & Cotterell's Table 1: NoPE on their 11 regular languages, each with their negatives; "
        "accuracy max and mean ± std beside theirs, with N* and the worst-case N*), "
        "e6 (paper 000 E.6's hybrid: 5 windowed layers + a global NoPE layer, RoPE vs JoFormer "
        "fixed/learned/projected, the last in 3 stages), hybrids (a NoPE layer with RoPE_NP at β 1e2/1e4, "
        "windowed RoPE_NP + global NoPE, RoPE_P + NoPE, and their pure controls, Tables 2 and 5's languages).",
    ),
    scale: str = typer.Option(
        "quick", "--scale",
        help="quick (table2: about 2 min with 2 workers on a 2-core CPU), medium (the paper's model and "
        "negatives, 2,000 steps: table2 in about 70 min) or paper (the paper's full settings; GPU-scale).",
    ),
    out: Optional[Path] = typer.Option(
        None, "--out",
        help="Results folder (default results/<table>-<scale>; missing folders are created). "
        "Finished runs are skipped on rerun.",
    ),
    workers: int = typer.Option(2, "--workers", help=ro.WORKERS_HELP),
    seeds: Optional[int] = typer.Option(None, "--seeds", help="Override the number of seeds."),
    steps: Optional[int] = typer.Option(None, "--steps", help="Override the training steps per run."),
    n_per_length: Optional[int] = typer.Option(
        None, "--n-per-length", help="Override the test strings per length."
    ),
    eval_mode: Optional[str] = typer.Option(
        None, "--eval",
        help="worst-case: also search every run for misclassified strings (n_star_worst beside n_star; "
        "docs/evaluation.md); finished runs without it are trained again (same packs, same numbers). full: the "
        "default (every test length).",
    ),
    worst_case_budget: ro.WorstCaseBudget = None,
    nnch_samples: ro.NnchSamples = None,
    layer_pe: ro.LayerPe = None,
    window: ro.Window = None,
    objective: ro.Objective = None,
    run: ro.RunFlags = None,
    dry_run: bool = typer.Option(
        False, "--dry-run", help="Only list the runs of each table (and check the run options); nothing runs."
    ),
    json_output: bool = typer.Option(
        False, "--json", help="Print the aggregate table as JSON (with --dry-run: the runs, per table)."
    ),
) -> None:
    """Rerun a table of the core paper (sweeps/<table>.toml): train, evaluate 41…500, print the table, write Parquet and a plot."""  # noqa: E501 (Typer lists the command by this line, breaks included)
    reproduce_tables(table)
    check_scale(scale)
    if table == "lc25" and eval_mode is None:
        eval_mode = "worst-case"  # their sampled accuracy beside the worst case it cannot see
    ro.check_positive(workers=workers)
    mode, search = ro.parse_eval(eval_mode)
    if mode == "nstar":
        raise FormalRopeError("reproduce evaluates every test length (--eval full); nstar would make other runs "
                              "(another run id): use `sweep --config sweeps/<table>.toml --eval nstar`")
    worst_case = ro.worst_case_settings(search, worst_case_budget)
    console = Console(stderr=json_output)
    shrinks = LC25_SHRINKS if table == "lc25" else SCALE_SHRINKS
    if scale in shrinks:
        console.print(f"[yellow]{scale} scale shrinks:[/]\n  " + "\n  ".join(shrinks[scale]))
    if table == "lc25":
        console.print("[yellow]protocol:[/]\n  " + "\n  ".join(PROTOCOL_NOTES))
    hybrid = ro.hybrid_fields(layer_pe, window)
    explicit = {**ro.given(seeds=seeds, steps=steps, n_per_length=n_per_length, nnch_samples=nnch_samples,
                           objective=objective), **hybrid}
    if explicit:
        console.print(
            "[yellow]overridden here:[/] " + ", ".join(f"{key} {value}" for key, value in explicit.items())
        )
    tables = plan_reproduce(table, scale, out=out, seeds=seeds, steps=steps, n_per_length=n_per_length,
                            nnch_samples=nnch_samples, state_dir=run.state_dir, hybrid=hybrid, objective=objective)
    if dry_run:
        run.check(workers)  # what a real run checks, contacting nothing
        for plan in tables:
            for text in plan.notes:
                note(text)
        _dry_run_tables(tables, scale, console, json_output)
        return
    plans = [(plan, {**options, "worst_case": worst_case})
             for plan, options in _checked_options(tables, run, workers, console)]
    payloads = {plan.name: _run_table(plan, run_options, scale, console, json_output) for plan, run_options in plans}
    if json_output:
        # One JSON document: the table's payload, or {table: payload} for `all`.
        print_json(payloads[table] if table != "all" else payloads)


def print_lc25(rows, console) -> None:
    """Li & Cotterell's Table 1 beside ours: accuracy % (max, mean ± std over seeds × learning rates),
    N* and the worst-case N*, and whether the language is learned as its class predicts."""
    from rich import box
    from rich.table import Table

    table = Table(title="Li & Cotterell's Table 1 (theirs: 15 runs of 10^6 steps) beside ours, accuracy %",
                  box=box.SIMPLE, padding=(0, 1), pad_edge=False,
                  caption=f"ours: {rows[0].runs if rows else 0} runs per language; N* and worst (the worst-case "
                          "search's N*): the max over our runs; ok: learned (some run at 100%) exactly when LTL[P]")
    headers = ("language", "LTL[P]", "theirs", "mean±sd", "ours", "mean±sd", "N*", "worst", "ok")
    cells = [(
        row.paper.paper_name, "yes" if row.paper.ltl_p else "no", f"{row.paper.max:.1f}",
        f"{row.paper.mean:.1f}±{row.paper.std:.1f}", f"{row.max:.1f}", f"{row.mean:.1f}±{row.std:.1f}",
        "-" if row.n_star_max is None else str(row.n_star_max),
        "-" if row.n_star_worst_max is None else str(row.n_star_worst_max), "yes" if row.agrees else "no",
    ) for row in rows]
    for index, column in enumerate(headers):
        width = max([len(column), *(len(cell[index]) for cell in cells)])
        table.add_column(column, justify="left" if index == 0 else "right", no_wrap=True, min_width=width)
    for cell in cells:
        table.add_row(*cell[:-1], cell[-1] if cell[-1] == "yes" else "[red]no[/]")
    console.print(table)
    for text in LEFT_OUT:
        console.print(f"[yellow]left out:[/] {text}", highlight=False)
    differing = [row.paper.paper_name for row in rows if not row.agrees]
    console.print("split (every LTL[P] language learned by some run, none of the others): "
                  + ("as in their Table 1" if not differing else "differs on " + ", ".join(differing)), highlight=False)


def _checked_options(tables, run: ro.RunFlags, workers: int, console) -> list[tuple]:
    """(plan, run_sweep options) per table: every table's options (state folder, Ray) are checked
    before the first run starts."""
    checked = []
    for plan in tables:
        for text in plan.notes:
            note(text)
        finished_run_ids(plan.out)
        options = run.sweep_options(plan.configs, plan.out, workers=workers, state_dir=plan.state_dir,
                                    note=lambda text: console.print(f"[yellow]note:[/] {text}"))
        checked.append((plan, options))
    return checked


def _run_table(plan, run_options: dict, scale: str, console, json_output: bool) -> dict:
    """Run one table's sweep, print its report (unless json_output) and its deviations from the
    paper; return the report's JSON document."""
    searched = run_options.get("worst_case") is not None
    done = len({config.run_id() for config in plan.configs} & finished_run_ids(plan.out, worst_case=searched))
    console.print(
        f"[bold]{plan.name}[/] ({plan.spec.description}): {len(plan.configs)} "
        f"runs at {scale} scale → {plan.out}" + (f" ({done} already finished there, skipped)" if done else ""),
        soft_wrap=True,
    )
    try:
        summary = run_with_progress(plan.configs, plan.out, console, axes=swept_fields(plan.configs),
                                    resolved=plan.runs, **run_options)
    except KeyboardInterrupt:
        raise interrupted(plan.configs, plan.out) from None
    console.print(f"{summary.completed} run(s) finished, {summary.skipped} already done (skipped), statuses "
                  f"{summary.statuses}, {summary.wall_s:.0f}s", soft_wrap=True)
    request = ReportRequest(out=plan.out, plot=plan.out / f"{plan.name}.png", reference=plan.spec.reference,
                            title=plan.name, scale=scale, variants=plan.spec.variants,
                            variant_baseline=plan.spec.overrides, languages=plan.spec.languages,
                            run_variants=variant_run_ids(plan.spec))
    payload = print_report(request, console, QUIET if json_output else TABLE)
    for line in deviation_lines(plan.name, scale):
        console.print(f"[yellow]deviation:[/] {line}", highlight=False, soft_wrap=True)
    if plan.name == "lc25":
        rows = lc25_rows(plan.out)
        if not json_output:
            print_lc25(rows, console)
        payload = {**payload, "lc25": lc25_payload(rows)}
    return payload
