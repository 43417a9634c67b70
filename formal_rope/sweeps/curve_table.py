"""The results folder's training curves: OUT/curves, one Parquet file per run beside runs/ and evals/.

Columns run_id, step, loss, train_accuracy, lr (one row per point of the run's curve,
`formal_rope.storage.curves`). Written by the sweep's driver before the run's row (like its evals),
atomically; a run trained again replaces its file. Folders written before curves existed have none:
`read_curves` then returns an empty table.
"""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq

from formal_rope.errors import FormalRopeError
from formal_rope.storage.curves import TrainingCurve

CURVES = "curves"
CURVE_COLUMN_TYPES = {"run_id": "string", "step": "int64", "loss": "float64", "train_accuracy": "float64",
                      "lr": "float64"}


def curve_columns(run_id: str, curve: TrainingCurve) -> dict:
    """The `curves` rows of one run, as columns."""
    return {"run_id": [run_id] * len(curve), "step": [int(s) for s in curve.step],
            **{name: [float(v) for v in getattr(curve, name)] for name in ("loss", "train_accuracy", "lr")}}


def write_curve(out: Path, run_id: str, curve: TrainingCurve | None, write_parquet) -> None:
    """OUT/curves/RUN_ID.parquet for a run with a curve (`write_parquet(columns, types, path)`: the
    results layer's atomic writer); nothing for a run without one (logging off, failed at once)."""
    if curve is None or not len(curve):
        return
    (Path(out) / CURVES).mkdir(parents=True, exist_ok=True)
    write_parquet(curve_columns(run_id, curve), CURVE_COLUMN_TYPES, Path(out) / CURVES / f"{run_id}.parquet")


def read_curves(out: str | Path, runs=None):
    """Every curve of the results folder as one DataFrame (columns of CURVE_COLUMN_TYPES, sorted by run
    and step). With `runs` (`read_results(out).runs`), only the kept runs' curves, keyed by today's run
    ids (as their evals are). FormalRopeError naming a file that is not a readable curve file."""
    folder = Path(out) / CURVES
    frames = []
    for path in sorted(folder.glob("*.parquet")) if folder.is_dir() else []:
        if path.name.startswith((".", "_")):
            continue  # a temporary file of a write in progress
        try:
            frames.append(pq.read_table(path, columns=list(CURVE_COLUMN_TYPES)).to_pandas())
        except (pa.ArrowException, OSError, ValueError, KeyError) as error:
            raise FormalRopeError(f"{path} is not a readable formal-rope curve file ({error}); delete it (rerunning "
                                  "the run recreates it)") from None
    if not frames:
        return pd.DataFrame({name: pd.Series(dtype="object" if kind == "string" else kind)
                             for name, kind in CURVE_COLUMN_TYPES.items()})
    curves = pd.concat(frames, ignore_index=True)
    if runs is not None:
        current = dict(zip(runs["stored_run_id"], runs["run_id"])) if "stored_run_id" in runs.columns else {
            run_id: run_id for run_id in runs["run_id"]}
        curves = curves[curves["run_id"].isin(set(current))]
        curves = curves.assign(run_id=curves["run_id"].map(current))
    return curves.sort_values(["run_id", "step"], kind="stable").reset_index(drop=True)
