"""Results on disk: one Parquet file per finished run under OUT/runs and OUT/evals.

Each run's rows are written to a hidden temporary file and renamed into place, so a crash or
Ctrl-C never leaves a half-written file, and pandas.read_parquet(OUT / "runs") (which ignores
names starting with '.' or '_') always sees complete runs only.
"""

from __future__ import annotations

import json
import math
import os
import subprocess
from pathlib import Path

from formal_rope.errors import FormalRopeError
from formal_rope.training.config import RunConfig, RunResult

RUNS = "runs"
EVALS = "evals"
MARKER = "formal-rope-results.json"  # identifies a results folder


def ensure_results_dir(out: str | Path) -> Path:
    """Create the results folder (FormalRopeError when it cannot be created or written)."""
    out = Path(out)
    try:
        (out / RUNS).mkdir(parents=True, exist_ok=True)
        (out / EVALS).mkdir(parents=True, exist_ok=True)
        marker = out / MARKER
        if not marker.exists():
            marker.write_text(json.dumps({"format": 1, "tables": [RUNS, EVALS]}) + "\n")
    except OSError as error:
        raise FormalRopeError(f"cannot use {str(out)!r} as a results folder: {error.strerror or error}") from None
    return out


def finished_run_ids(out: str | Path) -> set[str]:
    """Ids of the runs a rerun skips: every written run except those with status `failed` (an error
    or a dead worker, which a rerun should retry; ok and diverged runs are results)."""
    import pyarrow.parquet as pq

    runs = Path(out) / RUNS
    if not runs.is_dir():
        return set()
    finished = set()
    for path in runs.glob("*.parquet"):
        if path.name.startswith((".", "_")):
            continue
        statuses = pq.read_table(path, columns=["status"]).column("status").to_pylist()
        if statuses and statuses[0] != "failed":
            finished.add(path.stem)
    return finished


def git_commit() -> str | None:
    try:
        completed = subprocess.run(
            ["git", "rev-parse", "HEAD"],
            cwd=Path(__file__).resolve().parent,
            capture_output=True,
            text=True,
            timeout=5,
        )
    except (OSError, subprocess.SubprocessError):
        return None
    return completed.stdout.strip() or None if completed.returncode == 0 else None


def run_row(config: RunConfig, result: RunResult, run_id: str) -> dict:
    # The alphabet and periods the run actually used (config None = the language's own alphabet /
    # periods "auto"); the config's values only when the run failed before resolving them.
    alphabet = result.alphabet if result.alphabet is not None else config.alphabet
    periods = result.resolved_periods if result.resolved_periods is not None else config.periods
    return {
        "run_id": run_id,
        "language": config.language,
        "alphabet": ",".join(alphabet) if alphabet else None,
        "pe": config.pe,
        "base": float(config.base),
        "periods": ",".join(str(p) for p in periods) if periods else None,
        "seed": int(config.seed),
        "lr": float(config.lr),
        "steps": int(config.steps),
        "batch_size": int(config.batch_size),
        "layers": int(config.layers),
        "d_model": int(config.d_model),
        "heads": int(config.heads),
        "n_star": int(result.n_star),
        "accuracy": float(result.accuracy),
        **metric_columns(result),
        "data": config.data,
        "data_hash": config.data_hash,
        "first_failure": result.first_failure,
        "status": result.status,
        "error": result.error,
        "final_loss": None if result.final_loss is None else float(result.final_loss),
        "steps_done": int(result.steps_done),
        "wall_s": float(result.wall_s),
        "versions": json.dumps(result.versions, sort_keys=True),
        "commit": result.commit,
        "config": json.dumps(config.to_dict(), sort_keys=True),
    }


def nnch_accuracy(result: RunResult) -> float:
    """Delétang et al.'s metric for one run: the mean per-length accuracy over *every* test length.

    Equal to `result.accuracy` when every length was evaluated; NaN when eval mode nstar stopped
    at the first imperfect length (the remaining lengths' accuracies are unknown) or the run diverged."""
    return float(result.accuracy) if result.eval_complete else math.nan


def metric_columns(result: RunResult) -> dict:
    """The columns placed beside n_star and accuracy (mean over the *evaluated* lengths): nnch_accuracy
    and eval_complete (whether every test length was evaluated)."""
    return {"nnch_accuracy": nnch_accuracy(result), "eval_complete": bool(result.eval_complete)}


# Fixed column types: every per-run file must share one schema, or reading the folder fails
# when a column is null in one file and a string in another.
RUN_COLUMN_TYPES = {
    "run_id": "string", "language": "string", "alphabet": "string", "pe": "string", "base": "float64",
    "periods": "string", "seed": "int64", "lr": "float64", "steps": "int64", "batch_size": "int64",
    "layers": "int64", "d_model": "int64", "heads": "int64", "n_star": "int64", "accuracy": "float64",
    "nnch_accuracy": "float64", "eval_complete": "bool", "data": "string", "data_hash": "string",
    "first_failure": "string", "status": "string", "error": "string", "final_loss": "float64",
    "steps_done": "int64", "wall_s": "float64", "versions": "string", "commit": "string", "config": "string",
}
EVAL_COLUMN_TYPES = {"run_id": "string", "length": "int64", "accuracy": "float64", "n": "int64"}


def _arrow_schema(column_types: dict):
    import pyarrow as pa

    kinds = {"string": pa.string(), "float64": pa.float64(), "int64": pa.int64(), "bool": pa.bool_()}
    return pa.schema([(name, kinds[kind]) for name, kind in column_types.items()])


def _atomic_parquet(columns: dict, column_types: dict, path: Path) -> None:
    import pyarrow as pa
    import pyarrow.parquet as pq

    table = pa.Table.from_pydict(columns, schema=_arrow_schema(column_types))
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    pq.write_table(table, tmp)
    os.replace(tmp, path)


def write_run(out: str | Path, config: RunConfig, result: RunResult) -> None:
    """Persist one finished run: evals first, then the run row (its presence marks 'finished')."""
    out = ensure_results_dir(out)
    run_id = config.run_id()
    evals = {
        "run_id": [run_id] * len(result.per_length),
        "length": [int(r.length) for r in result.per_length],
        "accuracy": [float(r.accuracy) for r in result.per_length],
        "n": [int(r.n) for r in result.per_length],
    }
    _atomic_parquet(evals, EVAL_COLUMN_TYPES, out / EVALS / f"{run_id}.parquet")
    row = run_row(config, result, run_id)
    _atomic_parquet({key: [row[key]] for key in RUN_COLUMN_TYPES}, RUN_COLUMN_TYPES, out / RUNS / f"{run_id}.parquet")


def load_results(out: str | Path):
    """(runs, evals) DataFrames of a results folder; a clear error if it is not one."""
    import pandas as pd

    out = Path(out)
    if not out.is_dir():
        raise FormalRopeError(f"{out} is not a results folder: it does not exist or is not a directory")
    if not (out / RUNS).is_dir() or not any((out / RUNS).glob("*.parquet")):
        raise FormalRopeError(
            f"{out} is not a results folder: no {RUNS}/*.parquet inside "
            "(run `formalrope sweep --out DIR` or `formalrope reproduce --out DIR` first)"
        )
    runs = pd.read_parquet(out / RUNS)
    if "nnch_accuracy" not in runs:  # written before the column existed: unknown, not guessed
        runs["nnch_accuracy"] = math.nan
    evals_dir = out / EVALS
    if evals_dir.is_dir() and any(evals_dir.glob("*.parquet")):
        evals = pd.read_parquet(evals_dir)
    else:
        evals = pd.DataFrame({"run_id": [], "length": [], "accuracy": [], "n": []})
    return runs, evals
