"""Printers of a report's table model (`table.ResultsTable`): GitHub Markdown (docs/findings.md), a
Rich table (`formalrope report`, `sweep`, `reproduce`) and the JSON rows (`report --json`); and the
Rich table of a `--compare`."""

from __future__ import annotations

from rich.table import Table

from formal_rope.sweeps.report.aggregate import AggregateRow
from formal_rope.sweeps.report.cells import cell_text, number
from formal_rope.sweeps.report.columns import MARKDOWN, RICH
from formal_rope.sweeps.report.table import ResultsTable, results_table


def markdown_text(table: ResultsTable) -> str:
    """The table as GitHub Markdown: a header line, a rule, a line per row."""
    headers = table.headers(MARKDOWN)
    lines = ["| " + " | ".join(headers) + " |", "|" + "|".join("---" for _ in headers) + "|"]
    lines += ["| " + " | ".join(cells) + " |" for cells in table.cells(MARKDOWN)]
    return "\n".join(lines)


def markdown_table(rows: list[AggregateRow], by, reference: dict | None = None) -> str:
    """The aggregate rows as a GitHub Markdown table: the grouping columns, runs, accuracy max and
    mean±std, N* max and mean±std, every run's N* and how many reached the longest test length
    (what docs/findings.md holds); when some run was searched (`--eval worst-case`), every searched
    run's worst-case N* in the same order and how many of those reached it. With a sweep
    file's [reference] and a grouping that names language and pe, a last column gives the paper's
    accuracy max / N* max (mean) for the row's (language, pe, base)."""
    return markdown_text(results_table(rows, by, reference=reference))


def rich_table(table: ResultsTable) -> Table:
    """The table as Rich renders it in a terminal (cells never wrap; statistics right-aligned)."""
    rendered = Table(title=table.title, show_lines=False)
    for column in table.grouping():
        rendered.add_column(column.header, justify=column.justify, no_wrap=True)
    fields = table.context.header_fields()
    for column in table.columns(RICH):
        rendered.add_column(column.header.format(**fields), justify="right", style=column.style, no_wrap=True)
    for cells in table.cells(RICH):
        rendered.add_row(*cells)
    return rendered


def json_rows(table: ResultsTable) -> list[dict]:
    """The rows as `report --json` holds them: grouping values, then every statistic (strict JSON)."""
    return [row.to_dict() for row in table.rows]


def comparison_table(comparisons: list[dict], by) -> Table:
    """`report --compare`'s result (`compare.compare_cells`) as a Rich table, a row per stratum."""
    first = comparisons[0]
    strata = [name for name in by if name in first]
    rendered = Table(title=f"{first['a']} vs {first['b']} ({first['metric']}, per {', '.join(strata) or 'folder'})")
    for name in (*strata, "runs", "mean", "median", "test", "p", "Cliff's δ"):
        rendered.add_column({"pe": "PE"}.get(name, name),
                            justify="left" if name in strata or name == "test" else "right", no_wrap=True)
    for entry in comparisons:
        p = entry["p_value"]
        rendered.add_row(
            *(cell_text(name, entry[name]) for name in strata),
            f"{entry['n_a']} vs {entry['n_b']}",
            f"{number(entry['mean_a'], 3)} vs {number(entry['mean_b'], 3)}",
            f"{number(entry['median_a'], 3)} vs {number(entry['median_b'], 3)}",
            entry["method"],
            "–" if p is None else f"{p:.3g}",
            "–" if entry["cliffs_delta"] is None else f"{entry['cliffs_delta']:+.2f}",
        )
    return rendered
