"""CLI: formalrope classify (in-process through formal_rope.cli.main)."""

from __future__ import annotations

import json

import pytest

from cli_support import main_call, run_main, torch_free_stdout

REQUIRED_KEYS = {
    "expression", "kind", "alphabet", "states", "monoid_size", "ltl_p", "ltl_p_mod", "mod_k",
    "star_free", "r_trivial", "l_trivial", "j_trivial", "witness",
}


def run(capsys, *argv):
    return run_main(capsys, argv)


@pytest.mark.parametrize(
    "expression, alphabet, ltl_p, ltl_p_mod, mod_k",
    [("(aa)*", None, False, True, 2), ("Σ*abΣ*", None, False, False, None), ("Σ*abΣ*", "ab", True, True, 1)],
)
def test_json_is_one_object_with_the_verdicts(capsys, expression, alphabet, ltl_p, ltl_p_mod, mod_k):
    argv = ["classify", expression, "--json"] + (["--alphabet", alphabet] if alphabet else [])
    code, out, err = run(capsys, *argv)
    assert code == 0
    data = json.loads(out)  # exactly one JSON document on stdout
    assert REQUIRED_KEYS <= set(data)
    assert (data["ltl_p"], data["ltl_p_mod"], data["mod_k"]) == (ltl_p, ltl_p_mod, mod_k)
    assert data["expression"] == "Σ*abΣ*" if "Σ*ab" in expression else data["expression"] == expression
    if not ltl_p_mod:
        assert data["witness"]["ltl_p_mod"]["k_bound"] == data["k_bound"]


def test_detection_note_goes_to_stderr(capsys):
    code, out, err = run(capsys, "classify", "MOD_2^0 & P(a)", "--alphabet", "ab", "--json")
    assert code == 0 and "LTL formula" in err
    data = json.loads(out)
    assert data["kind"] == "ltl" and data["mod_k"] == 2


def test_human_output_has_table_and_witnesses(capsys):
    code, out, err = run(capsys, "classify", "parity")
    assert code == 0
    assert "LTL[P,MOD]" in out and "star-free" in out
    assert "not LTL[P,MOD]" in out and "period 2" in out


def test_bad_expression_is_a_user_error(capsys):
    code, out, err = run(capsys, "classify", "(ab", "--json")
    assert code == 2 and out == ""
    assert "^" in err and "Traceback" not in err


def test_monoid_cap_is_a_user_error(capsys):
    code, out, err = run(capsys, "classify", "Σ*abΣ*", "--max-monoid-size", "3")
    assert code == 2 and "monoid" in err and "Traceback" not in err
    # One paragraph like every other user error, naming the option that raises the cap.
    assert err.splitlines()[-1].startswith("error: ") and "--max-monoid-size" in err


def test_att_file(capsys, mlregtest_dir):
    path = sorted(mlregtest_dir.glob("*.Zp.*.att"))[0]
    code, out, err = run(capsys, "classify", str(path), "--json")
    assert code == 0
    data = json.loads(out)
    assert data["kind"] == "att" and data["star_free"] is False


@pytest.mark.parametrize("entry", ["module", "cli"])
def test_classify_does_not_import_torch(entry):
    if entry == "module":  # the command module alone
        call = (
            "import typer\n"
            "from formal_rope.commands.classify import classify_command\n"
            "app = typer.Typer()\n"
            "app.command('classify')(classify_command)\n"
            "app.command('noop')(lambda: None)\n"
            "run = lambda: app(['classify', '(ab)*', '--json'], standalone_mode=False)\n"
        )
    else:  # the real entry point, which registers every command group
        call = main_call(["classify", "(ab)*", "--json"])
    stdout = torch_free_stdout(call)
    assert '"mod_k": 2' in stdout
