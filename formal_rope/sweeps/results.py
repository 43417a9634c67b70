"""Results on disk: one Parquet file per finished run under OUT/runs and OUT/evals (and OUT/curves,
`formal_rope.sweeps.curve_table`).

Each run's rows are written to a hidden temporary file and renamed into place, so a crash or
Ctrl-C never leaves a half-written file, and pandas.read_parquet(OUT / "runs") (which ignores
names starting with '.' or '_') always sees complete runs only.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path

import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pyarrow.types as types

from formal_rope.errors import FormalRopeError
from formal_rope.files import atomic_file, write_bytes_atomically
from formal_rope.run_config.config import RunConfig
from formal_rope.run_config.fields import FIELD_NAMES, field_kind
from formal_rope.sweeps.curve_table import write_curve
from formal_rope.theory.runs import prediction_columns
from formal_rope.training.run_result import RunResult

RUNS = "runs"
EVALS = "evals"
MARKER = "formal-rope-results.json"  # identifies a results folder
ATLAS_LANGUAGES_FILE = "atlas-languages.json"  # an atlas's language set, beside runs/ and evals/ (`formalrope atlas`)


def ensure_results_dir(out: str | Path) -> Path:
    """Create the results folder (FormalRopeError when it cannot be created or written)."""
    out = Path(out)
    try:
        (out / RUNS).mkdir(parents=True, exist_ok=True)
        (out / EVALS).mkdir(parents=True, exist_ok=True)
        marker = out / MARKER
        if not marker.exists():
            write_bytes_atomically(marker, (json.dumps({"format": 1, "tables": [RUNS, EVALS]}) + "\n").encode(),
                                   "the results marker")
    except OSError as error:
        raise FormalRopeError(f"cannot use {str(out)!r} as a results folder: {error.strerror or error}") from None
    return out


def finished_run_ids(out: str | Path, worst_case: bool = False) -> set[str]:
    """Ids of the runs a rerun skips: every written run except those with status `failed` (an error
    or a dead worker, which a rerun should retry; ok and diverged runs are results). With
    `worst_case`, also except the runs without a worst-case result (`n_star_worst` null).

    Ids are recomputed from each file's stored config, so runs written under an older id scheme (file
    named by the old id) count as finished under today's id. A file that is not a readable run or
    eval file (unreadable, foreign, columns of the wrong type) is a FormalRopeError naming it, so a
    sweep stops on it before training rather than in the report after."""
    runs = Path(out) / RUNS
    if not runs.is_dir():
        return set()
    if (Path(out) / EVALS).is_dir():
        for path in _parquet_files(Path(out) / EVALS):
            _read_parquet(path, EVAL_REQUIRED, "eval", columns=["run_id"])
    finished = set()
    for path in _parquet_files(runs):
        table = _read_parquet(path, RUN_REQUIRED, "run", columns=["status", "config"])
        searched = [True] * table.num_rows
        if worst_case:
            searched = [False] * table.num_rows  # files written before the search existed lack the column
            if "n_star_worst" in _column_names(path):
                column = _read_parquet(path, RUN_REQUIRED, "run", columns=["n_star_worst"]).column("n_star_worst")
                searched = [value is not None for value in column.to_pylist()]
        for status, config_text, found in zip(table.column("status").to_pylist(), table.column("config").to_pylist(),
                                              searched):
            if status != "failed" and found:
                finished.add(_stored_config(path, config_text).run_id())
    return finished


def _column_names(path: Path) -> list[str]:
    return list(pq.read_schema(path).names)


def _column_value(value, name: str | None = None):
    """A config value as its Parquet cell: tuples comma-joined (as --alphabet/--periods take them);
    a field stored as text (`window`: an int or a list) written as text."""
    if isinstance(value, (list, tuple)):
        return ",".join(str(item) for item in value)
    if name is not None and value is not None and RUN_COLUMN_TYPES.get(name) == "string" and not isinstance(value, str):
        return str(value)
    return value


def run_row(config: RunConfig, result: RunResult, run_id: str) -> dict:
    """The `runs` row of one result: the SPEC §9 columns, every RunConfig field as its own column
    (None where the field does not apply to the run), the theory's prediction (PREDICTION_COLUMNS,
    `theory.runs`), and the full config as JSON."""
    # The alphabet and periods the run actually used (config None = the language's own alphabet /
    # periods "auto"); the config's values only when the run failed before resolving them.
    alphabet = result.alphabet if result.alphabet is not None else config.alphabet
    periods = result.resolved_periods if result.resolved_periods is not None else config.periods
    settings = config.to_dict()
    row = {name: _column_value(settings[name], name) for name in CONFIG_COLUMNS}
    row.update({
        "run_id": run_id,
        "alphabet": ",".join(alphabet) if alphabet else None,
        "periods": ",".join(str(p) for p in periods) if periods and config.applies("periods") else None,
        "n_star": None if result.n_star is None else int(result.n_star),
        "accuracy": float(result.accuracy),
        **metric_columns(result),
        **worst_case_columns(result),
        **blind_spot_columns(result),
        # The theory's verdict for the run, from the class decider and the config (never the result).
        **prediction_columns(config, result.resolved_periods),
        "pack_id": result.pack_id,
        "pack_size": int(result.pack_size),
        "first_failure": result.first_failure,
        "status": result.status,
        "error": result.error,
        "final_loss": None if result.final_loss is None else float(result.final_loss),
        "steps_done": int(result.steps_done),
        "wall_s": float(result.wall_s),
        "eval_complete": bool(result.eval_complete),
        "warnings": json.dumps(list(result.warnings)) if result.warnings else None,
        "versions": json.dumps(result.versions, sort_keys=True),
        "commit": result.commit,
        "config": json.dumps(settings, sort_keys=True),
    })
    return row


def nnch_accuracy(result: RunResult) -> float:
    """NNCH's score of one run (`evaluation.nnch`: Delétang et al.'s mean accuracy on uniformly random
    strings over their lengths, 42..500 by default); NaN where it was not measured (evaluation
    stopped early, a run on files, nnch_samples 0, a diverged or failed run)."""
    return float(result.nnch_accuracy)


def worst_case_columns(result: RunResult) -> dict:
    """The worst-case search's columns beside n_star (`--eval worst-case`; null when not searched)."""
    return {
        "n_star_worst": None if result.n_star_worst is None else int(result.n_star_worst),
        "worst_failure": result.worst_failure,
        "worst_failure_margin": None if result.worst_failure_margin is None else float(result.worst_failure_margin),
        "worst_strings_tried": None if result.worst_strings_tried is None else int(result.worst_strings_tried),
    }


def blind_spot_columns(result: RunResult) -> dict:
    """The theory's families (`runs.blind_spots`: refuted_at, the shortest length of a misclassified
    family string, null when the model held or was not tested; family_strings_tried null when not
    tested), the test sets' transition coverage, and the final training accuracy (the curve's last
    point: mean over its last log_every steps; null without a curve)."""
    curve = result.curve
    final = curve.train_accuracy[-1] if curve is not None and len(curve.train_accuracy) else None
    return {
        "family": result.family,
        "family_strings_tried": None if result.family_strings_tried is None else int(result.family_strings_tried),
        "refuted_at": None if result.refuted_at is None else int(result.refuted_at),
        "family_failure": result.family_failure,
        "test_transitions_covered": None if result.test_transitions_covered is None
        else int(result.test_transitions_covered),
        "test_transitions": None if result.test_transitions is None else int(result.test_transitions),
        "final_train_accuracy": None if final is None or final != final else float(final),
    }


def metric_columns(result: RunResult) -> dict:
    """The columns placed beside n_star and accuracy (mean over the *evaluated* lengths of the balanced
    sets): nnch_accuracy and eval_complete (whether every test length was evaluated)."""
    return {"nnch_accuracy": nnch_accuracy(result), "eval_complete": bool(result.eval_complete)}


_KIND_TYPES = {"str": "string", "int": "int64", "float": "float64", "symbols": "string", "integers": "string",
               "optional_str": "string", "window": "string"}
# Every RunConfig field is a column; alphabet and periods hold the resolved values the run used.
CONFIG_COLUMNS = FIELD_NAMES
# Fixed column types: every per-run file must share one schema, or reading the folder fails
# when a column is null in one file and a string in another. The SPEC §9 columns come first.
RUN_COLUMN_TYPES = {
    "run_id": "string", "language": "string", "alphabet": "string", "pe": "string", "base": "float64",
    "periods": "string", "seed": "int64", "lr": "float64", "steps": "int64", "batch_size": "int64",
    "layers": "int64", "d_model": "int64", "heads": "int64", "n_star": "int64", "accuracy": "float64",
    "nnch_accuracy": "float64", "eval_complete": "bool",
    "n_star_worst": "int64", "worst_failure": "string", "worst_failure_margin": "float64",
    "worst_strings_tried": "int64",
    "family": "string", "family_strings_tried": "int64", "refuted_at": "int64", "family_failure": "string",
    "test_transitions_covered": "int64", "test_transitions": "int64", "final_train_accuracy": "float64",
    "predicted": "string", "predicted_by": "string", "predicted_reason": "string",
    "data": "string", "data_hash": "string",
    "pack_id": "string", "pack_size": "int64",
    "first_failure": "string", "status": "string", "error": "string", "final_loss": "float64",
    "steps_done": "int64", "wall_s": "float64", "warnings": "string", "versions": "string", "commit": "string",
}
RUN_COLUMN_TYPES.update(
    {name: _KIND_TYPES[field_kind(name)] for name in CONFIG_COLUMNS if name not in RUN_COLUMN_TYPES}
)
RUN_COLUMN_TYPES.update({"eval_complete": "bool", "config": "string"})
EVAL_COLUMN_TYPES = {"run_id": "string", "length": "int64", "accuracy": "float64", "n": "int64"}
# What a file must hold to be read as a run / eval file (older formal-rope files hold these too).
RUN_REQUIRED = ("run_id", "language", "pe", "n_star", "accuracy", "status", "config")
EVAL_REQUIRED = tuple(EVAL_COLUMN_TYPES)


def _arrow_schema(column_types: dict):
    kinds = {"string": pa.string(), "float64": pa.float64(), "int64": pa.int64(), "bool": pa.bool_()}
    return pa.schema([(name, kinds[kind]) for name, kind in column_types.items()])


def _atomic_parquet(columns: dict, column_types: dict, path: Path) -> None:
    table = pa.Table.from_pydict(columns, schema=_arrow_schema(column_types))
    with atomic_file(path, "the results file") as temporary:  # hidden, unique to this process
        pq.write_table(table, temporary)


def write_run(out: str | Path, config: RunConfig, result: RunResult) -> None:
    """Persist one finished run: evals and curve first, then the run row (its presence marks 'finished')."""
    out = ensure_results_dir(out)
    run_id = config.run_id()
    evals = {
        "run_id": [run_id] * len(result.per_length),
        "length": [int(r.length) for r in result.per_length],
        "accuracy": [float(r.accuracy) for r in result.per_length],
        "n": [int(r.n) for r in result.per_length],
    }
    _atomic_parquet(evals, EVAL_COLUMN_TYPES, out / EVALS / f"{run_id}.parquet")
    write_curve(out, run_id, result.curve, _atomic_parquet)  # OUT/curves (sweeps.curve_table)
    row = run_row(config, result, run_id)
    _atomic_parquet({key: [row[key]] for key in RUN_COLUMN_TYPES}, RUN_COLUMN_TYPES, out / RUNS / f"{run_id}.parquet")


@dataclass(frozen=True)
class Results:
    """A results folder read back: one row per run (`runs`), one per tested length (`evals`), and
    notes on what reading had to normalise (runs recorded under older run ids)."""

    runs: object  # pandas.DataFrame
    evals: object  # pandas.DataFrame
    notes: tuple[str, ...] = field(default=())


def load_results(out: str | Path):
    """(runs, evals) DataFrames of a results folder (`read_results` without the notes)."""
    results = read_results(out)
    return results.runs, results.evals


def read_results(out: str | Path) -> Results:
    """Read every run and eval file of a results folder, normalised to today's conventions.

    Each row's config columns and run id are recomputed from its stored config, so files written by
    older versions read like new ones: fields that do not apply to the run are null (NoPE's base),
    fields added since get their values, and runs whose configs are now equal (NoPE trained at two
    bases) are one run, kept once (the ok/diverged row before a failed one) with a note.
    A file that is not a readable formal-rope run/eval file is a FormalRopeError naming it."""
    out = Path(out)
    if not out.is_dir():
        raise FormalRopeError(f"{out} is not a results folder: it does not exist or is not a directory")
    run_files = _parquet_files(out / RUNS) if (out / RUNS).is_dir() else []
    if not run_files:
        raise FormalRopeError(
            f"{out} is not a results folder: no {RUNS}/*.parquet inside "
            "(run `formalrope sweep --out DIR` or `formalrope reproduce --out DIR` first)"
        )
    frames = [_read_parquet(path, RUN_REQUIRED, "run").to_pandas().assign(file=path.name) for path in run_files]
    frames, older = zip(*(_without_balanced_nnch(frame) for frame in frames))
    runs, notes = _deduplicated(_normalised_runs(out / RUNS, pd.concat(frames, ignore_index=True)))
    if any(older):
        notes.insert(0, f"{sum(older)} run file(s) were written before NNCH's score was measured on uniformly random "
                        "strings: their nnch_accuracy (the balanced accuracy over every test length, a number NNCH "
                        "never reports) reads as unknown; rerun those runs (delete their files) to measure it")
    evals = _read_evals(out / EVALS, runs)
    return Results(runs[[c for c in RUN_COLUMN_TYPES if c in runs.columns]].reset_index(drop=True), evals, tuple(notes))


def _without_balanced_nnch(frame):
    """(frame, older): a run file written before the `nnch_samples` field existed held in nnch_accuracy
    the mean *balanced* accuracy over every test length, not NNCH's score: null it there."""
    if "nnch_samples" in frame.columns or "nnch_accuracy" not in frame.columns:
        return frame, False
    return frame.assign(nnch_accuracy=None), True


def _parquet_files(folder: Path) -> list[Path]:
    """The data files of a table folder (hidden/underscore names are temporary files, skipped)."""
    return sorted(path for path in folder.glob("*.parquet") if not path.name.startswith((".", "_")))


def _read_parquet(path: Path, required: tuple[str, ...], kind: str, columns: list[str] | None = None):
    """The Arrow table of one results file; FormalRopeError naming the file when it is unreadable
    (garbage, truncated), lacks the columns a formal-rope `kind` file has (a foreign Parquet file) or
    holds a known column with another type than formal-rope writes (n_star as strings)."""
    folder = RUNS if kind == "run" else EVALS
    try:
        schema = pq.read_schema(path)
        missing = [name for name in required if name not in schema.names]
        if missing:
            raise FormalRopeError(
                f"{path} is not a formal-rope {kind} file: it lacks the column(s) {', '.join(missing)} "
                f"(its columns: {', '.join(schema.names[:12])}{', ...' if len(schema.names) > 12 else ''}); "
                "another tool's Parquet file (e.g. `formalrope sample --out`) does not belong "
                f"in {folder}/: move it elsewhere"
            )
        _check_column_types(path, schema, RUN_COLUMN_TYPES if kind == "run" else EVAL_COLUMN_TYPES, kind)
        return pq.read_table(path, columns=columns)
    except FormalRopeError:
        raise
    except (pa.ArrowException, OSError, ValueError) as error:
        raise FormalRopeError(
            f"{path} is not a readable Parquet file ({error}); it is truncated or corrupt. formal-rope writes "
            f"its files atomically, so this one was damaged or put there by hand: delete it (rerunning the "
            f"sweep recreates a run's files)"
        ) from None


def _arrow_type_fits(arrow_type, kind: str) -> bool:
    """Whether a column of `arrow_type` converts to formal-rope's `kind` without a value-level
    failure: null columns (a field no run of the file had) always do, integers widen to floats."""
    if types.is_null(arrow_type):
        return True
    if kind == "string":
        return types.is_string(arrow_type) or types.is_large_string(arrow_type)
    if kind == "int64":
        return types.is_integer(arrow_type)
    if kind == "float64":
        return types.is_integer(arrow_type) or types.is_floating(arrow_type)
    if kind == "bool":
        return types.is_boolean(arrow_type)
    raise AssertionError(kind)  # every kind of RUN_COLUMN_TYPES / EVAL_COLUMN_TYPES is handled above


def _check_column_types(path: Path, schema, column_types: dict, kind: str) -> None:
    """FormalRopeError naming the file and the columns whose stored type is not the one formal-rope
    writes (e.g. n_star as strings): reading would otherwise fail later, in some conversion, with a
    traceback. Every known column of the file is checked, whichever columns the caller reads."""
    wrong = [f"{name} ({schema.field(name).type}, expected {column_types[name]})"
             for name in schema.names if name in column_types and not _arrow_type_fits(schema.field(name).type,
                                                                                        column_types[name])]
    if wrong:
        raise FormalRopeError(
            f"{path} has column(s) of the wrong type for a formal-rope {kind} file: {', '.join(wrong)}. formal-rope "
            f"writes its files with fixed column types, so this one was rewritten or put there by hand: delete it "
            f"or move it out of {RUNS if kind == 'run' else EVALS}/ (rerunning the sweep recreates a run's files)"
        )


def _stored_config(path: Path, text) -> RunConfig:
    try:
        return RunConfig.from_dict(json.loads(text), record=True)
    except (TypeError, ValueError, FormalRopeError) as error:
        raise FormalRopeError(f"{path}: its 'config' column does not hold a RunConfig ({error})") from None


def _normalised_runs(folder: Path, frame):
    """Run rows (with their `file` name) with run id and config columns recomputed from the stored config."""
    configs = [_stored_config(folder / name, text) for name, text in zip(frame["file"], frame["config"])]
    settings = [config.to_dict() for config in configs]
    columns = {"stored_run_id": frame["run_id"], "run_id": [config.run_id() for config in configs]}
    resolved = {"alphabet", "periods"}  # the columns hold what the run used, not the config's setting
    for name in CONFIG_COLUMNS:
        if name not in resolved or name not in frame.columns:
            columns[name] = [_column_value(values[name], name) for values in settings]
    columns["periods"] = [value if config.applies("periods") else None
                          for value, config in zip(columns.get("periods", frame["periods"]), configs)]
    columns["config"] = [json.dumps(values, sort_keys=True) for values in settings]
    frame = frame.drop(columns=[name for name in columns if name in frame.columns]).assign(**columns)
    missing = {name: None for name in RUN_COLUMN_TYPES if name not in frame.columns}
    if "pack_size" in missing:
        missing["pack_size"] = 1  # written before packed training: every run trained alone
    frame = frame.assign(**missing) if missing else frame
    frame = frame.astype({name: "float64" for name, kind in RUN_COLUMN_TYPES.items() if kind == "float64"})
    # A failed run measured nothing; files written before that was recorded as null hold N* 0 for it.
    failed = (frame["status"] == "failed").to_numpy()
    measured = {"n_star": frame["n_star"].astype("float64").where(~failed),
                "n_star_worst": frame["n_star_worst"].astype("float64").where(~failed)}
    measured.update({name: frame[name].where(~failed) for name in ("accuracy", "nnch_accuracy")})
    # Nullable integers: N* stays an integer (41, not 41.0) where a failed run's is missing.
    return frame.assign(**measured).astype({name: "Int64" for name in (
        "n_star", "n_star_worst", "worst_strings_tried", "family_strings_tried", "refuted_at",
        "test_transitions_covered", "test_transitions")})


_STATUS_RANK = {"ok": 0, "diverged": 0, "failed": 1}


def _deduplicated(runs):
    """Keep one row per run id (results, then the file named by today's id); notes on the rest."""
    runs = runs.assign(
        _rank=[_STATUS_RANK.get(status, 2) for status in runs["status"]],
        _old_name=[name != f"{run_id}.parquet" for name, run_id in zip(runs["file"], runs["run_id"])],
    ).sort_values(["run_id", "_rank", "_old_name", "file"], kind="stable")
    duplicated = runs["run_id"].duplicated(keep="first")
    notes = []
    if duplicated.any():
        dropped = runs[duplicated]
        examples = "; ".join(
            f"{row.file} repeats {runs.loc[(runs['run_id'] == row.run_id) & ~duplicated, 'file'].iloc[0]}"
            for row in dropped.head(3).itertuples()
        )
        notes.append(
            f"{int(duplicated.sum())} run file(s) hold runs recorded again under an older run id (settings "
            f"that do not affect the run, such as NoPE's base, used to change the id); each run is counted "
            f"once ({examples}{'; ...' if len(dropped) > 3 else ''})"
        )
    kept = runs[~duplicated].drop(columns=["_rank", "_old_name"])
    return kept.sort_values("file", kind="stable"), notes


def _read_evals(folder: Path, runs):
    """The eval rows of the kept runs, keyed by today's run ids."""
    stored_to_current = dict(zip(runs["stored_run_id"], runs["run_id"]))
    frames = [_read_parquet(path, EVAL_REQUIRED, "eval", columns=list(EVAL_COLUMN_TYPES)).to_pandas()
              for path in (_parquet_files(folder) if folder.is_dir() else [])]
    if not frames:
        return pd.DataFrame({"run_id": [], "length": [], "accuracy": [], "n": []})
    evals = pd.concat(frames, ignore_index=True)
    evals = evals[evals["run_id"].isin(set(stored_to_current))]
    return evals.assign(run_id=evals["run_id"].map(stored_to_current)).reset_index(drop=True)
