"""Sweeps, the results folder: reading older, damaged, foreign or mistyped Parquet files."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pytest

from formal_rope.errors import FormalRopeError
from formal_rope.run_config.config import RunConfig
from formal_rope.sweeps.grid import expand_grid
from formal_rope.sweeps.report import aggregate
from formal_rope.sweeps.results import load_results
from formal_rope.sweeps.runner import run_sweep
from sweeps_support import cli as _cli
from sweeps_support import fake_runner, spec


def _legacy_config_dict(**changes) -> dict:
    """A RunConfig as formal-rope wrote it before canonical configs: every field, whatever --base the
    grid had (also for NoPE), and no test_lengths field."""
    data = {
        "language": "(ab)*", "alphabet": None, "pe": "rope", "base": 1e4, "periods": None, "rope_fraction": 0.5,
        "phase_precision": "fp64", "attention": "auto", "seed": 0, "lr": 1e-4, "steps": 3, "batch_size": 64,
        "layers": 2, "d_model": 32, "heads": 4, "ffn_mult": 4, "weight_decay": 0.01, "grad_clip": 1.0,
        "train_min_length": 0, "train_max_length": 40, "test_min_length": 41, "test_max_length": 500,
        "n_per_length": 16, "eval_mode": "full", "eval_seed": 0, "lr_schedule": "cosine", "warmup_steps": 50,
        "train_near_miss_fraction": 0.5,
    }
    data.update(changes)
    return data


def _write_legacy_run(out: Path, config: dict, status: str = "ok", n_star: int = 45) -> str:
    """One run in the old layout: the old 24 columns, files named by the old id (hash of the full dict)."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    from formal_rope.run_config.config import legacy_run_id

    run_id = legacy_run_id(config)
    row = {
        "run_id": run_id, "language": config["language"], "alphabet": "a,b", "pe": config["pe"],
        "base": config["base"], "periods": "2" if config["pe"] == "rope_p" else None, "seed": config["seed"],
        "lr": config["lr"], "steps": config["steps"], "batch_size": config["batch_size"], "layers": config["layers"],
        "d_model": config["d_model"], "heads": config["heads"], "n_star": n_star, "accuracy": 0.9,
        "first_failure": "ab" * 23, "status": status, "error": None, "final_loss": 0.1, "steps_done": 3,
        "wall_s": 1.0, "versions": "{}", "commit": None, "config": json.dumps(config, sort_keys=True),
    }
    for folder in ("runs", "evals"):
        (out / folder).mkdir(parents=True, exist_ok=True)
    pq.write_table(pa.Table.from_pylist([row]), out / "runs" / f"{run_id}.parquet")
    evals = {"run_id": [run_id] * 2, "length": [41, 42], "accuracy": [1.0, 0.5], "n": [4, 4]}
    pq.write_table(pa.Table.from_pydict(evals), out / "evals" / f"{run_id}.parquet")
    return run_id


def _damaged(folder: Path, kind: str) -> Path:
    configs = expand_grid(spec(languages=["(ab)*"], pes=["nope"], bases=[1e4], seeds=1, lrs=[1e-4]))
    run_sweep(configs, folder, runner=fake_runner)
    good = next((folder / "runs").glob("*.parquet"))
    if kind == "truncated":
        bad = folder / "runs" / "cut.parquet"
        bad.write_bytes(good.read_bytes()[: len(good.read_bytes()) // 2])
    elif kind == "garbage":
        bad = folder / "runs" / "noise.parquet"
        bad.write_bytes(b"not parquet at all")
    elif kind == "foreign":
        bad = folder / "runs" / "sample.parquet"  # the columns `formalrope sample --out x.parquet` writes
        pd.DataFrame({"string": ["ab"], "label": [True], "length": [2], "near_miss": [False]}).to_parquet(bad)
    else:
        bad = folder / "evals" / "noise.parquet"
        bad.write_bytes(b"PAR1 broken")
    return bad


def test_report_rejects_a_folder_that_is_not_results(tmp_path):
    with pytest.raises(FormalRopeError, match="not a results folder"):
        load_results(tmp_path)
    with pytest.raises(FormalRopeError, match="not a results folder"):
        load_results(tmp_path / "missing")


def test_results_with_old_run_ids_are_normalised_deduplicated_and_recognised_as_finished(tmp_path, capsys):
    from formal_rope.sweeps.results import finished_run_ids, read_results

    old_nope_1 = _write_legacy_run(tmp_path, _legacy_config_dict(pe="nope", base=1.0))
    old_nope_5 = _write_legacy_run(tmp_path, _legacy_config_dict(pe="nope", base=5.0))
    _write_legacy_run(tmp_path, _legacy_config_dict(pe="rope", base=1.0), n_star=60)
    _write_legacy_run(tmp_path, _legacy_config_dict(pe="rope_p", base=1.0, seed=1), status="failed", n_star=0)
    results = read_results(tmp_path)
    runs = results.runs.set_index("pe")
    # The two NoPE files are one run today (NoPE has no base): kept once, with a note.
    assert len(results.runs) == 3 and pd.isna(runs.loc["nope", "base"]) and runs.loc["rope", "base"] == 1.0
    nope = RunConfig.from_dict(_legacy_config_dict(pe="nope", base=1.0))
    assert runs.loc["nope", "run_id"] == nope.run_id() not in (old_nope_1, old_nope_5)
    assert any("older run id" in note for note in results.notes)
    # Columns that did not exist then are filled from the stored config.
    assert runs.loc["rope", "train_near_miss_fraction"] == 0.5 and runs.loc["rope", "lr_schedule"] == "cosine"
    assert set(results.evals["run_id"]) == set(results.runs["run_id"]) and len(results.evals) == 3 * 2
    # A rerun recognises the old finished runs by today's ids and retries only the failed one.
    assert finished_run_ids(tmp_path) == {nope.run_id(), RunConfig.from_dict(_legacy_config_dict(base=1.0)).run_id()}
    calls = []
    rerun = [RunConfig.from_dict(_legacy_config_dict(pe=pe, base=1.0, seed=seed)) for pe, seed in
             (("nope", 0), ("rope", 0), ("rope_p", 1))]
    run_sweep(rerun, tmp_path, runner=lambda config: calls.append(config.pe) or fake_runner(config))
    assert calls == ["rope_p"]
    results = read_results(tmp_path)
    assert len(results.runs) == 3 and set(results.runs["status"]) == {"ok"}  # the retry replaces the failure
    code, stdout, _ = _cli(capsys, ["report", str(tmp_path)])
    assert code == 0 and "older run id" in " ".join(stdout.split())


@pytest.mark.parametrize("kind", ["truncated", "garbage", "foreign", "evals"])
def test_damaged_or_foreign_result_files_are_user_errors_naming_the_file(tmp_path, capsys, kind):
    # Regression (issue 9.3): report and sweep --out raised pyarrow tracebacks on such files.
    from formal_rope.sweeps.results import finished_run_ids

    bad = _damaged(tmp_path / "r", kind)
    code, _, stderr = _cli(capsys, ["report", str(tmp_path / "r")])
    assert code == 2 and str(bad) in stderr and "Traceback" not in stderr
    assert ("not a formal-rope run file" if kind == "foreign" else "not a readable Parquet file") in stderr
    if kind != "evals":
        with pytest.raises(FormalRopeError, match=bad.name):
            finished_run_ids(tmp_path / "r")
        code, _, stderr = _cli(capsys, ["sweep", "--lang", "(ab)*", "--pe", "nope", "--seeds", "2", "--steps", "2",
                                        "--out", str(tmp_path / "r")])
        assert code == 2 and str(bad) in stderr and "Traceback" not in stderr
        assert len(list((tmp_path / "r" / "runs").glob("*.parquet"))) == 2  # nothing was trained


def test_failed_runs_of_older_files_read_as_unmeasured(tmp_path):
    # Files written before failed runs had a null N* recorded 0; read back, they measure nothing.
    from formal_rope.sweeps.results import read_results

    _write_legacy_run(tmp_path, _legacy_config_dict(pe="nope", seed=0), n_star=45)
    _write_legacy_run(tmp_path, _legacy_config_dict(pe="nope", seed=1), status="failed", n_star=0)
    runs = read_results(tmp_path).runs.set_index("seed")
    assert runs.loc[0, "n_star"] == 45 and pd.isna(runs.loc[1, "n_star"]) and pd.isna(runs.loc[1, "accuracy"])
    (row,) = aggregate(runs.reset_index())
    assert (row.runs, row.n_stars, row.n_star_max, row.n_star_std) == (2, (45,), 45.0, 0.0)


@pytest.mark.parametrize(
    "folder, column, values",
    [
        ("runs", "n_star", ["41x"]),
        ("runs", "accuracy", ["0.5"]),
        ("runs", "eval_complete", ["yes"]),
        ("runs", "status", [1]),
        ("runs", "steps_done", [2.5]),
        ("evals", "length", ["41"]),
        ("evals", "accuracy", ["high"]),
    ],
)
def test_result_files_with_columns_of_the_wrong_type_are_user_errors_naming_the_file(tmp_path, capsys, folder,
                                                                                     column, values):
    # Regression: a runs/ file whose n_star held strings ended `report` in `ValueError: could not
    # convert string to float` (a traceback) instead of the one-paragraph error naming the file.
    import pyarrow as pa
    import pyarrow.parquet as pq

    from formal_rope.sweeps.results import finished_run_ids

    configs = expand_grid(spec(languages=["(ab)*"], pes=["nope"], bases=[1e4], seeds=2, lrs=[1e-4]))
    run_sweep(configs, tmp_path / "r", runner=fake_runner)
    path = sorted((tmp_path / "r" / folder).glob("*.parquet"))[0]
    table = pq.read_table(path)
    rewritten = table.set_column(table.schema.get_field_index(column), column, pa.array(values * table.num_rows))
    pq.write_table(rewritten, path)
    code, _, stderr = _cli(capsys, ["report", str(tmp_path / "r")])
    message = " ".join(stderr.split())
    assert code == 2 and "Traceback" not in stderr and str(path) in message, stderr
    assert f"wrong type for a formal-rope {folder[:-1]} file: {column} (" in message and stderr.count("\n") == 1
    with pytest.raises(FormalRopeError, match=path.name):
        finished_run_ids(tmp_path / "r")
    code, _, stderr = _cli(capsys, ["sweep", "--lang", "(ab)*", "--pe", "nope", "--seeds", "3", "--steps", "2",
                                    "--out", str(tmp_path / "r")])
    assert code == 2 and str(path) in " ".join(stderr.split()) and "Traceback" not in stderr
    assert len(list((tmp_path / "r" / "runs").glob("*.parquet"))) == 2  # nothing was trained


def test_an_alphabet_equal_to_the_languages_own_is_one_run_also_in_old_results(tmp_path, capsys):
    # Regression: `--alphabet ab` on (ab)* was another run id than no --alphabet, for the same training.
    def ids(*argv):
        code, stdout, _ = _cli(capsys, ["sweep", "--lang", "(ab)*", "--seeds", "1", "--dry-run", "--json", *argv])
        assert code == 0
        return [run["run_id"] for run in json.loads(stdout)]

    assert ids("--alphabet", "ab") == ids() == ids("--alphabet", "a,b") != ids("--alphabet", "ba")
    assert RunConfig("ab_star", alphabet=("a", "b")) == RunConfig("ab_star")
    assert RunConfig("a.*", alphabet=("a", "b")).alphabet == ("a", "b")  # it needs one: kept
    # Results written before: the run with alphabet a,b and the one without are one run, read once,
    # under today's id, and a rerun skips it.
    from formal_rope.sweeps.results import finished_run_ids, read_results

    _write_legacy_run(tmp_path, _legacy_config_dict(alphabet=["a", "b"]))
    _write_legacy_run(tmp_path, _legacy_config_dict())
    results = read_results(tmp_path)
    today = RunConfig.from_dict(_legacy_config_dict()).run_id()
    assert list(results.runs["run_id"]) == [today] and any("older run id" in note for note in results.notes)
    assert finished_run_ids(tmp_path) == {today}
