"""Sweeps stage: grids of runs -> Parquet results -> paper-style tables and plots."""

from formal_rope.sweeps.grid import (
    BASE_FREE_PES,
    EXPERIMENTS,
    MAX_GRID_RUNS,
    PAPER_TABLES,
    SweepSpec,
    build_spec,
    expand_grid,
    load_sweep_file,
    paper_sweep_path,
    unused_settings,
    validate_grid,
)
from formal_rope.sweeps.report import DEFAULT_GROUPING, SORT_KEYS, AggregateRow, aggregate, mixed_settings, plot_n_star, sort_rows
from formal_rope.sweeps.results import Results, finished_run_ids, load_results, nnch_accuracy, read_results, write_run
from formal_rope.sweeps.runner import SweepSummary, run_sweep

__all__ = [
    "AggregateRow",
    "BASE_FREE_PES",
    "EXPERIMENTS",
    "DEFAULT_GROUPING",
    "MAX_GRID_RUNS",
    "Results",
    "PAPER_TABLES",
    "SORT_KEYS",
    "SweepSpec",
    "SweepSummary",
    "aggregate",
    "build_spec",
    "expand_grid",
    "finished_run_ids",
    "load_results",
    "load_sweep_file",
    "mixed_settings",
    "nnch_accuracy",
    "paper_sweep_path",
    "plot_n_star",
    "read_results",
    "run_sweep",
    "sort_rows",
    "unused_settings",
    "validate_grid",
    "write_run",
]
