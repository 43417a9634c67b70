"""Where command output goes: a Rich console for stdout that never squeezes tables when piped.

Rich assumes 80 columns when stdout is not a terminal, so `formalrope … | less` or `> file` got
tables folded into narrow columns. Piped output has no width to respect: tables and lines keep
their natural width (an explicit COLUMNS still wins, as on a terminal).
"""

from __future__ import annotations

import os

# Wider than any table the commands print; Rich pads nothing but a table's title to this.
PIPED_WIDTH = 10_000


def stdout_console(**options):
    """A rich Console on stdout: the terminal's width on a terminal, unlimited when piped."""
    from rich.console import Console

    console = Console(**options)
    if not console.is_terminal and "COLUMNS" not in os.environ and "width" not in options:
        console = Console(width=PIPED_WIDTH, **options)
    return console
