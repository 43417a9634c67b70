"""Language (from formal_rope.lang.source.resolve_language) -> minimal DFA."""

from __future__ import annotations

from typing import Any

from formal_rope.automata.att import load_att
from formal_rope.automata.dfa import DFA
from formal_rope.automata.ltl import ltl_to_dfa
from formal_rope.automata.ops import DEFAULT_MAX_STATES, check_state_limit, minimize
from formal_rope.automata.regex import regex_to_dfa
from formal_rope.errors import FormalRopeError


def language_dfa(language: Any, max_states: int = DEFAULT_MAX_STATES) -> DFA:
    """The minimal DFA of a resolved language, dispatching on `language.kind`.

    Uses `kind` ('regex' | 'ltl' | 'att'), `ast`, `alphabet` and, for .att files, `path`.
    """
    alphabet = tuple(language.alphabet) if language.alphabet is not None else None
    if language.kind == "regex":
        dfa = regex_to_dfa(language.ast, alphabet, max_states)
    elif language.kind == "ltl":
        dfa = ltl_to_dfa(language.ast, alphabet, max_states)
    elif language.kind == "att":
        dfa = minimize(load_att(language.path, alphabet))
    else:
        raise FormalRopeError(f"unknown language kind {language.kind!r} (expected regex, ltl or att)")
    # The constructions check the intermediate automata they explore; small ones (a symbol set,
    # a .att file) are not explored, so the result is checked too: the limit holds for every kind.
    check_state_limit(dfa.n_states, max_states, "the language's automaton")
    return dfa
