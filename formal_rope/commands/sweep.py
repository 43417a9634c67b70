"""CLI: `sweep`, `report`, `reproduce` — grids of training runs, Parquet results, paper tables."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Optional

import typer

from formal_rope.commands import run_options as ro
from formal_rope.errors import FormalRopeError

def _split(text: str | None) -> list[str]:
    if text is None:
        return []
    return [part.strip() for part in text.split(",") if part.strip()]


def _floats(text: str | None, what: str) -> list[float]:
    values = []
    for part in _split(text):
        try:
            values.append(float(part))
        except ValueError:
            raise FormalRopeError(f"{what}: {part!r} is not a number (expected a comma-separated list like 1e-4,3e-4)") from None
    return values


def _alphabet(text: str | None):
    """--alphabet like `train`: 'ab' or 'a,b' -> ('a', 'b'); None keeps each language's own."""
    if not text:
        return None
    from formal_rope.lang.source import parse_alphabet

    return parse_alphabet(text)


def _periods(text: str | None, default):
    """--periods 'auto' or '2,3' (the same parser as `train`); None keeps `default`."""
    if not text:
        return default
    from formal_rope.commands.train import parse_periods

    parsed = parse_periods(text)
    return "auto" if parsed is None else list(parsed)


def _overrides(**values) -> dict:
    return {key: value for key, value in values.items() if value is not None}


def _describe_config(config) -> str:
    from formal_rope.sweeps.grid import BASE_FREE_PES

    base = "" if config.pe in BASE_FREE_PES else f" β={config.base:g}"
    return f"{config.language} {config.pe}{base} seed={config.seed} lr={config.lr:g}"


def _run_with_progress(configs, out: Path, workers: int, console, quiet: bool, **run_options):
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn, TimeRemainingColumn

    from formal_rope.sweeps.runner import run_sweep

    with Progress(
        TextColumn("[bold]sweep"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        TimeRemainingColumn(),
        TextColumn("{task.description}"),
        console=console,
        disable=quiet,
        transient=False,
    ) as progress:
        task = progress.add_task("", total=len(configs))
        running: dict[str, str] = {}
        failed = [0]

        def on_event(kind, config, result):
            run_id = config.run_id()
            if kind == "skip":
                progress.advance(task)
            elif kind in ("start", "retry"):
                running[run_id] = _describe_config(config)
                if kind == "retry":
                    progress.console.print(f"[yellow]retry   [/] {_describe_config(config)} (its worker died; resumes "
                                           "from its last saved state, if any)")
            elif kind == "done":
                running.pop(run_id, None)
                progress.advance(task)
                status = result.status
                failed[0] += status == "failed"
                colour = {"ok": "green", "diverged": "yellow"}.get(status, "red")
                progress.console.print(
                    f"[{colour}]{status:8s}[/] {_describe_config(config):48s} N*={result.n_star:<4d} "
                    f"acc={result.accuracy:.3f} {result.wall_s:6.1f}s"
                    + (f"  ({result.error})" if result.error else "")
                )
            counts = f"{len(running)} running" + (f", {failed[0]} failed" if failed[0] else "")
            shown = f"{counts}: " + "; ".join(running.values()) if running else (counts if failed[0] else "")
            progress.update(task, description=shown[:100])

        return run_sweep(configs, out, workers=workers, on_event=on_event,
                         on_note=lambda text: progress.console.print(f"[dim]{text}[/]"), **run_options)


def _print_json(payload) -> None:
    from formal_rope.commands.train import json_ready

    print(json.dumps(json_ready(payload), indent=2, allow_nan=False))


def _report(out: Path, console, json_output: bool, plot: Path | None, reference=None, title: str = "",
            quiet: bool = False) -> dict:
    """Aggregate `out`; print the table (or, with json_output, the payload as JSON) unless quiet."""
    from rich.measure import Measurement
    from rich.table import Table

    from formal_rope.sweeps.report import PE_LABELS, aggregate, format_base, mixed_settings, plot_n_star
    from formal_rope.sweeps.results import load_results

    runs, evals = load_results(out)
    rows = aggregate(runs)
    ref_rows = {}
    for ref in (reference or {}).get("rows", []):
        language, pe, base = ref[0], ref[1], (None if ref[2] == 0 else float(ref[2]))
        ref_rows[(language, pe, base)] = ref
    payload = {
        "results": str(out),
        "runs": int(len(runs)),
        "evals": int(len(evals)),
        "statuses": {str(k): int(v) for k, v in runs["status"].value_counts().items()},
        "rows": [row.to_dict() for row in rows],
        "plot": None,  # always present, so the JSON keys do not depend on the options
    }
    if plot is not None:
        payload["plot"] = str(plot_n_star(rows, plot, title=title))
    if json_output:
        _print_json(payload)
        return payload
    if quiet:
        return payload

    table = Table(title=title or f"results in {out}", show_lines=False)
    for name, justify in [("language", "left"), ("PE", "left"), ("base", "right"), ("runs", "right"),
                          ("acc max", "right"), ("acc mean±std", "right"), ("N* max", "right"), ("N* mean±std", "right")]:
        table.add_column(name, justify=justify, no_wrap=True)
    if ref_rows:
        table.add_column("paper: acc max / N* max (mean)", justify="right", style="dim", no_wrap=True)
    for row in rows:
        cells = [row.language, PE_LABELS.get(row.pe, row.pe), format_base(row.base),
                 f"{row.runs}" + ("" if row.ok_runs == row.runs else f" ({row.runs - row.ok_runs} not ok)"),
                 f"{row.accuracy_max:.3f}", f"{row.accuracy_mean:.3f}±{row.accuracy_std:.3f}",
                 f"{row.n_star_max:.0f}", f"{row.n_star_mean:.1f}±{row.n_star_std:.1f}"]
        if ref_rows:
            ref = ref_rows.get((row.language, row.pe, row.base))
            if ref is None:
                cells.append("")
            else:
                mean = "" if ref[6] is None or (isinstance(ref[6], float) and math.isnan(ref[6])) else f" ({ref[6]:.1f})"
                cells.append(f"{ref[3]:.3f} / {ref[5]:.0f}{mean}")
        table.add_row(*cells)
    # Tables are wider than the 80 columns Rich assumes off a terminal; never squeeze their cells:
    # print at the table's natural width (measured with room to spare).
    narrow = console.width
    console.width = max(narrow, 1000)
    console.width = max(narrow, Measurement.get(console, console.options, table).maximum)
    console.print(table)
    console.width = narrow
    for language, pe, base, differing in mixed_settings(runs):
        settings = "; ".join(f"{key} {', '.join(values)}" for key, values in differing.items())
        console.print(f"[yellow]note:[/] {language} {PE_LABELS.get(pe, pe)} {format_base(base)} aggregates runs "
                      f"with different settings ({settings}), not only seeds and learning rates")
    failures = runs[runs["first_failure"].notna()]
    if len(failures):
        console.print("[dim]first failing strings (shortest failing length) per run:[/]")
        for _, run in failures.head(12).iterrows():
            text = str(run["first_failure"])
            shown = text if len(text) <= 40 else text[:37] + "..."
            console.print(f"  [dim]{run['language']} {run['pe']} seed={run['seed']} N*={run['n_star']}: {shown!r} (len {len(text)})[/]")
    if plot is not None:
        console.print(f"plot written to {payload['plot']}")
    return payload


def register(app: typer.Typer) -> None:
    @app.command()
    def sweep(
        config: Optional[Path] = typer.Option(None, "--config", help="Sweep TOML file (e.g. sweeps/table2.toml); flags below override it."),
        lang: Optional[list[str]] = typer.Option(None, "--lang", help="Language (registry name, expression, ltl:/re:, .att path). Repeat for several."),
        pe: Optional[str] = typer.Option(None, "--pe", help="Positional encodings, comma-separated (nope,sipe,sipe_p,rope,rope_p,partial_rope,jof_fixed,jof_learned,jof_projected)."),
        base: Optional[str] = typer.Option(None, "--base", help="Bases β, comma-separated (e.g. 1e-12,1,1e4). Ignored by nope/rope_p/sipe_p."),
        periods: Optional[str] = typer.Option(None, "--periods", help="'auto' (least k from classify) or comma-separated periods for rope_p/sipe_p."),
        alphabet: Optional[str] = typer.Option(None, "--alphabet", help="Alphabet override for every language (e.g. a,b)."),
        seeds: Optional[int] = typer.Option(None, "--seeds", help="Number of seeds (0..n-1). Default from --scale."),
        lrs: Optional[str] = typer.Option(None, "--lrs", help="Learning rates, comma-separated. Default from --scale."),
        scale: Optional[str] = typer.Option(None, "--scale", help="quick (2-core CPU) or paper (the paper's settings): defaults for model size, steps, strings per length, seeds."),
        steps: Optional[int] = typer.Option(None, "--steps", help="Training steps per run."),
        batch_size: Optional[int] = typer.Option(None, "--batch-size", help="Training batch size."),
        layers: Optional[int] = typer.Option(None, "--layers", help="Transformer layers."),
        d_model: Optional[int] = typer.Option(None, "--d-model", help="Model width."),
        heads: Optional[int] = typer.Option(None, "--heads", help="Attention heads."),
        n_per_length: Optional[int] = typer.Option(None, "--n-per-length", help="Test strings per length."),
        eval_mode: Optional[str] = typer.Option(None, "--eval", help="full (every test length) or nstar (stop at the first imperfect length)."),
        workers: int = typer.Option(1, "--workers", help="Parallel single-threaded worker processes."),
        out: Path = typer.Option(Path("results/sweep"), "--out", help="Results folder (Parquet under runs/ and evals/). Finished runs there are skipped."),
        backend: ro.Backend = "local", address: ro.Address = None, cpus_per_run: ro.CpusPerRun = None,
        gpus_per_run: ro.GpusPerRun = 0.0, max_retries: ro.MaxRetries = 3, checkpoint_every: ro.CheckpointEvery = None,
        state_dir: ro.StateDir = None, keep_state: ro.KeepState = False,
        dry_run: bool = typer.Option(False, "--dry-run", help="Only list the runs of the grid."),
        json_output: bool = typer.Option(False, "--json", help="Print the summary (and aggregate table) as JSON."),
    ) -> None:
        """Run a grid of training runs (languages × PEs × bases × seeds × lrs); rerunning skips finished runs."""
        from rich.console import Console

        from formal_rope.sweeps.grid import build_spec, expand_grid, load_sweep_file, validate_grid

        console = Console(stderr=json_output)
        run_settings = _overrides(steps=steps, batch_size=batch_size, layers=layers, d_model=d_model, heads=heads,
                                  n_per_length=n_per_length, eval_mode=eval_mode)
        if config is not None:
            spec, chosen = load_sweep_file(config, scale)
            spec = build_spec(
                name=spec.name,
                languages=lang or spec.languages,
                pes=_split(pe) or spec.pes,
                bases=_floats(base, "--base") or spec.bases,
                seeds=seeds if seeds is not None else spec.seeds,
                lrs=_floats(lrs, "--lrs") or spec.lrs,
                periods=_periods(periods, spec.periods),
                alphabet=_alphabet(alphabet) or spec.alphabet,
                scale=chosen,
                overrides={**spec.overrides, **run_settings},
                description=spec.description,
                reference=spec.reference,
            )
        else:
            if not lang:
                raise FormalRopeError("sweep needs --lang (one or more) or --config FILE.toml")
            chosen = scale or "quick"
            spec = build_spec(
                name="cli",
                languages=lang,
                pes=_split(pe) or ["rope"],
                bases=_floats(base, "--base") or [1e4],
                seeds=seeds,
                lrs=_floats(lrs, "--lrs") or None,
                periods=_periods(periods, "auto"),
                alphabet=_alphabet(alphabet),
                scale=chosen,
                overrides=run_settings,
            )
        configs = expand_grid(spec)
        validate_grid(configs)
        if dry_run:
            listing = [{"run_id": c.run_id(), **c.to_dict()} for c in configs]
            if json_output:
                print(json.dumps(listing, indent=2))
            else:
                for c in configs:
                    console.print(f"{c.run_id()}  {_describe_config(c)}  steps={c.steps}")
                console.print(f"{len(configs)} runs ({chosen} scale)")
            return
        run_options = ro.sweep_run_options(
            configs, out, backend=backend, address=address, cpus_per_run=cpus_per_run, gpus_per_run=gpus_per_run,
            max_retries=max_retries, checkpoint_every=checkpoint_every, state_dir=state_dir, keep_state=keep_state,
            note=lambda text: console.print(f"[yellow]note:[/] {text}"))
        console.print(f"[bold]{spec.name}[/]: {len(configs)} runs at {chosen} scale → {out}")
        summary = _run_with_progress(configs, out, workers, console, quiet=False, **run_options)
        console.print(f"{summary.completed} run(s) finished, {summary.skipped} already done, statuses {summary.statuses}, {summary.wall_s:.0f}s")
        payload = _report(out, console, False, None, spec.reference, title=spec.name, quiet=json_output)
        if json_output:
            payload["sweep"] = {"name": spec.name, "total": summary.total, "skipped": summary.skipped,
                                "completed": summary.completed, "statuses": summary.statuses,
                                "wall_s": summary.wall_s, "backend": summary.backend, "units": summary.units,
                                "retries": summary.retries, "dashboard_url": summary.dashboard_url}
            _print_json(payload)

    @app.command()
    def report(
        results: Path = typer.Argument(..., help="Results folder written by `sweep` or `reproduce`."),
        json_output: bool = typer.Option(False, "--json", help="Print the aggregate table as JSON."),
        plot: Optional[Path] = typer.Option(None, "--plot", help="Write a Figure 2/3-style plot (mean N* vs base, ±1 std; NoPE band) to this PNG."),
        reference: Optional[Path] = typer.Option(None, "--reference", help="Sweep TOML whose \\[reference] rows (the paper's numbers) are shown beside ours."),
    ) -> None:
        """Aggregate a results folder like the core paper's Tables 4–5 (max/mean/std of accuracy and N*)."""
        from rich.console import Console

        ref = None
        if reference is not None:
            from formal_rope.sweeps.grid import load_sweep_file

            ref = load_sweep_file(reference)[0].reference
        _report(results, Console(), json_output, plot, ref)

    @app.command()
    def reproduce(
        table: str = typer.Argument("table2", help="table2, table4, table5 or all."),
        scale: str = typer.Option("quick", "--scale", help="quick (fits a 2-core CPU in ~15 min for table2) or paper (the paper's full settings; GPU-scale)."),
        out: Optional[Path] = typer.Option(None, "--out", help="Results folder (default results/<table>-<scale>). Finished runs are skipped on rerun."),
        workers: int = typer.Option(2, "--workers", help="Parallel single-threaded worker processes."),
        seeds: Optional[int] = typer.Option(None, "--seeds", help="Override the number of seeds."),
        steps: Optional[int] = typer.Option(None, "--steps", help="Override the training steps per run."),
        n_per_length: Optional[int] = typer.Option(None, "--n-per-length", help="Override the test strings per length."),
        backend: ro.Backend = "local", address: ro.Address = None, cpus_per_run: ro.CpusPerRun = None,
        gpus_per_run: ro.GpusPerRun = 0.0, max_retries: ro.MaxRetries = 3, checkpoint_every: ro.CheckpointEvery = None,
        state_dir: ro.StateDir = None, keep_state: ro.KeepState = False,
        json_output: bool = typer.Option(False, "--json", help="Print the aggregate table as JSON."),
    ) -> None:
        """Rerun a table of the core paper (sweeps/<table>.toml): train, evaluate 41…500, print the table, write Parquet and a plot."""
        from rich.console import Console

        from formal_rope.sweeps.grid import (
            PAPER_TABLES, build_spec, expand_grid, load_sweep_file, paper_sweep_path, validate_grid,
        )
        from formal_rope.training.state import state_subfolder

        if table not in PAPER_TABLES + ("all",):
            raise FormalRopeError(f"unknown table {table!r}; expected one of {', '.join(PAPER_TABLES)} or all")
        if scale not in ("quick", "paper"):
            raise FormalRopeError(f"unknown scale {scale!r}; expected quick or paper")
        console = Console(stderr=json_output)
        if scale == "quick":
            from formal_rope.training.scales import QUICK_SHRINKS

            console.print("[yellow]quick scale shrinks:[/]\n  " + "\n  ".join(QUICK_SHRINKS))
        explicit = _overrides(seeds=seeds, steps=steps, n_per_length=n_per_length)
        if explicit:
            console.print("[yellow]overridden here:[/] " + ", ".join(f"{key} {value}" for key, value in explicit.items()))
        payloads = {}
        grids = []
        for name in PAPER_TABLES if table == "all" else (table,):
            spec, _ = load_sweep_file(paper_sweep_path(name), scale)
            if seeds is not None or steps is not None or n_per_length is not None:
                spec = build_spec(
                    name=spec.name, languages=spec.languages, pes=spec.pes, bases=spec.bases,
                    seeds=seeds if seeds is not None else spec.seeds, lrs=spec.lrs, periods=spec.periods,
                    alphabet=spec.alphabet, scale=scale,
                    overrides={**spec.overrides, **_overrides(steps=steps, n_per_length=n_per_length)},
                    description=spec.description, reference=spec.reference,
                )
            target = out if out is not None and table != "all" else (out / name if out is not None else Path("results") / f"{name}-{scale}")
            configs = expand_grid(spec)
            validate_grid(configs)
            # Every table's options (state folder, Ray) are checked before the first run starts.
            run_options = ro.sweep_run_options(
                configs, target, backend=backend, address=address, cpus_per_run=cpus_per_run,
                gpus_per_run=gpus_per_run, max_retries=max_retries, checkpoint_every=checkpoint_every,
                state_dir=state_dir if state_dir is None or table != "all" else state_subfolder(state_dir, name),
                keep_state=keep_state, note=lambda text: console.print(f"[yellow]note:[/] {text}"))
            grids.append((name, spec, target, configs, run_options))
        for name, spec, target, configs, run_options in grids:
            console.print(f"[bold]{name}[/] ({spec.description}): {len(configs)} runs at {scale} scale → {target}")
            _run_with_progress(configs, target, workers, console, quiet=False, **run_options)
            payloads[name] = _report(target, console, False, target / f"{name}.png", spec.reference,
                                     title=f"{name} ({scale})", quiet=json_output)
        if json_output:
            # One JSON document: the table's payload, or {table: payload} for `all`.
            _print_json(payloads[table] if table != "all" else payloads)
