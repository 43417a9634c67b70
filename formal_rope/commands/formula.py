"""CLI: `formalrope formula LANG` — an LTL[P] or LTL[P,MOD] formula for any language, checked equivalent."""

from __future__ import annotations

import json
import sys
from typing import Optional

import typer

from formal_rope.compiler.formula_search import SearchOptions
from formal_rope.compiler.language_to_formula import (
    DEFAULT_MAX_SIZE,
    DEFAULT_TIME_LIMIT,
    FRAGMENTS,
    describe_method,
    formula_json,
    language_to_formula,
)
from formal_rope.errors import FormalRopeError
from formal_rope.lang.printer import format_ltl
from formal_rope.lang.source import resolve_formula_first


def formula_command(
    language_text: str = typer.Argument(
        ..., metavar="LANGUAGE",
        help="A registry name, a regex ('(ab)*', 're:' optional), an 'ltl:' formula or a .att automaton.",
    ),
    alphabet: Optional[str] = typer.Option(
        None, "--alphabet", "-a", help="Alphabet, e.g. 'ab' or 'a,b' (default: the language's own symbols)."
    ),
    fragment: str = typer.Option(
        "ltl_p_mod", "--fragment",
        help="ltl_p_mod (default): LTL[P,MOD]; ltl_p: refuse a language that needs MOD (exit 2, with the witness).",
    ),
    max_size: int = typer.Option(
        DEFAULT_MAX_SIZE, "--max-size", min=1,
        help="Largest formula the search for an LTL[P,MOD] \\ LTL[P] language tries, in nodes of its tree "
        "(a Boolean combination of atoms and MOD counts as one leaf); 'no formula found up to size S' is exit 1.",
    ),
    time_limit: float = typer.Option(
        DEFAULT_TIME_LIMIT, "--time-limit", min=0.1, help="Seconds the search may take before it gives up (exit 1).",
    ),
    one_line: bool = typer.Option(
        False, "--one-line", help="Print shared definitions on one line ('@1 := ...; @2 := ...; formula')."
    ),
    json_output: bool = typer.Option(
        False, "--json", help="Print one JSON object: the formula, its method, size, tree size, depth, P and MOD nodes."
    ),
) -> None:
    """Print an LTL[P] or LTL[P,MOD] formula for any language (regex, registry name, .att), checked equivalent.

    LTL[P] languages go through Li & Cotterell's construction (one formula per state of the
    partially ordered minimal DFA); LTL[P,MOD] \\ LTL[P] through a bounded search over formulas of the
    language's period. Long formulas share subformulas as definitions `@k := ...;`, which every
    command that reads formulas parses. Exit 2 for a language outside the fragment (with the
    decider's witness), exit 1 when the search finds no formula within --max-size / --time-limit.
    """
    if fragment not in FRAGMENTS:
        raise FormalRopeError(f"--fragment {fragment!r}: expected one of {', '.join(FRAGMENTS)}")
    language = resolve_formula_first(language_text, alphabet)
    if language.detected:
        print(f"note: {language_text!r} {language.detected}", file=sys.stderr)
    built = language_to_formula(language, fragment=fragment,
                                search=SearchOptions(max_size=max_size, time_limit=time_limit))
    if json_output:
        print(json.dumps({"language": language.spec, "kind": language.kind, **formula_json(built)},
                         ensure_ascii=False))
        return
    print(format_ltl(built.formula, separator="; " if one_line else ";\n"))
    print(f"note: {describe_method(built)}; alphabet {{{', '.join(built.alphabet)}}}; equivalent to the language's "
          f"{built.dfa.n_states}-state minimal DFA", file=sys.stderr)
