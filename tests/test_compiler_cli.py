"""`formalrope compile` and `formalrope run` through the real entry point."""

from __future__ import annotations

import json
import math
import warnings

import pytest

from formal_rope.cli import main


def _run(capsys, argv, stdin=None, monkeypatch=None):
    if stdin is not None:
        import io

        monkeypatch.setattr("sys.stdin", io.StringIO(stdin))
    try:
        main(argv)
        code = 0  # main() returns normally on success
    except SystemExit as exit_:
        code = exit_.code
    out, err = capsys.readouterr()
    return code, out, err


def _verdicts(out: str) -> list[bool]:
    return [row["accepted"] for row in json.loads(out)["results"]]


def test_compile_json_save_and_run(tmp_path, capsys, monkeypatch):
    model = tmp_path / "m.zip"
    code, out, _ = _run(capsys, ["compile", "ltl:P(a) & MOD_2^0", "--alphabet", "ab", "--verify-to", "40",
                                 "--out", str(model), "--json"])
    assert code == 0
    report = json.loads(out)
    for key in ("formula", "format", "f_large", "layers", "heads", "d_model", "certified_length",
                "verified_strings", "verified_max_length", "first_disagreement"):
        assert key in report
    assert report["certified_length"] is None and report["first_disagreement"] is None
    assert report["verified_max_length"] == 40 and report["layers"] == 2 and report["format"] == "fp32"
    assert math.isclose(report["f_large"], 103.972, rel_tol=1e-4)

    code, out, _ = _run(capsys, ["run", str(model), "ab", "bba", "", "--json"])
    assert code == 0 and _verdicts(out) == [False, True, False]
    report = json.loads(out)
    assert (report["format"], report["mode"], report["certified_length"]) == ("fp32", "emulated", None)
    assert [row["string"] for row in report["results"]] == ["ab", "bba", ""]
    assert [row["beyond_certified_length"] for row in report["results"]] == [False] * 3
    code, out, _ = _run(capsys, ["run", str(model), "--json"], stdin="a\n\nbab\n", monkeypatch=monkeypatch)
    assert code == 0 and _verdicts(out) == [True, False, True]

    code, out, _ = _run(capsys, ["run", str(model), "--trace", "abba", "--json"])
    trace = json.loads(out)
    assert trace["positions"] == ["bos", "a", "b", "b", "a", "eos"]
    assert trace["coordinates"]["P(a)"] == [0, 0, 1, 1, 1, 1]
    assert trace["coordinates"]["MOD_2^0"] == [0, 0, 1, 0, 1, 0]


def test_compile_human_report_shows_margins_and_certificate(capsys):
    # g ≈ 2π/7 + 1e-3: the key 7 back nearly ties with the target, so N_max = 6 (see the formula tests).
    code, out, _ = _run(capsys, ["compile", "Y(a)", "-a", "ab", "--freq", "0.8985979", "--scale", "1024",
                                 "--verify-to", "20"])
    assert code == 0
    assert "certified length: 6" in out and "first disagreement" in out and "outside" in out
    assert "margin" in out and "RoPE_NP" in out


def test_compile_errors_exit_2(capsys, tmp_path):
    code, _, err = _run(capsys, ["compile", "a S b"])
    assert code == 2 and "S (since)" in err
    code, _, err = _run(capsys, ["compile", "P(a)", "--format", "fp7"])
    assert code == 2 and "fp7" in err
    code, _, err = _run(capsys, ["compile", "P(a", "-a", "ab"])
    assert code == 2 and "^" in err
    junk = tmp_path / "junk.zip"
    junk.write_text("junk")
    code, _, err = _run(capsys, ["run", str(junk), "a"])
    assert code == 2 and "not a formal-rope model file" in err


# ------------------------------------------------------------------------------ regressions
def test_narrow_format_gets_a_finite_y_scale(capsys):
    # e3m4 (max 15.5): 2·f_large = 10 exceeds max_finite/4, so the power-of-two range was empty and the
    # compiler picked C = 16, which overflows ("scale 16 overflows e3m4") although C = 12 works.
    code, out, err = _run(capsys, ["compile", "Y(a)", "-a", "ab", "-F", "e3m4", "--verify-to", "0",
                                   "--exhaustive", "3", "--json"])
    assert code == 0, err
    report = json.loads(out)
    assert report["y_scale"] <= 15.5 and report["certified_length"] >= 1


def test_lower_bound_certified_length_is_marked(capsys):
    # fp64: the realized scan stops at --certify-max-length without a failure; the length is only
    # a lower bound and used to be printed as if exact.
    argv = ["compile", "Y(a)", "-a", "ab", "-F", "fp64", "--verify-to", "0", "--exhaustive", "2",
            "--certify-max-length", "30"]
    code, out, _ = _run(capsys, argv + ["--json"])
    report = json.loads(out)
    assert code == 0 and report["certified_length"] == 30 and report["certified_length_is_lower_bound"] is True
    code, out, _ = _run(capsys, argv)
    assert "certified length: >= 30" in out
    code, out, _ = _run(capsys, ["compile", "Y(a)", "-a", "ab", "--verify-to", "0", "--exhaustive", "2", "--json"])
    assert json.loads(out)["certified_length_is_lower_bound"] is False


def test_max_states_option_and_early_mode_checks(capsys):
    # The DFA-size error tells users to pass --max-states, which compile did not accept.
    code, _, err = _run(capsys, ["compile", "Y^12(a)", "-a", "ab", "--verify-to", "20", "--max-states", "100"])
    assert code == 2 and "more than 100 states" in err and "Traceback" not in err
    code, _, err = _run(capsys, ["compile", "P(a)", "-a", "ab", "--mode", "native", "-F", "fp8e4m3"])
    assert code == 2 and "no native torch dtype" in err
    code, _, err = _run(capsys, ["compile", "P(a)", "-a", "ab", "--mode", "fast"])
    assert code == 2 and "unknown evaluation mode" in err


def test_run_refuses_weights_that_overflow_and_notes_uncertified_lengths(tmp_path, capsys):
    model = tmp_path / "y.zip"
    code, _, _ = _run(capsys, ["compile", "Y(a)", "-a", "ab", "--freq", "0.8985979", "--scale", "1024",
                               "--verify-to", "0", "--exhaustive", "2", "--out", str(model)])
    assert code == 0
    # N_max = 6 here: the 8-symbol string is beyond it and gets a note on stderr.
    code, out, err = _run(capsys, ["run", str(model), "ab", "aaaaaaab", "--json"])
    assert code == 0 and len(json.loads(out)["results"]) == 2
    assert "1 of 2 strings are longer than the model's certified length 6" in err
    # C = 1024 fits fp16 but not e3m2 (max 14): an overflowed weight made every score NaN and every
    # verdict "rejected"; now it is a user error.
    code, out, err = _run(capsys, ["run", str(model), "ab", "-F", "e3m2"])
    assert code == 2 and "do not fit in e3m2" in err and out == ""


def test_trace_json_stays_valid_when_scores_overflow(tmp_path, capsys):
    # C = 15.5 fits e3m4 but its rotated scores overflow (certified length 2): the NaNs reached the
    # trace as the invalid JSON token NaN, with numpy RuntimeWarnings on stderr.
    model = tmp_path / "y.zip"
    code, _, _ = _run(capsys, ["compile", "Y(a)", "-a", "ab", "-F", "e3m4", "-C", "15.5", "--verify-to", "0",
                               "--exhaustive", "2", "--out", str(model)])
    assert code == 0
    with warnings.catch_warnings():
        warnings.simplefilter("error", RuntimeWarning)
        code, out, err = _run(capsys, ["run", str(model), "--trace", "abab", "--json"])
    trace = json.loads(out, parse_constant=lambda token: pytest.fail(f"invalid JSON token {token}"))
    assert code == 0 and None in trace["coordinates"]["Y(a)"] and "RuntimeWarning" not in err


def test_bad_out_path_is_refused_before_compiling_and_missing_folders_are_created(tmp_path, capsys):
    code, _, err = _run(capsys, ["compile", "P(a)", "-a", "ab", "--out", str(tmp_path)])
    assert code == 2 and "is a directory" in err
    blocker = tmp_path / "file"
    blocker.write_text("")
    code, _, err = _run(capsys, ["compile", "P(a)", "-a", "ab", "--out", str(blocker / "m.zip")])
    assert code == 2 and err.startswith("error: cannot write model file")
    # Issue 9: compile refused a missing folder while train --out and report --plot create them.
    target = tmp_path / "missing" / "deeper" / "m.zip"
    code, _, err = _run(capsys, ["compile", "P(a)", "-a", "ab", "--verify-to", "0", "--exhaustive", "1",
                                 "--out", str(target)])
    assert code == 0 and target.is_file() and not (target.parent / "m.zip.tmp").exists()


def test_run_table_says_which_mode_and_format_produced_the_verdicts(tmp_path, capsys):
    model = tmp_path / "m.zip"
    assert _run(capsys, ["compile", "P(a)", "-a", "ab", "--verify-to", "0", "--exhaustive", "1",
                         "--out", str(model)])[0] == 0
    code, out, _ = _run(capsys, ["run", str(model), "ba"])
    assert code == 0 and "emulated fp32" in out and "yes" in out
    code, out, _ = _run(capsys, ["run", str(model), "ba", "--mode", "native", "-F", "bf16"])
    assert code == 0 and "native bf16" in out


def test_trace_of_a_long_string_has_one_row_per_position(tmp_path, capsys):
    # 80 columns cannot hold 42 position columns (they were squeezed to single characters).
    model = tmp_path / "m.zip"
    assert _run(capsys, ["compile", "P(a)", "-a", "ab", "--verify-to", "0", "--exhaustive", "1",
                         "--out", str(model)])[0] == 0
    code, out, _ = _run(capsys, ["run", str(model), "--trace", "ab" * 20])
    rows = [line for line in out.splitlines() if line.startswith("│")]
    assert code == 0 and len(rows) == 42 and "│ 41 │ eos" in rows[-1]


def test_compile_without_sampled_verification_builds_no_dfa(capsys):
    # Issue 9: `compile 'Y^20(a)' --verify-to 0 --exhaustive 0` was refused after 10 s because the
    # verification DFA (2^20 states) exceeded --max-states; only sampling needs that DFA.
    code, out, err = _run(capsys, ["compile", "Y^12(a)", "-a", "ab", "--verify-to", "0", "--exhaustive", "3",
                                   "--max-states", "100", "--json"])
    data = json.loads(out)
    assert code == 0 and data["ok"] and data["verified_strings"] == 15 and data["disagreements"] == 0
    code, out, err = _run(capsys, ["compile", "Y^12(a)", "-a", "ab", "--verify-to", "0", "--exhaustive", "0",
                                   "--max-states", "100", "--json"])
    assert code == 0 and json.loads(out)["verified_strings"] == 1


@pytest.fixture(scope="module")
def y_fp32(tmp_path_factory):
    """Y(a) over {a, b} compiled for fp32 (certified to 709 there, to 43 in bf16)."""
    path = tmp_path_factory.mktemp("y") / "y.zip"
    main(["compile", "Y(a)", "-a", "ab", "--verify-to", "0", "--exhaustive", "2", "--out", str(path), "--json"])
    return path


@pytest.mark.parametrize("mode", ["emulated", "native"])
def test_run_in_another_format_recomputes_the_certificate_and_flags_longer_inputs(y_fp32, capsys, mode):
    # Issue 9: `run y.zip --format bf16 --json` on a^60 b printed [true] (accepts says false) with
    # nothing on stderr: the note used fp32's certified length 709, but in bf16 the head holds to 43.
    long = "a" * 60 + "b"
    code, out, err = _run(capsys, ["run", str(y_fp32), "--format", "bf16", "--mode", mode, long, "ab", "--json"])
    report = json.loads(out)
    assert code == 0 and report["certified_length"] == 43 and report["certificate_recomputed"] is True
    assert [row["beyond_certified_length"] for row in report["results"]] == [True, False]
    assert [row["length"] for row in report["results"]] == [61, 2]
    assert "1 of 2 strings are longer than the model's certified length 43 in bf16" in err
    assert "compiled for fp32: 709" in err
    code, out, err = _run(capsys, ["run", str(y_fp32), "--format", "bf16", "--mode", mode, "--trace", long, "--json"])
    trace = json.loads(out)
    assert trace["certified_length"] == 43 and trace["beyond_certified_length"] is True and "43 in bf16" in err
    code, out, err = _run(capsys, ["run", str(y_fp32), long, "--json"])  # fp32: inside 709, nothing flagged
    report = json.loads(out)
    assert report["certified_length"] == 709 and not report["results"][0]["beyond_certified_length"] and err == ""


def test_every_wrong_verdict_in_another_format_is_flagged(y_fp32):
    """Soundness against the DFA: in bf16 about a quarter of random strings up to length 200 get the
    wrong verdict; each must be flagged as beyond the recomputed certified length."""
    import numpy as np

    from formal_rope.automata import accepts, language_dfa
    from formal_rope.lang import resolve_language
    from formal_rope.model import evaluate, load_model

    rng = np.random.default_rng(7)
    strings = ["".join(rng.choice(["a", "b"], size=n)) for n in rng.integers(0, 201, size=120)]
    truth = accepts(language_dfa(resolve_language("Y(a)", "ab")), strings)
    result = evaluate(load_model(y_fp32), strings, fmt="bf16")
    wrong = result.accepted != truth
    assert wrong.sum() > 10  # the format really breaks the head
    assert not (wrong & ~result.beyond_certified_length).any()
    assert result.certificate.certified_length == 43 and result.certificate.recomputed
    same = evaluate(load_model(y_fp32), strings, fmt="fp32")
    assert not same.certificate.recomputed and same.n_beyond_certified == 0 and (same.accepted == truth).all()


def test_multi_character_symbols_are_read_as_accepts_reads_them(tmp_path, capsys):
    # Issue 9 item 2: `run mc.zip --trace 'open close open'` raised IndexError, and with --json
    # split the input into characters.
    model = tmp_path / "mc.zip"
    code, _, err = _run(capsys, ["compile", "P('open') & !Y('close')", "--verify-to", "0", "--exhaustive", "3",
                                 "--out", str(model)])
    assert code == 0, err
    code, out, err = _run(capsys, ["run", str(model), "--trace", "open close open", "--json"])
    trace = json.loads(out)
    assert code == 0 and trace["positions"] == ["bos", "open", "close", "open", "eos"] and trace["accepted"] is True
    assert trace["length"] == 3
    code, out, err = _run(capsys, ["run", str(model), "--trace", "open close open"])
    assert code == 0 and "close" in out and "Traceback" not in err
    code, out, _ = _run(capsys, ["run", str(model), "open close open", "open close", "--json"])
    assert _verdicts(out) == [True, False]
    code, out, err = _run(capsys, ["run", str(model), "--trace", "open shut"])
    assert code == 2 and "unknown symbol 'shut'" in err
    code, out, _ = _run(capsys, ["phases", str(model), "open close open", "--head", "1", "--json"])
    assert code == 0 and json.loads(out)["positions"] == ["<bos>", "open", "close", "open", "<eos>"]


def test_python_classify_warns_beyond_the_certified_length(y_fp32):
    from formal_rope.evaluation import load_runnable
    from formal_rope.model.certificate import BeyondCertifiedLengthWarning

    runnable = load_runnable(y_fp32)
    with pytest.warns(BeyondCertifiedLengthWarning, match="43 in bf16"):
        assert runnable.classify(["a" * 60 + "b"], fmt="bf16") == [True]  # wrong, and now flagged
    with warnings.catch_warnings():
        warnings.simplefilter("error", BeyondCertifiedLengthWarning)
        assert runnable.classify(["a" * 60 + "b"]) == [False]  # fp32: inside 709


def test_phases_flags_an_input_beyond_the_certified_length_of_its_dtype(y_fp32, capsys):
    from formal_rope.diagnostics import capture_heads

    long = "a" * 60 + "b"
    code, out, err = _run(capsys, ["phases", str(y_fp32), long, "-F", "bf16", "--json"])
    summary = json.loads(out)
    assert code == 0 and summary["certified_length"] == 43 and summary["beyond_certified_length"] is True
    assert "longer than the model's certified length 43 in bf16 (native)" in err
    code, out, err = _run(capsys, ["phases", str(y_fp32), long, "--json"])  # fp32: inside
    assert code == 0 and json.loads(out)["beyond_certified_length"] is False and err == ""
    captured = capture_heads(y_fp32, long, fmt="bf16")
    assert captured.beyond_certified_length and captured.certificate.certified_length == 43


def test_options_without_effect_get_a_note(capsys):
    # Issue 9 (class of item 12): --scale/--freq on a formula without Y heads, or --seed with no
    # sampled strings, were silently ignored.
    code, out, err = _run(capsys, ["compile", "P(a)", "-a", "ab", "--scale", "5", "--freq", "2", "--verify-to", "0",
                                   "--seed", "3", "--max-states", "10", "--json"])
    assert code == 0 and json.loads(out)["ok"]
    assert "note: --freq, --scale set the Y^k heads, and P(a) has none: no effect" in err
    assert "note: --seed, --max-states set the sampled verification strings" in err
    code, out, err = _run(capsys, ["compile", "Y(a)", "-a", "ab", "--scale", "1e6", "--verify-to", "30", "--seed", "1",
                                   "--json"])
    assert code == 0 and "note:" not in err
    code, out, err = _run(capsys, ["certify", "--scale", "1e6", "--max-length", "100", "--json"])
    assert code == 2 and "--max-length bounds the realized scan" in err
    code, out, err = _run(capsys, ["certify", "--scale", "1e300", "--json"])
    assert code == 0 and "overflows fp32" in err


def test_a_model_too_large_to_build_is_refused_up_front(capsys):
    # Y^99999 (a gate of 99999 nested P heads) ran for minutes and gigabytes before failing.
    code, out, err = _run(capsys, ["compile", "Y^99999(a)", "-a", "ab", "--verify-to", "0"])
    assert code == 2 and out == "" and "nested P heads" in err and "offsets up to about k =" in err


def test_deeply_nested_formulas_compile_or_are_refused_without_recursion_errors(capsys):
    # The DAG builder recursed once per nesting level: P(P(…(a)…)) 1000 deep raised RecursionError.
    from formal_rope.compiler import compile_formula

    deep = "P(" * 1100 + "a" + ")" * 1100
    compiled = compile_formula(deep, "ab", certify_mode="ideal")
    assert len(compiled.ir.layers) == 1100
    code, out, err = _run(capsys, ["compile", "P(" * 2000 + "a" + ")" * 2000, "-a", "ab", "--verify-to", "0"])
    assert code == 2 and "more than the compiler builds" in err and "Traceback" not in err


@pytest.mark.parametrize("damage", ["construct_formula", "constructs_type", "y_scale", "format"])
def test_damaged_certificate_records_are_reported_on_loading(y_fp32, tmp_path, capsys, damage):
    # The certificate is recomputed from metadata.json's construct records: damaged ones raised
    # ValueError tracebacks (or caret errors naming no file) from run.
    import zipfile

    with zipfile.ZipFile(y_fp32) as archive:
        members = {name: archive.read(name) for name in archive.namelist()}
    metadata = json.loads(members["metadata.json"])
    if damage == "construct_formula":
        metadata["constructs"][0]["formula"] = "Y(("
    elif damage == "constructs_type":
        metadata["constructs"] = "x"
    elif damage == "y_scale":
        metadata["y_scale"] = "big"
    else:
        metadata["format"] = "fp99"
    members["metadata.json"] = json.dumps(metadata).encode()
    target = tmp_path / f"{damage}.zip"
    with zipfile.ZipFile(target, "w") as archive:
        for name, data in members.items():
            archive.writestr(name, data)
    code, out, err = _run(capsys, ["run", str(target), "ab", "-F", "bf16"])
    assert code == 2 and out == "" and err.startswith(f"error: {target}: corrupt compiled model")
    assert len(err.strip().splitlines()) == 1


def test_compile_json_is_the_library_report(capsys):
    from formal_rope.compiler import compile_formula, compile_report, verify_compiled

    code, out, _ = _run(capsys, ["compile", "P(a) & MOD_2^0", "-a", "ab", "--verify-to", "30", "--json"])
    compiled = compile_formula("P(a) & MOD_2^0", "ab")
    assert code == 0 and json.loads(out) == compile_report(compiled, verify_compiled(compiled, verify_to=30))


def test_option_checks_belong_to_the_library_and_run_before_compiling(capsys, monkeypatch):
    from formal_rope.commands import compile as compile_command
    from formal_rope.compiler import CompileOptions, VerificationOptions, compile_formula, verify_compiled
    from formal_rope.errors import FormalRopeError

    with pytest.raises(FormalRopeError, match=r"seed \(--seed\)"):
        verify_compiled(compile_formula("P(a)", "ab"), seed=-1, verify_to=0)
    with pytest.raises(FormalRopeError, match="--per-length 0 samples no strings"):
        VerificationOptions(per_length=0)
    with pytest.raises(FormalRopeError, match=r"certify_max_length \(--certify-max-length\)"):
        CompileOptions(certify_max_length=0)
    assert CompileOptions(fmt="e8m23").fmt.name == "fp32"  # a format is parsed once, here
    monkeypatch.setattr(compile_command, "compile_formula",
                        lambda *a, **k: pytest.fail("compiled despite a bad option"))
    for argv in (["--seed", "-1"], ["--certify-max-length", "0"], ["--per-length", "0"], ["--freq", "-1"]):
        code, _, err = _run(capsys, ["compile", "P(a)", "-a", "ab", *argv])
        assert code == 2 and err.startswith("error: "), argv


def test_compile_options_state_the_library_defaults():
    # The CLI declares its options without importing the library (start-up path), so the defaults
    # it shows are written out: they must be the library's.
    import typer

    from formal_rope.automata import DEFAULT_MAX_STATES
    from formal_rope.cli import app
    from formal_rope.compiler import CompileOptions, VerificationOptions

    params = {param.name: param for param in typer.main.get_command(app).commands["compile"].params}
    assert params["format_name"].default == CompileOptions.fmt.name
    assert (params["verify_to"].default, params["exhaustive"].default, params["mode"].default) == (
        VerificationOptions.verify_to, VerificationOptions.exhaustive_up_to, VerificationOptions.mode)
    for name, default in (
        ("freq", f"{CompileOptions.freq:g}"), ("per_length", VerificationOptions.per_length),
        ("seed", VerificationOptions.seed), ("certify_max_length", CompileOptions.certify_max_length),
    ):
        assert params[name].default is None and f"default {default})" in params[name].help, name
    assert "realized (the model's own rounded scores, default)" in params["certify_mode"].help
    assert CompileOptions.certify_mode == "realized" and VerificationOptions.max_states is None
    assert DEFAULT_MAX_STATES == 10**6 and "(default 10^6)" in params["max_states"].help
