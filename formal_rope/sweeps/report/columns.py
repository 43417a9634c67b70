"""The columns of a report's results table, each defined once: its header, its cell, the printers
that show it and when, and (for a column over a statistic the rows do not hold yet) how the
statistic is computed from a row's runs.

Adding a column is one entry in COLUMNS. An entry with a `statistic` is computed by `aggregate`
for every row, lands in the `report --json` rows after the other statistics, and its cell reads it
with `row.statistic(key)`; an entry without one reads the row's existing fields. `printers` says
which tables show it (Rich: `formalrope report`; Markdown: docs/findings.md), `shown` whether
they do for a given table (worst-case columns only when some run was searched, the paper's beside a
grouping that can key it).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Callable

from formal_rope.sweeps.report.cells import DEFAULT_GROUPING, mean_std, number, reference_index
from formal_rope.sweeps.report.labels import VARIANT_COLUMN
from formal_rope.sweeps.statistics import DEFAULT_LEVEL

RICH, MARKDOWN = "rich", "markdown"  # the printers of a table (`printers`)


@dataclass(frozen=True)
class TableContext:
    """What a table's headers, cells and columns depend on besides its rows: the grouping, whether
    some run was searched (`--eval worst-case`), the paper's [reference] table, the intervals'
    confidence level and the longest test length's label ('500', or 'max' when runs differ)."""

    by: tuple[str, ...]
    searched: bool = False
    reference: dict | None = None
    level: float = DEFAULT_LEVEL
    longest: str = "max"

    @property
    def paper(self) -> dict:
        """The paper's rows keyed by (language, pe, base) (`cells.reference_index`)."""
        return reference_index(self.reference)

    def header_fields(self) -> dict:
        """The values a header's {fields} take: {confidence} ('95%') and {longest}."""
        return {"confidence": f"{self.level:.0%}".replace(".0%", "%"), "longest": self.longest}


def _always(context: TableContext) -> bool:
    return True


@dataclass(frozen=True)
class Column:
    """One column of the results table (see the module's docstring)."""

    header: str  # may name {confidence} and {longest} (`TableContext.header_fields`)
    cell: Callable  # (AggregateRow, TableContext) -> the cell's text
    printers: tuple[str, ...] = (RICH, MARKDOWN)
    shown: Callable[[TableContext], bool] = _always
    style: str = ""  # the Rich column's style
    # (key, the rows' runs -> value): a statistic `aggregate` computes for the column, or None.
    statistic: tuple[str, Callable] | None = None


def _runs(row, context) -> str:
    return str(row.runs) + ("" if row.ok_runs == row.runs else f" ({row.runs - row.ok_runs} not ok)")


def _searched(context: TableContext) -> bool:
    return context.searched


def _interval(interval, digits: int) -> str:
    return "–" if interval is None else interval.text(digits)


def _nnch(text: Callable) -> Callable:
    """A NNCH cell: '–' when no run of the row has NNCH's score (evaluation stopped early, runs on
    files, nnch_samples 0, results written before the score was measured)."""
    return lambda row, context: "–" if math.isnan(row.nnch_max) else text(row)


def _paper_beside_rich(context: TableContext) -> bool:
    # The paper's rows are keyed by (language, pe, base); a variant's rows have no row of the paper.
    return set(DEFAULT_GROUPING) <= set(context.by) and VARIANT_COLUMN not in context.by and bool(context.paper)


def _paper_rich(row, context) -> str:
    ref = context.paper.get((row.language, row.pe, row.base))
    if ref is None:
        return ""
    mean = "" if math.isnan(ref["n_star_mean"]) else f" ({ref['n_star_mean']:.1f})"
    return f"{ref['accuracy_max']:.3f} / {ref['n_star_max']:.0f}{mean}"


def _paper_beside_markdown(context: TableContext) -> bool:
    return bool(context.reference) and {"language", "pe"} <= set(context.by)


def _paper_markdown(row, context) -> str:
    group = dict(row.group)
    base = group.get("base")
    base = None if base is None or (isinstance(base, float) and math.isnan(base)) else float(base)
    values = context.paper.get((group["language"], group["pe"], base))
    if values is None:
        return "–"
    return (f"{values['accuracy_max']:.2f} / {values['n_star_max']:.0f}"
            + ("" if math.isnan(values["n_star_mean"]) else f" ({values['n_star_mean']:.1f})"))


def _predictions(group) -> str:
    """The theory's verdicts on a row's runs (`theory.runs`; '–' for runs written before predictions)."""
    if "predicted" not in group.columns:
        return "–"
    verdicts = [str(value) for value in dict.fromkeys(group["predicted"]) if isinstance(value, str) and value]
    return ", ".join(verdicts) or "–"


def _family(group) -> str:
    """The theory's families on a row's runs (`runs.blind_spots`): refuted / tested and the shortest
    refuting length; '–' where no run was tested (not predicted not expressible, or written before)."""
    if "family_strings_tried" not in group.columns:
        return "–"
    tested = group[group["family_strings_tried"].notna()]
    if not len(tested):
        return "–"
    refuted = tested["refuted_at"].dropna()
    shortest = f" (from {int(refuted.min())})" if len(refuted) else ""
    return f"{len(refuted)}/{len(tested)} refuted{shortest}"


def _transitions(group) -> str:
    """The fewest transitions of the minimal DFA a row's runs' test strings took, of how many."""
    if "test_transitions" not in group.columns or not group["test_transitions"].notna().any():
        return "–"
    chosen = group[group["test_transitions"].notna()]
    low = chosen.loc[chosen["test_transitions_covered"].astype(float).idxmin()]
    return f"{int(low['test_transitions_covered'])}/{int(low['test_transitions'])}"


# In table order; each printer shows its own columns in this order, after the grouping columns.
COLUMNS: tuple[Column, ...] = (
    Column("runs", _runs),
    Column("acc max", lambda row, context: number(row.accuracy_max, 3)),
    Column("acc mean±std", lambda row, context: mean_std(row.accuracy_mean, row.accuracy_std, 3)),
    Column("N* max", lambda row, context: number(row.n_star_max, 0)),  # "–": every run of the row failed
    Column("N* mean±std", lambda row, context: mean_std(row.n_star_mean, row.n_star_std, 1)),
    Column("N* {confidence} CI", lambda row, context: _interval(row.n_star_interval, 0), printers=(RICH,)),
    Column("acc {confidence} CI", lambda row, context: _interval(row.accuracy_interval, 3), printers=(RICH,)),
    Column("N* of each run", lambda row, context: ", ".join(str(n) for n in row.n_stars) or "–",
           printers=(MARKDOWN,)),
    Column("reached {longest}", lambda row, context: f"{row.successes}/{len(row.n_stars)}", printers=(RICH,)),
    Column("reached max", lambda row, context: f"{row.successes}/{len(row.n_stars)}" if row.n_stars else "–",
           printers=(MARKDOWN,)),
    Column("worst N* max", lambda row, context: number(row.n_star_worst_max, 0), printers=(RICH,), shown=_searched),
    Column("worst N* mean±std", lambda row, context: mean_std(row.n_star_worst_mean, row.n_star_worst_std, 1),
           printers=(RICH,), shown=_searched),
    Column("worst reached {longest}",
           lambda row, context: "–" if row.successes_worst is None else f"{row.successes_worst}/{row.runs_searched}",
           printers=(RICH,), shown=_searched),
    # In the order of "N* of each run" (pairs sorted by N*, then by worst-case N*).
    Column("worst-case N* of each run", lambda row, context: ", ".join(str(w) for _, w in row.n_star_pairs) or "–",
           printers=(MARKDOWN,), shown=_searched),
    Column("reached max, worst case",
           lambda row, context: f"{row.successes_worst}/{row.runs_searched}" if row.runs_searched else "–",
           printers=(MARKDOWN,), shown=_searched),
    Column("predicted", lambda row, context: row.statistic("predicted"), printers=(RICH,),
           statistic=("predicted", _predictions)),
    Column("theory's family", lambda row, context: row.statistic("family"), printers=(RICH,),
           statistic=("family", _family)),
    Column("test transitions", lambda row, context: row.statistic("test_transitions"), printers=(RICH,),
           statistic=("test_transitions", _transitions)),
    Column("NNCH max", _nnch(lambda row: f"{row.nnch_max:.3f}"), printers=(RICH,)),
    Column("NNCH mean±std", _nnch(lambda row: f"{row.nnch_mean:.3f}±{row.nnch_std:.3f}"), printers=(RICH,)),
    Column("paper: acc max / N* max (mean)", _paper_rich, printers=(RICH,), shown=_paper_beside_rich, style="dim"),
    Column("paper: acc max / N* max (mean)", _paper_markdown, printers=(MARKDOWN,), shown=_paper_beside_markdown),
)
