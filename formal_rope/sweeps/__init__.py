"""Sweeps stage: grids of runs -> Parquet results -> paper-style tables and plots.

Importing this package imports nothing else: each name loads its module on first access, so that
the command line, which reads the backend registry (`formal_rope.sweeps.backends`) when it starts,
stays light (the grid and results modules import numpy).
"""

from __future__ import annotations

from formal_rope._lazy import lazy_exports

# name -> module it lives in, imported on first access.
_LAZY = {
    **dict.fromkeys(("BASE_FREE_PES", "EXPERIMENTS", "MAX_GRID_RUNS", "PAPER_TABLES", "SweepSpec", "build_spec",
                     "expand_grid", "load_sweep_file", "paper_sweep_path", "unused_settings"),
                    "formal_rope.sweeps.grid"),
    **dict.fromkeys(("GridRuns", "check_grid", "resolve_grid"), "formal_rope.sweeps.checks"),
    **dict.fromkeys(("DEFAULT_GROUPING", "SORT_KEYS", "AggregateRow", "aggregate", "mixed_settings", "plot_n_star",
                     "sort_rows"), "formal_rope.sweeps.report"),
    **dict.fromkeys(("Results", "finished_run_ids", "load_results", "nnch_accuracy", "read_results", "write_run"),
                    "formal_rope.sweeps.results"),
    **dict.fromkeys(("SweepSummary", "run_sweep"), "formal_rope.sweeps.runner"),
    **dict.fromkeys(("BACKENDS", "BackendOptions", "backend_options"), "formal_rope.sweeps.backends"),
}

__getattr__, __dir__ = lazy_exports(__name__, _LAZY, globals())

__all__ = sorted(_LAZY)
