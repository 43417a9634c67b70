"""CLI: formalrope dfa / accepts / equiv (in-process through formal_rope.cli.main)."""

from __future__ import annotations

import json

import pytest

from cli_support import main_call, run_main, torch_free_stdout


def run(capsys, monkeypatch, *argv, stdin: str | None = None):
    return run_main(capsys, argv, stdin=stdin, monkeypatch=monkeypatch)


def test_dfa_json(capsys, monkeypatch):
    code, out, err = run(capsys, monkeypatch, "dfa", "re:(ab)*", "--json")
    assert code == 0
    data = json.loads(out)
    assert data["alphabet"] == ["a", "b"] and data["n_states"] == 3
    assert data["transitions"] == [[1, 2], [2, 0], [2, 2]] and data["accepting"] == [0]


def test_dfa_table_and_detection_note(capsys, monkeypatch):
    code, out, err = run(capsys, monkeypatch, "dfa", "P(a) & MOD_2^0", "--alphabet", "ab")
    assert code == 0 and "4 states" in out and "→0" in out
    assert "read as an LTL formula" in err or "registry language" in err


def test_dfa_dot(capsys, monkeypatch):
    code, out, _ = run(capsys, monkeypatch, "dfa", "re:a*", "--dot")
    assert code == 0 and out.startswith("digraph") and "doublecircle" in out


def test_dfa_max_states_refusal(capsys, monkeypatch):
    code, out, err = run(capsys, monkeypatch, "dfa", "re:Σ*aΣ{12}", "--alphabet", "ab", "--max-states", "100")
    assert code == 2 and "--max-states" in err and "Traceback" not in err


def test_accepts_arguments_and_json(capsys, monkeypatch):
    code, out, _ = run(capsys, monkeypatch, "accepts", "ltl:MOD_2^0", "a", "aa", "", "aaa", "--alphabet", "a", "--json")
    assert code == 0 and json.loads(out) == [True, False, False, True]
    code, out, _ = run(capsys, monkeypatch, "accepts", "re:(ab)*", "ab", "ba")
    assert out.splitlines() == ["accept\tab", "reject\tba"]


def test_accepts_stdin_with_empty_line(capsys, monkeypatch):
    code, out, _ = run(capsys, monkeypatch, "accepts", "re:(ab)*", "--json", stdin="ab\n\nba\nabab\n")
    assert code == 0 and json.loads(out) == [True, True, False, True]


def test_accepts_unknown_symbol_is_a_user_error(capsys, monkeypatch):
    code, out, err = run(capsys, monkeypatch, "accepts", "re:(ab)*", "abc")
    assert code == 2 and "'c' at column 3" in err and "Traceback" not in err


def _verdict(out: str) -> dict:
    data = json.loads(out)
    return {key: data[key] for key in ("equivalent", "counterexample")}


def test_equiv(capsys, monkeypatch):
    code, out, _ = run(capsys, monkeypatch, "equiv", "ltl:P(a)", "re:Σ*aΣ*", "--alphabet", "ab", "--json")
    assert _verdict(out) == {"equivalent": True, "counterexample": None}
    assert json.loads(out)["alphabets_differ"] is False
    code, out, _ = run(capsys, monkeypatch, "equiv", "re:(aa)*", "re:a*", "--json")
    assert _verdict(out) == {"equivalent": False, "counterexample": "a"}
    code, out, _ = run(capsys, monkeypatch, "equiv", "re:a*", "re:(a|b)*", "--json")
    assert _verdict(out) == {"equivalent": False, "counterexample": "b"}  # compared over {a, b}
    code, out, _ = run(capsys, monkeypatch, "equiv", "re:(ab)*", "re:(ab)*|ε|b", "--json")
    assert json.loads(out)["counterexample"] == "b"
    code, out, _ = run(capsys, monkeypatch, "equiv", "re:a+", "re:a*")
    assert out.strip() == "not equivalent: ε is in re:a* but not in re:a+"


def test_equiv_says_the_alphabets_differ_before_the_counterexample(capsys, monkeypatch):
    # Issue 9: P(b & Y(a)) (over {a, b}) against the registry's contains_ab (over {a, b, c}): the
    # counterexample abc is about the alphabets, and the output must say so first.
    code, out, _ = run(capsys, monkeypatch, "equiv", "P(b & Y(a))", "contains_ab")
    lines = out.strip().splitlines()
    assert code == 0 and len(lines) == 2
    assert lines[0].startswith("the alphabets differ: P(b & Y(a)) is over {a, b}, contains_ab over {a, b, c}")
    assert lines[1].startswith("not equivalent: 'abc'")
    code, out, _ = run(capsys, monkeypatch, "equiv", "P(b & Y(a))", "contains_ab", "--json")
    data = json.loads(out)
    assert data["alphabets_differ"] is True and data["alphabets"] == [["a", "b"], ["a", "b", "c"]]
    code, out, _ = run(capsys, monkeypatch, "equiv", "P(b & Y(a))", "contains_ab", "-a", "abc")
    assert out.strip() == "equivalent over {a, b, c}"


def test_accepts_reads_a_formula_over_its_own_symbols(capsys, monkeypatch):
    # Issue 9: `accepts 'ltl:a S b' cb` said true (the registry's a_since_b is over {a, b, c}).
    code, out, err = run(capsys, monkeypatch, "accepts", "ltl:a S b", "cb")
    assert code == 2 and out == "" and "'c'" in err and err.startswith("error: ")
    code, out, err = run(capsys, monkeypatch, "accepts", "a_since_b", "cb")
    assert code == 0 and out.startswith("accept") and "registry language a_since_b" in err


def test_equiv_over_att_file(capsys, monkeypatch, mlregtest_dir):
    path = str(sorted(mlregtest_dir.glob("04.04.SL.*.att"))[0])
    code, out, _ = run(capsys, monkeypatch, "equiv", path, path, "--json")
    assert code == 0 and json.loads(out)["equivalent"] is True


@pytest.mark.parametrize(
    "command", [["accepts", "re:(ab)*", "ab"], ["dfa", "P(a)", "--json"], ["equiv", "re:a", "re:b"]]
)
def test_commands_do_not_import_torch(command):
    torch_free_stdout(main_call(command))


def test_dfa_table_is_capped_for_large_automata(capsys, monkeypatch):
    code, out, _ = run(capsys, monkeypatch, "dfa", "ltl:Y^9(a)", "--alphabet", "ab")
    assert code == 0 and "512 states" in out and "312 more states not shown" in out


def test_dfa_dot_keeps_non_ascii_symbols_literal(capsys, monkeypatch):
    """Graphviz does not read JSON's \\uXXXX escapes: the labels of (αβ)* were drawn as u03b1."""
    code, out, _ = run(capsys, monkeypatch, "dfa", "re:(αβ)*", "--dot")
    assert code == 0 and 'label="α"' in out and 'label="β"' in out and "\\u" not in out


def test_max_states_bounds_the_result_of_every_kind(capsys, monkeypatch, mlregtest_dir):
    """A symbol set or a .att file is never 'explored', so --max-states used to pass them through."""
    code, _, err = run(capsys, monkeypatch, "dfa", "re:a", "--max-states", "2")
    assert code == 2 and "more than 2 states" in err
    att = sorted(mlregtest_dir.glob("*.att"))[0]
    code, _, err = run(capsys, monkeypatch, "dfa", str(att), "--max-states", "1")
    assert code == 2 and "more than 1 states" in err
    code, out, _ = run(capsys, monkeypatch, "dfa", "re:a", "--max-states", "3", "--json")
    assert code == 0 and json.loads(out)["n_states"] == 3


def test_dot_and_json_together_are_refused(capsys, monkeypatch):
    code, out, err = run(capsys, monkeypatch, "dfa", "re:a", "--dot", "--json")
    assert code == 2 and out == "" and "--dot and --json" in err


def test_sample_output_feeds_back_into_accepts_with_quoted_symbols(capsys, monkeypatch):
    # A symbol with a blank is written quoted (as in expressions) by sample and equiv, and accepts
    # reads it back: the round trip gives every row its own label.
    language, alphabet = "'long name' b*", "'long name',b"
    code, out, _ = run(
        capsys, monkeypatch, "sample", language, "-a", alphabet, "--lengths", "1..3", "--n", "6", "--quiet"
    )
    rows = [json.loads(line) for line in out.splitlines()]
    assert code == 0 and {row["label"] for row in rows} == {True, False}
    assert any("'long name'" in row["string"] for row in rows)
    stdin = "".join(row["string"] + "\n" for row in rows)
    code, out, err = run(capsys, monkeypatch, "accepts", language, "-a", alphabet, "--json", stdin=stdin)
    assert code == 0, err
    assert json.loads(out) == [row["label"] for row in rows]
    code, out, _ = run(capsys, monkeypatch, "accepts", language, "-a", alphabet, "'long name' b b", "b 'long name'")
    assert out.splitlines() == ["accept\t'long name' b b", "reject\tb 'long name'"]
    code, out, _ = run(capsys, monkeypatch, "equiv", language, "'long name'", "-a", alphabet, "--json")
    counterexample = json.loads(out)["counterexample"]
    assert counterexample == "'long name' b"
    code, out, _ = run(capsys, monkeypatch, "accepts", language, "-a", alphabet, counterexample)
    assert out.startswith("accept")


def test_accepts_unterminated_quote_is_a_user_error(capsys, monkeypatch):
    code, out, err = run(capsys, monkeypatch, "accepts", "'long name' b*", "-a", "'long name',b", "'long name b")
    assert code == 2 and "quote at column 1 of" in err and "unterminated" in err and "Traceback" not in err


def test_dfa_dot_quotes_symbols_that_contain_commas(capsys, monkeypatch):
    code, out, _ = run(capsys, monkeypatch, "dfa", "'a,b' c", "-a", "'a,b',c", "--dot")
    assert code == 0
    labels = [
        line.split('label="', 1)[1].split('"]', 1)[0] for line in out.splitlines() if "->" in line and "label=" in line
    ]
    # Every sink edge reads both symbols: the quoted one and c, two items, not three.
    assert "'a,b',c" in labels and "a,b,c" not in labels
    code, out, _ = run(capsys, monkeypatch, "dfa", "re:(ab)*", "--dot")
    assert 'label="a,b"' in out  # plain symbols stay unquoted


def test_huge_modulus_with_huge_max_states_is_a_user_error(capsys, monkeypatch):
    code, out, err = run(
        capsys, monkeypatch, "dfa", "ltl:MOD_{99999999999999999999}^1", "-a", "a", "--max-states", str(10**23)
    )
    assert code == 2 and "least common multiple" in err and "Traceback" not in err
