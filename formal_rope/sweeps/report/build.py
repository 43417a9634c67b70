"""A results folder, reported: `build_report` reads the runs once, labels variants, aggregates, builds
the table model and the `report --json` document, and draws the plot when asked (what
`formalrope report`, `sweep` and `reproduce` print)."""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

from formal_rope.errors import FormalRopeError
from formal_rope.sampling.text import shown_string
from formal_rope.sweeps.grid import PAPER_TABLES, load_sweep_file, paper_sweep_path
from formal_rope.sweeps.report.aggregate import (
    aggregate,
    check_grouping,
    default_grouping,
    hybrid_labels,
    mixed_settings,
    normalise_runs,
    sort_rows,
)
from formal_rope.sweeps.report.cells import cell_text
from formal_rope.sweeps.report.compare import compare_cells
from formal_rope.sweeps.report.labels import VARIANT_COLUMN, label_variants, scale_label
from formal_rope.sweeps.report.plots import plot_n_star, plot_path
from formal_rope.sweeps.report.printers import json_rows
from formal_rope.sweeps.report.table import ResultsTable, results_table
from formal_rope.sweeps.results import CONFIG_COLUMNS, read_results
from formal_rope.sweeps.statistics import DEFAULT_LEVEL


@dataclass(frozen=True)
class ReportRequest:
    """What to report of the results folder `out`.

    by: the grouping (None: `default_grouping`, language, PE, base and every other setting that
    varies within those rows beyond seeds and learning rates); sort: the rows' order (`SORT_KEYS`;
    None: the grouping's, languages in `languages` order); reference: a sweep file's [reference]
    (the paper's numbers beside ours); plot: where to draw the N* plot (None: none), titled `title`
    (default the folder's name) and the scale (`scale`, or what the runs' settings say); level: the
    confidence of each row's intervals; comparison (FIRST, SECOND): `compare_cells` on `metric`.

    variants (a sweep file's [[variants]], with its fixed values `variant_baseline`, and
    `run_variants`, run id -> variant, from `grid.variant_run_ids`): each run is labelled with its
    variant, rows are grouped by it too, and runs of no variant are left out."""

    out: str | Path
    by: tuple[str, ...] | None = None
    sort: str | None = None
    reference: dict | None = None
    plot: str | Path | None = None
    title: str = ""
    scale: str | None = None
    variants: tuple = ()
    variant_baseline: dict | None = None
    run_variants: dict | None = None
    languages: tuple = ()
    level: float = DEFAULT_LEVEL
    comparison: tuple[str, str] | None = None
    metric: str = "n_star"


@dataclass(frozen=True)
class Report:
    """A results folder aggregated: its rows (grouped `by`), the runs they aggregate (pandas), the
    notes for the reader, `payload`, the `report --json` document (with the plot's path), and
    `table`, the table model the printers print."""

    payload: dict
    rows: list
    runs: object
    by: tuple
    notes: list
    table: ResultsTable | None = None


def reference_table(reference: str | None) -> dict | None:
    """`--reference`: a paper table name (table2, table4, table5) or a sweep TOML path -> its [reference]."""
    if reference is None:
        return None
    path = Path(reference)
    if reference in PAPER_TABLES and not path.exists():
        path = paper_sweep_path(reference)
    elif not path.exists():
        raise FormalRopeError(
            f"--reference {reference!r} is neither a paper table ({', '.join(PAPER_TABLES)}) nor an existing sweep file"
        )
    return load_sweep_file(path)[0].reference


def _ignore(text: str) -> None:
    pass


def build_report(request: ReportRequest | str | Path, on_note: Callable[[str], None] = _ignore) -> Report:
    """Aggregate the results folder of `request` (a bare folder: every option at its default) into
    a report; `on_note` hears how many runs were no variant of the sweep. The notes: the folder's own
    (`read_results`) and one per row whose runs differ in more than seeds and learning rates."""
    if not isinstance(request, ReportRequest):
        request = ReportRequest(out=request)
    plot = None if request.plot is None else plot_path(request.plot)  # before reading: where the plot really goes
    results = read_results(request.out)
    runs, extra = _variant_runs(results.runs, request, on_note)
    by = request.by
    # No grouping given: every swept axis is a row key (a row never mixes two values of an axis).
    by = default_grouping(runs, extra) if by is None else tuple(by) + tuple(name for name in extra if name not in by)
    check_grouping(runs, by)
    # The sweep's own language order ((aa)* before (ab)*), not the order the runs finished in.
    rows = sort_rows(aggregate(runs, by, language_order=request.languages, level=request.level), request.sort)
    notes = list(results.notes) + _mixed_notes(runs, by)
    table = results_table(rows, by, reference=request.reference, level=request.level, longest=_longest(runs),
                          title=request.title or f"results in {request.out}", notes=notes)
    payload = {
        "results": str(request.out),
        "by": list(by),
        "runs": int(len(runs)),
        "evals": int(len(results.evals)),
        "statuses": {str(k): int(v) for k, v in runs["status"].value_counts().items()},
        "rows": json_rows(table),
        "notes": notes,
        "plot": None,  # always present, so the JSON keys do not depend on the options
        "level": request.level,
        "intervals": table.intervals,
        "comparisons": (None if request.comparison is None
                        else compare_cells(runs, *request.comparison, by=by, metric=request.metric)),
    }
    if plot is not None:
        label = f"{request.scale} scale" if request.scale else scale_label(runs)
        heading = (f"{request.title or Path(request.out).name}\n{label}"
                   + (" (hollow markers: the paper)" if request.reference else ""))
        payload["plot"] = str(plot_n_star(rows, plot, title=heading, reference=request.reference))
    return Report(payload=payload, rows=rows, runs=runs, by=by, notes=notes, table=table)


def _variant_runs(runs, request: ReportRequest, on_note: Callable[[str], None]):
    """(runs, extra grouping columns): with a sweep file's [[variants]], each run labelled with its
    variant (grouped by it too), and runs of no variant left out (on_note says how many)."""
    if not request.variants:
        return runs, ()
    runs = label_variants(runs, request.variants, request.variant_baseline, request.run_variants)
    strangers = runs[VARIANT_COLUMN].isna()
    if strangers.any():
        on_note(f"{int(strangers.sum())} run(s) in {request.out} are none of the sweep's variants (another "
                "sweep's); left out")
        runs = runs[~strangers]
    return runs, (VARIANT_COLUMN,)


def _mixed_notes(runs, by) -> list[str]:
    """A note per row whose runs differ in more than seeds and learning rates (`mixed_settings`)."""
    notes = []
    for *keys, differing in mixed_settings(runs, by):
        settings = "; ".join(f"{key} {', '.join(values)}" for key, values in differing.items())
        group = " ".join(cell_text(name, value) if name != "base" else f"β={cell_text(name, value)}"
                         for name, value in zip(by, keys) if value is not None)
        notes.append(f"{group} aggregates runs with different settings ({settings}), not only seeds and learning rates")
    return notes


def _longest(runs) -> str:
    """The label of the runs' longest test length: the length when they share one, else 'max'."""
    lengths = (sorted({int(n) for n in runs["test_max_length"].dropna()})
               if len(runs) and "test_max_length" in runs.columns else [])
    return str(lengths[0]) if len(lengths) == 1 else "max"


def failure_lines(runs, by, limit: int = 12) -> list[str]:
    """One line per run with a first failing string (the first `limit`), naming what tells the run
    apart: its grouping values, seed, lr, and every other setting that varies across the runs."""
    # A hybrid's PE is its label ('RoPE_NP+NoPE(L2) w8(L1)', as in the table's rows), which names
    # its layers' encodings and windows.
    hybrids = any(label is not None for label in hybrid_labels(runs))
    runs = normalise_runs(runs)
    failures = runs[runs["first_failure"].notna()]
    # A setting that is null where it does not apply (phase_precision for NoPE) does not tell the
    # runs where it applies apart, so only differing present values count as varying.
    folded = ("layer_pe", "window") if hybrids and "pe" in by else ()
    varying = [name for name in CONFIG_COLUMNS
               if name not in by and name not in ("seed", "lr", "alphabet", *folded)
               and name in runs.columns and runs[name].nunique(dropna=True) > 1]
    lines = []
    for _, run in failures.head(limit).iterrows():
        label = [cell_text(name, run[name]) for name in by if name in ("language", "pe")]
        label += [f"β={cell_text('base', run['base'])}"] if "base" in by and _present(run["base"]) else []
        label += [f"{name}={cell_text(name, run[name])}" for name in by if name not in ("language", "pe", "base")]
        label += [f"seed={run['seed']}"] if "seed" not in by else []
        label += [f"lr={run['lr']:g}"] if "lr" not in by else []
        label += [f"{name}={cell_text(name, run[name])}" for name in varying if _present(run[name])]
        text = str(run["first_failure"])
        lines.append(f"{' '.join(label)} N*={run['n_star']}: {shown_string(text)} (len {len(text)})")
    return lines


def _present(value) -> bool:
    return value is not None and not (isinstance(value, float) and math.isnan(value))
