"""Known places where a reduced scale disagrees with the core paper, each pointing to the section of
docs/findings.md that measures which choice causes it. `reproduce` prints them after each table."""

from __future__ import annotations

FINDINGS = "docs/findings.md"

# (table, scale) -> lines; "*" matches any table or scale.
DEVIATIONS: dict[tuple[str, str], tuple[str, ...]] = {}


def deviation_lines(table: str, scale: str) -> list[str]:
    """The known deviations of `table` at `scale` from the paper, one line each, with their section."""
    lines = []
    for (known_table, known_scale), entries in DEVIATIONS.items():
        if known_table in (table, "*") and known_scale in (scale, "*"):
            lines.extend(entries)
    return lines
