"""Sweeps stage: grids of runs -> Parquet results -> paper-style tables and plots."""

from formal_rope.sweeps.grid import (
    BASE_FREE_PES,
    PAPER_TABLES,
    SweepSpec,
    build_spec,
    expand_grid,
    load_sweep_file,
    paper_sweep_path,
    validate_grid,
)
from formal_rope.sweeps.report import AggregateRow, aggregate, mixed_settings, plot_n_star
from formal_rope.sweeps.report import SORT_KEYS, sort_rows
from formal_rope.sweeps.results import load_results, write_run
from formal_rope.sweeps.results import nnch_accuracy
from formal_rope.sweeps.runner import SweepSummary, run_sweep

__all__ = [
    "AggregateRow",
    "BASE_FREE_PES",
    "PAPER_TABLES",
    "SORT_KEYS",
    "SweepSpec",
    "SweepSummary",
    "aggregate",
    "build_spec",
    "expand_grid",
    "load_results",
    "load_sweep_file",
    "mixed_settings",
    "nnch_accuracy",
    "paper_sweep_path",
    "plot_n_star",
    "run_sweep",
    "sort_rows",
    "validate_grid",
    "write_run",
]
