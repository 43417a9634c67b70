"""CLI: `sweep` — a grid of training runs (languages × PEs × bases × seeds × lrs × --set axes) into
a results folder of Parquet files, then its report."""

from __future__ import annotations

import json
from pathlib import Path
from typing import NamedTuple, Optional

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
from formal_rope.lang.source import parse_alphabet
from formal_rope.run_config.encodings import encoding_names
from formal_rope.run_config.text import lengths_fields
from formal_rope.sweeps.plan import GridRequest, check_axes, plan_sweep, swept_fields
from formal_rope.sweeps.report import ReportRequest
from formal_rope.sweeps.results import finished_run_ids


def _alphabet(text: str | None):
    """--alphabet like `train`: 'ab' or 'a,b' -> ('a', 'b'); None keeps each language's own."""
    return None if text is None else parse_alphabet(text)


def _periods(text: str | None):
    """--periods 'auto' or '2,3' (the same parser as `train`) -> "auto" or [2, 3]; None: not given."""
    if text is None:
        return None
    parsed = ro.parse_periods(text)
    return "auto" if parsed is None else list(parsed)


class GridFlags(NamedTuple):
    """The grid's dedicated axes as `sweep` takes them."""
    lang: Optional[list[str]] = typer.Option(
        None, "--lang", help="Language (registry name, expression, ltl:/re:, .att path). Repeat for several."
    )
    pe: Optional[str] = typer.Option(
        None, "--pe", help=f"Positional encodings, comma-separated (e.g. rope,rope_p): {encoding_names()}."
    )
    base: Optional[str] = typer.Option(
        None, "--base",
        help="Bases β, comma-separated (e.g. 1e-12,1,1e4). nope/rope_p/sipe_p have no base: "
        "their runs are the same at every β. Each is read as a float64 and the phases are exact for that double "
        "(docs/training.md).",
    )
    periods: Optional[str] = typer.Option(
        None, "--periods",
        help="'auto' (least k from classify, at least 2; an error outside LTL[P,MOD]) or comma-separated periods for "
        "rope_p/sipe_p.",
    )
    alphabet: Optional[str] = typer.Option(
        None, "--alphabet", "-a", help="Alphabet override for every language (e.g. a,b)."
    )
    seeds: Optional[int] = typer.Option(None, "--seeds", help="Number of seeds (0..n-1). Default from --scale.")
    lrs: Optional[str] = typer.Option(None, "--lrs", help="Learning rates, comma-separated. Default from --scale.")

    def parsed(self) -> dict:
        """The axes as `sweeps.plan.GridRequest` takes them (FormalRopeError for a malformed list)."""
        return dict(languages=tuple(self.lang or ()), pes=tuple(ro.split_list(self.pe, "--pe")),
                    bases=tuple(ro.float_list(self.base, "--base")), seeds=self.seeds,
                    lrs=tuple(ro.float_list(self.lrs, "--lrs")), alphabet=_alphabet(self.alphabet),
                    periods=_periods(self.periods))


class SweepSettings(NamedTuple):
    """Settings `sweep` fixes for every run of the grid."""
    steps: Optional[int] = typer.Option(None, "--steps", help="Training steps per run.")
    batch_size: ro.BatchSize = None
    layers: ro.Layers = None
    d_model: ro.DModel = None
    heads: Optional[int] = typer.Option(None, "--heads", help="Attention heads.")
    n_per_length: Optional[int] = typer.Option(None, "--n-per-length", help="Test strings per length.")
    nnch_samples: ro.NnchSamples = None
    layer_pe: ro.LayerPe = None
    window: ro.Window = None
    test_lengths: Optional[str] = typer.Option(
        None, "--test-lengths", help="Test lengths for every run: a range 41..500 or a list 41,45,50."
    )
    eval_mode: ro.EvalMode = None
    worst_case_budget: ro.WorstCaseBudget = None

    def worst_case(self):
        """The worst-case search's settings (`--eval worst-case`), or None."""
        return ro.worst_case_settings(ro.parse_eval(self.eval_mode)[1], self.worst_case_budget)

    def fields(self) -> dict:
        """The RunConfig fields given (FormalRopeError for malformed test lengths)."""
        fields = ro.given(steps=self.steps, batch_size=self.batch_size, layers=self.layers, d_model=self.d_model,
                            heads=self.heads, n_per_length=self.n_per_length, nnch_samples=self.nnch_samples,
                            eval_mode=ro.parse_eval(self.eval_mode)[0])
        fields.update(ro.hybrid_fields(self.layer_pe, self.window))
        if self.test_lengths is not None:
            fields.update(lengths_fields(self.test_lengths, "--test-lengths"))
        return fields


def _dry_run(plan, console, json_output: bool) -> None:

    if json_output:
        print(json.dumps(plan.runs_payload(), indent=2))
        return
    dry_run_lines(plan.configs, console)
    console.print(f"{len(plan.configs)} runs ({plan.scale} scale)")


@ro.with_option_groups
def sweep(
    config: Optional[Path] = typer.Option(
        None, "--config", help="Sweep TOML file (e.g. sweeps/table2.toml); flags below override it."
    ),
    grid: GridFlags = None,
    scale: Optional[str] = typer.Option(
        None, "--scale",
        help="quick (2-core CPU), medium (the paper's model, batch and negatives with fewer steps) or paper (the "
        "paper's settings): defaults for model size, steps, strings per length, seeds.",
    ),
    settings: SweepSettings = None,
    data: Optional[Path] = typer.Option(
        None, "--data",
        help="Train and test every run on these files (FLaRe folder or MLRegTest DIR/<language>; docs/formats.md); "
        "at most one --lang, whose labels are checked.",
    ),
    set_fields: Optional[list[str]] = typer.Option(
        None, "--set",
        help="Any RunConfig field as a grid axis, FIELD=v1,v2 (repeatable), e.g. --set "
        "train_near_miss_fraction=0,0.5 --set layers=2,5.",
    ),
    workers: Optional[int] = typer.Option(None, "--workers", help=ro.WORKERS_HELP + " Default 1."),
    out: Optional[Path] = typer.Option(
        None, "--out",
        help="Results folder (default results/sweep; Parquet under runs/ and evals/; missing folders are created). "
        "Finished runs there are skipped.",
    ),
    run: ro.RunFlags = None,
    dry_run: bool = typer.Option(False, "--dry-run", help="Only list the runs of the grid."),
    json_output: bool = typer.Option(False, "--json", help="Print the summary (and aggregate table) as JSON."),
) -> None:
    """Run a grid of training runs (languages × PEs × bases × seeds × lrs × --set axes); rerunning skips finished runs."""  # noqa: E501 (Typer lists the command by this line, breaks included)
    ro.check_positive(workers=workers)
    console = Console(stderr=json_output)
    fixed = settings.fields()
    worst_case = settings.worst_case()
    axes = check_axes(ro.parse_assignments(set_fields), fixed)
    plan = plan_sweep(
        GridRequest(config=config, scale=scale, settings=fixed, axes=axes, data=data, **grid.parsed())
    )
    for text in plan.notes:
        note(text)
    if dry_run:
        # The same run options a real run checks (nothing is contacted): a dry run that passes
        # means the sweep itself will start.
        run.check(1 if workers is None else workers)
        unused = [option for option, value in (("--out", out), ("--workers", workers)) if value is not None]
        if unused:
            note(
                f"{' and '.join(unused)} {'has' if len(unused) == 1 else 'have'} no "
                "effect with --dry-run (nothing runs)"
            )
        _dry_run(plan, console, json_output)
        return
    out = Path("results/sweep") if out is None else out
    finished_run_ids(out)  # a damaged or foreign file in the folder: an error before any training
    run_options = run.sweep_options(plan.configs, out, workers=1 if workers is None else workers,
                                    note=lambda text: console.print(f"[yellow]note:[/] {text}"))
    run_options["worst_case"] = worst_case
    console.print(f"[bold]{plan.spec.name}[/]: {len(plan.configs)} runs at {plan.scale} scale → {out}")
    try:
        summary = run_with_progress(plan.configs, out, console, axes=swept_fields(plan.configs),
                                    resolved=plan.runs, **run_options)
    except KeyboardInterrupt:
        raise interrupted(plan.configs, out) from None
    console.print(
        f"{summary.completed} run(s) finished, {summary.skipped} already done, statuses "
        f"{summary.statuses}, {summary.wall_s:.0f}s"
    )
    request = ReportRequest(out=out, reference=plan.spec.reference, title=plan.spec.name,
                            languages=plan.spec.languages)
    payload = print_report(request, console, QUIET if json_output else TABLE)
    if json_output:
        payload["sweep"] = {"name": plan.spec.name, **summary.to_dict()}
        print_json(payload)
