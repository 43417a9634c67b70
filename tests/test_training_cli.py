"""`formalrope train`: JSON output, checkpoint, summary table, user errors (exit 2)."""

from __future__ import annotations

import json

import pytest

from formal_rope.commands.run_options import parse_length_range, parse_periods
from formal_rope.errors import FormalRopeError

TINY_ARGS = ["--steps", "5", "--layers", "1", "--d-model", "16", "--heads", "2", "--batch-size", "8",
             "--n-per-length", "4", "--test-lengths", "41..43"]


def _run(argv, capsys):
    from formal_rope.cli import main

    with pytest.raises(SystemExit) as exit_info:
        main(argv)
        raise SystemExit(0)
    captured = capsys.readouterr()
    return exit_info.value.code or 0, captured.out, captured.err


def test_train_json_and_checkpoint(tmp_path, capsys):
    out = tmp_path / "model.zip"
    code, stdout, _ = _run(["train", "--lang", "(ab)*", "--pe", "rope_p", "--periods", "auto", *TINY_ARGS,
                            "--out", str(out), "--json"], capsys)
    assert code == 0
    payload = json.loads(stdout)
    assert payload["status"] == "ok" and payload["resolved_periods"] == [2]
    assert [r["length"] for r in payload["per_length"]] == [41, 42, 43]
    assert payload["checkpoint"] == str(out) and out.exists()
    from formal_rope.training.trained_classifier import load_checkpoint

    assert len(load_checkpoint(out).classify(["ab", "ba"])) == 2


def test_train_summary_table(tmp_path, capsys):
    code, stdout, _ = _run(["train", "--lang", "(aa)*", "--pe", "nope", *TINY_ARGS, "--no-save", "--quiet"], capsys)
    assert code == 0
    assert "N*" in stdout and "first failing string" in stdout and "per-length accuracy" in stdout


@pytest.mark.parametrize(
    "argv, message",
    [
        (["--pe", "alibi"], "unknown positional encoding"),
        (["--pe", "rope", "--base", "0"], "base"),
        (["--pe", "rope", "--base", "-5"], "base"),
        (["--pe", "rope_p", "--periods", "0,2"], "periods"),
        (["--pe", "rope_p", "--periods", "x"], "periods"),
        (["--pe", "rope", "--scale", "huge"], "scale"),
        (["--pe", "rope", "--test-lengths", "50..40"], "test-lengths"),
    ],
)
def test_user_errors_exit_2(argv, message, capsys):
    code, _, stderr = _run(["train", "--lang", "(ab)*", *argv, "--no-save"], capsys)
    assert code == 2
    assert message in stderr
    assert "Traceback" not in stderr


def test_unknown_language_exits_2(capsys):
    code, _, stderr = _run(["train", "--lang", "(ab", "--no-save"], capsys)
    assert code == 2 and "error" in stderr


def test_option_parsers():
    assert parse_periods(None) is None and parse_periods("auto") is None and parse_periods("AUTO") is None
    assert parse_periods("2") == (2,) and parse_periods("2,3") == (2, 3)
    assert parse_length_range("41..500") == (41, 500) and parse_length_range("7") == (7, 7)
    with pytest.raises(FormalRopeError):
        parse_length_range("a..b")
    with pytest.raises(FormalRopeError, match="one range"):
        parse_length_range("41,45")


def _strict_json(text: str):
    """json.loads that rejects the non-standard NaN/Infinity tokens, as strict parsers (jq, JS) do."""

    def reject(token):
        raise ValueError(f"non-standard JSON token {token}")

    return json.loads(text, parse_constant=reject)


def test_diverged_run_prints_strict_json(capsys):
    # Regression: a diverged run's NaN accuracy/loss used to be printed as the bare token NaN.
    code, stdout, _ = _run(["train", "--lang", "(ab)*", *TINY_ARGS, "--lr", "1e6", "--no-save", "--json"], capsys)
    payload = _strict_json(stdout)
    assert code == 0 and payload["status"] == "diverged"
    assert payload["accuracy"] is None and payload["final_loss"] is None and payload["per_length"] == []


def test_environment_errors_exit_2_before_training(tmp_path, monkeypatch, capsys):
    """Regression: a checkpoint path that cannot be written, a device or attention implementation
    this machine lacks, and a bad partial_rope fraction were recorded as a failed run (exit 1, or a
    traceback after training for the checkpoint) instead of a user error up front."""
    import torch

    import formal_rope.kernels as kernels

    blocker = tmp_path / "a-file"
    blocker.write_text("")
    cases = [
        (["--out", str(blocker / "model.zip")], "cannot write the checkpoint"),
        (["--out", str(tmp_path)], "is a folder"),
        (["--pe", "partial_rope", "--rope-fraction", "2", "--no-save"], "fraction"),
        (["--device", "nodevice", "--no-save"], "unknown torch device"),
    ]
    if not torch.cuda.is_available():
        cases.append((["--device", "cuda", "--no-save"], "no CUDA device"))
    for extra, message in cases:
        code, stdout, stderr = _run(["train", "--lang", "(ab)*", *TINY_ARGS, "--quiet", *extra], capsys)
        assert code == 2 and message in stderr and "Traceback" not in stderr, (extra, stderr)
        assert "status" not in stdout  # nothing was trained

    def no_triton():
        raise kernels.AttentionImplError("attention impl 'triton' needs the triton package")

    monkeypatch.setattr(kernels, "_triton_module", no_triton)
    code, _, stderr = _run(["train", "--lang", "(ab)*", *TINY_ARGS, "--attention", "triton", "--no-save"], capsys)
    assert code == 2 and "triton" in stderr


# ----------------------------------------------------------------------------------------------
# Issue 9: options without effect, limits, lists of test lengths, the missing options


@pytest.mark.parametrize(
    "argv, message",
    [
        (["--pe", "nope", "--base", "5"], "--base has no effect with --pe nope"),
        (["--pe", "rope_p", "--base", "5"], "--base has no effect with --pe rope_p"),
        (["--pe", "rope", "--periods", "2"], "--periods has no effect with --pe rope"),
        (["--pe", "rope", "--rope-fraction", "0.3"], "--rope-fraction has no effect with --pe rope"),
        (["--pe", "sipe_p", "--phase-precision", "fp32"], "--phase-precision has no effect with --pe sipe_p"),
        (["--pe", "nope", "--set", "base=5"], "--set base has no effect with --pe nope"),
        (["--pe", "rope", "--out", "x.zip"], "--no-save writes none"),
        (["--pe", "rope", "--threads", "2", "--device", "cuda"], "--threads sets torch's CPU threads"),
        (["--lang", "Σ*a", "--pe", "rope_p"], "not in LTL[P,MOD]"),
        (["--pe", "rope", "--threads", "0"], "--threads must be at least 1"),
        (["--pe", "rope", "--test-lengths", "41..99999999999"], "this run cannot finish"),
        (["--pe", "rope", "--steps", "99999999999999999999"], "this run cannot finish"),
        (["--pe", "rope", "--test-lengths", "0..2000000,3"], "more than 1,000,000"),
        (["--pe", "rope", "--train-lengths", "0..4,7"], "--train-lengths takes one range"),
        (["--pe", "rope", "--seed", "-1"], "seed must be non-negative"),
        (["--pe", "rope", "--set", "steps=1,2"], "takes one value"),
        (["--pe", "rope", "--set", "colour=red"], "unknown run setting 'colour'"),
        (["--pe", "rope", "--weight-decay", "-1"], "weight_decay and grad_clip must be non-negative"),
        (["--pe", "rope", "--lr-schedule", "linear"], "unknown lr schedule"),
    ],
)
def test_options_without_effect_or_out_of_reach_are_errors(argv, message, capsys):
    # Regression (issues 9.7, 9.12): these were ignored, resolved to NoPE in silence, or started runs
    # with an ETA of centuries.
    language = [] if "--lang" in argv else ["--lang", "(ab)*"]
    code, stdout, stderr = _run(["train", *language, *argv, "--no-save"], capsys)
    assert code == 2 and message in stderr and "Traceback" not in stderr, stderr
    assert "status" not in stdout


def test_test_length_lists_and_the_new_training_options_reach_the_run(capsys):
    # Regression (issue 9.13): --test-lengths 41,45,50 was refused; lengths, lr schedule, warm-up,
    # weight decay, near-misses and -a were TOML-only.
    code, stdout, stderr = _run(["train", "--lang", "(ab)*", *TINY_ARGS[:-2], "--test-lengths", "41,45,50",
                                 "--train-lengths", "2..12", "--lr-schedule", "cosine", "--warmup-steps", "2",
                                 "--weight-decay", "0.1", "--train-near-miss", "0.25", "-a", "abc",
                                 "--set", "grad_clip=0.5", "--no-save", "--json"], capsys)
    payload = json.loads(stdout)
    config = payload["config"]
    assert code == 0 and [r["length"] for r in payload["per_length"]] == [41, 45, 50]
    assert payload["n_star"] in (0, 41, 45, 50)
    assert (config["train_min_length"], config["train_max_length"], config["lr_schedule"], config["warmup_steps"]) == (
        2, 12, "cosine", 2)
    assert (config["weight_decay"], config["train_near_miss_fraction"], config["grad_clip"]) == (0.1, 0.25, 0.5)
    assert payload["alphabet"] == ["a", "b", "c"] and config["test_lengths"] == [41, 45, 50]


def test_rope_p_auto_periods_never_make_it_nope(capsys):
    # Issue 43.4: rope_p auto on an LTL[P] language (least period 1) takes period 2 and says so; an
    # explicit period 1 still gets the NoPE note (issue 9.12).
    code, stdout, stderr = _run(["train", "--lang", "aΣ*", "--pe", "rope_p", *TINY_ARGS, "--no-save", "--json"], capsys)
    assert code == 0 and "periods auto resolved to 2" in stderr and json.loads(stdout)["resolved_periods"] == [2]
    assert "this run is NoPE" not in stderr
    code, stdout, stderr = _run(["train", "--lang", "aΣ*", "--pe", "sipe_p", "--periods", "1", *TINY_ARGS,
                                 "--no-save", "--json"], capsys)
    assert code == 0 and "this run is NoPE" in stderr and json.loads(stdout)["resolved_periods"] == [1]
    code, _, stderr = _run(["train", "--lang", "Σ*a", "--pe", "rope_p", "--periods", "2", *TINY_ARGS, "--no-save",
                            "--quiet"], capsys)
    # Only the note saying how the language was read remains; nothing about periods or NoPE.
    notes = [line for line in stderr.splitlines() if line.startswith("note")]
    assert code == 0 and all("registry language" in line for line in notes) and "NoPE" not in stderr


def test_checkpoint_out_creates_missing_folders(tmp_path, capsys):
    out = tmp_path / "a" / "b" / "m.zip"
    code, _, _ = _run(["train", "--lang", "(ab)*", *TINY_ARGS, "--out", str(out), "--quiet"], capsys)
    assert code == 0 and out.is_file()


def test_train_and_sweep_say_how_the_language_was_read(capsys):
    """Issue 9.6: a registry alphabet is never applied silently; train and sweep say so like classify."""
    from tests.cli_support import run_main

    code, _, stderr = run_main(capsys, ["train", "--lang", "Σ*abΣ*", "--steps", "2", "--layers", "1", "--d-model", "8",
                                        "--heads", "1", "--test-lengths", "41", "--n-per-length", "4", "--no-save",
                                        "--quiet"])
    assert code == 0 and "registry language contains_ab" in stderr and "{a, b, c}" in stderr
    code, _, stderr = run_main(capsys, ["sweep", "--lang", "P(a)", "--pe", "nope", "--dry-run"])
    assert code == 0 and "'P(a)' read as an LTL formula" in stderr


@pytest.mark.parametrize(
    "argv, message",
    [
        (["--pe", "rope_p", "--periods", "100000000000"], "period 100,000,000,000 is too large"),
        (["--pe", "rope_p", "--periods", "2," + "1" + "0" * 23], "is too large"),
        (["--pe", "sipe_p", "--set", "periods=[2,100000000000]"], "is too large"),
        (
            ["--pe", "rope_p", "--periods", "2,5,7,11,13"],
            "5 periods (2,5,7,11,13) but rope_p with d_model 16 and 2 heads has 4 rotary pairs per head",
        ),
        (["--pe", "sipe_p", "--periods", "2,3,5,7,11,13,17,19,23"], "sipe_p with d_model 16 has 8 sin/cos pairs"),
    ],
)
def test_periods_that_cannot_be_built_or_would_be_dropped_exit_2_before_training(argv, message, capsys):
    # Regression: --periods 10^11 started the run and was recorded failed (MemoryError: 745 GiB;
    # 10^23: OverflowError), and a fifth period on a model with 4 rotary pairs per head was dropped
    # without a word (the same final loss as without it, under another run id).
    code, stdout, stderr = _run(["train", "--lang", "(ab)*", *TINY_ARGS, *argv, "--no-save", "--json"], capsys)
    assert code == 2 and message in " ".join(stderr.split()) and "Traceback" not in stderr, stderr
    assert stdout == ""  # nothing trained, no result printed


def test_as_many_periods_as_pairs_train_and_fewer_are_repeated_over_the_pairs(capsys):
    for periods in ("2,3,5,7", "2,3"):
        code, stdout, _ = _run(["train", "--lang", "(ab)*", *TINY_ARGS, "--pe", "rope_p", "--periods", periods,
                                "--no-save", "--json"], capsys)
        assert code == 0 and json.loads(stdout)["resolved_periods"] == [int(p) for p in periods.split(",")]


def test_a_failed_run_has_no_n_star(monkeypatch, capsys):
    # Regression: a failed run showed `N* 0` and JSON "n_star": 0, as if it had been measured.
    import formal_rope.runs.pack as training

    def broken(*args, **kwargs):
        raise RuntimeError("evaluation exploded")

    monkeypatch.setattr(training, "evaluate_pack", broken)
    code, stdout, stderr = _run(["train", "--lang", "(ab)*", *TINY_ARGS, "--no-save", "--json"], capsys)
    payload = _strict_json(stdout)
    assert code == 1 and payload["status"] == "failed" and "evaluation exploded" in stderr
    assert payload["n_star"] is None and payload["accuracy"] is None
    code, stdout, _ = _run(["train", "--lang", "(ab)*", *TINY_ARGS, "--no-save", "--quiet"], capsys)
    row = next(line for line in stdout.splitlines() if "N*" in line)
    assert code == 1 and "not measured" in row and " 0 " not in row


def test_an_explicit_alphabet_equal_to_the_languages_own_is_the_same_run(capsys):
    # Regression: `-a ab` on ab_star gave another run id for a bit-identical training, so a rerun
    # trained it again and a report counted it twice.
    def run(*alphabet):
        code, stdout, _ = _run(["train", "--lang", "ab_star", *TINY_ARGS, *alphabet, "--no-save", "--json"], capsys)
        assert code == 0
        return json.loads(stdout)

    own = run()
    for alphabet in (["-a", "ab"], ["-a", "a,b"]):
        same = run(*alphabet)
        assert same["run_id"] == own["run_id"] and same["config"]["alphabet"] is None
        assert same["final_loss"] == own["final_loss"]
    for alphabet in (["-a", "ba"], ["-a", "abc"]):  # other token ids / another language: other runs
        assert run(*alphabet)["run_id"] != own["run_id"]


def test_resume_without_a_saved_state_says_so(tmp_path, capsys):
    # Regression: --resume with no state of this run (settings changed, so its state key did too)
    # started at step 0 in silence.
    from formal_rope.storage.training_state import open_state_store

    state_dir = tmp_path / "state"
    argv = ["train", "--lang", "(ab)*", *TINY_ARGS, "--checkpoint-every", "2", "--state-dir", str(state_dir),
            "--resume", "--no-save", "--json"]
    code, stdout, stderr = _run(argv, capsys)
    assert code == 0 and json.loads(stdout)["steps_done"] == 5
    assert "note: --resume: no saved training state of this run" in stderr and str(state_dir) in stderr
    assert "other runs" not in stderr
    open_state_store(str(state_dir)).save("0123456789abcdef", b"a state of a run with other settings")
    code, _, stderr = _run(argv, capsys)
    assert code == 0 and "holds 1 state(s) of other runs" in " ".join(stderr.split())
