"""language_dfa on resolved languages: registry formulas vs their regexes, paper state counts."""

from __future__ import annotations

import pytest

from formal_rope.automata import accepts, equivalent, language_dfa
from formal_rope.lang.registry import registry_entries
from formal_rope.lang.source import resolve_language

PAIRS = [(entry.name, entry.name.removesuffix("_ltl")) for entry in registry_entries() if entry.name.endswith("_ltl")]


@pytest.mark.parametrize("formula_name, regex_name", PAIRS)
def test_registry_formula_equals_its_regex(formula_name, regex_name):
    formula = language_dfa(resolve_language(formula_name))
    regex = language_dfa(resolve_language(regex_name))
    result = equivalent(formula, regex)
    assert result.equivalent, f"{formula_name} vs {regex_name}: {result.counterexample}"


@pytest.mark.parametrize(
    "spec, n_states",
    [("(aa)*", 2), ("(ab)*", 3), ("aΣ*", 3), ("Σ*a", 2), ("Σ*abΣ*", 3), ("parity", 2), ("a S b", 2)],
)
def test_paper_languages_minimal_sizes(spec, n_states):
    assert language_dfa(resolve_language(spec)).n_states == n_states


def test_att_language(mlregtest_dir):
    path = sorted(mlregtest_dir.glob("04.04.SP.*.att"))[0]
    language = resolve_language(str(path))
    dfa = language_dfa(language)
    assert language.kind == "att" and dfa.alphabet == language.alphabet
    assert dfa.start == 0


def test_mod_readout_through_the_parser():
    odd_length = language_dfa(resolve_language("ltl:MOD_2^0", alphabet="ab"))
    assert accepts(odd_length, ["", "a", "ab", "aba"]).tolist() == [False, True, False, True]
    y2 = language_dfa(resolve_language("Y^2(a)", alphabet="ab"))
    assert accepts(y2, ["a", "ab", "ba", "aab"]).tolist() == [False, True, False, True]
