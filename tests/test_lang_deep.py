"""Deep ASTs (long concatenations, many prefix/postfix operators, nested P): structural equality,
hashing, printing and `parse --json` must not recurse once per level (acceptance-pass regressions:
a 1 000-symbol regex used to raise RecursionError in `dfa`, and `parse --json` of a 3 000-symbol
one in json.dumps)."""

from __future__ import annotations

import json
import pickle
import sys

import pytest

from cli_support import run_main
from formal_rope.lang import format_ltl, format_regex, parse_ltl, parse_regex
from formal_rope.lang.ast import Atom, Historically, Past
from formal_rope.lang.serialize import json_text

DEPTH = 3000  # well past the interpreter's default recursion limit of 1000


def test_deep_asts_compare_and_hash_without_recursion():
    text = "ab" * (DEPTH // 2)
    first, second = parse_regex(text), parse_regex(text)
    assert first is not second and first == second and hash(first) == hash(second)
    assert first != parse_regex(text[:-1] + "a")
    assert {first: 1}[second] == 1
    restored = pickle.loads(pickle.dumps(parse_ltl("P(a) & MOD_2^0")))
    assert restored == parse_ltl("P(a) & MOD_2^0") and hash(restored) == hash(parse_ltl("P(a) & MOD_2^0"))
    # The node type is part of equality and hash: P(a) and H(a) differ.
    assert Past(Atom("a")) != Historically(Atom("a"))


@pytest.mark.parametrize(
    "text, parse, format_",
    [
        ("!" * DEPTH + "a", parse_ltl, format_ltl),
        ("P(" * DEPTH + "a" + ")" * DEPTH, parse_ltl, format_ltl),
        ("a" + "*" * DEPTH, parse_regex, format_regex),
        ("~" * DEPTH + "a", parse_regex, format_regex),
    ],
    ids=["not-chain", "past-chain", "star-chain", "complement-chain"],
)
def test_deep_unary_chains_print_and_reparse(text, parse, format_):
    ast = parse(text, ("a", "b"))
    printed = format_(ast)
    assert parse(printed, ("a", "b")) == ast
    assert printed.count("a") == 1


@pytest.mark.parametrize("indent", [2, None])
def test_json_text_is_json_dumps(indent):
    values = [
        {}, [], "é\n\"", {"a": [1, 2.5, None, True, {"b": {}}], "c": [[[]]]}, {"ast": {"type": "Atom", "symbol": "a"}}
    ]
    for value in values:
        assert json_text(value, indent) == json.dumps(value, ensure_ascii=False, indent=indent)


def test_parse_json_of_a_deep_expression(capsys):
    code, out, err = run_main(capsys, ["parse", "re:" + "ab" * (DEPTH // 2), "--json"])
    assert code == 0 and "Traceback" not in err
    old_limit = sys.getrecursionlimit()
    sys.setrecursionlimit(20 * DEPTH)  # json.loads itself recurses per level
    try:
        payload = json.loads(out)
    finally:
        sys.setrecursionlimit(old_limit)
    assert payload["canonical"] == "ab" * (DEPTH // 2)
    assert "\n" not in out.strip()  # deep ASTs print on one line, not with depth² blanks
    node, depth = payload["ast"], 0
    while node["type"] == "Concat":
        node, depth = node["left"], depth + 1
    assert depth == DEPTH - 1 and node == {"type": "Symbol", "symbol": "a"}


def test_dfa_of_a_long_expression(capsys):
    code, out, err = run_main(capsys, ["dfa", "re:" + "ab" * 600, "--json"])
    assert code == 0 and json.loads(out)["n_states"] == 1202


def test_parse_table_does_not_draw_a_tree_that_cannot_fit(capsys, monkeypatch):
    """Rich folded labels and dropped levels of a 30-deep tree in 80 columns; say so instead.
    (Piped output has no width limit; COLUMNS sets one, as a terminal does.)"""
    monkeypatch.setenv("COLUMNS", "80")
    code, out, _ = run_main(capsys, ["parse", "re:" + "a" * 30])
    assert code == 0 and "30 levels deep, too deep to draw" in out and "Symbol" not in out
    code, out, _ = run_main(capsys, ["parse", "re:aaa"])
    assert code == 0 and out.count("Symbol a") == 3
