"""CLI: `report` — a results folder aggregated like the core paper's Tables 4–5 (a Rich table, JSON,
a plot, comparisons over seeds, a results page)."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import NamedTuple, Optional

import typer
from rich.console import Console

from formal_rope.atlas.render import agreement_cells_of_runs, constructed_cells_of_folder
from formal_rope.commands import run_options as ro
from formal_rope.commands.sweep_display import JSON, TABLE, note, print_report
from formal_rope.commands.terminal import check_output_place
from formal_rope.errors import FormalRopeError
from formal_rope.sweeps.report import DEFAULT_GROUPING, ReportRequest, reference_table
from formal_rope.sweeps.results_page import write_results_page


def _grouping(text: str | None) -> tuple[str, ...] | None:
    """--by as column names; None when not given (the report's default: language, pe, base and every
    swept axis)."""
    if text is None:
        return None
    names = ro.split_list(text, "--by")
    repeated = sorted({name for name in names if names.count(name) > 1})
    if repeated:
        raise FormalRopeError(f"--by names {', '.join(repeated)} more than once")
    return tuple(names)


class ReportFlags(NamedTuple):
    """`report`'s options."""
    json_output: bool = typer.Option(False, "--json", help="Print the aggregate table as JSON.")
    plot: Optional[Path] = typer.Option(
        None, "--plot",
        help="Write a Figure 2/3-style plot (mean N* vs base, ±1 std; NoPE band; the paper's values hollow with "
        "--reference) to this PNG; missing folders are created.",
    )
    reference: Optional[str] = typer.Option(
        None, "--reference",
        help="The paper's numbers beside ours: a table name (table2, table4, table5) or a sweep "
        "TOML with a \\[reference] table.",
    )
    by: Optional[str] = typer.Option(
        None, "--by",
        help="Group rows by these runs columns, comma-separated, e.g. language,pe,train_near_miss_fraction "
        "(default: language,pe,base and every setting that varies across the runs besides seed and lr).",
    )
    sort: Optional[str] = typer.Option(
        None, "--sort",
        help="Order rows best first by n_star (N* max, then mean), nnch (NNCH's score max, then mean) or "
        "accuracy; default: the grouping's order.",
    )
    confidence: float = typer.Option(
        0.95, "--confidence",
        help="Confidence level of each row's intervals for mean N* and accuracy (bootstrap of the mean from 5 "
        "runs on, exact order-statistic interval of the median below; docs/sweeps.md).",
    )
    compare: Optional[tuple[str, str]] = typer.Option(
        None, "--compare",
        help="Compare two cells over seeds: --compare pe=rope_p pe=nope (COLUMN=VALUE[,COLUMN=VALUE] each), per "
        "value of the other grouping columns (per language by default): exact permutation test (Mann-Whitney U "
        "for large samples) and Cliff's delta.",
    )
    metric: str = typer.Option(
        "n_star", "--metric",
        help="What --compare compares: n_star, accuracy, nnch_accuracy, n_star_worst, success (N* at the longest "
        "test length, 0/1) or success_worst.",
    )
    html: Optional[Path] = typer.Option(
        None, "--html",
        help="Also write a self-contained results page to this .html file (tables sortable and filterable, each "
        "language's classes, DFA, runs and failing strings, the figures; no server or network needed).",
    )
    plot_curves: Optional[Path] = typer.Option(
        None, "--plot-curves",
        help="Also draw every run's training curve (loss and accuracy against the step, OUT/curves) into this PNG.",
    )
    color_by: str = typer.Option(
        "pe", "--color-by", help="The runs column that colours the lines of --plot-curves (any column, e.g. "
        "language, lr, seed).")

    def request(self, results: Path):
        """What to report of `results`, a `ReportRequest` (FormalRopeError for a malformed option; a
        note for an option that has no effect)."""
        grouping = _grouping(self.by)
        for where, what in ((self.plot, "the plot"), (self.html, "the results page"),
                            (self.plot_curves, "the curves plot")):
            if where is not None:  # before the table is printed: a bad place is refused, not found last
                check_output_place(where, what)
        if not 0 < self.confidence < 1:
            raise FormalRopeError(
                f"--confidence must lie strictly between 0 and 1 (e.g. 0.95), got {self.confidence}")
        if (self.reference is not None and self.plot is None and grouping is not None
                and not set(DEFAULT_GROUPING) <= set(grouping)):
            note("--reference is shown in the table only with a grouping that has language, pe and base (the "
                 "default) and otherwise only on a --plot; it has no effect here")
        if self.compare is None and self.metric != "n_star":
            note("--metric chooses what --compare compares; it has no effect without --compare")
        return ReportRequest(out=results, by=grouping, sort=self.sort, reference=reference_table(self.reference),
                             plot=self.plot, level=self.confidence, comparison=self.compare, metric=self.metric)


@ro.with_option_groups
def report(
    results: Path = typer.Argument(..., help="Results folder written by `sweep` or `reproduce`."),
    options: ReportFlags = None,
) -> None:
    """Aggregate a results folder like the core paper's Tables 4–5: max/mean/std of accuracy, N* and NNCH's score (uniform strings, lengths 42..500)."""  # noqa: E501 (Typer lists the command by this line, breaks included)

    request = options.request(results)
    print_report(request, Console(), JSON if options.json_output else TABLE)
    if options.html is not None:
        written = write_results_page(results, options.html, by=request.by, sort=request.sort,
                                     reference=request.reference, level=request.level,
                                     comparison=request.comparison, metric=request.metric,
                                     atlas_table=agreement_cells_of_runs,
                                     constructed_table=constructed_cells_of_folder)
        print(f"results page written to {written}", file=sys.stderr if options.json_output else sys.stdout)
    if options.plot_curves is not None:
        # function-local: matplotlib loads only when curves are drawn
        from formal_rope.sweeps.curves_plot import plot_curves as draw_curves

        drawn = draw_curves(results, options.plot_curves, options.color_by)
        print(f"training curves written to {drawn}", file=sys.stderr if options.json_output else sys.stdout)
