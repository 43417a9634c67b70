"""Automata stage: regex/LTL ASTs and .att files -> minimal complete DFAs on numpy tables.

Construction: regex_to_dfa, ltl_to_dfa, load_att, language_dfa. Operations: minimize, complement,
product/intersection/union/difference, equivalent (shortest counterexample), is_empty,
shortest_accepted. Membership (vectorized): split_symbols, encode_strings, accepts_encoded,
accepts. Oracle: evaluate_ltl, ltl_accepts. Rendering: to_dot, to_table, to_json.
"""

from formal_rope.automata.att import load_att
from formal_rope.automata.dfa import DFA
from formal_rope.automata.language import language_dfa
from formal_rope.automata.ltl import evaluate_ltl, ltl_accepts, ltl_to_dfa
from formal_rope.automata.membership import accepts, accepts_encoded, encode_strings, run_encoded, split_symbols
from formal_rope.automata.ops import (
    DEFAULT_MAX_STATES,
    EquivalenceResult,
    TooManyStatesError,
    complement,
    complete,
    difference,
    discovery_order,
    empty_language,
    equivalent,
    extend_alphabet,
    intersection,
    is_empty,
    minimize,
    product,
    shortest_accepted,
    symmetric_difference,
    trim_unreachable,
    union,
    union_alphabet,
    universal_language,
)
from formal_rope.automata.regex import concatenate, kleene_star, regex_to_dfa, repeat
from formal_rope.automata.render import to_dot, to_json, to_table

__all__ = [
    "DEFAULT_MAX_STATES",
    "DFA",
    "EquivalenceResult",
    "TooManyStatesError",
    "accepts",
    "accepts_encoded",
    "complement",
    "complete",
    "concatenate",
    "difference",
    "discovery_order",
    "empty_language",
    "encode_strings",
    "equivalent",
    "evaluate_ltl",
    "extend_alphabet",
    "intersection",
    "is_empty",
    "kleene_star",
    "language_dfa",
    "load_att",
    "ltl_accepts",
    "ltl_to_dfa",
    "minimize",
    "product",
    "regex_to_dfa",
    "repeat",
    "run_encoded",
    "shortest_accepted",
    "split_symbols",
    "symmetric_difference",
    "to_dot",
    "to_json",
    "to_table",
    "trim_unreachable",
    "union",
    "union_alphabet",
    "universal_language",
]
