"""The theory's prediction for a run, from its config alone: the columns `predicted`, `predicted_by`,
`predicted_reason` that every run of a sweep gets when its result is written.

It reads the run's language the way every command does (`resolve_language(language, alphabet)`),
asks the class decider (`formal_rope.classes.classify`) and `formal_rope.theory.predict_run`, and
never looks at a training result: the same config gives the same prediction before and after
training. The decider's verdicts are cached per (language, alphabet), so a sweep classifies each of
its languages once however many runs it has.

LTL[P,Y] membership, which the decider does not settle and the RoPE_NP / hybrid rules need, is
taken from what the language's text says when it can say it (`language_ltl_p_y`): an MLRegTest file
of a class inside LTL[P,Y] (`mlregtest_ltl_p_y`), or an `ltl:` formula built from atoms, Boolean
connectives, P, H and Y only (such a formula is an LTL[P,Y] formula); otherwise from the locality
test (`theory.locality.ltl_p_y_of`), run only when the verdict without it is "no prediction".
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

from formal_rope.automata.dfa import DFA
from formal_rope.automata.language import language_dfa
from formal_rope.classes.classify import classify
from formal_rope.errors import FormalRopeError
from formal_rope.lang.ast import And, Atom, Const, Historically, Iff, Implies, Not, Or, Past, Yesterday, children
from formal_rope.lang.source import automaton_path, resolve_language
from formal_rope.run_config.config import DATA_LANGUAGE_PREFIX, RunConfig
from formal_rope.theory import NO_PREDICTION, LanguageFacts, Prediction, mlregtest_ltl_p_y, predict_run
from formal_rope.theory.locality import ltl_p_y_of
from formal_rope.theory.predictions import NOTHING_PROVED

# Formula nodes of LTL[P,Y] (H φ = ¬P¬φ; Since and MOD are not in it).
_LTL_P_Y_NODES = (Atom, Const, Not, And, Or, Implies, Iff, Past, Historically, Yesterday)
# MLRegTest's file names: Sigma.Tau.CLASS.k.t.i.att (data/mlregtest/README.md).
_MLREGTEST_NAME = re.compile(r"^\d+\.\d+\.([A-Za-z]+)\.\d+\.\d+\.\d+\.att$")


@dataclass(frozen=True)
class _Language:
    """One resolved language: its minimal DFA, the decider's verdicts and the text's LTL[P,Y] hint."""

    dfa: DFA
    classification: object  # formal_rope.classes.Classification
    ltl_p_y_hint: bool | None


def mlregtest_class_of(language: str) -> str | None:
    """The MLRegTest class (SL, SP, ...) of a language named by an MLRegTest file path; None otherwise."""
    match = _MLREGTEST_NAME.match(Path(language).name)
    return match.group(1) if match else None


def formula_in_ltl_p_y(formula) -> bool:
    """Whether every node of an LTL formula is an atom, a Boolean connective, P, H or Y."""
    stack = [formula]
    while stack:  # explicit stack: generated formulas can nest deeper than the recursion limit allows
        node = stack.pop()
        if not isinstance(node, _LTL_P_Y_NODES):
            return False
        stack.extend(children(node))
    return True


def language_ltl_p_y(language: str, resolved) -> bool | None:
    """What the language's text says about LTL[P,Y] membership: True for an MLRegTest file of a class
    inside LTL[P,Y] or a formula of LTL[P,Y]'s operators; None when the text does not say."""
    language_class = mlregtest_class_of(language)
    if language_class is not None:
        return mlregtest_ltl_p_y(language_class)
    if resolved.kind == "ltl" and resolved.ast is not None and formula_in_ltl_p_y(resolved.ast):
        return True
    return None


def _place(language: str) -> str | None:
    """The file an automaton path names from here (None for an expression or a name): part of the
    caches' key, so a relative path read from another working directory is never answered from the
    cache of another file."""
    text = language.strip()
    return str(automaton_path(text).resolve()) if text.lower().endswith(".att") else None


def _resolved(language: str, alphabet: tuple[str, ...] | None) -> _Language:
    return _resolved_at(language, alphabet, _place(language))


@lru_cache(maxsize=4096)
def _resolved_at(language: str, alphabet: tuple[str, ...] | None, place: str | None) -> _Language:
    resolved = resolve_language(language, alphabet)
    dfa = language_dfa(resolved)
    return _Language(dfa, classify(dfa), language_ltl_p_y(language, resolved))


def _locality(language: str, alphabet: tuple[str, ...] | None) -> bool | None:
    return _locality_at(language, alphabet, _place(language))


@lru_cache(maxsize=4096)
def _locality_at(language: str, alphabet: tuple[str, ...] | None, place: str | None) -> bool | None:
    entry = _resolved_at(language, alphabet, place)
    return ltl_p_y_of(entry.dfa, entry.classification)


def classification_of(language: str, alphabet: tuple[str, ...] | None = None):
    """The class decider's verdicts on a language as every command resolves it (cached)."""
    return _resolved(language, None if alphabet is None else tuple(alphabet)).classification


def run_prediction(config: RunConfig, resolved_periods=None) -> Prediction:
    """The theory's verdict for one run (`theory.predict_run`), from its config and, when known, the
    periods the run resolved ("auto" otherwise resolves as training does, to the least k)."""
    if config.data is not None and config.language.startswith(DATA_LANGUAGE_PREFIX):
        return Prediction(NO_PREDICTION, NOTHING_PROVED,
                          "the run trains on data files without a language: there are no class verdicts to read")
    try:
        language = _resolved(config.language, config.alphabet)
    except FormalRopeError as error:
        return Prediction(NO_PREDICTION, NOTHING_PROVED, f"the language could not be resolved: {error}")
    prediction = predict_run(language.classification, config, resolved_periods, ltl_p_y=language.ltl_p_y_hint)
    facts = LanguageFacts.of(language.classification, language.ltl_p_y_hint)
    if prediction.verdict == NO_PREDICTION and facts.in_ltl_p_y is None:
        # Knowing LTL[P,Y] can only turn "no prediction" into a verdict: the (slower) locality test
        # runs only where it can change the answer.
        ltl_p_y = _locality(config.language, config.alphabet)
        if ltl_p_y is not None:
            prediction = predict_run(language.classification, config, resolved_periods, ltl_p_y=ltl_p_y)
    return prediction


def prediction_columns(config: RunConfig, resolved_periods=None) -> dict[str, str]:
    """The PREDICTION_COLUMNS of a run's row (`run_prediction(...).columns()`)."""
    return run_prediction(config, resolved_periods).columns()
