"""CLI: `sweep`, `report`, `reproduce` — grids of training runs, Parquet results, paper tables.

The commands parse their options, ask `formal_rope.sweeps` (plan, runner, report) and render with
Rich. Library modules and Rich are imported inside the commands: they load numpy (and pandas),
which the command line's start-up path does without.
"""

from __future__ import annotations

import json
import math
import sys
from pathlib import Path
from typing import NamedTuple, Optional

import typer

from formal_rope.commands import run_options as ro
from formal_rope.commands.train import check_positive, json_ready, parse_assignments, parse_periods
from formal_rope.errors import FormalRopeError, Interrupted
from formal_rope.numbers import float_text
from formal_rope.training.encodings import encoding_names


def _split(text: str | None, option: str | None = None) -> list[str]:
    """'a, b' -> ['a', 'b']. With `option` (a list the user gave), an empty list or an empty item is
    an error rather than a silent fall-back to the default."""
    if text is None:
        return []
    parts = [part.strip() for part in text.split(",")]
    if option is not None and (not any(parts) or not all(parts)):
        raise FormalRopeError(f"{option} {text!r}: expected a comma-separated list without empty items")
    return [part for part in parts if part]


def _floats(text: str | None, what: str) -> list[float]:
    values = []
    for part in _split(text, what):
        try:
            values.append(float_text(part))
        except ValueError:
            raise FormalRopeError(
                f"{what}: {part!r} is not a number (expected a comma-separated list like 1e-4,3e-4)"
            ) from None
    return values


def _alphabet(text: str | None):
    """--alphabet like `train`: 'ab' or 'a,b' -> ('a', 'b'); None keeps each language's own."""
    if text is None:
        return None
    from formal_rope.lang.source import parse_alphabet  # function-local: the parsers, off the start-up path

    return parse_alphabet(text)


def _periods(text: str | None):
    """--periods 'auto' or '2,3' (the same parser as `train`) -> "auto" or [2, 3]; None: not given."""
    if text is None:
        return None
    parsed = parse_periods(text)
    return "auto" if parsed is None else list(parsed)


def _overrides(**values) -> dict:
    return {key: value for key, value in values.items() if value is not None}


def _describe_config(config, axes=()) -> str:
    """'(ab)* rope β=10000 seed=0 lr=0.005', plus the values of the grid's further axes that apply."""
    from formal_rope.sweeps.report import cell_text  # function-local: numpy, off the start-up path

    base = f" β={config.base:g}" if config.applies("base") else ""
    extra = "".join(f" {name}={cell_text(name, getattr(config, name))}" for name in axes
                    if name not in ("base", "seed", "lr") and config.applies(name))
    if config.is_hybrid():
        from formal_rope.training.encodings import hybrid_label

        extra += f" [{hybrid_label(config.pe, config.layer_pe, config.window)}]"
    if config.init_from is not None:
        extra += f" from={config.init_from}"
    return f"{config.language} {config.pe}{base} seed={config.seed} lr={config.lr:g}{extra}"


def _number(value: float, digits: int) -> str:
    """A statistic for the table: '–' when undefined (NaN: no run of the row has a value)."""
    return "–" if value is None or math.isnan(value) else f"{value:.{digits}f}"


def _run_with_progress(configs, out: Path, console, axes=(), **run_options):
    """run_sweep with a Rich progress display: a line per finished run, the runs in flight. Off a
    terminal (a log), a line per run as it starts and one as it finishes, and no bar."""
    # function-local: rich and the runner (numpy) stay off the start-up path
    from rich.progress import (
        BarColumn,
        MofNCompleteColumn,
        TextColumn,
        TimeElapsedColumn,
        TimeRemainingColumn,
    )

    from formal_rope.progress import progress_display

    # The module, not the function: run_sweep is looked up when called (tests replace its trainer).
    from formal_rope.sweeps import runner

    live = console.is_terminal
    with progress_display(
        TextColumn("[bold]sweep"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        TimeRemainingColumn(),
        TextColumn("{task.description}"),
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
                running[run_id] = _describe_config(config, axes)
                if kind == "start" and not live:  # a log sees work begin, not only end (a pack can take minutes)
                    progress.console.print(f"started  {running[run_id]}", markup=False, highlight=False,
                                           soft_wrap=True)
                if kind == "retry":
                    progress.console.print(
                        f"[yellow]retry   [/] {_describe_config(config, axes)} (its worker died; resumes "
                        "from its last saved state, if any)"
                    )
            elif kind == "done":
                running.pop(run_id, None)
                progress.advance(task)
                status = result.status
                failed[0] += status == "failed"
                colour = {"ok": "green", "diverged": "yellow"}.get(status, "red")
                n_star = "–" if result.n_star is None else str(result.n_star)  # None: failed, nothing measured
                if result.n_star_worst is not None:
                    n_star += f"/{result.n_star_worst}"
                progress.console.print(
                    f"[{colour}]{status:8s}[/] {_describe_config(config, axes):48s} N*={n_star:<4s}"
                    + (" (sampled/worst-case)" if result.n_star_worst is not None else "") + " "
                    f"acc={_number(result.accuracy, 3)} {result.wall_s:6.1f}s"
                    + (f"  ({result.error})" if result.error else ""),
                    soft_wrap=True,
                )
            counts = f"{len(running)} running" + (f", {failed[0]} failed" if failed[0] else "")
            shown = f"{counts}: " + "; ".join(running.values()) if running else (counts if failed[0] else "")
            progress.update(task, description=shown[:100])

        return runner.run_sweep(list(configs), out, on_event=on_event,
                                on_note=lambda text: progress.console.print(f"[dim]{text}[/]"), **run_options)


def _print_json(payload) -> None:
    print(json.dumps(json_ready(payload), indent=2, allow_nan=False))


def _note(text: str) -> None:
    print(f"note: {text}", file=sys.stderr)


# ----------------------------------------------------------------------------------------------
# report


def _grouping(text: str | None) -> tuple[str, ...] | None:
    """--by as column names; None when not given (the report's default: language, pe, base and every
    swept axis)."""
    if text is None:
        return None
    names = _split(text, "--by")
    repeated = sorted({name for name in names if names.count(name) > 1})
    if repeated:
        raise FormalRopeError(f"--by names {', '.join(repeated)} more than once")
    return tuple(names)


def _results_table(rows, by, title: str, reference: dict | None, level: float = 0.95, longest: str = "max"):
    # function-local: rich and the report (numpy) stay off the start-up path
    from rich.table import Table

    from formal_rope.sweeps.report import DEFAULT_GROUPING, VARIANT_COLUMN, cell_text, reference_index

    # The paper's cell beside each row of it: rows keyed by (language, pe, base), swept axes beside.
    paper = reference_index(reference) if set(DEFAULT_GROUPING) <= set(by) and VARIANT_COLUMN not in by else {}
    searched = any(row.runs_searched for row in rows)
    table = Table(title=title, show_lines=False)
    for name in by:
        table.add_column({"pe": "PE"}.get(name, name), justify="right" if name == "base" else "left", no_wrap=True)
    confidence = f"{level:.0%}".replace(".0%", "%")
    names = ["runs", "acc max", "acc mean±std", "N* max", "N* mean±std", f"N* {confidence} CI", f"acc {confidence} CI",
             f"reached {longest}"]
    if searched:
        names += ["worst N* max", "worst N* mean±std", f"worst reached {longest}"]
    for name in (*names, "NNCH max", "NNCH mean±std"):
        table.add_column(name, justify="right", no_wrap=True)
    if paper:
        table.add_column("paper: acc max / N* max (mean)", justify="right", style="dim", no_wrap=True)
    for row in rows:
        cells = [cell_text(name, value) for name, value in row.group]
        cells += [
            f"{row.runs}" + ("" if row.ok_runs == row.runs else f" ({row.runs - row.ok_runs} not ok)"),
            _number(row.accuracy_max, 3),
            "–" if math.isnan(row.accuracy_mean) else f"{row.accuracy_mean:.3f}±{row.accuracy_std:.3f}",
            _number(row.n_star_max, 0),  # "–" when every run of the row failed (no N* measured)
            "–" if math.isnan(row.n_star_mean) else f"{row.n_star_mean:.1f}±{row.n_star_std:.1f}",
            "–" if row.n_star_interval is None else row.n_star_interval.text(0),
            "–" if row.accuracy_interval is None else row.accuracy_interval.text(3),
            f"{row.successes}/{len(row.n_stars)}",
        ]
        if searched:
            cells += [
                _number(row.n_star_worst_max, 0),
                "–" if math.isnan(row.n_star_worst_mean) else f"{row.n_star_worst_mean:.1f}±{row.n_star_worst_std:.1f}",
                "–" if row.successes_worst is None else f"{row.successes_worst}/{row.runs_searched}",
            ]
        cells += list(_nnch_cells(row))
        if paper:
            ref = paper.get((row.language, row.pe, row.base))
            mean = "" if ref is None or math.isnan(ref["n_star_mean"]) else f" ({ref['n_star_mean']:.1f})"
            cells.append("" if ref is None else f"{ref['accuracy_max']:.3f} / {ref['n_star_max']:.0f}{mean}")
        table.add_row(*cells)
    return table


def _comparison_table(comparisons, by):
    from rich.table import Table  # function-local: rich, off the start-up path

    from formal_rope.sweeps.report import cell_text

    first = comparisons[0]
    strata = [name for name in by if name in first]
    table = Table(title=f"{first['a']} vs {first['b']} ({first['metric']}, per {', '.join(strata) or 'folder'})")
    for name in (*strata, "runs", "mean", "median", "test", "p", "Cliff's δ"):
        table.add_column({"pe": "PE"}.get(name, name), justify="left" if name in strata or name == "test" else "right",
                         no_wrap=True)
    for entry in comparisons:
        p = entry["p_value"]
        table.add_row(
            *(cell_text(name, entry[name]) for name in strata),
            f"{entry['n_a']} vs {entry['n_b']}",
            f"{_number(entry['mean_a'], 3)} vs {_number(entry['mean_b'], 3)}",
            f"{_number(entry['median_a'], 3)} vs {_number(entry['median_b'], 3)}",
            entry["method"],
            "–" if p is None else f"{p:.3g}",
            "–" if entry["cliffs_delta"] is None else f"{entry['cliffs_delta']:+.2f}",
        )
    return table


def _nnch_cells(row) -> tuple[str, str]:
    """NNCH max and mean±std; "–" when no run of the row has NNCH's score (evaluation stopped early, runs
    on files, nnch_samples 0, results written before the score was measured)."""
    if math.isnan(row.nnch_max):
        return "–", "–"
    return f"{row.nnch_max:.3f}", f"{row.nnch_mean:.3f}±{row.nnch_std:.3f}"


def _print_wide(console, table) -> None:
    """Tables are wider than the 80 columns Rich assumes off a terminal; never squeeze their cells:
    print at the table's natural width (measured with room to spare)."""
    from rich.measure import Measurement  # function-local: rich, off the start-up path

    narrow = console.width
    console.width = max(narrow, 1000)
    console.width = max(narrow, Measurement.get(console, console.options, table).maximum)
    console.print(table)
    console.width = narrow


def _report(out: Path, console, json_output: bool, plot: Path | None, reference=None, title: str = "",
            quiet: bool = False, by=None, scale: str | None = None, sort: str | None = None, variants=(),
            variant_baseline: dict | None = None, languages=(), level: float = 0.95, comparison=None,
            metric: str = "n_star", run_variants: dict | None = None) -> dict:
    """Aggregate `out` (`sweeps.report.build_report`); print the table (or, with json_output, the
    payload as JSON) unless quiet; return the payload."""
    # function-local: rich and the report (pandas) stay off the start-up path
    from rich.markup import escape

    from formal_rope.sweeps.report import build_report, failure_lines

    report = build_report(out, by=by, sort=sort, reference=reference, plot=plot, title=title, scale=scale,
                          variants=variants, variant_baseline=variant_baseline, run_variants=run_variants,
                          languages=languages, on_note=_note,
                          level=level, comparison=comparison, metric=metric)
    payload = report.payload
    if json_output or quiet:
        if json_output:
            _print_json(payload)
        return payload
    lengths = sorted({int(n) for n in report.runs["test_max_length"].dropna()}) if len(report.runs) else []
    longest = str(lengths[0]) if len(lengths) == 1 else "max"
    _print_wide(console, _results_table(report.rows, report.by, title or f"results in {out}", reference, level,
                                        longest))
    console.print(f"[dim]{payload['intervals']}[/]", highlight=False, soft_wrap=True)
    if payload["comparisons"]:
        _print_wide(console, _comparison_table(payload["comparisons"], report.by))
    for note in report.notes:
        console.print(f"[yellow]note:[/] {escape(note)}", highlight=False, soft_wrap=True)
    lines = failure_lines(report.runs, report.by)
    if lines:
        console.print("[dim]first failing strings (shortest failing length) per run:[/]")
        for line in lines:
            console.print(f"  {line}", style="dim", highlight=False, markup=False, soft_wrap=True)
    if plot is not None:
        console.print(f"plot written to {payload['plot']}")
    return payload


# ----------------------------------------------------------------------------------------------
# sweep


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
        help="'auto' (least k from classify; an error outside LTL[P,MOD]) or comma-separated periods for "
        "rope_p/sipe_p.",
    )
    alphabet: Optional[str] = typer.Option(
        None, "--alphabet", "-a", help="Alphabet override for every language (e.g. a,b)."
    )
    seeds: Optional[int] = typer.Option(None, "--seeds", help="Number of seeds (0..n-1). Default from --scale.")
    lrs: Optional[str] = typer.Option(None, "--lrs", help="Learning rates, comma-separated. Default from --scale.")

    def parsed(self) -> dict:
        """The axes as `sweeps.plan.GridRequest` takes them (FormalRopeError for a malformed list)."""
        return dict(languages=tuple(self.lang or ()), pes=tuple(_split(self.pe, "--pe")),
                    bases=tuple(_floats(self.base, "--base")), seeds=self.seeds, lrs=tuple(_floats(self.lrs, "--lrs")),
                    alphabet=_alphabet(self.alphabet), periods=_periods(self.periods))


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
        from formal_rope.training.config import lengths_fields  # function-local: numpy, off the start-up path

        fields = _overrides(steps=self.steps, batch_size=self.batch_size, layers=self.layers, d_model=self.d_model,
                            heads=self.heads, n_per_length=self.n_per_length, nnch_samples=self.nnch_samples,
                            eval_mode=ro.parse_eval(self.eval_mode)[0])
        fields.update(ro.hybrid_fields(self.layer_pe, self.window))
        if self.test_lengths is not None:
            fields.update(lengths_fields(self.test_lengths, "--test-lengths"))
        return fields


def _dry_run_tables(plans, scale: str, console, json_output: bool) -> None:
    """`reproduce --dry-run`: each table's runs and results folder (JSON: {table: {out, runs}})."""
    if json_output:
        print(json.dumps({plan.name: {"out": str(plan.out), "runs": [{"run_id": c.run_id(), **c.to_dict()}
                                                                      for c in plan.configs]}
                          for plan in plans}, indent=2))
        return
    for plan in plans:
        console.print(f"[bold]{plan.name}[/] → {plan.out}")
        _dry_run_lines(plan.configs, console)
    console.print(f"{sum(len(plan.configs) for plan in plans)} runs ({scale} scale)")


def _dry_run(plan, console, json_output: bool) -> None:
    if json_output:
        print(json.dumps(plan.runs_payload(), indent=2))
        return
    _dry_run_lines(plan.configs, console)
    console.print(f"{len(plan.configs)} runs ({plan.scale} scale)")


def _dry_run_lines(configs, console) -> None:
    """A line per run: its id, what tells it apart (every swept field) and its steps."""
    from formal_rope.sweeps.plan import swept_fields  # function-local: the sweeps stage, off the start-up path

    swept = [name for name in swept_fields(configs) if name != "steps"]
    for c in configs:
        console.print(f"{c.run_id()}  {_describe_config(c, swept)}  steps={c.steps}", highlight=False, soft_wrap=True)


_WORKERS_HELP = (
    "Parallel worker processes (at least 1; with --backend local at most 4 per CPU core, MAX_WORKERS_PER_CORE; "
    "never more are started than there are units of work)."
)


def _interrupted(configs, out: Path) -> Interrupted:
    """What a Ctrl-C during a sweep keeps: every finished run, and the saved training states."""
    from formal_rope.sweeps.results import finished_run_ids  # function-local: pyarrow, off the start-up path

    ids = {config.run_id() for config in configs}
    finished = len(ids & finished_run_ids(out))
    return Interrupted(
        f"{finished} of {len(ids)} runs finished and are kept in {out}; run the same command again to continue "
        "(finished runs are skipped, runs with a saved training state resume from it)"
    )


def register(app: typer.Typer) -> None:
    @app.command()
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
        workers: Optional[int] = typer.Option(None, "--workers", help=_WORKERS_HELP + " Default 1."),
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
        # function-local: rich and the sweeps stage (numpy) stay off the start-up path
        from rich.console import Console

        from formal_rope.sweeps.plan import GridRequest, check_axes, plan_sweep, swept_fields
        from formal_rope.sweeps.results import finished_run_ids

        check_positive(workers=workers)
        console = Console(stderr=json_output)
        fixed = settings.fields()
        worst_case = settings.worst_case()
        axes = check_axes(parse_assignments(set_fields), fixed)
        plan = plan_sweep(
            GridRequest(config=config, scale=scale, settings=fixed, axes=axes, data=data, **grid.parsed())
        )
        for note in plan.notes:
            _note(note)
        if dry_run:
            # The same run options a real run checks (nothing is contacted): a dry run that passes
            # means the sweep itself will start.
            run.check(1 if workers is None else workers)
            unused = [option for option, value in (("--out", out), ("--workers", workers)) if value is not None]
            if unused:
                _note(
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
            summary = _run_with_progress(plan.configs, out, console, axes=swept_fields(plan.configs), **run_options)
        except KeyboardInterrupt:
            raise _interrupted(plan.configs, out) from None
        console.print(
            f"{summary.completed} run(s) finished, {summary.skipped} already done, statuses "
            f"{summary.statuses}, {summary.wall_s:.0f}s"
        )
        payload = _report(out, console, False, None, plan.spec.reference, title=plan.spec.name, quiet=json_output,
                          languages=plan.spec.languages)
        if json_output:
            payload["sweep"] = {"name": plan.spec.name, **summary.to_dict()}
            _print_json(payload)

    @app.command()
    def report(
        results: Path = typer.Argument(..., help="Results folder written by `sweep` or `reproduce`."),
        json_output: bool = typer.Option(False, "--json", help="Print the aggregate table as JSON."),
        plot: Optional[Path] = typer.Option(
            None, "--plot",
            help="Write a Figure 2/3-style plot (mean N* vs base, ±1 std; NoPE band; the paper's values hollow with "
            "--reference) to this PNG; missing folders are created.",
        ),
        reference: Optional[str] = typer.Option(
            None, "--reference",
            help="The paper's numbers beside ours: a table name (table2, table4, table5) or a sweep "
            "TOML with a \\[reference] table.",
        ),
        by: Optional[str] = typer.Option(
            None, "--by",
            help="Group rows by these runs columns, comma-separated, e.g. language,pe,train_near_miss_fraction "
            "(default: language,pe,base and every setting that varies across the runs besides seed and lr).",
        ),
        sort: Optional[str] = typer.Option(
            None, "--sort",
            help="Order rows best first by n_star (N* max, then mean), nnch (NNCH's score max, then mean) or "
            "accuracy; default: the grouping's order.",
        ),
        confidence: float = typer.Option(
            0.95, "--confidence",
            help="Confidence level of each row's intervals for mean N* and accuracy (bootstrap of the mean from 5 "
            "runs on, exact order-statistic interval of the median below; docs/sweeps.md).",
        ),
        compare: Optional[tuple[str, str]] = typer.Option(
            None, "--compare",
            help="Compare two cells over seeds: --compare pe=rope_p pe=nope (COLUMN=VALUE[,COLUMN=VALUE] each), per "
            "value of the other grouping columns (per language by default): exact permutation test (Mann-Whitney U "
            "for large samples) and Cliff's delta.",
        ),
        metric: str = typer.Option(
            "n_star", "--metric",
            help="What --compare compares: n_star, accuracy, nnch_accuracy, n_star_worst, success (N* at the longest "
            "test length, 0/1) or success_worst.",
        ),
        html: Optional[Path] = typer.Option(
            None, "--html",
            help="Also write a self-contained results page to this .html file (tables sortable and filterable, each "
            "language's classes, DFA, runs and failing strings, the figures; no server or network needed).",
        ),
        plot_curves: Optional[Path] = typer.Option(
            None, "--plot-curves",
            help="Also draw every run's training curve (loss and accuracy against the step, OUT/curves) into this PNG.",
        ),
        color_by: str = typer.Option(
            "pe", "--color-by", help="The runs column that colours the lines of --plot-curves (any column, e.g. "
            "language, lr, seed)."),
    ) -> None:
        """Aggregate a results folder like the core paper's Tables 4–5: max/mean/std of accuracy, N* and NNCH's score (uniform strings, lengths 42..500)."""  # noqa: E501 (Typer lists the command by this line, breaks included)
        # function-local: rich and the report (numpy) stay off the start-up path
        from rich.console import Console

        from formal_rope.sweeps.report import DEFAULT_GROUPING, reference_table

        grouping = _grouping(by)
        if not 0 < confidence < 1:
            raise FormalRopeError(f"--confidence must lie strictly between 0 and 1 (e.g. 0.95), got {confidence}")
        if reference is not None and plot is None and grouping is not None and not set(DEFAULT_GROUPING) <= set(
                grouping):
            _note("--reference is shown in the table only with a grouping that has language, pe and base (the "
                  "default) and otherwise only on a --plot; it has no effect here")
        if compare is None and metric != "n_star":
            _note("--metric chooses what --compare compares; it has no effect without --compare")
        _report(results, Console(), json_output, plot, reference_table(reference), by=grouping, sort=sort,
                level=confidence, comparison=compare, metric=metric)
        if html is not None:
            from formal_rope.sweeps.results_page import write_results_page  # function-local: pandas, matplotlib

            written = write_results_page(results, html, by=grouping, sort=sort, reference=reference_table(reference),
                                         level=confidence, comparison=compare, metric=metric)
            print(f"results page written to {written}", file=sys.stderr if json_output else sys.stdout)
        if plot_curves is not None:
            from formal_rope.sweeps.curves_plot import plot_curves as draw_curves  # function-local: matplotlib

            drawn = draw_curves(results, plot_curves, color_by)
            print(f"training curves written to {drawn}", file=sys.stderr if json_output else sys.stdout)

    @app.command()
    @ro.with_option_groups
    def reproduce(
        table: str = typer.Argument(
            "table2",
            help="table2, table4, table5, all (the paper's three), or one of our experiments: ablation (each "
            "quick-scale choice undone, Table 2), ablation45 (the same for NoPE and RoPE_NP on (ab)* and Σ*abΣ*, "
            "Tables 4-5), stability (RoPE_P over 5 seeds, periods 2-4), joformer (JoFormer "
            "on the paper's five languages), test_sets (Table 2 with near-miss vs uniform test negatives, "
            "(aa)* over {a} and over {a, b}), recipes (RoPE_P over 5 seeds, periods 2-4, recipes at <= 3x quick), "
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
        workers: int = typer.Option(2, "--workers", help=_WORKERS_HELP),
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
        run: ro.RunFlags = None,
        dry_run: bool = typer.Option(
            False, "--dry-run", help="Only list the runs of each table (and check the run options); nothing runs."
        ),
        json_output: bool = typer.Option(
            False, "--json", help="Print the aggregate table as JSON (with --dry-run: the runs, per table)."
        ),
    ) -> None:
        """Rerun a table of the core paper (sweeps/<table>.toml): train, evaluate 41…500, print the table, write Parquet and a plot."""  # noqa: E501 (Typer lists the command by this line, breaks included)
        # function-local: rich and the sweeps stage (numpy) stay off the start-up path
        from rich.console import Console

        from formal_rope.sweeps.deviations import deviation_lines
        from formal_rope.sweeps.grid import variant_run_ids
        from formal_rope.sweeps.plan import check_scale, plan_reproduce, reproduce_tables, swept_fields
        from formal_rope.sweeps.results import finished_run_ids
        from formal_rope.training.scales import SCALE_SHRINKS

        reproduce_tables(table)
        check_scale(scale)
        check_positive(workers=workers)
        mode, search = ro.parse_eval(eval_mode)
        if mode == "nstar":
            raise FormalRopeError("reproduce evaluates every test length (--eval full); nstar would make other runs "
                                  "(another run id): use `sweep --config sweeps/<table>.toml --eval nstar`")
        worst_case = ro.worst_case_settings(search, worst_case_budget)
        console = Console(stderr=json_output)
        if scale in SCALE_SHRINKS:
            console.print(f"[yellow]{scale} scale shrinks:[/]\n  " + "\n  ".join(SCALE_SHRINKS[scale]))
        hybrid = ro.hybrid_fields(layer_pe, window)
        explicit = {**_overrides(seeds=seeds, steps=steps, n_per_length=n_per_length, nnch_samples=nnch_samples),
                    **hybrid}
        if explicit:
            console.print(
                "[yellow]overridden here:[/] " + ", ".join(f"{key} {value}" for key, value in explicit.items())
            )
        plans = []
        tables = plan_reproduce(table, scale, out=out, seeds=seeds, steps=steps, n_per_length=n_per_length,
                                nnch_samples=nnch_samples, state_dir=run.state_dir, hybrid=hybrid)
        if dry_run:
            run.check(workers)  # what a real run checks, contacting nothing
            for plan in tables:
                for note in plan.notes:
                    _note(note)
            _dry_run_tables(tables, scale, console, json_output)
            return
        for plan in tables:
            for note in plan.notes:
                _note(note)
            finished_run_ids(plan.out)
            # Every table's options (state folder, Ray) are checked before the first run starts.
            options = run.sweep_options(plan.configs, plan.out, workers=workers, state_dir=plan.state_dir,
                                        note=lambda text: console.print(f"[yellow]note:[/] {text}"))
            plans.append((plan, {**options, "worst_case": worst_case}))
        payloads = {}
        for plan, run_options in plans:
            console.print(
                f"[bold]{plan.name}[/] ({plan.spec.description}): {len(plan.configs)} "
                f"runs at {scale} scale → {plan.out}"
            )
            try:
                _run_with_progress(plan.configs, plan.out, console, axes=swept_fields(plan.configs), **run_options)
            except KeyboardInterrupt:
                raise _interrupted(plan.configs, plan.out) from None
            payloads[plan.name] = _report(plan.out, console, False, plan.out / f"{plan.name}.png", plan.spec.reference,
                                          title=plan.name, quiet=json_output, scale=scale, variants=plan.spec.variants,
                                          variant_baseline=plan.spec.overrides, languages=plan.spec.languages,
                                          run_variants=variant_run_ids(plan.spec))
            for line in deviation_lines(plan.name, scale):
                console.print(f"[yellow]deviation:[/] {line}", highlight=False, soft_wrap=True)
        if json_output:
            # One JSON document: the table's payload, or {table: payload} for `all`.
            _print_json(payloads[table] if table != "all" else payloads)
