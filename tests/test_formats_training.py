"""Datasets in: `train --data` / `sweep --data` train and evaluate on FLaRe or MLRegTest files
(training.data.FileData), record which data (path + content hash), check labels against --lang."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest

from formal_rope.automata import language_dfa
from formal_rope.errors import FormalRopeError
from formal_rope.lang.source import resolve_language
from formal_rope.run_config.config import RunConfig
from formal_rope.sampling import test_sets, write_flare_split
from formal_rope.training.data import FileData, data_settings, run_data
from tests.cli_support import run_main

TINY = ["--steps", "3", "--batch-size", "8", "--layers", "1", "--d-model", "8", "--heads", "1", "--no-save", "--json"]


@pytest.fixture()
def flare(tmp_path):
    """A FLaRe language folder of Σ*abΣ*: training lengths 0..12, test lengths 14, 15, 17."""
    dfa = language_dfa(resolve_language("Σ*abΣ*"))
    root = tmp_path / "sab"
    write_flare_split(root, test_sets(dfa, range(0, 13), n_per_length=8, seed=5), dfa)
    write_flare_split(root / "datasets" / "test", test_sets(dfa, [14, 15, 17], n_per_length=6, seed=6), dfa)
    return root


def test_train_on_a_flare_folder(flare, capsys):
    code, out, _ = run_main(capsys, ["train", "--data", str(flare), *TINY])
    result = json.loads(out)
    assert code == 0 and result["status"] == "ok"
    config = result["config"]
    assert config["language"] == f"data:{flare}" and config["data"] == str(flare) and len(config["data_hash"]) == 16
    assert (config["train_min_length"], config["train_max_length"]) == (0, 12)
    assert (config["test_min_length"], config["test_max_length"]) == (14, 17)
    assert [r["length"] for r in result["per_length"]] == [14, 15, 17] and [r["n"] for r in result["per_length"]] == [
        6
    ] * 3
    assert result["alphabet"] == ["a", "b", "c"]


def test_labels_are_checked_against_the_language(flare, capsys):
    code, out, _ = run_main(capsys, ["train", "--data", str(flare), "--lang", "Σ*abΣ*", *TINY])
    assert code == 0 and json.loads(out)["config"]["language"] == "Σ*abΣ*"
    code, _, err = run_main(capsys, ["train", "--data", str(flare), "--lang", "re:[abc]*ba[abc]*", *TINY])
    assert code == 2 and f"{flare / 'main.tok'}:" in err and f"the label ({flare / 'labels.txt'}:" in err


def test_malformed_files_exit_2_naming_file_and_line(flare, capsys):
    labels = flare / "datasets" / "test" / "labels.txt"
    lines = labels.read_text().split("\n")
    lines[4] = "yes"
    labels.write_text("\n".join(lines))
    code, _, err = run_main(capsys, ["train", "--data", str(flare), *TINY])
    assert code == 2 and f"{labels}:5: expected a label 0 or 1, got 'yes'" in err
    code, _, err = run_main(capsys, ["train", "--data", str(flare.parent / "nowhere"), *TINY])
    assert code == 2 and "no data at" in err
    code, _, err = run_main(capsys, ["train", *TINY])
    assert code == 2 and "--lang" in err and "--data" in err


def test_train_on_an_mlregtest_language(tmp_path, capsys):
    language = tmp_path / "04.04.SL.2.1.0"
    rng = np.random.default_rng(0)
    train = ["".join(rng.choice(list("abcd"), rng.integers(3, 8))) for _ in range(40)]
    (tmp_path / "04.04.SL.2.1.0_Train.txt").write_text(
        "".join(f"{w}\t{'TRUE' if 'a' in w else 'FALSE'}\n" for w in train)
    )
    (tmp_path / "04.04.SL.2.1.0_TestLR.txt").write_text("abcdabcdabcd\tTRUE\nbbbbbbbbbbbb\tFALSE\n")
    (tmp_path / "04.04.SL.2.1.0_TestSA.txt").write_text("abcd\tTRUE\nbcdd\tFALSE\n")
    code, out, _ = run_main(capsys, ["train", "--data", str(language), "--lang", "re:[abcd]*a[abcd]*", *TINY])
    result = json.loads(out)
    assert code == 0 and [(r["length"], r["n"]) for r in result["per_length"]] == [(4, 2), (12, 2)]
    code, out, _ = run_main(capsys, ["train", "--data", str(language), "--test-lengths", "10..20", *TINY])
    assert code == 0 and [r["length"] for r in json.loads(out)["per_length"]] == [12]


def test_run_id_records_the_data_only_when_used(flare):
    sampled = RunConfig("(ab)*")
    assert sampled.to_dict()["data"] is None and sampled.to_dict()["data_hash"] is None
    assert "data" not in sampled.id_fields() and sampled.run_id() == "45d988f98a189371"  # ids unchanged
    settings = data_settings(flare)
    config = RunConfig(**{**settings, "pe": "rope"})
    assert RunConfig.from_dict(config.to_dict()) == config
    labels = flare / "labels.txt"
    labels.write_text(labels.read_text().replace("0", "1", 1))
    changed = RunConfig(**{**data_settings(flare), "pe": "rope"})
    assert changed.data_hash != config.data_hash and changed.run_id() != config.run_id()
    with pytest.raises(FormalRopeError, match="has changed since the run was configured"):
        run_data(config, None)  # the files no longer hold what the run was configured with


def test_file_data_serves_the_trainer_seam(flare):
    config = RunConfig(**{**data_settings(flare, language="Σ*abΣ*"), "pe": "rope"})
    data = run_data(config, language_dfa(resolve_language("Σ*abΣ*")))
    assert isinstance(data, FileData) and data.alphabet == ("a", "b", "c")
    batch = data.training_batch(np.random.default_rng(1), 6)
    assert batch.labels.sum() == 3 and batch.lengths.max() <= 12
    assert [s.length for s in data.test_sets()] == [14, 15, 17]
    assert data.decode(np.array([0, 1, 2])) == "abc"
    narrow = run_data(config.with_(train_max_length=5), None)  # the training file's strings of lengths 0..5
    assert narrow.training_batch(np.random.default_rng(1), 64).lengths.max() <= 5
    with pytest.raises(FormalRopeError, match="no positive string of a length in 0..1"):
        run_data(config.with_(train_max_length=1), None)  # no string of Σ*abΣ* is that short


def test_periods_auto_needs_a_language(flare, capsys):
    code, _, err = run_main(capsys, ["train", "--data", str(flare), "--pe", "rope_p", *TINY])
    assert code == 2 and "--periods" in err
    code, out, _ = run_main(capsys, ["train", "--data", str(flare), "--pe", "rope_p", "--periods", "2", *TINY])
    assert code == 0 and json.loads(out)["resolved_periods"] == [2]


def test_sweep_on_data_records_path_and_hash(flare, tmp_path, capsys):
    out = tmp_path / "results"
    argv = ["sweep", "--data", str(flare), "--pe", "rope,nope", "--seeds", "1", "--steps", "3", "--batch-size", "8",
            "--layers", "1", "--d-model", "8", "--heads", "1", "--out", str(out), "--json"]
    code, stdout, _ = run_main(capsys, argv)
    assert code == 0 and json.loads(stdout)["statuses"] == {"ok": 2}
    runs = pd.read_parquet(out / "runs")
    assert set(runs["data"]) == {str(flare)} and runs["data_hash"].str.len().eq(16).all()
    assert all(json.loads(c)["data_hash"] == runs["data_hash"][0] for c in runs["config"])
    code, _, err = run_main(capsys, argv[:3] + ["--lang", "Σ*abΣ*", "--lang", "(ab)*"] + argv[3:])
    assert code == 2 and "at most one --lang" in err


def _lengths(out: str) -> list[int]:
    return [r["length"] for r in json.loads(out)["per_length"]]


def test_train_on_data_tests_a_list_of_lengths_or_refuses_one_the_files_lack(flare, tmp_path, capsys):
    # Regression: `train --data DIR --test-lengths 14,17` stopped with a KeyError traceback.
    code, out, _ = run_main(capsys, ["train", "--data", str(flare), "--test-lengths", "14,17", *TINY])
    assert code == 0 and _lengths(out) == [14, 17] and json.loads(out)["config"]["test_lengths"] == [14, 17]
    code, _, err = run_main(capsys, ["train", "--data", str(flare), "--test-lengths", "14,16,17", *TINY])
    assert code == 2 and "hold no string of length 16" in err and "they hold lengths 14..15, 17" in err
    language = tmp_path / "04.04.SL.2.1.0"  # the same on an MLRegTest language
    (tmp_path / "04.04.SL.2.1.0_Train.txt").write_text("ab\tTRUE\nbb\tFALSE\n")
    (tmp_path / "04.04.SL.2.1.0_TestLR.txt").write_text("aaaa\tTRUE\nbbbb\tFALSE\naaaaaa\tTRUE\nbbbbbbbb\tFALSE\n")
    code, out, _ = run_main(capsys, ["train", "--data", str(language), "--test-lengths", "4,8", *TINY])
    assert code == 0 and _lengths(out) == [4, 8]


def test_data_lengths_record_what_the_run_trains_and_tests_on(flare, capsys):
    # A range wider than the files is narrowed to the lengths they hold in it (with a note), so the
    # config records what was measured and equals the run without the option (one run id).
    code, out, _ = run_main(capsys, ["train", "--data", str(flare), *TINY])
    default = json.loads(out)
    code, out, err = run_main(capsys, ["train", "--data", str(flare), "--test-lengths", "10..100",
                                       "--train-lengths", "0..60", *TINY])
    wide = json.loads(out)
    assert code == 0 and wide["run_id"] == default["run_id"] and _lengths(out) == [14, 15, 17]
    assert "the run tests, and records, 14..17" in err and "the run trains on, and records, 0..12" in err
    code, out, _ = run_main(capsys, ["train", "--data", str(flare), "-a", "abc", *TINY])  # the files' own alphabet
    assert (
        code == 0 and json.loads(out)["run_id"] == default["run_id"] and json.loads(out)["config"]["alphabet"] is None
    )
    # Regression: --train-lengths was ignored on data (training stayed 0..12, same run id).
    code, out, _ = run_main(capsys, ["train", "--data", str(flare), "--train-lengths", "0..5", *TINY])
    short = json.loads(out)
    assert code == 0 and short["run_id"] != default["run_id"]
    assert (short["config"]["train_min_length"], short["config"]["train_max_length"]) == (0, 5)
    code, _, err = run_main(capsys, ["train", "--data", str(flare), "--train-lengths", "0..1", *TINY])
    assert code == 2 and "no positive string of a length in 0..1" in err


def test_sampling_settings_are_refused_on_data_and_leave_the_config_neutral(flare, capsys):
    # Regression: --n-per-length and --set eval_seed changed the run id of an identical training.
    for argv, named in [(["--n-per-length", "7"], "--n-per-length"), (["--set", "eval_seed=5"], "--set eval_seed"),
                        (["--train-near-miss", "0.5"], "--train-near-miss"),
                        (["--nnch-samples", "8"], "--nnch-samples")]:
        code, _, err = run_main(capsys, ["train", "--data", str(flare), *argv, *TINY])
        assert code == 2 and named in err and "reads its strings from files" in err, argv
    settings = {**data_settings(flare), "pe": "rope"}
    neutral = RunConfig(**settings)
    sampled_settings = RunConfig(**settings, n_per_length=7, eval_seed=5, train_near_miss_fraction=0.5, nnch_samples=8)
    assert sampled_settings == neutral and sampled_settings.run_id() == neutral.run_id()
    assert {neutral.to_dict()[name]
            for name in ("n_per_length", "eval_seed", "train_near_miss_fraction", "nnch_samples")} == {None}
    assert RunConfig("(ab)*", n_per_length=7) != RunConfig("(ab)*")  # sampled runs keep them


def test_sweep_on_data_tests_exactly_the_given_lengths(flare, tmp_path, capsys):
    # Regression: sweep --data evaluated every test length of the files whatever --test-lengths said.
    tiny = ["--seeds", "1", "--lrs", "1e-3", "--steps", "3", "--batch-size", "8", "--layers", "1", "--d-model", "8",
            "--heads", "1", "--json"]
    for lengths, evaluated, recorded in [("14..15", [14, 15], (14, 15, None)), ("14,17", [14, 17], (14, 17, "14,17"))]:
        out = tmp_path / lengths
        code, _, _ = run_main(
            capsys, ["sweep", "--data", str(flare), "--test-lengths", lengths, "--out", str(out), *tiny]
        )
        runs, evals = pd.read_parquet(out / "runs"), pd.read_parquet(out / "evals")
        assert code == 0 and sorted(evals["length"]) == evaluated, lengths
        listed = None if pd.isna(runs["test_lengths"][0]) else runs["test_lengths"][0]
        assert (runs["test_min_length"][0], runs["test_max_length"][0], listed) == recorded
    code, _, err = run_main(capsys, ["sweep", "--data", str(flare), "--test-lengths", "14,16", "--dry-run", *tiny])
    assert code == 2 and "hold no string of length 16" in err


def test_sweep_on_data_never_multiplies_over_sampling_settings(flare, capsys):
    # Regression: --set eval_seed=1,2 --set train_near_miss_fraction=0,0.5 made 4 runs of one training,
    # and --set train_max_length said it was "given both by its own option and by --set".
    base = ["sweep", "--data", str(flare), "--seeds", "1", "--lrs", "1e-3", "--dry-run", "--json"]
    code, out, err = run_main(capsys, [*base, "--set", "eval_seed=1,2", "--set", "train_near_miss_fraction=0,0.5",
                                       "--n-per-length", "4", "--nnch-samples", "8"])
    runs = json.loads(out)
    assert code == 0 and len(runs) == 1 and runs[0]["eval_seed"] is None and runs[0]["n_per_length"] is None
    assert runs[0]["nnch_samples"] is None
    for option in ("--set eval_seed", "--set train_near_miss_fraction", "--n-per-length", "--nnch-samples"):
        assert f"note: {option} has no effect on this grid: its runs read their strings from files" in err, option
    grid_file = flare.parent / "axes.toml"  # a sweep file's [axes] entry is said the same way
    grid_file.write_text('languages = ["Σ*abΣ*"]\n[axes]\neval_seed = [0, 3]\n')
    code, out, err = run_main(capsys, [*base, "--config", str(grid_file)])
    assert code == 0 and len(json.loads(out)) == 1 and "note: the sweep file's [axes] eval_seed has no effect" in err
    code, out, err = run_main(capsys, [*base, "--set", "train_max_length=5,12,60"])
    assert code == 0 and [r["train_max_length"] for r in json.loads(out)] == [5, 12]  # 60 is the file's 12
    assert "given both" not in err and "trains on, and records, 0..12" in err
