"""`--eval worst-case` in train/sweep and the `attack` command: results beside N*, run ids unchanged,
Parquet columns, reruns of finished runs that lack a worst case, and user errors."""

from __future__ import annotations

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from cli_support import run_main
from formal_rope.evaluation import SearchSettings
from formal_rope.run_config.config import RunConfig
from formal_rope.runs import run_training
from formal_rope.sweeps.results import finished_run_ids, read_results
from formal_rope.sweeps.runner import run_sweep
from formal_rope.training.run_result import RunResult
from sweeps_support import fake_runner

TINY = ["--layers", "1", "--d-model", "16", "--heads", "2", "--batch-size", "16", "--steps", "20",
        "--test-lengths", "41..44", "--n-per-length", "6", "--seed", "1"]


def test_run_training_adds_the_worst_case_without_changing_the_run(tmp_path):
    config = RunConfig(language="(ab)*", pe="rope_p", layers=1, d_model=16, heads=2, batch_size=16, steps=20,
                       lr=3e-3, test_min_length=41, test_max_length=46, n_per_length=6)
    plain, _ = run_training(config, progress=False)
    events = []
    searched, _ = run_training(config, progress=events.append, worst_case=SearchSettings(budget=16))
    assert searched.run_id == plain.run_id and searched.per_length == plain.per_length
    assert searched.n_star == plain.n_star and plain.n_star_worst is None
    assert searched.n_star_worst is not None and searched.n_star_worst <= searched.n_star
    assert searched.worst_strings_tried > 0 and any(event.stage == "search" for event in events)
    if searched.n_star_worst < config.test_max_length:
        failing_length = searched.n_star_worst + 1 if searched.n_star_worst else config.test_min_length
        assert searched.worst_failure is not None and len(searched.worst_failure) == failing_length
    assert RunResult.from_dict(json.loads(json.dumps(searched.to_dict()))) == searched


def test_train_json_and_attack_report_the_worst_case(tmp_path, capsys):
    model = tmp_path / "m.zip"
    code, out, err = run_main(capsys, ["train", "--lang", "(ab)*", "--pe", "nope", *TINY, "--eval", "worst-case",
                                       "--worst-case-budget", "8", "--out", str(model), "--json"])
    assert code == 0, err
    result = json.loads(out)
    assert result["n_star_worst"] is not None and result["n_star_worst"] <= result["n_star"]
    assert result["config"]["eval_mode"] == "full" and result["worst_strings_tried"] > 0
    code, out, _ = run_main(capsys, ["train", "--lang", "(ab)*", "--pe", "nope", *TINY, "--no-save", "--json"])
    assert json.loads(out)["run_id"] == result["run_id"] and json.loads(out)["n_star_worst"] is None
    code, out, err = run_main(capsys, ["attack", str(model), "--budget", "8", "--json"])
    found = json.loads(out)
    assert code == 0 and found["language"] == "(ab)*" and found["lengths"] == [41, 42, 43, 44]
    assert found["start"] == 6 and found["n_star_worst"] <= found["n_star_start"]
    assert found["n_star_worst"] == result["n_star_worst"]  # the same search as train's, from the same test sets
    code, out, err = run_main(capsys, ["attack", str(model), "--budget", "8", "--lengths", "41,50"])
    assert code == 0 and "worst-case N*" in out and "strings tried" in out


def test_attack_on_a_compiled_model(tmp_path, capsys):
    model = tmp_path / "y.zip"
    code, _, err = run_main(capsys, ["compile", "Y(a)", "-a", "ab", "--freq", "0.8985979", "--scale", "1024",
                                     "--verify-to", "0", "--exhaustive", "2", "--out", str(model)])
    assert code == 0, err
    code, out, err = run_main(capsys, ["attack", str(model), "--lengths", "1..10", "--budget", "1024", "--json"])
    found = json.loads(out)
    assert code == 0 and found["certified_length"] == 6 and found["kind"] == "compiled"
    assert found["n_star_worst"] >= 6 and found["failure"] is not None and found["failure_length"] <= 10
    code, out, _ = run_main(capsys, ["attack", str(model), "--lengths", "1..10", "--budget", "1024"])
    assert code == 0 and "lengths with failures" in out and "certified length" in out


@pytest.mark.parametrize("argv, message", [
    (["train", "--lang", "(ab)*", "--eval", "nstar,full"], "exclude each other"),
    (["train", "--lang", "(ab)*", "--eval", "worst"], "unknown eval mode"),
    (["train", "--lang", "(ab)*", "--worst-case-budget", "9"], "needs --eval worst-case"),
    (["sweep", "--lang", "(ab)*", "--worst-case-budget", "9", "--dry-run"], "needs --eval worst-case"),
    (["reproduce", "table2", "--eval", "nstar"], "nstar would make other runs"),
    (["attack", "missing.zip"], "does not exist"),
])
def test_worst_case_options_refuse_bad_input(capsys, argv, message):
    code, out, err = run_main(capsys, argv)
    assert code == 2 and message in err and "Traceback" not in err


def test_attack_refuses_options_of_the_other_kind_of_model(tmp_path, capsys):
    model = tmp_path / "m.zip"
    run_main(capsys, ["train", "--lang", "(ab)*", "--pe", "nope", *TINY, "--steps", "2", "--out", str(model)])
    code, _, err = run_main(capsys, ["attack", str(model), "--format", "bf16"])
    assert code == 2 and "compiled models" in err
    code, _, err = run_main(capsys, ["attack", str(model), "--lang", "(abc)*"])
    assert code == 2 and "error:" in err


def _searching_runner(configs, *, device, threads, state, worst_case=None):
    """A pack runner that records whether it was asked for the worst case and fills it in."""
    from dataclasses import replace

    results = [fake_runner(config) for config in configs]
    if worst_case is None:
        return results
    return [replace(result, n_star_worst=min(result.n_star, 45), worst_strings_tried=worst_case.budget)
            for result in results]


def test_a_sweep_with_the_worst_case_reruns_finished_runs_without_one(tmp_path):
    configs = [RunConfig(language="(ab)*", pe=pe, seed=0, steps=1) for pe in ("nope", "rope_p")]
    run_sweep(configs, tmp_path, pack_runner=_searching_runner, pack=1)
    runs = read_results(tmp_path).runs
    assert runs["n_star_worst"].isna().all() and len(finished_run_ids(tmp_path)) == 2
    assert finished_run_ids(tmp_path, worst_case=True) == set()
    summary = run_sweep(configs, tmp_path, pack_runner=_searching_runner, pack=1,
                        worst_case=SearchSettings(budget=7))
    assert summary.completed == 2 and summary.skipped == 0
    runs = read_results(tmp_path).runs.set_index("pe")
    assert runs.loc["rope_p", "n_star"] == 500 and runs.loc["rope_p", "n_star_worst"] == 45
    assert runs.loc["nope", "worst_strings_tried"] == 7 and set(runs["run_id"]) == {c.run_id() for c in configs}
    again = run_sweep(configs, tmp_path, pack_runner=_searching_runner, pack=1, worst_case=SearchSettings(budget=7))
    assert again.skipped == 2


@pytest.fixture(scope="module")
def tiny_model(tmp_path_factory):
    """A tiny (ab)* model trained 20 steps and tested at 41..50 (6 strings per length)."""
    from formal_rope.cli import main

    path = tmp_path_factory.mktemp("attack") / "m.zip"
    argv = ["train", "--lang", "(ab)*", "--pe", "nope", *TINY, "--out", str(path), "--json", "--quiet"]
    argv[argv.index("41..44")] = "41..50"
    try:
        main(argv)
    except SystemExit as exit_:
        assert not exit_.code
    return path


def test_attack_counts_no_length_where_nothing_was_scored(tiny_model, capsys):
    """--start 0 --budget 0: nothing is scored at the odd lengths of (ab)* (only negatives, 2^L of
    them), so no length passes; the old search printed the last length as the worst-case N*, and
    `complete: true`. With --start 0 the start sets test nothing, so their N* is 0 too."""
    code, out, err = run_main(capsys, ["attack", str(tiny_model), "--start", "0", "--budget", "0", "--json"])
    found = json.loads(out)
    assert code == 0, err
    assert found["n_star_worst"] == 0 and found["n_star_start"] == 0 and found["complete"] is False
    assert found["per_length"][0]["tried"] == 0 and found["per_length"][0]["unscored"] == ["negative"]
    code, out, err = run_main(capsys, ["attack", str(tiny_model), "--start", "0", "--budget", "8", "--json"])
    found = json.loads(out)
    assert code == 0 and found["n_star_start"] == 0 and found["n_star_worst"] == 0
    code, out, _ = run_main(capsys, ["attack", str(tiny_model), "--start", "0", "--budget", "0"])
    assert code == 0 and "not counted" in out


@settings(max_examples=6)
@given(start=st.integers(0, 3), budget=st.integers(0, 12), first=st.integers(0, 45), count=st.integers(1, 4))
def test_attack_never_counts_an_untested_length(tiny_model, start, budget, first, count):
    """Any --start, --budget and lengths: worst-case N* <= N* of the start sets, and every length it
    counts had strings of each class that exists there scored, in the start set and in the search."""
    import contextlib
    import io

    from formal_rope.cli import main

    argv = ["attack", str(tiny_model), "--start", str(start), "--budget", str(budget),
            "--lengths", f"{first}..{first + count - 1}", "--json"]
    out = io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.suppress(SystemExit):
        main(argv)
    found = json.loads(out.getvalue())
    assert found["n_star_worst"] <= found["n_star_start"]
    for entry in found["per_length"]:
        if entry["length"] <= found["n_star_worst"] and entry["passed"]:
            assert entry["tried"] > 0 and not entry["unscored"] and not entry["start_unscored"]
        if not entry["passed"] and entry["length"] <= found["n_star_worst"]:
            assert found["n_star_worst"] == 0 and entry is found["per_length"][0]
    assert not found["complete"] or all(not e["unscored"] and not e["start_unscored"] for e in found["per_length"])
    if start == 0:
        assert found["n_star_start"] == 0 and found["n_star_worst"] == 0


def test_attack_and_train_search_the_empty_string(tiny_model, capsys):
    """Length 0 (the empty string) in attack's --lengths and train's --test-lengths with the search:
    the old search ended in `cannot reshape array of size 0` (attack: a traceback; train: a failed run)."""
    code, out, err = run_main(capsys, ["attack", str(tiny_model), "--lengths", "0..3", "--budget", "8", "--json"])
    assert code == 0, err
    found = json.loads(out)
    assert found["per_length"][0]["length"] == 0 and found["per_length"][0]["tried"] == 1
    code, out, err = run_main(capsys, ["attack", str(tiny_model), "--lengths", "0..3", "--budget", "8"])
    assert code == 0 and "Traceback" not in err
    argv = ["train", "--lang", "(ab)*", "--pe", "nope", *TINY, "--eval", "worst-case", "--worst-case-budget", "8",
            "--no-save", "--json"]
    argv[argv.index("41..44")] = "0..5"
    code, out, err = run_main(capsys, argv)
    result = json.loads(out)
    assert code == 0 and result["status"] == "ok" and result["error"] is None, err
    assert result["n_star_worst"] is not None and result["n_star_worst"] <= result["n_star"]
    assert [r["length"] for r in result["per_length"]] == list(range(6))
