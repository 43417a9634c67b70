"""Sweeps, the command line: `sweep`, `reproduce` and their options checked before anything trains."""

from __future__ import annotations

import json
from typing import NamedTuple, Optional

import pandas as pd
import pytest
import typer
from typer.testing import CliRunner

from formal_rope.commands.run_options import Layers, RunFlags, with_option_groups
from formal_rope.sweeps.grid import expand_grid
from formal_rope.sweeps.runner import run_sweep
from sweeps_support import REPO, fake_runner, spec
from sweeps_support import cli as _cli


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
    code, stdout, _ = _cli(
        capsys, ["sweep", "--lang", "(ab)*", "--alphabet", "abc", "--seeds", "1", "--dry-run", "--json"]
    )
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

    monkeypatch.setattr(
        runner_module, "run_sweep", lambda *a, **k: real_run_sweep(*a, **{**k, "runner": diverging_runner})
    )

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
    assert code == 0 and "periods auto resolved to 2" in stderr and "this run is NoPE" not in stderr
    code, _, stderr = _cli(capsys, ["sweep", "--lang", "aΣ*", "--pe", "rope_p", "--periods", "1", "--dry-run"])
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


def test_set_makes_any_field_an_axis_of_the_cross_product(capsys):
    code, stdout, _ = _cli(capsys, ["sweep", "--lang", "(ab)*", "--pe", "rope,nope", "--seeds", "2",
                                    "--set", "train_near_miss_fraction=0,0.5", "--set", "layers=1,2,3",
                                    "--set", "lr_schedule=constant", "--dry-run", "--json"])
    runs = json.loads(stdout)
    assert code == 0 and len(runs) == 2 * 2 * 2 * 3 == len({r["run_id"] for r in runs})
    assert {(r["train_near_miss_fraction"], r["layers"]) for r in runs} == {
        (f, n) for f in (0.0, 0.5) for n in (1, 2, 3)
    }
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


def test_options_without_effect_in_dry_runs_and_reports_are_noted(tmp_path, capsys):
    # Issue 9.12: --out/--workers do nothing in a dry run; --reference does nothing with a custom --by
    # and no plot.
    code, _, stderr = _cli(
        capsys, ["sweep", "--lang", "(ab)*", "--dry-run", "--out", str(tmp_path / "x"), "--workers", "2"]
    )
    assert code == 0 and "--out and --workers have no effect with --dry-run" in stderr and not (tmp_path / "x").exists()
    run_sweep(expand_grid(spec(languages=["(ab)*"], pes=["nope"], bases=[1e4], seeds=1, lrs=[1e-4])), tmp_path / "r",
              runner=fake_runner)
    code, _, stderr = _cli(capsys, ["report", str(tmp_path / "r"), "--by", "pe", "--reference", "table2"])
    assert code == 0 and "--reference is shown in the table only" in stderr


@pytest.mark.parametrize(
    "options, message",
    [
        (["--periods", "100000000000"], "period 100,000,000,000 is too large"),
        (["--set", "periods=2,100000000000000000000000"], "is too large"),
        (["--set", "periods=[2,3,5,7,11],2"], "5 periods (2,3,5,7,11) but rope_p with d_model 16 and 2 heads has 4"),
        (["--config", "FILE"], "is too large"),
        (
            ["--config", "FILE", "--pe", "sipe_p", "--set", "periods=[2,3,5,7,11,13,17,19,23]"],
            "sipe_p with d_model 16 has 8",
        ),
    ],
)
def test_sweep_refuses_periods_that_cannot_be_built_or_would_be_dropped_before_training(
    options, message, tmp_path, capsys
):
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



class ModelFlags(NamedTuple):
    """A toy option group: a shared option (declared in run_options) and one of its own."""

    layers: Layers = None
    heads: Optional[int] = typer.Option(None, "--heads", help="Attention heads.")


class LayersAgain(NamedTuple):
    layers: Layers = None


def test_an_option_group_is_declared_once_and_reaches_its_command_as_one_value():
    # `sweep`, `reproduce` and `train` take shared options as groups (commands/run_options.py).
    seen = []
    app = typer.Typer()

    @app.command()
    @with_option_groups
    def probe(name: str = typer.Option("x", "--name"), model: ModelFlags = None, run: RunFlags = None,
              last: bool = typer.Option(False, "--last")) -> None:
        seen.append((name, model, run, last))

    done = CliRunner().invoke(app, ["--layers", "3", "--backend", "ray", "--max-retries", "1", "--last"])
    assert done.exit_code == 0, done.output
    assert seen == [("x", ModelFlags(layers=3, heads=None), RunFlags(backend="ray", max_retries=1), True)]
    help_text = CliRunner().invoke(app, ["--help"], env={"COLUMNS": "200"}).output
    flags = ["--name", "--layers", "--heads", "--pack", "--backend", "--keep-state", "--last"]
    assert sorted(flags, key=help_text.index) == flags  # each group's options at the group's place

    def clash(model: ModelFlags = None, again: LayersAgain = None) -> None:
        pass

    with pytest.raises(TypeError, match="option groups repeat the parameters layers"):
        with_option_groups(clash)
