"""Sweeps: grid expansion, TOML validation, atomic per-run results, skipping, reports and plots.

Training itself is replaced by a deterministic fake runner (the trainer has its own tests); one
end-to-end test runs a real tiny sweep through the CLI.
"""

from __future__ import annotations

import dataclasses
import json
import math
from pathlib import Path

import pandas as pd
import pytest

from formal_rope.errors import FormalRopeError
from formal_rope.sweeps.grid import build_spec, expand_grid, load_sweep_file
from formal_rope.sweeps.report import aggregate, plot_n_star
from formal_rope.sweeps.results import load_results
from formal_rope.sweeps.runner import run_sweep
from formal_rope.training.config import LengthResult, RunConfig, RunResult

REPO = Path(__file__).resolve().parents[1]


def fake_runner(config: RunConfig) -> RunResult:
    """N* depends on the PE and seed so that aggregation has something to check."""
    n_star = {"rope_p": 500, "nope": 41 + 10 * config.seed}.get(config.pe, 60)
    per_length = tuple(LengthResult(length, 1.0 if length <= n_star else 0.5, 4) for length in range(41, 51))
    accuracy = sum(r.accuracy for r in per_length) / len(per_length)
    return RunResult(
        run_id=config.run_id(), config=config, status="ok", n_star=n_star, accuracy=accuracy,
        per_length=per_length, first_failure=None if n_star >= 50 else "ab" * 25, steps_done=config.steps,
        wall_s=0.01, versions={"torch": "x"},
    )


def crashing_runner(config: RunConfig) -> RunResult:
    if config.seed == 1:
        raise RuntimeError("boom")
    return fake_runner(config)


class Interrupt(BaseException):
    pass


def spec(**kwargs):
    defaults = dict(name="t", languages=["(aa)*", "(ab)*"], pes=["nope", "rope_p", "rope"], bases=[1.0, 1e4],
                    seeds=2, lrs=[1e-4, 3e-4], scale="quick", overrides={"steps": 3})
    defaults.update(kwargs)
    return build_spec(**defaults)


def test_grid_expansion_counts_and_base_free_pes():
    configs = expand_grid(spec())
    # per language: nope and rope_p ignore the base (2 seeds x 2 lrs each), rope has 2 bases x 4.
    assert len(configs) == 2 * (4 + 4 + 8)
    assert len({c.run_id() for c in configs}) == len(configs)
    assert {c.base for c in configs if c.pe == "rope"} == {1.0, 1e4}
    assert all(c.steps == 3 for c in configs)
    assert {c.seed for c in configs} == {0, 1}


def test_run_id_is_a_hash_of_the_full_config():
    config = RunConfig(language="(ab)*", pe="rope", steps=10)
    assert config.run_id() == RunConfig(language="(ab)*", pe="rope", steps=10).run_id()
    assert config.run_id() != config.with_(steps=11).run_id()
    assert RunConfig.from_dict(config.to_dict()) == config


def test_bad_grid_values_are_user_errors():
    with pytest.raises(FormalRopeError, match="unknown positional encoding 'ropee'"):
        spec(pes=["ropee"])
    with pytest.raises(FormalRopeError, match="base must be > 0"):
        spec(bases=[0.0])
    with pytest.raises(FormalRopeError, match="periods must be positive"):
        spec(periods=[2, 0])


def test_toml_unknown_key_is_named_with_its_line(tmp_path):
    path = tmp_path / "bad.toml"
    path.write_text('name = "x"\nlanguages = ["(ab)*"]\npes = ["rope"]\n\n[quick]\nsteps = 5\nstepz = 6\n')
    with pytest.raises(FormalRopeError) as error:
        load_sweep_file(path)
    assert "stepz" in str(error.value) and f"{path}:7" in str(error.value)
    path.write_text('name = "x"\nlanguage = ["(ab)*"]\n')
    with pytest.raises(FormalRopeError, match=r"bad.toml:2: unknown key 'language'"):
        load_sweep_file(path)


@pytest.mark.parametrize("experiment", ["ablation", "ablation45", "stability", "joformer"])
def test_experiment_files_expand_and_quote_the_papers_tables_exactly(experiment):
    # Our experiments' [reference] rows must be the paper's own rows (copied from the table files),
    # and every grid cell a variant labels must exist at quick and medium scale.
    from formal_rope.sweeps.grid import paper_sweep_path

    paper_rows = {}
    for table in ("table2", "table4", "table5"):
        for row in load_sweep_file(paper_sweep_path(table))[0].reference["rows"]:
            paper_rows.setdefault((row[0], row[1], row[2]), row)
    for scale in ("quick", "medium"):
        spec_, _ = load_sweep_file(paper_sweep_path(experiment), scale)
        configs = expand_grid(spec_)
        assert configs and len({c.run_id() for c in configs}) == len(configs)
        if spec_.variants:  # at quick scale every variant changes the recipe; at medium some coincide
            cells = len(spec_.variants) * len(expand_grid(dataclasses.replace(spec_, variants=())))
            assert len(configs) == cells if scale == "quick" else len(configs) <= cells
        for row in (spec_.reference or {}).get("rows", []):
            assert str(paper_rows[(row[0], row[1], row[2])][3:]) == str(row[3:]), row


@pytest.mark.parametrize("name", ["table2", "table4", "table5"])
def test_paper_sweep_files_load_at_both_scales(name):
    quick, _ = load_sweep_file(REPO / "sweeps" / f"{name}.toml", "quick")
    paper, _ = load_sweep_file(REPO / "sweeps" / f"{name}.toml", "paper")
    assert paper.overrides["layers"] == 5 and paper.overrides["d_model"] == 64 and paper.overrides["heads"] == 8
    assert paper.overrides["steps"] == 1_000_000 and paper.overrides["n_per_length"] == 512
    assert len(paper.seeds) == 5 and paper.lrs == (1e-4, 3e-4, 5e-4)
    for spec_ in (quick, paper):
        configs = expand_grid(spec_)
        assert all(c.test_min_length == 41 and c.test_max_length == 500 for c in configs)
    assert len(expand_grid(quick)) < len(expand_grid(paper))
    from formal_rope.training.scales import SCALES

    # Grid axes the file leaves out come from the scale preset.
    assert quick.lrs == tuple(SCALES["quick"]["lrs"])
    assert quick.seeds == tuple(SCALES["quick"]["seeds"])
    assert quick.reference["rows"]


def test_sweep_writes_parquet_and_rerun_skips_finished(tmp_path):
    configs = expand_grid(spec(languages=["(ab)*"], pes=["nope", "rope_p"], bases=[1e4], seeds=2, lrs=[1e-4]))
    summary = run_sweep(configs, tmp_path, runner=fake_runner)
    assert summary.completed == 4 and summary.skipped == 0
    runs, evals = load_results(tmp_path)
    required = {"run_id", "language", "alphabet", "pe", "base", "periods", "seed", "lr", "steps", "batch_size",
                "layers", "d_model", "heads", "n_star", "accuracy", "first_failure", "status", "wall_s",
                "versions", "commit"}
    assert required <= set(runs.columns)
    assert sorted(runs["run_id"]) == sorted(c.run_id() for c in configs)
    assert len(evals) == 4 * 10 and set(evals.columns) >= {"run_id", "length", "accuracy", "n"}
    assert json.loads(runs["versions"].iloc[0]) == {"torch": "x"}

    calls = []

    def counting_runner(config):
        calls.append(config)
        return fake_runner(config)

    more = configs + expand_grid(spec(languages=["(ab)*"], pes=["nope"], bases=[1e4], seeds=[7], lrs=[1e-4]))
    summary = run_sweep(more, tmp_path, runner=counting_runner)
    assert summary.skipped == 4 and [c.seed for c in calls] == [7]
    assert len(load_results(tmp_path)[0]) == 5


def test_interrupted_sweep_keeps_finished_runs_and_no_partial_files(tmp_path):
    configs = expand_grid(spec(languages=["(ab)*"], pes=["nope"], bases=[1e4], seeds=4, lrs=[1e-4]))

    def interrupting_runner(config):
        if config.seed == 2:
            raise Interrupt()
        return fake_runner(config)

    with pytest.raises(Interrupt):
        run_sweep(configs, tmp_path, runner=interrupting_runner)
    runs, _ = load_results(tmp_path)
    assert sorted(runs["seed"]) == [0, 1]
    assert not [p for p in (tmp_path / "runs").iterdir() if not p.name.endswith(".parquet")]


def test_failed_run_is_recorded_and_sweep_goes_on(tmp_path):
    configs = expand_grid(spec(languages=["(ab)*"], pes=["nope"], bases=[1e4], seeds=3, lrs=[1e-4]))
    summary = run_sweep(configs, tmp_path, runner=crashing_runner)
    assert summary.statuses == {"ok": 2, "failed": 1}
    runs, _ = load_results(tmp_path)
    failed = runs[runs["status"] == "failed"].iloc[0]
    assert failed["seed"] == 1 and "boom" in failed["error"]


def test_parallel_workers_give_the_same_rows(tmp_path):
    configs = expand_grid(spec(languages=["(ab)*"], pes=["nope", "rope"], bases=[1.0], seeds=2, lrs=[1e-4]))
    run_sweep(configs, tmp_path / "serial", runner=fake_runner)
    run_sweep(configs, tmp_path / "parallel", runner=fake_runner, workers=2)
    serial = load_results(tmp_path / "serial")[0].sort_values("run_id").reset_index(drop=True)
    parallel = load_results(tmp_path / "parallel")[0].sort_values("run_id").reset_index(drop=True)
    pd.testing.assert_frame_equal(serial[["run_id", "n_star", "accuracy"]], parallel[["run_id", "n_star", "accuracy"]])


def test_aggregate_matches_pandas_statistics_and_plot(tmp_path):
    configs = expand_grid(spec(languages=["(aa)*"], pes=["nope", "rope_p", "rope"], bases=[1.0, 1e4], seeds=3, lrs=[1e-4]))
    run_sweep(configs, tmp_path, runner=fake_runner)
    runs, _ = load_results(tmp_path)
    rows = {(r.pe, r.base): r for r in aggregate(runs)}
    nope = rows[("nope", None)]
    assert nope.runs == 3 and nope.n_star_max == 61 and math.isclose(nope.n_star_mean, 51.0)
    assert math.isclose(nope.n_star_std, pd.Series([41.0, 51.0, 61.0]).std())
    assert rows[("rope_p", None)].n_star_mean == 500
    assert set(rows) == {("nope", None), ("rope_p", None), ("rope", 1.0), ("rope", 1e4)}
    png = plot_n_star(list(rows.values()), tmp_path / "fig.png")
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_report_rejects_a_folder_that_is_not_results(tmp_path):
    with pytest.raises(FormalRopeError, match="not a results folder"):
        load_results(tmp_path)
    with pytest.raises(FormalRopeError, match="not a results folder"):
        load_results(tmp_path / "missing")


# ----------------------------------------------------------------------------------------------
# Regressions found in the acceptance pass


def resolving_runner(config: RunConfig) -> RunResult:
    """What the real trainer records: the alphabet and periods it resolved."""
    from dataclasses import replace

    return replace(fake_runner(config), alphabet=("a", "b"), resolved_periods=(2,) if config.pe == "rope_p" else None)


def dying_runner(config: RunConfig) -> RunResult:
    import os

    if config.seed == 1:
        os._exit(3)  # a worker killed (e.g. for memory) mid-run
    return fake_runner(config)


def test_results_record_the_resolved_alphabet_and_periods(tmp_path):
    # Regression: with periods "auto" and the language's own alphabet, both columns were null.
    configs = expand_grid(spec(languages=["(ab)*"], pes=["rope_p", "nope"], bases=[1e4], seeds=1, lrs=[1e-4]))
    assert all(c.periods is None and c.alphabet is None for c in configs)
    run_sweep(configs, tmp_path, runner=resolving_runner)
    runs = load_results(tmp_path)[0].set_index("pe")
    assert runs.loc["rope_p", "periods"] == "2" and runs.loc["rope_p", "alphabet"] == "a,b"
    assert pd.isna(runs.loc["nope", "periods"])


def test_failed_runs_are_retried_on_rerun_and_finished_ones_skipped(tmp_path):
    configs = expand_grid(spec(languages=["(ab)*"], pes=["nope"], bases=[1e4], seeds=3, lrs=[1e-4]))
    run_sweep(configs, tmp_path, runner=crashing_runner)
    calls = []

    def counting_runner(config):
        calls.append(config.seed)
        return fake_runner(config)

    summary = run_sweep(configs, tmp_path, runner=counting_runner)
    assert calls == [1] and summary.skipped == 2
    runs = load_results(tmp_path)[0]
    assert len(runs) == 3 and set(runs["status"]) == {"ok"}


def test_a_dead_worker_fails_its_run_and_the_sweep_goes_on(tmp_path):
    # Regression: BrokenProcessPool escaped run_sweep (a traceback) and the rest of the grid never ran.
    configs = expand_grid(spec(languages=["(ab)*"], pes=["nope"], bases=[1e4], seeds=6, lrs=[1e-4]))
    summary = run_sweep(configs, tmp_path, runner=dying_runner, workers=2)
    runs = load_results(tmp_path)[0].set_index("seed")
    assert summary.completed == 6 and len(runs) == 6
    assert runs.loc[1, "status"] == "failed" and "worker process died" in runs.loc[1, "error"]
    failed = runs[runs["status"] == "failed"]
    assert all("worker process died" in error for error in failed["error"])
    # With 2 workers at most one other run was in flight when seed 1's worker died: every other run
    # finished before the crash or ran in the fresh pool.
    assert len(failed) <= 2 and set(runs["status"]) <= {"ok", "failed"}


@pytest.mark.parametrize(
    "body, message",
    [
        ('[quick]\nsteps = "many"\n', r"x.toml:4: 'steps' in \[quick\] must be an integer"),
        ("[quick]\nlr = 1e-3\n", r"'lr' in \[quick\] is a grid axis; set 'lrs'"),
        ('[quick]\nseeds = [0, "x"]\n', "'seeds' must be a count"),
        ('bases = ["big"]\n', "'bases' must hold numbers"),
        ("periods = [2.5]\n", "'periods' must be"),
        ("[reference]\nrows = [[1, 2]]\n", "every \\[reference\\] row must be"),
    ],
)
def test_toml_values_of_the_wrong_type_are_user_errors(tmp_path, body, message):
    # Regression: these raised ValueError tracebacks or were silently accepted (lr ignored).
    path = tmp_path / "x.toml"
    path.write_text('name = "x"\nlanguages = ["(ab)*"]\n' + body)
    with pytest.raises(FormalRopeError, match=message):
        load_sweep_file(path)


def test_toml_alphabet_string_is_split_into_symbols(tmp_path):
    path = tmp_path / "x.toml"
    path.write_text('languages = ["(ab)*"]\nalphabet = "ab"\n')
    assert load_sweep_file(path)[0].alphabet == ("a", "b")


def _cli(capsys, argv):
    from cli_support import run_main

    return run_main(capsys, argv)


def test_sweep_cli_checks_every_run_before_training(tmp_path, capsys):
    # Regression: a bad language or setting became one `failed` run per grid point.
    bad = tmp_path / "bad.toml"
    bad.write_text('languages = ["(ab)*"]\n[quick]\nlayers = 0\n')
    for argv, message in [
        (["sweep", "--lang", "(ab", "--out", str(tmp_path / "r1")], "unbalanced parentheses"),
        (["sweep", "--config", str(bad), "--out", str(tmp_path / "r2")], "layers must be positive"),
        (["sweep", "--lang", "(ab)*", "--eval", "some", "--dry-run"], "unknown eval mode"),
        (["sweep", "--lang", "(ab)*", "--pe", "rope_p", "--periods", "x", "--dry-run"], "--periods"),
        (["sweep", "--lang", "∅", "--alphabet", "ab", "--dry-run"], "cannot train on"),
    ]:
        code, _, stderr = _cli(capsys, argv)
        assert code == 2 and message in stderr and "Traceback" not in stderr, (argv, stderr)
    assert not (tmp_path / "r1").exists() and not (tmp_path / "r2").exists()
    blocker = tmp_path / "file"
    blocker.write_text("")
    code, _, stderr = _cli(capsys, ["sweep", "--lang", "(ab)*", "--seeds", "1", "--out", str(blocker)])
    assert code == 2 and "cannot use" in stderr and "Traceback" not in stderr
    # --alphabet is read like `train --alphabet`: 'abc' is three symbols, not one symbol "abc".
    # ('ab' is (ab)*'s own alphabet, which the config drops: the same run as without --alphabet.)
    code, stdout, _ = _cli(capsys, ["sweep", "--lang", "(ab)*", "--alphabet", "abc", "--seeds", "1", "--dry-run", "--json"])
    assert code == 0 and json.loads(stdout)[0]["alphabet"] == ["a", "b", "c"]


def test_sweep_and_reproduce_json_are_single_strict_documents(tmp_path, capsys, monkeypatch):
    # Regression: `reproduce all --json` printed three JSON documents one after another, and NaN
    # (diverged runs) was printed as a bare token.
    import formal_rope.sweeps.runner as runner_module

    real_run_sweep = runner_module.run_sweep

    def diverging_runner(config):
        from dataclasses import replace

        result = fake_runner(config)
        return replace(result, status="diverged", accuracy=float("nan")) if config.pe == "nope" else result

    monkeypatch.setattr(runner_module, "run_sweep", lambda *a, **k: real_run_sweep(*a, **{**k, "runner": diverging_runner}))

    def strict(text):
        return json.loads(text, parse_constant=lambda token: pytest.fail(f"non-standard JSON token {token}"))

    code, stdout, _ = _cli(capsys, ["sweep", "--lang", "(ab)*", "--pe", "nope,rope", "--seeds", "1",
                                    "--out", str(tmp_path / "s"), "--json"])
    payload = strict(stdout)
    assert code == 0 and payload["sweep"]["completed"] == 2 and payload["statuses"] == {"diverged": 1, "ok": 1}
    code, stdout, _ = _cli(capsys, ["reproduce", "all", "--seeds", "1", "--out", str(tmp_path / "r"), "--json"])
    payload = strict(stdout)
    assert code == 0 and set(payload) == {"table2", "table4", "table5"}
    assert all(table["rows"] for table in payload.values())
    assert (tmp_path / "r" / "table5" / "table5.png").exists()


def test_report_table_is_not_squeezed_and_bad_plot_path_is_a_user_error(tmp_path, capsys):
    configs = expand_grid(spec(languages=["(ab)*"], pes=["nope", "rope"], bases=[1e4], seeds=2, lrs=[1e-4]))
    run_sweep(configs, tmp_path, runner=fake_runner)
    reference = REPO / "sweeps" / "table4.toml"
    code, stdout, _ = _cli(capsys, ["report", str(tmp_path), "--reference", str(reference)])
    # Off a terminal Rich assumes 80 columns; the 9-column table with the paper column was cut.
    assert code == 0 and "language" in stdout and "paper: acc max / N* max (mean)" in stdout and "…" not in stdout
    code, stdout, _ = _cli(capsys, ["report", str(tmp_path), "--json"])
    assert code == 0 and set(json.loads(stdout)) == {"results", "by", "runs", "evals", "statuses", "rows", "notes", "plot"}
    blocker = tmp_path / "file"
    blocker.write_text("")
    code, _, stderr = _cli(capsys, ["report", str(tmp_path), "--plot", str(blocker / "fig.png")])
    assert code == 2 and "cannot write the plot" in stderr and "Traceback" not in stderr


def test_report_notes_rows_that_mix_settings_beyond_seeds_and_lrs(tmp_path, capsys):
    # A results folder reused with other --steps used to be averaged together without a word.
    from formal_rope.sweeps.report import mixed_settings

    grid = dict(languages=["(ab)*"], pes=["rope"], bases=[1e4], seeds=2, lrs=[1e-4, 3e-4])
    run_sweep(expand_grid(spec(**grid)), tmp_path, runner=fake_runner)
    assert mixed_settings(load_results(tmp_path)[0]) == []  # seeds and lrs are what rows aggregate
    run_sweep(expand_grid(spec(**grid, overrides={"steps": 7})), tmp_path, runner=fake_runner)
    assert mixed_settings(load_results(tmp_path)[0]) == [("(ab)*", "rope", 1e4, {"steps": ["3", "7"]})]
    code, stdout, _ = _cli(capsys, ["report", str(tmp_path)])
    assert code == 0 and "aggregates runs with different settings (steps 3, 7)" in " ".join(stdout.split())


def test_reproduce_reads_the_sweep_file_the_library_names(tmp_path, capsys, monkeypatch):
    # `reproduce` used its own lookup (commands/sweep.py:sweeps_dir); now it asks
    # formal_rope.sweeps.paper_sweep_path, so a Python user gets the very file the CLI runs.
    import formal_rope.sweeps.grid as grid_module
    import formal_rope.sweeps.runner as runner_module
    from formal_rope.sweeps import paper_sweep_path

    asked = []
    mini = tmp_path / "mini.toml"
    mini.write_text('name = "table4"\nlanguages = ["(ab)*"]\npes = ["nope"]\n[quick]\nseeds = [0]\n')

    def recording_lookup(table):
        asked.append(table)
        return mini

    real_run_sweep = runner_module.run_sweep
    monkeypatch.setattr(grid_module, "paper_sweep_path", recording_lookup)
    monkeypatch.setattr(runner_module, "run_sweep", lambda *a, **k: real_run_sweep(*a, **{**k, "runner": fake_runner}))
    code, stdout, _ = _cli(capsys, ["reproduce", "table4", "--out", str(tmp_path / "r"), "--json"])
    assert code == 0 and asked == ["table4"]
    assert [row["pe"] for row in json.loads(stdout)["rows"]] == ["nope"]  # the mini grid, not the paper's
    assert paper_sweep_path("table4") == REPO / "sweeps" / "table4.toml"


# ----------------------------------------------------------------------------------------------
# Issue 9: nothing silently wrong (results files, base-free ids, limits, report details)


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

    from formal_rope.training.config import legacy_run_id

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


def test_base_free_encodings_have_a_null_base_and_one_id_across_bases(tmp_path, capsys):
    # Regression (issue 9.4): NoPE/RoPE_P/SiPE_P rows carried the grid's base and the id hashed it, so
    # `--base 1` and `--base 5` trained NoPE twice and runs.query('base == 1.0') mixed NoPE with RoPE β=1.
    ids = []
    for base in ("1", "5"):
        code, stdout, _ = _cli(capsys, ["sweep", "--lang", "(ab)*", "--pe", "nope,rope_p,sipe_p", "--base", base,
                                        "--seeds", "1", "--dry-run", "--json"])
        assert code == 0
        ids.append({run["pe"]: run["run_id"] for run in json.loads(stdout)})
        assert all(run["base"] is None for run in json.loads(stdout))
    assert ids[0] == ids[1]
    configs = expand_grid(spec(languages=["(ab)*"], pes=["nope", "rope"], bases=[1.0, 5.0], seeds=1, lrs=[1e-4]))
    assert sorted(c.pe for c in configs) == ["nope", "rope", "rope"]
    run_sweep(configs, tmp_path, runner=fake_runner)
    runs = pd.read_parquet(tmp_path / "runs")
    assert list(runs.query("base == 1.0")["pe"]) == ["rope"]
    assert runs.set_index("pe").loc["nope", "base"] != runs.set_index("pe").loc["nope", "base"]  # NaN (null)


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


def test_report_names_base_and_lr_in_failure_lines_and_shows_no_nan_for_diverged_rows(tmp_path, capsys):
    # Regression (issue 9.9): two identical-looking failure lines (β missing), and `nan±0.000` with
    # std 0.0 in JSON for a row whose only run diverged.
    from dataclasses import replace

    def runner(config):
        result = replace(fake_runner(config), first_failure="ab" * 21)
        return replace(result, status="diverged", accuracy=float("nan")) if config.pe == "sipe" else result

    grid = spec(languages=["(ab)*"], pes=["rope", "sipe"], bases=[1.0, 1e4], seeds=1, lrs=[1e-4, 3e-4])
    run_sweep([c for c in expand_grid(grid) if not (c.pe == "sipe" and c.lr > 2e-4)], tmp_path, runner=runner)
    code, stdout, _ = _cli(capsys, ["report", str(tmp_path)])
    text = " ".join(stdout.split())
    assert code == 0 and "nan" not in text
    assert "RoPE_NP β=1 seed=0 lr=0.0001" in text and "RoPE_NP β=1e4 seed=0 lr=0.0003" in text
    failure_lines = [line for line in stdout.splitlines() if "N*=" in line]
    assert len(failure_lines) == len(set(failure_lines)) == 6
    code, stdout, _ = _cli(capsys, ["report", str(tmp_path), "--json"])
    rows = {(r["pe"], r["base"]): r for r in json.loads(stdout)["rows"]}
    assert rows[("sipe", 1.0)]["accuracy_mean"] is None and rows[("sipe", 1.0)]["accuracy_std"] is None
    assert rows[("rope", 1.0)]["accuracy_std"] is not None


def test_report_reference_takes_a_paper_table_name(tmp_path, capsys):
    # Regression (issue 9.11): `--reference table2` was read as a (missing) file path.
    configs = expand_grid(spec(languages=["(aa)*"], pes=["nope", "rope_p"], bases=[1e4], seeds=1, lrs=[1e-4]))
    run_sweep(configs, tmp_path, runner=fake_runner)
    code, stdout, _ = _cli(capsys, ["report", str(tmp_path), "--reference", "table2"])
    assert code == 0 and "0.500 / 41" in stdout and "1.000 / 500" in stdout
    code, _, stderr = _cli(capsys, ["report", str(tmp_path), "--reference", "table9"])
    assert code == 2 and "neither a paper table" in stderr


def test_out_options_create_missing_parent_folders(tmp_path, capsys, monkeypatch):
    # Issue 9.11: one rule for every --out (and --plot): missing folders are created.
    import formal_rope.sweeps.runner as runner_module

    real_run_sweep = runner_module.run_sweep
    monkeypatch.setattr(runner_module, "run_sweep", lambda *a, **k: real_run_sweep(*a, **{**k, "runner": fake_runner}))
    deep = tmp_path / "a" / "b"
    code, _, _ = _cli(capsys, ["sweep", "--lang", "(ab)*", "--pe", "nope", "--seeds", "1", "--out", str(deep / "s")])
    assert code == 0 and (deep / "s" / "runs").is_dir()
    code, _, _ = _cli(capsys, ["report", str(deep / "s"), "--plot", str(tmp_path / "p" / "q" / "fig.png")])
    assert code == 0 and (tmp_path / "p" / "q" / "fig.png").is_file()
    code, stdout, _ = _cli(capsys, ["reproduce", "table2", "--seeds", "1", "--out", str(tmp_path / "x" / "y" / "t2")])
    assert code == 0 and (tmp_path / "x" / "y" / "t2" / "table2.png").is_file()
    # Issue 12.3: the known quick-scale deviations, one line each, pointing to their findings section.
    assert stdout.count("deviation:") == 4 and "docs/findings.md#stable-rope_p" in stdout.replace("\n", "")


def test_reproduce_help_states_the_measured_time():
    # Regression (issue 9.11): the help said ~15 min where the README measured ~3.5 min. The help's
    # estimate must stay within a minute of the README's measured wall time of the main job.
    import re as regex

    import typer

    from formal_rope.cli import app

    command = typer.main.get_command(app).commands["reproduce"]
    scale_help = next(p.help for p in command.params if p.name == "scale")
    readme = (REPO / "README.md").read_text()
    minutes, seconds = regex.search(r"\*\*(\d+) min\s+(\d+) s\*\*\s+wall", readme).groups()
    stated = float(regex.search(r"table2: about ([\d.]+) min", scale_help).group(1))
    assert abs(stated - (int(minutes) + int(seconds) / 60)) <= 1.0, (stated, minutes, seconds)


@pytest.mark.parametrize(
    "argv, message",
    [
        (["sweep", "--lang", "(ab)*", "--workers", "0", "--dry-run"], "--workers must be at least 1"),
        (["sweep", "--lang", "(ab)*", "--workers", "-2", "--dry-run"], "--workers must be at least 1"),
        (["sweep", "--lang", "(ab)*", "--seeds", "0", "--dry-run"], "at least one seed"),
        (["sweep", "--lang", "(ab)*", "--seeds", "-3", "--dry-run"], "at least one seed"),
        (["sweep", "--lang", "(ab)*", "--seeds", "99999999999", "--dry-run"], "more than a sweep may run"),
        (["sweep", "--lang", "(ab)*", "--n-per-length", "0", "--dry-run"], "n_per_length must be positive"),
        (["sweep", "--lang", "(ab)*", "--steps", "-1", "--dry-run"], "steps must be non-negative"),
        (["sweep", "--lang", "(ab)*", "--steps", "99999999999999999999", "--dry-run"], "cannot finish"),
        (["sweep", "--lang", "(ab)*", "--test-lengths", "41..99999999999", "--dry-run"], "cannot finish"),
        (["reproduce", "table2", "--workers", "0"], "--workers must be at least 1"),
        (["reproduce", "table2", "--seeds", "-1"], "at least one seed"),
        (["reproduce", "table2", "--steps", "99999999999999999999"], "cannot finish"),
    ],
)
def test_counts_out_of_range_and_runs_that_cannot_finish_are_refused_up_front(argv, message, capsys, tmp_path):
    # Regression (issue 9.7): huge values started runs with ETAs in the hundreds of thousands of hours,
    # and --workers 0 was accepted.
    code, _, stderr = _cli(capsys, [*argv, *(["--out", str(tmp_path / "r")] if argv[0] == "reproduce" else [])])
    assert code == 2 and message in stderr and "Traceback" not in stderr, stderr
    assert not (tmp_path / "r").exists()


def test_sweep_notes_options_without_effect_and_refuses_auto_periods_outside_ltl_p_mod(capsys):
    # Issue 9.12: `--base` on a base-free grid and periods auto on Σ*a (period 1 = NoPE) were silent.
    code, _, stderr = _cli(capsys, ["sweep", "--lang", "(ab)*", "--pe", "nope", "--base", "1", "--dry-run"])
    assert code == 0 and "note: --base has no effect on this grid" in stderr
    code, _, stderr = _cli(capsys, ["sweep", "--lang", "(ab)*", "--pe", "rope", "--set", "rope_fraction=0.2",
                                    "--dry-run"])
    assert code == 0 and "--set rope_fraction has no effect" in stderr
    code, _, stderr = _cli(capsys, ["sweep", "--lang", "Σ*a", "--pe", "rope_p", "--dry-run"])
    assert code == 2 and "not in LTL[P,MOD]" in stderr and "--periods" in stderr
    code, _, stderr = _cli(capsys, ["sweep", "--lang", "Σ*a", "--pe", "rope_p", "--periods", "2", "--dry-run"])
    assert code == 0
    code, _, stderr = _cli(capsys, ["sweep", "--lang", "aΣ*", "--pe", "rope_p", "--dry-run"])
    assert code == 0 and "this run is NoPE" in stderr
    # (aa)* over {a} has no near-misses: near-miss training negatives change nothing.
    code, _, stderr = _cli(capsys, ["sweep", "--lang", "(aa)*", "--pe", "nope", "--set", "train_near_miss_fraction=0.5",
                                    "--dry-run"])
    assert code == 0 and "train_near_miss_fraction 0.5 has no effect" in stderr


def test_sweep_test_lengths_and_alphabet_short_option(capsys):
    # Issue 9.13: sweep had no --test-lengths.
    code, stdout, _ = _cli(capsys, ["sweep", "--lang", "(ab)*", "-a", "abc", "--seeds", "1", "--test-lengths",
                                    "41,45,50", "--dry-run", "--json"])
    run = json.loads(stdout)[0]
    assert code == 0 and run["test_lengths"] == [41, 45, 50] and run["alphabet"] == ["a", "b", "c"]
    code, stdout, _ = _cli(capsys, ["sweep", "--lang", "(ab)*", "--seeds", "1", "--test-lengths", "41..60",
                                    "--dry-run", "--json"])
    run = json.loads(stdout)[0]
    assert (run["test_min_length"], run["test_max_length"], run["test_lengths"]) == (41, 60, None)


# ----------------------------------------------------------------------------------------------
# Issue 12: any config field is an axis; every field is a column; report --by; plots beside the paper


def test_set_makes_any_field_an_axis_of_the_cross_product(capsys):
    code, stdout, _ = _cli(capsys, ["sweep", "--lang", "(ab)*", "--pe", "rope,nope", "--seeds", "2",
                                    "--set", "train_near_miss_fraction=0,0.5", "--set", "layers=1,2,3",
                                    "--set", "lr_schedule=constant", "--dry-run", "--json"])
    runs = json.loads(stdout)
    assert code == 0 and len(runs) == 2 * 2 * 2 * 3 == len({r["run_id"] for r in runs})
    assert {(r["train_near_miss_fraction"], r["layers"]) for r in runs} == {(f, n) for f in (0.0, 0.5) for n in (1, 2, 3)}
    assert {r["lr_schedule"] for r in runs} == {"constant"}  # replaces the quick preset's cosine
    code, stdout, _ = _cli(capsys, ["sweep", "--lang", "(ab)*", "--pe", "rope_p", "--seeds", "1",
                                    "--set", "periods=[2,3],4,auto", "--dry-run", "--json"])
    assert code == 0 and [r["periods"] for r in json.loads(stdout)] == [[2, 3], [4], None]


@pytest.mark.parametrize(
    "argv, message",
    [
        (["--set", "stepz=1,2"], "unknown run setting 'stepz'"),
        (["--set", "layers=2,two"], "--set layers: layers must be an integer, got 'two'"),
        (["--set", "warmup_steps=1.5"], "warmup_steps must be an integer"),
        (["--set", "lr=1e-3"], "lr is already a grid axis: use --lrs"),
        (["--set", "steps"], "--set takes FIELD=VALUE"),
        (["--steps", "5", "--set", "steps=5,6"], "steps is given both"),
        (["--set", "layers=1", "--set", "layers=2"], "layers is given twice"),
        (["--set", "lr_schedule=linear"], "unknown lr schedule 'linear'"),
    ],
)
def test_set_values_are_validated_like_other_settings(argv, message, capsys):
    code, _, stderr = _cli(capsys, ["sweep", "--lang", "(ab)*", *argv, "--dry-run"])
    assert code == 2 and message in stderr and "Traceback" not in stderr, stderr


def test_sweep_file_axes_table(tmp_path):
    path = tmp_path / "ablation.toml"
    path.write_text(
        'languages = ["(ab)*"]\npes = ["rope_p", "nope"]\n[quick]\nseeds = [0]\n'
        '[axes]\ntrain_near_miss_fraction = [0.0, 0.5]\nlayers = [2, 5]\nperiods = [[2], "auto"]\n'
    )
    spec_, _ = load_sweep_file(path)
    configs = expand_grid(spec_)
    assert dict(spec_.axes)["layers"] == (2, 5)
    assert len(configs) == 2 * 2 * 2 + 2 * 2  # rope_p: x periods; nope has no periods
    for body, message in [
        ("[axes]\nlayerz = [1]\n", r"x.toml:4: unknown key 'layerz' in \[axes\]"),
        ('[axes]\nlayers = ["two"]\n', r"x.toml:4: 'layers' in \[axes\] must be an integer"),
        ("[axes]\nlayers = 2\n", "must be a non-empty list"),
        ("[axes]\npe = [\"rope\"]\n", "has its own grid key; use 'pes'"),
        ("[quick]\nlayers = 2\n[axes]\nlayers = [1, 2]\n", "both an \\[axes\\] entry and fixed"),
    ]:
        bad = tmp_path / "x.toml"
        bad.write_text('languages = ["(ab)*"]\npes = ["rope"]\n' + body)
        with pytest.raises(FormalRopeError, match=message):
            load_sweep_file(bad)


def test_every_config_field_is_a_column_and_report_groups_by_any_columns(tmp_path, capsys):
    import dataclasses

    grid = spec(languages=["(ab)*"], pes=["rope", "nope"], bases=[1e4], seeds=2, lrs=[1e-4],
                axes={"train_near_miss_fraction": [0.0, 0.5]})
    run_sweep(expand_grid(grid), tmp_path, runner=fake_runner)
    runs = pd.read_parquet(tmp_path / "runs")
    assert {f.name for f in dataclasses.fields(RunConfig)} <= set(runs.columns)
    assert sorted(runs["train_near_miss_fraction"].unique()) == [0.0, 0.5]
    code, stdout, _ = _cli(capsys, ["report", str(tmp_path), "--by", "pe,train_near_miss_fraction", "--json"])
    payload = json.loads(stdout)
    assert code == 0 and payload["by"] == ["pe", "train_near_miss_fraction"]
    assert [(r["pe"], r["train_near_miss_fraction"], r["runs"]) for r in payload["rows"]] == [
        ("nope", 0.0, 2), ("nope", 0.5, 2), ("rope", 0.0, 2), ("rope", 0.5, 2)]
    code, stdout, _ = _cli(capsys, ["report", str(tmp_path), "--by", "language,pe,base"])
    assert code == 0 and "aggregates runs with different settings (train_near_miss_fraction 0.0, 0.5)" in " ".join(stdout.split())
    code, _, stderr = _cli(capsys, ["report", str(tmp_path), "--by", "pe,colour"])
    assert code == 2 and "cannot group by colour" in stderr


def _captured_figure(monkeypatch):
    import formal_rope.sweeps.report as report_module

    captured = []
    monkeypatch.setattr(report_module, "_save_figure", lambda fig, path: captured.append(fig) or Path(path))
    return captured


def _hollow_points(fig) -> set[tuple[float, float]]:
    """(x, y) of every marker drawn without a face colour (hollow) in the figure."""
    points = set()
    for ax in fig.axes:
        for collection in ax.collections:
            if len(collection.get_offsets()) and len(collection.get_facecolors()) == 0:
                points.update((round(float(x), 6), round(float(y), 6)) for x, y in collection.get_offsets())
    return points


def test_plots_draw_the_papers_values_hollow_and_name_the_scale(tmp_path, capsys, monkeypatch):
    # Issue 12.6: the paper's reference values beside ours, and the scale in the title.
    configs = expand_grid(spec(languages=["(aa)*", "(ab)*"], pes=["nope", "rope_p", "sipe_p"], bases=[1e4], seeds=2,
                               lrs=[5e-3], overrides={}))
    run_sweep(configs, tmp_path / "t2", runner=fake_runner)
    figures = _captured_figure(monkeypatch)
    code, _, _ = _cli(capsys, ["report", str(tmp_path / "t2"), "--plot", str(tmp_path / "f.png"), "--reference", "table2"])
    assert code == 0
    ys = {y for _, y in _hollow_points(figures[0])}
    assert {41.0, 500.0, 96.0, 44.0} <= ys  # Table 2's N* max: NoPE/SiPE_P 41 on (aa)*, 96 / 44 on (ab)*
    title = " ".join(figures[0]._suptitle.get_text().split())
    assert "quick scale" in title and "hollow markers: the paper" in title

    configs = expand_grid(spec(languages=["(aa)*"], pes=["rope", "nope"], bases=[1e-4, 1.0], seeds=2, lrs=[1e-4],
                               overrides={"steps": 3}))
    run_sweep(configs, tmp_path / "t4", runner=fake_runner)
    code, _, _ = _cli(capsys, ["report", str(tmp_path / "t4"), "--plot", str(tmp_path / "g.png"), "--reference", "table4"])
    assert code == 0
    from formal_rope.sweeps.grid import load_sweep_file as load, paper_sweep_path

    paper = {(row[0], row[1], row[2]): row[6] for row in load(paper_sweep_path("table4"))[0].reference["rows"]}
    hollow = _hollow_points(figures[1])
    assert (1e-4, round(paper[("(aa)*", "rope", 1e-4)], 6)) in hollow and (1.0, round(paper[("(aa)*", "rope", 1.0)], 6)) in hollow
    assert "custom settings" in figures[1]._suptitle.get_text()


def test_options_without_effect_in_dry_runs_and_reports_are_noted(tmp_path, capsys):
    # Issue 9.12: --out/--workers do nothing in a dry run; --reference does nothing with a custom --by
    # and no plot.
    code, _, stderr = _cli(capsys, ["sweep", "--lang", "(ab)*", "--dry-run", "--out", str(tmp_path / "x"), "--workers", "2"])
    assert code == 0 and "--out and --workers have no effect with --dry-run" in stderr and not (tmp_path / "x").exists()
    run_sweep(expand_grid(spec(languages=["(ab)*"], pes=["nope"], bases=[1e4], seeds=1, lrs=[1e-4])), tmp_path / "r",
              runner=fake_runner)
    code, _, stderr = _cli(capsys, ["report", str(tmp_path / "r"), "--by", "pe", "--reference", "table2"])
    assert code == 0 and "--reference is shown in the table only" in stderr


def test_every_known_deviation_points_to_an_existing_findings_section():
    # Issue 12.3: `reproduce` prints one line per known deviation pointing to its findings section.
    import re as regex

    from formal_rope.sweeps.deviations import DEVIATIONS, FINDINGS, deviation_lines

    findings = (Path(__file__).resolve().parent.parent / FINDINGS).read_text()
    anchors = {
        regex.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")
        for heading in regex.findall(r"^#+ (.+)$", findings, flags=regex.MULTILINE)
    }
    lines = [line for entries in DEVIATIONS.values() for line in entries]
    assert lines and deviation_lines("table2", "quick")
    for line in lines:
        anchor = regex.search(rf"{regex.escape(FINDINGS)}#([\w\-]+)", line)
        assert anchor and anchor.group(1) in anchors, (line, sorted(anchors))
    assert deviation_lines("table2", "paper") == []


def test_markdown_table_lists_every_run_and_the_papers_value(tmp_path):
    # docs/findings.md's tables: one row per group, each run's N*, and the paper's numbers beside ours.
    from formal_rope.sweeps.report import markdown_table
    from formal_rope.sweeps.results import read_results

    configs = expand_grid(spec(languages=["(ab)*"], pes=["nope", "rope"], bases=[1e4], seeds=2, lrs=[1e-4]))
    run_sweep(configs, tmp_path, runner=fake_runner)
    by = ("language", "pe", "base")
    rows = aggregate(read_results(tmp_path).runs, by)
    expected = {row.pe: ", ".join(str(n) for n in row.n_stars) for row in rows}
    reference = {"rows": [["(ab)*", "rope", 1e4, 0.74, 0.56, 96.0, 66.0]]}
    lines = markdown_table(rows, by, reference).splitlines()
    assert lines[0].endswith("| N* of each run | paper: acc max / N* max (mean) |") and len(lines) == 4
    rope = next(line for line in lines if "RoPE_NP" in line)
    nope = next(line for line in lines if "NoPE" in line)
    assert rope.endswith(f"| {expected['rope']} | 0.74 / 96 (66.0) |") and "| 1e4 |" in rope
    assert nope.endswith(f"| {expected['nope']} | – |") and len(expected["nope"].split(", ")) == 2
    # Without a reference (or without language and pe in the grouping) there is no paper column.
    assert "paper" not in markdown_table(rows, by) and "paper" not in markdown_table(
        aggregate(read_results(tmp_path).runs, ("pe",)), ("pe",), reference)


# ----------------------------------------------------------------------------------------------
# One run's failure is its own; failed runs are not measurements; typed result files


def seed_one_breaks_its_pack(configs, *, device, threads, state):
    """A pack runner that raises whenever the pack holds seed 1 (like a run whose tables cannot be
    allocated), and otherwise returns the fake results."""
    if any(config.seed == 1 for config in configs):
        raise MemoryError("Unable to allocate 745. GiB")
    return [fake_runner(config) for config in configs]


def test_a_pack_runner_failure_is_charged_to_the_run_that_raises_alone(tmp_path):
    # Regression: an exception from the pack runner was recorded as every run's result.
    configs = expand_grid(spec(languages=["(ab)*"], pes=["nope"], bases=[1e4], seeds=3, lrs=[1e-4]))
    summary = run_sweep(configs, tmp_path, pack="auto", pack_runner=seed_one_breaks_its_pack)
    assert summary.units == 1 and summary.statuses == {"ok": 2, "failed": 1}
    runs = load_results(tmp_path)[0].set_index("seed")
    assert runs.loc[1, "status"] == "failed" and "MemoryError" in runs.loc[1, "error"]
    assert list(runs.loc[[0, 2], "n_star"]) == [41, 61] and runs.loc[[0, 2], "error"].isna().all()


def test_sweep_keeps_the_healthy_run_of_a_pack_whose_other_run_raises(tmp_path, capsys, monkeypatch):
    # Regression (reviewer): `sweep --set periods=2,<huge>` recorded both runs failed with the huge
    # period's MemoryError, and a rerun packed them together and failed both again. Huge periods are
    # refused up front now; any other run that raises inside a pack stands in for it here.
    import formal_rope.training.positional as positional

    real = positional.periodic_tables

    def tables(periods, n_pairs, positions):
        if 3 in tuple(periods):
            raise MemoryError("Unable to allocate 745. GiB for an array")
        return real(periods, n_pairs, positions)

    monkeypatch.setattr(positional, "periodic_tables", tables)
    tiny = ["--steps", "20", "--layers", "1", "--d-model", "16", "--heads", "2", "--test-lengths", "41..45",
            "--n-per-length", "4", "--seeds", "1", "--lrs", "3e-4", "--workers", "1"]
    argv = ["sweep", "--lang", "(ab)*", "--pe", "rope_p", "--set", "periods=2,3", *tiny, "--json"]
    code, stdout, _ = _cli(capsys, [*argv, "--out", str(tmp_path / "packed")])
    assert code == 0 and json.loads(stdout)["sweep"]["statuses"] == {"ok": 1, "failed": 1}
    code, _, _ = _cli(capsys, [*argv, "--pack", "1", "--out", str(tmp_path / "alone")])
    packed, alone = (load_results(tmp_path / name)[0].set_index("periods") for name in ("packed", "alone"))
    assert packed.loc["3", "status"] == "failed" and "MemoryError" in packed.loc["3", "error"]
    columns = ["run_id", "status", "n_star", "accuracy", "final_loss", "steps_done", "pack_id", "pack_size"]
    assert packed.loc["2", columns].to_dict() == alone.loc["2", columns].to_dict()  # as trained alone
    code, stdout, _ = _cli(capsys, [*argv, "--out", str(tmp_path / "packed")])  # the rerun retries the failed run only
    assert code == 0 and json.loads(stdout)["sweep"]["skipped"] == 1


def test_failed_runs_have_no_n_star_in_reports_tables_plots_and_json(tmp_path, capsys, monkeypatch):
    # Regression: a failed run counted as N* 0: `2 (1 not ok) … N* max 41, mean 20.5±29.0`, JSON
    # n_stars [41, 0], and a row whose only run failed showed `N* 0, 0.0±0.0`.
    from formal_rope.sweeps.report import markdown_table
    from formal_rope.sweeps.results import read_results

    def runner(config):
        if config.seed == 1 or config.pe == "rope_p":
            raise RuntimeError("boom")
        return fake_runner(config)

    configs = expand_grid(spec(languages=["(ab)*"], pes=["nope", "rope_p"], bases=[1e4], seeds=2, lrs=[1e-4]))
    run_sweep([c for c in configs if c.pe == "nope" or c.seed == 0], tmp_path, runner=runner)
    code, stdout, _ = _cli(capsys, ["report", str(tmp_path), "--json"])
    rows = {row["pe"]: row for row in json.loads(stdout)["rows"]}
    assert code == 0 and (rows["nope"]["runs"], rows["nope"]["ok_runs"]) == (2, 1)
    assert rows["nope"]["n_stars"] == [41] and rows["nope"]["n_star_max"] == 41
    assert rows["nope"]["n_star_mean"] == 41 and rows["nope"]["n_star_std"] == 0
    assert (rows["rope_p"]["runs"], rows["rope_p"]["ok_runs"], rows["rope_p"]["n_stars"]) == (1, 0, [])
    assert all(rows["rope_p"][key] is None for key in ("n_star_max", "n_star_mean", "n_star_std", "accuracy_max"))
    code, stdout, _ = _cli(capsys, ["report", str(tmp_path)])
    table = {line.split("│")[2].strip(): [cell.strip() for cell in line.split("│")[4:9]]
             for line in stdout.splitlines() if line.count("│") > 8 and "(ab)*" in line}
    assert code == 0 and table["NoPE"] == ["2 (1 not ok)", "0.550", "0.550±0.000", "41", "41.0±0.0"]
    assert table["RoPE_P"] == ["1 (1 not ok)", "–", "–", "–", "–"] and "nan" not in stdout
    figures = _captured_figure(monkeypatch)
    code, _, stderr = _cli(capsys, ["report", str(tmp_path), "--plot", str(tmp_path / "f.png")])
    assert code == 0 and "Traceback" not in stderr and len(figures) == 1
    runs = read_results(tmp_path).runs
    assert runs.loc[runs["status"] == "failed", "n_star"].isna().all()
    markdown = markdown_table(aggregate(runs), ("language", "pe", "base"))
    assert "| 41 | 41.0±0.0 | 41 |" in markdown and "| 1 (1 not ok) | – | – | – | – | – |" in markdown


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


@pytest.mark.parametrize(
    "options, message",
    [
        (["--periods", "100000000000"], "period 100,000,000,000 is too large"),
        (["--set", "periods=2,100000000000000000000000"], "is too large"),
        (["--set", "periods=[2,3,5,7,11],2"], "5 periods (2,3,5,7,11) but rope_p with d_model 16 and 2 heads has 4"),
        (["--config", "FILE"], "is too large"),
        (["--config", "FILE", "--pe", "sipe_p", "--set", "periods=[2,3,5,7,11,13,17,19,23]"], "sipe_p with d_model 16 has 8"),
    ],
)
def test_sweep_refuses_periods_that_cannot_be_built_or_would_be_dropped_before_training(options, message, tmp_path,
                                                                                        capsys):
    # Regression: `sweep --set periods=2,10^11` trained and recorded failed runs (exit 0), and periods
    # beyond the model's rotary pairs were dropped without a word.
    sweep_file = tmp_path / "p.toml"
    sweep_file.write_text('name = "p"\nlanguages = ["(ab)*"]\npes = ["rope_p"]\nperiods = [2, 100000000000]\n')
    options = [str(sweep_file) if option == "FILE" else option for option in options]
    language = [] if "--config" in options else ["--lang", "(ab)*", "--pe", "rope_p"]
    code, _, stderr = _cli(capsys, ["sweep", *language, *options, "--steps", "2", "--layers", "1", "--d-model", "16",
                                    "--heads", "2", "--seeds", "1", "--out", str(tmp_path / "r")])
    assert code == 2 and message in " ".join(stderr.split()) and "Traceback" not in stderr, stderr
    assert not (tmp_path / "r").exists()


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


def test_reproduce_tables_follow_the_sweep_files_language_order(tmp_path):
    # The table listed (ab)* before (aa)* when (ab)*'s runs were written first.
    from rich.console import Console

    from formal_rope.commands.sweep import _report

    for language in ("(ab)*", "(aa)*"):
        run_sweep(expand_grid(spec(languages=[language], pes=["nope"], bases=[1e4], seeds=1, lrs=[1e-4])),
                  tmp_path, runner=fake_runner)
    for order in (("(aa)*", "(ab)*"), ("(ab)*", "(aa)*")):
        payload = _report(tmp_path, Console(), False, None, quiet=True, languages=order)
        assert [row["language"] for row in payload["rows"]] == list(order)
