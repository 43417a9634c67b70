"""Stage ``language_to_formula``: any language source (registry name, regex, ``ltl:`` formula,
``.att`` file) → an LTL[P] or LTL[P,MOD] formula, checked equivalent to the language's DFA.

A formula in the requested fragment is used as written. Otherwise the language's minimal DFA is
classified: LTL[P] (a PODFA) goes through `podfa_to_formula` (Lemma C.1); LTL[P,MOD] \\ LTL[P]
through the bounded search of `formula_search` (refused under ``fragment='ltl_p'``); anything
else is refused with the decider's witness. Every result is compared with the language's DFA by
`equivalent` on the formula's subformula-by-subformula DFA: a mismatch is an internal error.
"""

from __future__ import annotations

from dataclasses import dataclass

from formal_rope.automata.dfa import DFA
from formal_rope.automata.language import language_dfa
from formal_rope.automata.ltl_compositional import ltl_to_dfa_compositional
from formal_rope.automata.ops import equivalent
from formal_rope.classes.classify import classify
from formal_rope.compiler.automaton_to_formula import NotInFragmentError, podfa_to_formula
from formal_rope.compiler.formula_search import (
    DEFAULT_MAX_SIZE,
    DEFAULT_TIME_LIMIT,
    SearchOptions,
    SearchResult,
    search_formula,
)
from formal_rope.errors import FormalRopeError
from formal_rope.lang.analysis import ltl_fragment
from formal_rope.lang.ast import Formula
from formal_rope.lang.metrics import FormulaMetrics, formula_metrics
from formal_rope.lang.printer import format_ltl

__all__ = ["DEFAULT_MAX_SIZE", "DEFAULT_TIME_LIMIT", "FRAGMENTS", "LanguageFormula", "NoFormulaFound",
           "check_equivalent", "describe_method", "formula_json", "language_to_formula"]

FRAGMENTS = {"ltl_p": "LTL[P]", "ltl_p_mod": "LTL[P,MOD]"}


class NoFormulaFound(FormalRopeError):
    """The bounded search ended without a formula (exit 1: an answer, not bad input)."""

    exit_code = 1


@dataclass(frozen=True)
class LanguageFormula:
    """formula over `alphabet`; dfa: the language's minimal DFA; method: given | automaton | search."""

    formula: Formula
    alphabet: tuple[str, ...]
    dfa: DFA
    method: str
    fragment: str
    metrics: FormulaMetrics
    search: SearchResult | None = None


def check_equivalent(formula: Formula, dfa: DFA) -> None:
    """AssertionError (a bug, never an answer) when the formula's language differs from the DFA's."""
    result = equivalent(ltl_to_dfa_compositional(formula, dfa.alphabet), dfa)
    if not result.equivalent:
        word = "".join(result.counterexample or ())
        raise AssertionError(f"internal error: the constructed formula differs from the language on {word!r}")


def language_to_formula(language, fragment: str = "ltl_p_mod", search: SearchOptions | None = None,
                        dfa: DFA | None = None) -> LanguageFormula:
    """The formula of a resolved language (`formal_rope.lang.source.Language`); see the module docstring.

    Raises NotInFragmentError (exit 2) outside the fragment, NoFormulaFound (exit 1) when the
    search ends without a formula.
    """
    if fragment not in FRAGMENTS:
        raise FormalRopeError(f"unknown fragment {fragment!r}; expected one of {', '.join(FRAGMENTS)}")
    wanted = FRAGMENTS[fragment]
    allowed = ("LTL[P]",) if fragment == "ltl_p" else ("LTL[P]", "LTL[P,MOD]")
    if dfa is None:
        dfa = language_dfa(language)
    if language.kind == "ltl" and ltl_fragment(language.ast) in allowed:
        return LanguageFormula(language.ast, tuple(language.alphabet), dfa, "given", ltl_fragment(language.ast),
                               formula_metrics(language.ast))
    verdict = classify(dfa)
    if verdict.ltl_p:
        built = podfa_to_formula(dfa)
        check_equivalent(built.formula, built.dfa)
        return LanguageFormula(built.formula, built.dfa.alphabet, built.dfa, "automaton", "LTL[P]",
                               formula_metrics(built.formula))
    if not verdict.ltl_p_mod:
        raise NotInFragmentError(
            f"{language.label} is not in LTL[P,MOD], so no formula (and no NoPE/RoPE_P model) exists: "
            + verdict.witness["ltl_p_mod"]["explanation"], "not LTL[P,MOD]")
    if fragment == "ltl_p":
        raise NotInFragmentError(
            f"{language.label} is in LTL[P,MOD] with period {verdict.mod_k} but not in {wanted}: "
            + verdict.witness["ltl_p"]["explanation"], "LTL[P,MOD] \\ LTL[P]")
    options = search or SearchOptions()
    result = search_formula(dfa, int(verdict.mod_k), options)
    if result.formula is None:
        why = f"the time limit ({options.time_limit:g} s)" if result.timed_out else f"size {options.max_size}"
        raise NoFormulaFound(
            f"no formula found for {language.label} (LTL[P,MOD], period {verdict.mod_k}) up to size "
            f"{result.searched_size} ({result.classes:,} distinct formulas; the search stopped at {why}); "
            "raise --max-size or --time-limit")
    check_equivalent(result.formula, dfa)
    return LanguageFormula(result.formula, dfa.alphabet, dfa, "search", ltl_fragment(result.formula),
                           formula_metrics(result.formula), result)


_METHODS = {
    "given": "the formula as written",
    "automaton": "the automaton construction (Li & Cotterell, Lemma C.1)",
    "search": "the bounded formula search",
}


def describe_method(built: LanguageFormula) -> str:
    """One line: how the formula was obtained and how big it is."""
    metrics = built.metrics
    how = _METHODS[built.method]
    if built.search is not None:
        how += f" ({built.search.classes:,} distinct formulas, {built.search.seconds:.1f} s)"
    return (f"{how}: an {built.fragment} formula of {metrics.dag_size:,} distinct subformulas (tree size "
            f"{metrics.tree_size:,}), depth {metrics.depth}, {metrics.past_nodes} P and {metrics.mod_nodes} MOD nodes")


def formula_json(built: LanguageFormula) -> dict:
    """The fields of `formalrope formula --json` (also under "language" in `compile --json`)."""
    return {
        "formula": format_ltl(built.formula),
        "alphabet": list(built.alphabet),
        "method": built.method,
        "fragment": built.fragment,
        **built.metrics.to_json(),
        "dfa_states": built.dfa.n_states,
        "search": None if built.search is None else {
            "searched_size": built.search.searched_size, "classes": built.search.classes,
            "candidates": built.search.candidates, "seconds": round(built.search.seconds, 3),
        },
    }
