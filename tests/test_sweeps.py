"""Sweeps: grid expansion, TOML validation, atomic per-run results, skipping, reports and plots.

Training itself is replaced by a deterministic fake runner (the trainer has its own tests); one
end-to-end test runs a real tiny sweep through the CLI.
"""

from __future__ import annotations

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
    # --alphabet is read like `train --alphabet`: 'ab' is two symbols, not one symbol "ab".
    code, stdout, _ = _cli(capsys, ["sweep", "--lang", "(ab)*", "--alphabet", "ab", "--seeds", "1", "--dry-run", "--json"])
    assert code == 0 and json.loads(stdout)[0]["alphabet"] == ["a", "b"]


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
