"""`formalrope compile` and `formalrope run` through the real entry point."""

from __future__ import annotations

import json
import math


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
    assert code == 0 and json.loads(out) == [False, True, False]
    code, out, _ = _run(capsys, ["run", str(model), "--json"], stdin="a\n\nbab\n", monkeypatch=monkeypatch)
    assert code == 0 and json.loads(out) == [True, False, True]

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
