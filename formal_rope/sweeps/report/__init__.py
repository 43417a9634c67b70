"""Reports of a results folder, like the core paper's Tables 4-5 and Figures 2-3.

One job per module: `aggregate` groups runs into rows; `columns` defines each column of the results
table once; `table` is the table model built from the rows; `printers` print it (Markdown, Rich,
JSON); `plots` draws the figures; `compare` compares two cells over seeds; `labels` labels runs
with a sweep's variants and scale; `build` reads a folder into a `Report` (`build_report`).
"""

from formal_rope.sweeps.report.aggregate import (
    AGGREGATED_AXES,
    SORT_KEYS,
    AggregateRow,
    aggregate,
    check_grouping,
    default_grouping,
    hybrid_labels,
    mixed_settings,
    normalise_runs,
    sort_rows,
    swept_axes,
)
from formal_rope.sweeps.report.build import Report, ReportRequest, build_report, failure_lines, reference_table
from formal_rope.sweeps.report.cells import (
    DEFAULT_GROUPING,
    PE_LABELS,
    cell_text,
    format_base,
    mean_std,
    number,
    plain_value,
    reference_index,
)
from formal_rope.sweeps.report.columns import COLUMNS, MARKDOWN, RICH, Column, TableContext
from formal_rope.sweeps.report.compare import (
    COMPARE_METRICS,
    METRIC_SOURCES,
    compare_cells,
    metric_values,
    parse_selection,
)
from formal_rope.sweeps.report.labels import VARIANT_COLUMN, label_variants, scale_label
from formal_rope.sweeps.report.plots import PLOT_SUFFIX, plot_n_star, plot_path
from formal_rope.sweeps.report.printers import comparison_table, json_rows, markdown_table, markdown_text, rich_table
from formal_rope.sweeps.report.table import INTERVAL_NOTE, ResultsTable, results_table

__all__ = [
    "AGGREGATED_AXES", "COLUMNS", "COMPARE_METRICS", "DEFAULT_GROUPING", "INTERVAL_NOTE", "MARKDOWN", "METRIC_SOURCES",
    "PE_LABELS", "PLOT_SUFFIX", "RICH", "SORT_KEYS", "VARIANT_COLUMN", "AggregateRow", "Column", "Report",
    "ReportRequest", "ResultsTable", "TableContext", "aggregate", "build_report", "cell_text", "check_grouping",
    "compare_cells", "comparison_table", "default_grouping", "failure_lines", "format_base", "hybrid_labels",
    "json_rows", "label_variants", "markdown_table", "markdown_text", "mean_std", "metric_values", "mixed_settings",
    "normalise_runs", "number", "parse_selection", "plain_value", "plot_n_star", "plot_path", "reference_index",
    "reference_table", "results_table", "rich_table", "scale_label", "sort_rows", "swept_axes",
]
