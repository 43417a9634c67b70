"""CLI: `sweep`, `report`, `reproduce` — grids of training runs, Parquet results, paper tables."""

from __future__ import annotations

import json
import math
import sys
from pathlib import Path
from typing import Optional

import typer

from formal_rope.commands import run_options as ro
from formal_rope.errors import FormalRopeError
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
            values.append(float(part))
        except ValueError:
            raise FormalRopeError(f"{what}: {part!r} is not a number (expected a comma-separated list like 1e-4,3e-4)") from None
    return values


def _alphabet(text: str | None):
    """--alphabet like `train`: 'ab' or 'a,b' -> ('a', 'b'); None keeps each language's own."""
    if text is None:
        return None
    from formal_rope.lang.source import parse_alphabet

    return parse_alphabet(text)


def _periods(text: str | None, default):
    """--periods 'auto' or '2,3' (the same parser as `train`); None keeps `default`."""
    if text is None:
        return default
    from formal_rope.commands.train import parse_periods

    parsed = parse_periods(text)
    return "auto" if parsed is None else list(parsed)


def _overrides(**values) -> dict:
    return {key: value for key, value in values.items() if value is not None}


def _describe_config(config, axes=()) -> str:
    """'(ab)* rope β=10000 seed=0 lr=0.005', plus the values of the grid's further axes that apply."""
    base = f" β={config.base:g}" if config.applies("base") else ""
    extra = "".join(f" {name}={_cell_text(name, getattr(config, name))}" for name in axes
                    if name not in ("base", "seed", "lr") and config.applies(name))
    return f"{config.language} {config.pe}{base} seed={config.seed} lr={config.lr:g}{extra}"


def _number(value: float, digits: int) -> str:
    """A statistic for the table: '–' when undefined (NaN: no run of the row has a value)."""
    return "–" if value is None or math.isnan(value) else f"{value:.{digits}f}"


def _run_with_progress(configs, out: Path, workers: int, console, quiet: bool, axes=(), **run_options):
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
                running[run_id] = _describe_config(config, axes)
                if kind == "retry":
                    progress.console.print(f"[yellow]retry   [/] {_describe_config(config, axes)} (its worker died; resumes "
                                           "from its last saved state, if any)")
            elif kind == "done":
                running.pop(run_id, None)
                progress.advance(task)
                status = result.status
                failed[0] += status == "failed"
                colour = {"ok": "green", "diverged": "yellow"}.get(status, "red")
                n_star = "–" if result.n_star is None else str(result.n_star)  # None: failed, nothing measured
                progress.console.print(
                    f"[{colour}]{status:8s}[/] {_describe_config(config, axes):48s} N*={n_star:<4s} "
                    f"acc={_number(result.accuracy, 3)} {result.wall_s:6.1f}s"
                    + (f"  ({result.error})" if result.error else ""),
                    soft_wrap=True,
                )
            counts = f"{len(running)} running" + (f", {failed[0]} failed" if failed[0] else "")
            shown = f"{counts}: " + "; ".join(running.values()) if running else (counts if failed[0] else "")
            progress.update(task, description=shown[:100])

        return run_sweep(configs, out, workers=workers, on_event=on_event,
                         on_note=lambda text: progress.console.print(f"[dim]{text}[/]"), **run_options)


def _print_json(payload) -> None:
    from formal_rope.commands.train import json_ready

    print(json.dumps(json_ready(payload), indent=2, allow_nan=False))


def _note(text: str) -> None:
    print(f"note: {text}", file=sys.stderr)


# ----------------------------------------------------------------------------------------------
# report


def _reference_table(reference: str | None) -> dict | None:
    """`--reference`: a paper table name (table2, table4, table5) or a sweep TOML path -> its [reference]."""
    if reference is None:
        return None
    from formal_rope.sweeps.grid import PAPER_TABLES, load_sweep_file, paper_sweep_path

    path = Path(reference)
    if reference in PAPER_TABLES and not path.exists():
        path = paper_sweep_path(reference)
    elif not path.exists():
        raise FormalRopeError(
            f"--reference {reference!r} is neither a paper table ({', '.join(PAPER_TABLES)}) nor an existing sweep file"
        )
    return load_sweep_file(path)[0].reference


def _grouping(text: str | None) -> tuple[str, ...]:
    from formal_rope.sweeps.report import DEFAULT_GROUPING

    if text is None:
        return DEFAULT_GROUPING
    names = _split(text, "--by")
    repeated = sorted({name for name in names if names.count(name) > 1})
    if repeated:
        raise FormalRopeError(f"--by names {', '.join(repeated)} more than once")
    return tuple(names)


def _cell_text(name: str, value) -> str:
    from formal_rope.sweeps.report import PE_LABELS, format_base

    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "–"
    if name == "pe":
        return PE_LABELS.get(value, value)
    if name == "base":
        return format_base(value)
    return f"{value:g}" if isinstance(value, float) else str(value)


def _results_table(rows, by, title: str, reference: dict | None):
    from rich.table import Table

    from formal_rope.sweeps.report import DEFAULT_GROUPING, reference_index

    paper = reference_index(reference) if tuple(by) == DEFAULT_GROUPING else {}
    table = Table(title=title, show_lines=False)
    for name in by:
        table.add_column({"pe": "PE"}.get(name, name), justify="right" if name == "base" else "left", no_wrap=True)
    for name in ("runs", "acc max", "acc mean±std", "N* max", "N* mean±std", "NNCH max", "NNCH mean±std"):
        table.add_column(name, justify="right", no_wrap=True)
    if paper:
        table.add_column("paper: acc max / N* max (mean)", justify="right", style="dim", no_wrap=True)
    for row in rows:
        cells = [_cell_text(name, value) for name, value in row.group]
        cells += [
            f"{row.runs}" + ("" if row.ok_runs == row.runs else f" ({row.runs - row.ok_runs} not ok)"),
            _number(row.accuracy_max, 3),
            "–" if math.isnan(row.accuracy_mean) else f"{row.accuracy_mean:.3f}±{row.accuracy_std:.3f}",
            _number(row.n_star_max, 0),  # "–" when every run of the row failed (no N* measured)
            "–" if math.isnan(row.n_star_mean) else f"{row.n_star_mean:.1f}±{row.n_star_std:.1f}",
            *_nnch_cells(row),
        ]
        if paper:
            ref = paper.get((row.language, row.pe, row.base))
            mean = "" if ref is None or math.isnan(ref["n_star_mean"]) else f" ({ref['n_star_mean']:.1f})"
            cells.append("" if ref is None else f"{ref['accuracy_max']:.3f} / {ref['n_star_max']:.0f}{mean}")
        table.add_row(*cells)
    return table


def _nnch_cells(row) -> tuple[str, str]:
    """NNCH max and mean±std; "–" when no run of the row evaluated every test length (eval nstar)."""
    if math.isnan(row.nnch_max):
        return "–", "–"
    return f"{row.nnch_max:.3f}", f"{row.nnch_mean:.3f}±{row.nnch_std:.3f}"


def _print_wide(console, table) -> None:
    """Tables are wider than the 80 columns Rich assumes off a terminal; never squeeze their cells:
    print at the table's natural width (measured with room to spare)."""
    from rich.measure import Measurement

    narrow = console.width
    console.width = max(narrow, 1000)
    console.width = max(narrow, Measurement.get(console, console.options, table).maximum)
    console.print(table)
    console.width = narrow


def _failure_lines(runs, by) -> list[str]:
    """One line per run with a first failing string, naming what tells the run apart: its grouping
    values, seed, lr, and every other setting that varies across the folder."""
    from formal_rope.sweeps.results import CONFIG_COLUMNS

    failures = runs[runs["first_failure"].notna()]
    # A setting that is null where it does not apply (phase_precision for NoPE) does not tell the
    # runs where it applies apart, so only differing present values count as varying.
    varying = [name for name in CONFIG_COLUMNS
               if name not in by and name not in ("seed", "lr", "alphabet") and runs[name].nunique(dropna=True) > 1]
    lines = []
    for _, run in failures.head(12).iterrows():
        label = [_cell_text(name, run[name]) for name in by if name in ("language", "pe")]
        label += [f"β={_cell_text('base', run['base'])}"] if "base" in by and _present(run["base"]) else []
        label += [f"{name}={_cell_text(name, run[name])}" for name in by if name not in ("language", "pe", "base")]
        label += [f"seed={run['seed']}"] if "seed" not in by else []
        label += [f"lr={run['lr']:g}"] if "lr" not in by else []
        label += [f"{name}={_cell_text(name, run[name])}" for name in varying if _present(run[name])]
        text = str(run["first_failure"])
        shown = text if len(text) <= 40 else text[:37] + "..."
        lines.append(f"{' '.join(label)} N*={run['n_star']}: {shown!r} (len {len(text)})")
    return lines


def _present(value) -> bool:
    return value is not None and not (isinstance(value, float) and math.isnan(value))


def _report(out: Path, console, json_output: bool, plot: Path | None, reference=None, title: str = "",
            quiet: bool = False, by=None, scale: str | None = None, sort: str | None = None, variants=(),
            variant_baseline: dict | None = None, languages=()) -> dict:
    """Aggregate `out`; print the table (or, with json_output, the payload as JSON) unless quiet.

    scale: the scale the runs were meant to have (for the plot title); None infers it from the runs."""
    from formal_rope.sweeps.report import (
        DEFAULT_GROUPING, aggregate, check_grouping, mixed_settings, plot_n_star, scale_label, sort_rows,
    )
    from formal_rope.sweeps.results import read_results

    from rich.markup import escape

    by = tuple(by or DEFAULT_GROUPING)
    results = read_results(out)
    runs = results.runs
    if variants:  # a sweep file's [[variants]]: label each run, and group by the label too
        from formal_rope.sweeps.report import VARIANT_COLUMN, label_variants

        runs = label_variants(runs, variants, variant_baseline)
        strangers = runs[VARIANT_COLUMN].isna()
        if strangers.any():
            _note(f"{int(strangers.sum())} run(s) in {out} are none of the sweep's variants (another sweep's); left out")
            runs = runs[~strangers]
        by = tuple(by) + ((VARIANT_COLUMN,) if VARIANT_COLUMN not in by else ())
    check_grouping(runs, by)
    # The sweep's own language order ((aa)* before (ab)*), not the order the runs finished in.
    rows = sort_rows(aggregate(runs, by, language_order=languages), sort)
    mixed = mixed_settings(runs, by)
    notes = list(results.notes)
    for *keys, differing in mixed:
        settings = "; ".join(f"{key} {', '.join(values)}" for key, values in differing.items())
        group = " ".join(_cell_text(name, value) if name != "base" else f"β={_cell_text(name, value)}"
                         for name, value in zip(by, keys) if value is not None)
        notes.append(f"{group} aggregates runs with different settings ({settings}), not only seeds and learning rates")
    payload = {
        "results": str(out),
        "by": list(by),
        "runs": int(len(runs)),
        "evals": int(len(results.evals)),
        "statuses": {str(k): int(v) for k, v in runs["status"].value_counts().items()},
        "rows": [row.to_dict() for row in rows],
        "notes": notes,
        "plot": None,  # always present, so the JSON keys do not depend on the options
    }
    if plot is not None:
        label = f"{scale} scale" if scale else scale_label(runs)
        heading = f"{title or Path(out).name}\n{label}" + (" (hollow markers: the paper)" if reference else "")
        payload["plot"] = str(plot_n_star(rows, plot, title=heading, reference=reference))
    if json_output or quiet:
        if json_output:
            _print_json(payload)
        return payload
    _print_wide(console, _results_table(rows, by, title or f"results in {out}", reference))
    for note in notes:
        console.print(f"[yellow]note:[/] {escape(note)}", highlight=False, soft_wrap=True)
    lines = _failure_lines(runs, by)
    if lines:
        console.print("[dim]first failing strings (shortest failing length) per run:[/]")
        for line in lines:
            console.print(f"  {line}", style="dim", highlight=False, markup=False, soft_wrap=True)
    if plot is not None:
        console.print(f"plot written to {payload['plot']}")
    return payload


# ----------------------------------------------------------------------------------------------
# sweep


def _data_language(data: Path, lang: list[str] | None, alphabet: str | None) -> tuple[str, dict]:
    """`sweep --data`: (the grid's one language: --lang, or data:PATH; the data's settings for
    every run: path, content hash, and the files' training and test lengths, which are defaults:
    lengths given by an option or an axis win and select part of the files' strings)."""
    from formal_rope.training.data import data_settings

    if lang and len(lang) > 1:
        raise FormalRopeError("sweep --data takes at most one --lang (the data's labels are checked against it)")
    settings = data_settings(data, language=lang[0] if lang else None, alphabet=_alphabet(alphabet))
    return settings.pop("language"), settings


def _fit_grid_to_data(configs) -> tuple[list, list[str]]:
    """`sweep --data`: every run fitted to the files (`training.data.fit_to_data`: the lengths it
    trains and tests on), then runs that became the same run kept once; the fitting notes, once each."""
    from formal_rope.training.data import fit_to_data

    fitted, notes, seen = [], [], set()
    for config in configs:
        config, config_notes = fit_to_data(config)
        notes.extend(note for note in config_notes if note not in notes)
        if config.run_id() not in seen:
            seen.add(config.run_id())
            fitted.append(config)
    return fitted, notes


def _cli_axes(set_fields: list[str] | None, explicit: dict) -> dict:
    """`--set` axes; a field also given by its own option is an error."""
    from formal_rope.commands.train import parse_assignments

    axes = parse_assignments(set_fields)
    both = sorted(set(axes) & set(explicit))
    if both:
        raise FormalRopeError(f"{both[0]} is given both by its own option and by --set; give it once")
    return axes


def _sweep_spec(config: Path | None, scale: str | None, grid: dict, settings: dict, axes: dict, defaults=None):
    """The SweepSpec of a sweep file with the command line's flags on top, or of the flags alone.

    grid: languages, pes, bases, seeds, lrs, periods, alphabet as given (None/empty: not given);
    settings: fixed RunConfig overrides; axes: --set fields -> values. A flag or --set replaces the
    file's axis of the same field. defaults (`sweep --data`: the files' lengths) replace the scale
    preset's and the file's fixed values, but not a flag, a --set axis or the file's [axes]."""
    from formal_rope.sweeps.grid import build_spec, load_sweep_file

    defaults = defaults or {}
    if config is None:
        if not grid["languages"]:
            raise FormalRopeError("sweep needs --lang (one or more) or --config FILE.toml")
        overrides = {key: value for key, value in {**defaults, **settings}.items() if key not in axes}
        return build_spec(
            name="cli", languages=grid["languages"], pes=grid["pes"] or ["rope"], bases=grid["bases"] or [1e4],
            seeds=grid["seeds"], lrs=grid["lrs"] or None, periods=_periods(grid["periods"], "auto"),
            alphabet=grid["alphabet"], scale=scale or "quick", overrides=overrides, axes=axes,
        ), scale or "quick"
    spec, chosen = load_sweep_file(config, scale)
    file_axes = {name: values for name, values in spec.axes if name not in settings and name not in axes}
    defaults = {key: value for key, value in defaults.items() if key not in file_axes}
    periods = _periods(grid["periods"], spec.periods) if "periods" not in axes else "auto"
    return build_spec(
        name=spec.name, languages=grid["languages"] or spec.languages, pes=grid["pes"] or spec.pes,
        bases=grid["bases"] or spec.bases, seeds=grid["seeds"] if grid["seeds"] is not None else spec.seeds,
        lrs=grid["lrs"] or spec.lrs, periods=periods, alphabet=grid["alphabet"] or spec.alphabet, scale=chosen,
        overrides={key: value for key, value in {**spec.overrides, **defaults, **settings}.items() if key not in axes},
        axes={**file_axes, **axes}, variants=spec.variants, description=spec.description, reference=spec.reference,
    ), chosen


# The sweep options that set a field some runs do not use (the option text, else the field's name).
_SETTING_OPTIONS = {"n_per_length": "--n-per-length"}


def _maybe_unused() -> set[str]:
    """Fields some runs do not use: those of some encodings only, and those data files cannot use."""
    from formal_rope.training.config import FIELD_APPLIES_TO, SAMPLING_FIELDS

    return {*FIELD_APPLIES_TO, *SAMPLING_FIELDS}


def _given_options(grid: dict, settings: dict, axes: dict) -> dict[str, str]:
    """Options the user wrote that only some runs use (option text -> RunConfig field)."""
    maybe_unused = _maybe_unused()
    given = {"--base": "base"} if grid["bases"] else {}
    if grid["periods"]:
        given["--periods"] = "periods"
    given.update({f"--set {name}": name for name in axes if name in maybe_unused})
    given.update({_SETTING_OPTIONS.get(name, name): name for name in settings if name in maybe_unused})
    return given


def _dry_run(configs, chosen: str, console, json_output: bool, axes=()) -> None:
    if json_output:
        print(json.dumps([{"run_id": c.run_id(), **c.to_dict()} for c in configs], indent=2))
        return
    for c in configs:
        console.print(f"{c.run_id()}  {_describe_config(c, axes)}  steps={c.steps}", highlight=False, soft_wrap=True)
    console.print(f"{len(configs)} runs ({chosen} scale)")


def register(app: typer.Typer) -> None:
    @app.command()
    def sweep(
        config: Optional[Path] = typer.Option(None, "--config", help="Sweep TOML file (e.g. sweeps/table2.toml); flags below override it."),
        lang: Optional[list[str]] = typer.Option(None, "--lang", help="Language (registry name, expression, ltl:/re:, .att path). Repeat for several."),
        pe: Optional[str] = typer.Option(None, "--pe", help=f"Positional encodings, comma-separated ({encoding_names(',')})."),
        base: Optional[str] = typer.Option(None, "--base", help="Bases β, comma-separated (e.g. 1e-12,1,1e4). nope/rope_p/sipe_p have no base: their runs are the same at every β."),
        periods: Optional[str] = typer.Option(None, "--periods", help="'auto' (least k from classify; an error outside LTL[P,MOD]) or comma-separated periods for rope_p/sipe_p."),
        alphabet: Optional[str] = typer.Option(None, "--alphabet", "-a", help="Alphabet override for every language (e.g. a,b)."),
        seeds: Optional[int] = typer.Option(None, "--seeds", help="Number of seeds (0..n-1). Default from --scale."),
        lrs: Optional[str] = typer.Option(None, "--lrs", help="Learning rates, comma-separated. Default from --scale."),
        scale: Optional[str] = typer.Option(None, "--scale", help="quick (2-core CPU), medium (the paper's model, batch and negatives with fewer steps) or paper (the paper's settings): defaults for model size, steps, strings per length, seeds."),
        steps: Optional[int] = typer.Option(None, "--steps", help="Training steps per run."),
        batch_size: Optional[int] = typer.Option(None, "--batch-size", help="Training batch size."),
        layers: Optional[int] = typer.Option(None, "--layers", help="Transformer layers."),
        d_model: Optional[int] = typer.Option(None, "--d-model", help="Model width."),
        heads: Optional[int] = typer.Option(None, "--heads", help="Attention heads."),
        n_per_length: Optional[int] = typer.Option(None, "--n-per-length", help="Test strings per length."),
        test_lengths: Optional[str] = typer.Option(None, "--test-lengths", help="Test lengths for every run: a range 41..500 or a list 41,45,50."),
        eval_mode: Optional[str] = typer.Option(None, "--eval", help="full (every test length) or nstar (stop at the first imperfect length)."),
        data: Optional[Path] = typer.Option(None, "--data", help="Train and test every run on these files (FLaRe folder or MLRegTest DIR/<language>; docs/formats.md); at most one --lang, whose labels are checked."),
        set_fields: Optional[list[str]] = typer.Option(None, "--set", help="Any RunConfig field as a grid axis, FIELD=v1,v2 (repeatable), e.g. --set train_near_miss_fraction=0,0.5 --set layers=2,5."),
        workers: Optional[int] = typer.Option(None, "--workers", help="Parallel single-threaded worker processes (at least 1; default 1)."),
        out: Optional[Path] = typer.Option(None, "--out", help="Results folder (default results/sweep; Parquet under runs/ and evals/; missing folders are created). Finished runs there are skipped."),
        pack: ro.Pack = "auto",
        backend: ro.Backend = "local", address: ro.Address = None, cpus_per_run: ro.CpusPerRun = None,
        gpus_per_run: ro.GpusPerRun = 0.0, max_retries: ro.MaxRetries = 3, checkpoint_every: ro.CheckpointEvery = None,
        state_dir: ro.StateDir = None, keep_state: ro.KeepState = False,
        dry_run: bool = typer.Option(False, "--dry-run", help="Only list the runs of the grid."),
        json_output: bool = typer.Option(False, "--json", help="Print the summary (and aggregate table) as JSON."),
    ) -> None:
        """Run a grid of training runs (languages × PEs × bases × seeds × lrs × --set axes); rerunning skips finished runs."""
        from rich.console import Console

        from formal_rope.commands.train import check_positive
        from formal_rope.sweeps.grid import expand_grid, unused_settings, validate_grid
        from formal_rope.sweeps.results import finished_run_ids
        from formal_rope.training.config import lengths_fields

        check_positive(workers=workers)
        console = Console(stderr=json_output)
        settings = _overrides(steps=steps, batch_size=batch_size, layers=layers, d_model=d_model, heads=heads,
                              n_per_length=n_per_length, eval_mode=eval_mode)
        if test_lengths is not None:
            settings.update(lengths_fields(test_lengths, "--test-lengths"))
        axes = _cli_axes(set_fields, settings)
        data_defaults = None
        if data is not None:
            language, data_defaults = _data_language(data, lang, alphabet)
            lang = [language]
        grid = {"languages": lang, "pes": _split(pe, "--pe"), "bases": _floats(base, "--base"), "seeds": seeds,
                "lrs": _floats(lrs, "--lrs"), "periods": periods, "alphabet": _alphabet(alphabet)}
        spec, chosen = _sweep_spec(config, scale, grid, settings, axes, data_defaults)
        configs = expand_grid(spec)
        fitted = []
        if data is not None:
            configs, fitted = _fit_grid_to_data(configs)
        given = _given_options(grid, settings, axes)
        given.update({f"the sweep file's [axes] {name}": name for name, _ in spec.axes
                      if name not in axes and name in _maybe_unused()})
        for note in unused_settings(configs, given) + fitted + validate_grid(configs):
            _note(note)
        if dry_run:
            # The same run options a real run checks (nothing is contacted): a dry run that passes
            # means the sweep itself will start.
            ro.check_sweep_options(backend=backend, address=address, cpus_per_run=cpus_per_run,
                                   gpus_per_run=gpus_per_run, max_retries=max_retries, pack=pack,
                                   workers=1 if workers is None else workers)
            unused = [option for option, value in (("--out", out), ("--workers", workers)) if value is not None]
            if unused:
                _note(f"{' and '.join(unused)} {'has' if len(unused) == 1 else 'have'} no effect with --dry-run (nothing runs)")
            _dry_run(configs, chosen, console, json_output, [name for name, _ in spec.axes])
            return
        workers = 1 if workers is None else workers
        out = Path("results/sweep") if out is None else out
        finished_run_ids(out)  # a damaged or foreign file in the folder: an error before any training
        run_options = ro.sweep_run_options(
            configs, out, backend=backend, address=address, cpus_per_run=cpus_per_run, gpus_per_run=gpus_per_run,
            max_retries=max_retries, checkpoint_every=checkpoint_every, state_dir=state_dir, keep_state=keep_state,
            pack=pack, note=lambda text: console.print(f"[yellow]note:[/] {text}"))
        console.print(f"[bold]{spec.name}[/]: {len(configs)} runs at {chosen} scale → {out}")
        summary = _run_with_progress(configs, out, workers, console, quiet=False, axes=[name for name, _ in spec.axes],
                                     **run_options)
        console.print(f"{summary.completed} run(s) finished, {summary.skipped} already done, statuses {summary.statuses}, {summary.wall_s:.0f}s")
        payload = _report(out, console, False, None, spec.reference, title=spec.name, quiet=json_output,
                          languages=spec.languages)
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
        plot: Optional[Path] = typer.Option(None, "--plot", help="Write a Figure 2/3-style plot (mean N* vs base, ±1 std; NoPE band; the paper's values hollow with --reference) to this PNG; missing folders are created."),
        reference: Optional[str] = typer.Option(None, "--reference", help="The paper's numbers beside ours: a table name (table2, table4, table5) or a sweep TOML with a \\[reference] table."),
        by: Optional[str] = typer.Option(None, "--by", help="Group rows by these runs columns, comma-separated (default language,pe,base), e.g. language,pe,train_near_miss_fraction."),
        sort: Optional[str] = typer.Option(None, "--sort", help="Order rows best first by n_star (N* max, then mean), nnch (NNCH accuracy max, then mean) or accuracy; default: the grouping's order."),
    ) -> None:
        """Aggregate a results folder like the core paper's Tables 4–5: max/mean/std of accuracy, N* and NNCH accuracy (mean over every test length)."""
        from rich.console import Console

        from formal_rope.sweeps.report import DEFAULT_GROUPING

        grouping = _grouping(by)
        if reference is not None and plot is None and grouping != DEFAULT_GROUPING:
            _note("--reference is shown in the table only with the default grouping (language,pe,base) and "
                  "otherwise only on a --plot; it has no effect here")
        _report(results, Console(), json_output, plot, _reference_table(reference), by=grouping, sort=sort)

    @app.command()
    def reproduce(
        table: str = typer.Argument("table2", help="table2, table4, table5, all (the paper's three), or one of our experiments: ablation (each quick-scale choice undone, Table 2), ablation45 (the same for NoPE and RoPE_NP on (ab)* and Σ*abΣ*, Tables 4-5), stability (RoPE_P over 5 seeds, periods 2-4), joformer (JoFormer on the paper's five languages)."),
        scale: str = typer.Option("quick", "--scale", help="quick (table2: about 1.5 min with 2 workers on a 2-core CPU), medium (the paper's model and negatives, 2,000 steps: table2 in about 70 min) or paper (the paper's full settings; GPU-scale)."),
        out: Optional[Path] = typer.Option(None, "--out", help="Results folder (default results/<table>-<scale>; missing folders are created). Finished runs are skipped on rerun."),
        workers: int = typer.Option(2, "--workers", help="Parallel single-threaded worker processes (at least 1)."),
        seeds: Optional[int] = typer.Option(None, "--seeds", help="Override the number of seeds."),
        steps: Optional[int] = typer.Option(None, "--steps", help="Override the training steps per run."),
        n_per_length: Optional[int] = typer.Option(None, "--n-per-length", help="Override the test strings per length."),
        pack: ro.Pack = "auto",
        backend: ro.Backend = "local", address: ro.Address = None, cpus_per_run: ro.CpusPerRun = None,
        gpus_per_run: ro.GpusPerRun = 0.0, max_retries: ro.MaxRetries = 3, checkpoint_every: ro.CheckpointEvery = None,
        state_dir: ro.StateDir = None, keep_state: ro.KeepState = False,
        json_output: bool = typer.Option(False, "--json", help="Print the aggregate table as JSON."),
    ) -> None:
        """Rerun a table of the core paper (sweeps/<table>.toml): train, evaluate 41…500, print the table, write Parquet and a plot."""
        from rich.console import Console

        from formal_rope.commands.train import check_positive
        from formal_rope.sweeps.grid import (
            EXPERIMENTS, PAPER_TABLES, SCALE_NAMES, expand_grid, paper_sweep_path, validate_grid,
        )
        from formal_rope.sweeps.deviations import deviation_lines
        from formal_rope.sweeps.results import finished_run_ids
        from formal_rope.training.scales import SCALE_SHRINKS
        from formal_rope.training.state import state_subfolder

        if table not in PAPER_TABLES + ("all",) and table not in EXPERIMENTS:
            raise FormalRopeError(
                f"unknown table {table!r}; expected one of {', '.join(PAPER_TABLES)}, all, or an experiment: "
                f"{', '.join(EXPERIMENTS)}"
            )
        if scale not in SCALE_NAMES:
            raise FormalRopeError(f"unknown scale {scale!r}; expected {', '.join(SCALE_NAMES)}")
        check_positive(workers=workers)
        console = Console(stderr=json_output)
        if scale in SCALE_SHRINKS:
            console.print(f"[yellow]{scale} scale shrinks:[/]\n  " + "\n  ".join(SCALE_SHRINKS[scale]))
        explicit = _overrides(seeds=seeds, steps=steps, n_per_length=n_per_length)
        if explicit:
            console.print("[yellow]overridden here:[/] " + ", ".join(f"{key} {value}" for key, value in explicit.items()))
        grid = {"languages": None, "pes": [], "bases": [], "seeds": seeds, "lrs": [], "periods": None, "alphabet": None}
        payloads = {}
        grids = []
        for name in PAPER_TABLES if table == "all" else (table,):
            spec, _ = _sweep_spec(paper_sweep_path(name), scale, grid, _overrides(steps=steps, n_per_length=n_per_length), {})
            target = out if out is not None and table != "all" else (out / name if out is not None else Path("results") / f"{name}-{scale}")
            configs = expand_grid(spec)
            for note in validate_grid(configs):
                _note(note)
            finished_run_ids(target)
            # Every table's options (state folder, Ray) are checked before the first run starts.
            run_options = ro.sweep_run_options(
                configs, target, backend=backend, address=address, cpus_per_run=cpus_per_run,
                gpus_per_run=gpus_per_run, max_retries=max_retries, checkpoint_every=checkpoint_every,
                state_dir=state_dir if state_dir is None or table != "all" else state_subfolder(state_dir, name),
                keep_state=keep_state, pack=pack, note=lambda text: console.print(f"[yellow]note:[/] {text}"))
            grids.append((name, spec, target, configs, run_options))
        for name, spec, target, configs, run_options in grids:
            console.print(f"[bold]{name}[/] ({spec.description}): {len(configs)} runs at {scale} scale → {target}")
            _run_with_progress(configs, target, workers, console, quiet=False, axes=[n for n, _ in spec.axes], **run_options)
            payloads[name] = _report(target, console, False, target / f"{name}.png", spec.reference,
                                     title=name, quiet=json_output, scale=scale, variants=spec.variants,
                                     variant_baseline=spec.overrides, languages=spec.languages)
            for line in deviation_lines(name, scale):
                console.print(f"[yellow]deviation:[/] {line}", highlight=False, soft_wrap=True)
        if json_output:
            # One JSON document: the table's payload, or {table: payload} for `all`.
            _print_json(payloads[table] if table != "all" else payloads)
