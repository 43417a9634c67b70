"""Any language → an LTL[P] / LTL[P,MOD] formula (issue: compile every expressible language).

Cross-checks: the constructed formula against the DFA it came from, through the direct semantic
evaluator (`ltl_accepts`, an implementation independent of the automaton constructions) on every
short string, and through the exact equivalence test; the compiled NoPE model against the DFA.
"""

from __future__ import annotations

import itertools
import json

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from formal_rope.automata import accepts, language_dfa
from formal_rope.automata.dfa import DFA
from formal_rope.automata.ltl import ltl_accepts
from formal_rope.automata.ltl_compositional import ltl_to_dfa_compositional
from formal_rope.automata.ops import equivalent
from formal_rope.compiler import compile_formula, verify_compiled
from formal_rope.compiler.automaton_to_formula import NotInFragmentError, podfa_to_formula
from formal_rope.compiler.formula_search import SearchOptions
from formal_rope.compiler.language_to_formula import NoFormulaFound, language_to_formula
from formal_rope.errors import ExpressionError
from formal_rope.lang.analysis import ltl_fragment
from formal_rope.lang.ast import And, Atom, Not, Or, Past
from formal_rope.lang.metrics import formula_metrics
from formal_rope.lang.parser import parse_ltl
from formal_rope.lang.printer import format_ltl
from formal_rope.lang.source import resolve_formula_first, resolve_language
from tests.cli_support import run_main


def _short_strings(alphabet, up_to):
    for length in range(up_to + 1):
        yield from itertools.product(alphabet, repeat=length)


def _agrees_on_short_strings(formula, dfa, up_to):
    words = list(_short_strings(dfa.alphabet, up_to))
    expected = accepts(dfa, words)
    actual = [ltl_accepts(formula, word) for word in words]
    return [word for word, want, got in zip(words, expected, actual) if bool(want) != got]


# ------------------------------------------------------------------ shared definitions in the text
def test_definitions_parse_to_shared_objects():
    formula = parse_ltl("@1 := P(a); @2 := @1 & !b; P(@2) | @1")
    assert formula == Or(Past(And(Past(Atom("a")), Not(Atom("b")))), Past(Atom("a")))
    assert formula.right is formula.left.child.left  # one object: the formula is a DAG


@pytest.mark.parametrize("text, message, column", [
    ("@1 := P(a); @2", "@2 is not defined before this use", 13),
    ("@1 := P(a); @1 := b; @1", "@1 is defined twice", 13),
    ("@x := P(@x); @x", "@x is not defined before this use", 9),
    ("@1 := P(a) @1", "unexpected '@1'", 12),
])
def test_definition_errors_point_at_the_name(text, message, column):
    with pytest.raises(ExpressionError) as caught:
        parse_ltl(text)
    assert message in caught.value.message
    assert caught.value.column == column


def _shared_formulas():
    """Formulas over {a, b} built bottom-up from a pool, so subformulas are reused (as objects)."""
    leaves = st.sampled_from([Atom("a"), Atom("b")])

    @st.composite
    def build(draw):
        pool = [draw(leaves)]
        for _ in range(draw(st.integers(1, 12))):
            kind = draw(st.sampled_from(["not", "past", "and", "or"]))
            pick = st.integers(0, len(pool) - 1)
            if kind == "not":
                pool.append(Not(pool[draw(pick)]))
            elif kind == "past":
                pool.append(Past(pool[draw(pick)]))
            else:
                pool.append((And if kind == "and" else Or)(pool[draw(pick)], pool[draw(pick)]))
        return pool[-1]

    return build()


@settings(max_examples=150, deadline=None)
@given(_shared_formulas(), st.sampled_from(["ascii", "unicode"]))
def test_shared_text_parses_back_to_the_formula(formula, style):
    for share in (True, False, None):
        text = format_ltl(formula, style=style, share=share)
        assert parse_ltl(text) == formula, text
    assert parse_ltl(format_ltl(formula, share=True, separator=";\n")) == formula


def test_a_huge_tree_prints_as_definitions_and_parses_back_small():
    formula = Atom("a")
    for _ in range(60):  # tree size 2^61: only definitions can write it
        formula = Or(Past(formula), And(Past(formula), Atom("b")))
    text = format_ltl(formula)
    assert len(text) < 10_000 and ":=" in text
    back = parse_ltl(text)
    assert formula_metrics(back) == formula_metrics(formula)
    assert formula_metrics(back).tree_size > 2**60


def test_a_definition_text_is_read_as_a_formula():
    language = resolve_language("@1 := P(a); @1 & !@1 | P(@1 & b)", "ab")
    assert language.kind == "ltl"


# ------------------------------------------------------------------ automaton → formula (Lemma C.1)
@st.composite
def partially_ordered_dfas(draw):
    """Random complete DFAs whose transitions never go back to an earlier state (a PODFA up to
    minimisation), over two or three symbols."""
    n_states = draw(st.integers(1, 6))
    n_symbols = draw(st.integers(2, 3))
    transitions = np.array([[draw(st.integers(state, n_states - 1)) for _ in range(n_symbols)]
                            for state in range(n_states)], dtype=np.int64)
    accepting = np.array([draw(st.booleans()) for _ in range(n_states)])
    return DFA(tuple("abc"[:n_symbols]), transitions, 0, accepting)


@settings(max_examples=120, deadline=None)
@given(partially_ordered_dfas())
def test_random_podfas_translate_to_equivalent_ltl_p_formulas(dfa):
    built = podfa_to_formula(dfa)
    assert ltl_fragment(built.formula) == "LTL[P]"
    assert equivalent(ltl_to_dfa_compositional(built.formula, dfa.alphabet), dfa).equivalent
    assert _agrees_on_short_strings(built.formula, dfa, 6 if len(dfa.alphabet) == 2 else 4) == []


@pytest.mark.parametrize("text", ["a*b*", "(a|b)*a(a|b)*", "a(a|b)*", "~((a|b)*b(a|b)*a(a|b)*)"])
def test_regexes_in_ltl_p_go_through_the_automaton(text):
    language = resolve_language(text, "ab")
    built = language_to_formula(language)
    assert built.method == "automaton" and built.fragment == "LTL[P]"
    assert _agrees_on_short_strings(built.formula, language_dfa(language), 8) == []


def test_a_formula_in_the_fragment_is_kept_and_one_with_y_is_rebuilt():
    kept = language_to_formula(resolve_formula_first("P(a) & MOD_2^0", "ab"))
    assert kept.method == "given" and format_ltl(kept.formula) == "P(a) & MOD_2^0"
    rebuilt = language_to_formula(resolve_formula_first("P(Y(a))", "ab"))  # Y(a) strictly before: P(P(a))
    assert rebuilt.method == "automaton" and ltl_fragment(rebuilt.formula) == "LTL[P]"


def test_outside_the_fragment_is_refused_with_the_witness():
    with pytest.raises(NotInFragmentError) as caught:
        language_to_formula(resolve_language("(a|b)*aa(a|b)*", "ab"))
    assert caught.value.exit_code == 2 and "not in LTL[P,MOD]" in str(caught.value)
    assert "reach each other" in str(caught.value)
    with pytest.raises(NotInFragmentError) as caught:
        language_to_formula(resolve_language("(ab)*", "ab"), fragment="ltl_p")
    assert "period 2" in str(caught.value) and "not in LTL[P]" in str(caught.value)


# ------------------------------------------------------------------ LTL[P,MOD] \ LTL[P]: the search
@pytest.mark.parametrize("text, alphabet", [
    ("(ab)*", "ab"),
    ("(aa)*", "a"),
    ("(abc)*", "abc"),
    ("((a|b)(a|b))* & (a|b)*a(a|b)*", "ab"),  # P(a) at even lengths: a period-2 variant of a P formula
    ("(a|b)((a|b)(a|b))*", "ab"),
])
def test_the_search_finds_equivalent_mod_formulas(text, alphabet):
    language = resolve_language(f"re:{text}", alphabet)
    built = language_to_formula(language, search=SearchOptions(time_limit=60))
    assert built.method == "search" and built.fragment == "LTL[P,MOD]"
    assert built.search is not None and not built.search.timed_out
    assert _agrees_on_short_strings(built.formula, language_dfa(language), 7 if len(alphabet) < 3 else 5) == []


def test_no_formula_up_to_the_size_limit_is_an_answer():
    with pytest.raises(NoFormulaFound) as caught:
        language_to_formula(resolve_language("(abc)*", "abc"), search=SearchOptions(max_size=1))
    assert caught.value.exit_code == 1 and "up to size 1" in str(caught.value)


# ------------------------------------------------------------------ the compiled model
@pytest.mark.parametrize("text, alphabet", [("a*b*", "ab"), ("(ab)*", "ab"), ("a(a|b)*b*a(a|b)*", "ab")])
def test_the_compiled_model_agrees_with_the_dfa(text, alphabet):
    language = resolve_language(f"re:{text}", alphabet)
    built = language_to_formula(language)
    compiled = compile_formula(built.formula, built.alphabet, fmt="fp32", language=language.spec)
    result = verify_compiled(compiled, exhaustive_up_to=9, verify_to=300, per_length=6, dfa=built.dfa)
    assert result.ok and result.disagreements == 0
    assert compiled.ir.metadata["language"] == language.spec


def test_a_large_mlregtest_automaton_compiles_and_verifies():
    language = resolve_language("data/mlregtest/04.04.PT.4.1.3.att")
    built = language_to_formula(language)
    metrics = built.metrics
    assert metrics.tree_size > 100 * metrics.dag_size  # shared: the text would be far larger as a tree
    compiled = compile_formula(built.formula, built.alphabet, language=language.spec)
    assert len(compiled.dag.nodes) <= metrics.dag_size + 2
    assert max(len(node.text) for node in compiled.dag.nodes) < 200  # coordinate names stay short
    result = verify_compiled(compiled, exhaustive_up_to=4, verify_to=120, per_length=4, mode="native",
                             dfa=built.dfa)
    assert result.ok and result.disagreements == 0


# ------------------------------------------------------------------ the commands
def test_formula_command_json(capsys):
    code, out, err = run_main(capsys, ["formula", "(ab)*", "--json"])
    assert code == 0, err
    report = json.loads(out)
    assert report["method"] == "search" and report["fragment"] == "LTL[P,MOD]"
    assert report["mod_nodes"] >= 1 and report["size"] >= 1 and report["depth"] >= 1
    dfa = language_dfa(resolve_language("(ab)*"))
    assert _agrees_on_short_strings(parse_ltl(report["formula"]), dfa, 8) == []


def test_formula_command_prints_text_that_parses_back(capsys):
    code, out, err = run_main(capsys, ["formula", "data/mlregtest/04.04.PT.2.1.3.att"])
    assert code == 0, err
    language = resolve_language("data/mlregtest/04.04.PT.2.1.3.att")
    formula = parse_ltl(out)
    assert equivalent(ltl_to_dfa_compositional(formula, language.alphabet), language_dfa(language)).equivalent
    assert "Lemma C.1" in err


@pytest.mark.parametrize("argv, exit_code, words", [
    (["formula", "(a|b)*aa(a|b)*"], 2, "not in LTL[P,MOD]"),
    (["formula", "(ab)*", "--fragment", "ltl_p"], 2, "not in LTL[P]"),
    (["formula", "(abc)*", "--max-size", "1"], 1, "no formula found"),
])
def test_formula_command_refusals(capsys, argv, exit_code, words):
    code, out, err = run_main(capsys, argv)
    assert code == exit_code
    assert out == ""
    assert words in err and "Traceback" not in err
    lines = [line for line in err.strip().splitlines() if not line.startswith("note:")]
    assert len(lines) == 1 and lines[0].startswith("error:")


def test_compile_takes_a_regex_and_the_model_runs(tmp_path, capsys):
    model = tmp_path / "ab.zip"
    code, out, err = run_main(capsys, ["compile", "(ab)*", "--verify-to", "60", "--out", str(model), "--json"])
    assert code == 0, err
    report = json.loads(out)
    assert report["language"]["method"] == "search" and report["disagreements"] == 0
    code, out, err = run_main(capsys, ["run", str(model), "abab", "aba", "", "--json"])
    assert code == 0, err
    assert [row["accepted"] for row in json.loads(out)["results"]] == [True, False, True]


def test_compile_refuses_outside_the_fragment_and_writes_nothing(tmp_path, capsys):
    model = tmp_path / "no.zip"
    code, out, err = run_main(capsys, ["compile", "data/mlregtest/04.04.SL.2.1.0.att", "--out", str(model)])
    assert code == 2 and "not in LTL[P,MOD]" in err and "Traceback" not in err
    assert not model.exists()
