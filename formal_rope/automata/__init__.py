"""Automata stage: regex/LTL ASTs -> complete DFAs on numpy transition tables."""

from formal_rope.automata.dfa import DFA

__all__ = ["DFA"]
