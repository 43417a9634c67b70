"""Sweeps stage: grids of runs -> Parquet results -> paper-style tables and plots."""

from formal_rope.sweeps.grid import SweepSpec, build_spec, expand_grid, load_sweep_file
from formal_rope.sweeps.results import load_results, write_run
from formal_rope.sweeps.runner import SweepSummary, run_sweep

__all__ = [
    "SweepSpec",
    "SweepSummary",
    "build_spec",
    "expand_grid",
    "load_results",
    "load_sweep_file",
    "run_sweep",
    "write_run",
]
