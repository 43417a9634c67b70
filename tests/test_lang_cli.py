"""CLI: `formalrope parse` and `formalrope languages` through the real entry point (exit codes,
stderr notes, caret errors, JSON), plus a subprocess check that they do not import torch."""

from __future__ import annotations

import json

import pytest

from cli_support import main_call, torch_free_stdout
from formal_rope.cli import main


def _run(capsys, *argv) -> tuple[int, str, str]:
    try:
        main(list(argv))
        code = 0
    except SystemExit as exit_:
        code = exit_.code or 0
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def test_parse_json_for_an_ltl_formula(capsys):
    code, out, err = _run(capsys, "parse", "P(a) ∧ MOD_2^0 → Y^2(b)", "--json")
    assert code == 0
    payload = json.loads(out)
    assert payload["kind"] == "ltl"
    assert payload["fragment"] == "LTL[P,Y,MOD]"
    assert payload["canonical"] == "P(a) & MOD_2^0 -> Y^2(b)"
    assert payload["alphabet"] == ["a", "b"]
    assert payload["ast"]["type"] == "Implies" and payload["ast"]["right"] == {
        "type": "Yesterday",
        "child": {"type": "Atom", "symbol": "b"},
        "k": 2,
    }
    assert "read as an LTL formula" in err


def test_parse_regex_table_output_and_unicode_switch(capsys):
    code, out, err = _run(capsys, "parse", "re:a.*b", "--alphabet", "a,b,c")
    assert code == 0
    assert "regex" in out and "aΣ*b" in out and "{a, b, c}" in out and "Concat" in out and "AnySymbol" in out
    assert "fragment" not in out
    code, out, _ = _run(capsys, "parse", "ltl:!a | b", "--unicode")
    assert code == 0 and "¬a ∨ b" in out and "LTL[P]" in out


def test_parse_registry_name_and_expression(capsys):
    code, out, err = _run(capsys, "parse", "(aa)*", "--json")
    payload = json.loads(out)
    assert code == 0 and payload["name"] == "aa_star" and payload["alphabet"] == ["a"]
    assert "registry language aa_star" in err


def test_parse_bad_input_exits_2_with_caret(capsys):
    code, out, err = _run(capsys, "parse", "ltl:(a&b")
    assert code == 2
    lines = err.splitlines()
    assert lines[0].startswith("error: unbalanced parentheses")
    echo = next(line for line in lines if "in expression:" in line)
    caret = lines[lines.index(echo) + 1]
    assert caret.index("^") == echo.index("(a&b")
    assert "Traceback" not in err and out == ""


@pytest.mark.parametrize(
    "argv, needle",
    [
        (["parse", "ltl:MOD_0^1", "--alphabet", "a"], "modulus"),
        (["parse", "ltl:Y^0(a)"], "k >= 1"),
        (["parse", "a{3,2}"], "upper bound"),
        (["parse", "abc", "--alphabet", "ab"], "not in the alphabet"),
        (["parse", "MOD_2^0"], "alphabet cannot be inferred"),
        (["parse", "a", "--alphabet", ","], "empty"),
        (["parse", "a", "--kind", "dfa"], "--kind"),
    ],
)
def test_parse_user_errors(capsys, argv, needle):
    code, _, err = _run(capsys, *argv)
    assert code == 2 and needle in err and "Traceback" not in err


def test_parse_att_file(capsys, tmp_path):
    path = tmp_path / "x.att"
    path.write_text("0 1 a a\n1 0 b b\n0\n", encoding="utf-8")
    code, out, _ = _run(capsys, "parse", str(path), "--json")
    payload = json.loads(out)
    assert code == 0 and payload["kind"] == "att" and payload["ast"] is None and payload["alphabet"] == ["a", "b"]


def test_languages_json_lists_registry_with_facts(capsys):
    code, out, _ = _run(capsys, "languages", "--json")
    assert code == 0
    rows = {row["name"]: row for row in json.loads(out)}
    assert rows["aa_star"]["expression"] == "(aa)*" and rows["aa_star"]["alphabet"] == ["a"]
    assert rows["contains_ab"]["alphabet"] == ["a", "b", "c"]
    if "states" in rows["aa_star"]:  # the automata stage is present
        assert rows["aa_star"]["states"] == 2
        assert rows["aa_star_ltl"]["states"] == rows["aa_star"]["states"]
    if "classes" in rows["aa_star"]:  # the classes stage is present
        assert rows["aa_star"]["classes"]["ltl_p_mod"] is True and rows["aa_star"]["classes"]["ltl_p"] is False


def test_languages_table_without_classes(capsys):
    code, out, _ = _run(capsys, "languages", "--no-classes")
    assert code == 0 and "aa_star" in out and "Σ*abΣ*" in out and "states" not in out


def test_cli_language_commands_do_not_import_torch():
    torch_free_stdout(main_call(["parse", "P(a)", "--json"]))


@pytest.mark.parametrize("text, column", [("P(a) S", 7), ("P(a) & Q(b)", 9), ("Y(a) b", 6)])
def test_parse_a_broken_formula_is_an_error_with_a_caret_not_a_regex(capsys, text, column):
    # Issue 9: `parse 'P(a) S'` exited 0 as the regex PaS over {P, S, a}.
    code, out, err = _run(capsys, "parse", text)
    assert code == 2 and out == ""
    lines = err.splitlines()
    assert lines[0].startswith("error: ") and f"re:{text}" in lines[0]
    echo = next(line for line in lines if "in expression:" in line)
    caret = lines[lines.index(echo) + 1]
    assert caret.index("^") == echo.index(text) + column - 1
    code, out, _ = _run(capsys, "parse", f"re:{text}", "--json")
    assert code == 0 and json.loads(out)["kind"] == "regex"  # the hint works


def test_classify_a_formula_over_its_own_symbols_whatever_registry_entry_it_spells(capsys):
    # Issue 9: P(b & Y(a)) equals contains_ab_ltl and was classified over {a, b, c} (not LTL[P]),
    # while P(Y(a) & b), the same formula, was over {a, b} (LTL[P]).
    results = []
    for text in ("P(b & Y(a))", "P(Y(a) & b)"):
        code, out, err = _run(capsys, "classify", text, "--json")
        assert code == 0
        data = json.loads(out)
        results.append((data["alphabet"], data["ltl_p"]))
        assert "registry" not in err
    assert results == [(["a", "b"], True), (["a", "b"], True)]


def test_compile_says_when_a_registry_entry_brings_its_alphabet(capsys):
    code, out, err = _run(capsys, "compile", "sigma_star_a_ltl", "--verify-to", "0", "--exhaustive", "3", "--json")
    assert code == 0 and json.loads(out)["alphabet"] == ["a", "b"]
    assert "registry language sigma_star_a_ltl" in err and "{a, b}" in err
