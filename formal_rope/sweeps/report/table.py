"""The table model of a report, built once: its rows, the columns each printer shows (`columns.COLUMNS`,
after the grouping columns), their headers and cells, the intervals' note and the notes. Markdown,
Rich and JSON (`printers`) print it; none of them formats a cell of its own."""

from __future__ import annotations

from dataclasses import dataclass

import formal_rope.sweeps.report.columns as column_table
from formal_rope.sweeps.report.aggregate import AggregateRow
from formal_rope.sweeps.report.cells import cell_text
from formal_rope.sweeps.report.columns import Column, TableContext
from formal_rope.sweeps.statistics import DEFAULT_LEVEL

INTERVAL_NOTE = ("intervals: percentile bootstrap of the mean over a cell's runs (10,000 resamples, seed 0) from 5 "
                 "runs on; below 5, the exact order-statistic interval of the median, with its coverage")


@dataclass(frozen=True)
class GroupingColumn:
    """A column of the grouping (`by`): its header, and where its values sit (bases right-aligned)."""

    name: str

    @property
    def header(self) -> str:
        return {"pe": "PE"}.get(self.name, self.name)

    @property
    def justify(self) -> str:
        return "right" if self.name == "base" else "left"


@dataclass(frozen=True)
class ResultsTable:
    """A report's rows with what their columns read (`TableContext`), a title, the note on how the
    intervals are computed and the notes for the reader."""

    rows: tuple[AggregateRow, ...]
    context: TableContext
    title: str = ""
    intervals: str = INTERVAL_NOTE
    notes: tuple[str, ...] = ()

    @property
    def by(self) -> tuple[str, ...]:
        return self.context.by

    def grouping(self) -> list[GroupingColumn]:
        return [GroupingColumn(name) for name in self.by]

    def columns(self, printer: str) -> list[Column]:
        """The statistics' columns `printer` shows for this table, in table order."""
        return [column for column in column_table.COLUMNS
                if printer in column.printers and column.shown(self.context)]

    def headers(self, printer: str) -> list[str]:
        """Every header of `printer`'s table: the grouping's, then the statistics'."""
        fields = self.context.header_fields()
        return [column.header for column in self.grouping()] + [
            column.header.format(**fields) for column in self.columns(printer)]

    def cells(self, printer: str) -> list[list[str]]:
        """A list of cells per row, in the order of `headers(printer)`."""
        columns = self.columns(printer)
        return [[cell_text(name, value) for name, value in row.group]
                + [column.cell(row, self.context) for column in columns] for row in self.rows]


def results_table(rows, by, *, reference: dict | None = None, level: float = DEFAULT_LEVEL, longest: str = "max",
                  title: str = "", notes=()) -> ResultsTable:
    """The table of aggregate `rows` grouped `by`, beside the paper's `reference` (a sweep file's
    [reference]) where the grouping keys it, intervals at confidence `level`, `longest` the
    label of the longest test length ('500', or 'max')."""
    rows = tuple(rows)
    context = TableContext(by=tuple(by), searched=any(row.runs_searched for row in rows), reference=reference,
                           level=level, longest=longest)
    return ResultsTable(rows=rows, context=context, title=title, notes=tuple(notes))
