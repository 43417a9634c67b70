"""Language stage: parse LTL[P,Y,S,MOD] formulas and regular expressions, print them back, analyse
them, and resolve `--lang` values (registry names, prefixed or bare expressions, .att files)."""

from formal_rope.lang.analysis import (
    FRAGMENTS,
    fold_ast,
    iter_nodes,
    ltl_fragment,
    max_lookback,
    moduli,
    needs_explicit_alphabet,
    symbols_of,
    uses_temporal_or_mod,
)
from formal_rope.lang.parser import parse_ltl, parse_regex
from formal_rope.lang.printer import format_ltl, format_regex
from formal_rope.lang.registry import RegistryEntry, lookup, registry_entries, registry_names
from formal_rope.lang.serialize import ast_from_dict, ast_to_dict
from formal_rope.lang.source import Language, parse_alphabet, resolve_language

__all__ = [
    "FRAGMENTS",
    "Language",
    "RegistryEntry",
    "ast_from_dict",
    "ast_to_dict",
    "fold_ast",
    "format_ltl",
    "format_regex",
    "iter_nodes",
    "lookup",
    "ltl_fragment",
    "max_lookback",
    "moduli",
    "needs_explicit_alphabet",
    "parse_alphabet",
    "parse_ltl",
    "parse_regex",
    "registry_entries",
    "registry_names",
    "resolve_language",
    "symbols_of",
    "uses_temporal_or_mod",
]
