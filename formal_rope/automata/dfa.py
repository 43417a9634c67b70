"""The DFA value type: a complete deterministic automaton on an integer transition table.

Contract shared by every stage (classes, sampling, compiler verification, trainer):
  alphabet     tuple of symbols (strings); symbol index = position in this tuple
  transitions  int64 numpy array of shape (n_states, n_symbols); always complete
  start        start state index
  accepting    bool numpy array of shape (n_states,)
Partial automata (e.g. .att files) are completed with a rejecting sink when loaded.
Operations (minimize, product, complement, equivalence, membership) live in sibling modules
and are re-exported from formal_rope.automata.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from formal_rope.errors import FormalRopeError


@dataclass(frozen=True, eq=False)
class DFA:
    """A complete deterministic automaton: `transitions[state, symbol index]` is the next state.

    Symbol index = position in `alphabet`; `accepting[state]` says whether a word ending there is
    in the language. Arrays are made read-only; build one with regex_to_dfa, ltl_to_dfa or language_dfa.
    """

    alphabet: tuple[str, ...]
    transitions: np.ndarray
    start: int
    accepting: np.ndarray

    def __post_init__(self) -> None:
        transitions = np.ascontiguousarray(self.transitions, dtype=np.int64)
        accepting = np.ascontiguousarray(self.accepting, dtype=bool)
        if transitions.ndim != 2 or transitions.shape[1] != len(self.alphabet):
            raise ValueError(f"transitions must have shape (n_states, {len(self.alphabet)}), got {transitions.shape}")
        n_states = transitions.shape[0]
        if accepting.shape != (n_states,):
            raise ValueError(f"accepting must have shape ({n_states},), got {accepting.shape}")
        if n_states == 0 or not 0 <= self.start < n_states:
            raise ValueError("start state out of range")
        if transitions.size and (transitions.min() < 0 or transitions.max() >= n_states):
            raise ValueError("transition target out of range")
        transitions.setflags(write=False)
        accepting.setflags(write=False)
        object.__setattr__(self, "transitions", transitions)
        object.__setattr__(self, "accepting", accepting)
        object.__setattr__(self, "alphabet", tuple(self.alphabet))

    @property
    def n_states(self) -> int:
        return int(self.transitions.shape[0])

    @property
    def n_symbols(self) -> int:
        return len(self.alphabet)

    def symbol_index(self) -> dict[str, int]:
        return {symbol: index for index, symbol in enumerate(self.alphabet)}

    def run(self, symbols: list[int] | np.ndarray, state: int | None = None) -> int:
        """State reached from `state` (default start) after reading symbol indices."""
        current = self.start if state is None else state
        for symbol in symbols:
            current = int(self.transitions[current, symbol])
        return current


def require_dfa(value: object, function: str, argument: str = "dfa") -> DFA:
    """`value` itself when it is a DFA; otherwise a FormalRopeError that says how to build one.

    Public functions that take an automaton call this first, so a regex string or an AST passed by
    mistake gets a message naming the fix instead of an AttributeError from deep inside.
    """
    if isinstance(value, DFA):
        return value
    got = f"the string {value!r}" if isinstance(value, str) else f"a {type(value).__name__}"
    example = (
        f"language_dfa(resolve_language({value!r}))"
        if isinstance(value, str)
        else "language_dfa(resolve_language(...))"
    )
    raise FormalRopeError(
        f"{function} expects a DFA for `{argument}`, got {got}; build one with {example}, "
        "regex_to_dfa(parse_regex(...), alphabet) or ltl_to_dfa(parse_ltl(...), alphabet) "
        "(from formal_rope.automata and formal_rope.lang)"
    )
