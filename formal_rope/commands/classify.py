"""CLI: `formalrope classify EXPR` — which logical/algebraic classes a regular language lies in.

Thin layer over formal_rope.classes.classify; imports only numpy/scipy (never torch).
"""

from __future__ import annotations

import json
import sys
from typing import Optional

import typer
from rich.table import Table

from formal_rope.automata import language_dfa
from formal_rope.classes import classify
from formal_rope.commands.terminal import stdout_console
from formal_rope.lang.source import resolve_language

_EXPR_HELP = (
    "A language: a registry name, ltl:<formula>, re:<regex>, a .att file, or a bare expression "
    "(a formula if it applies P, H, Y, S or MOD, otherwise a regex). Its alphabet is its own symbols unless it "
    "names a registry entry or is one of the paper's five languages verbatim."
)

# (field, label shown in the table, what the class means)
_ROWS = (
    ("ltl_p", "LTL[P] = PFO²[<]", "minimal DFA is a PODFA ⇔ syntactic monoid R-trivial"),
    ("ltl_p_mod", "LTL[P,MOD] = PFO²[<,MOD]", "some k-automaton A_k is a PODFA ⇔ syntactic monoid in QR"),
    ("star_free", "star-free = LTL[S]", "aperiodic syntactic monoid"),
    ("r_trivial", "R-trivial", "xM = yM ⇒ x = y"),
    ("l_trivial", "L-trivial", "Mx = My ⇒ x = y"),
    ("j_trivial", "J-trivial (piecewise testable)", "MxM = MyM ⇒ x = y"),
)


def classify_command(
    expression: str = typer.Argument(..., metavar="EXPR", help=_EXPR_HELP),
    alphabet: Optional[str] = typer.Option(
        None, "--alphabet", "-a",
        help="Alphabet overriding the default (the symbols the expression mentions): 'ab', 'a,b' or 'foo bar'.",
    ),
    max_states: int = typer.Option(
        10**6, "--max-states", min=1, help="Refuse to build automata with more states than this."
    ),
    max_monoid_size: int = typer.Option(
        200_000, "--max-monoid-size", min=1, help="Refuse languages whose syntactic monoid has more elements than this."
    ),
    json_output: bool = typer.Option(False, "--json", help="Print one JSON object instead of a table."),
) -> None:
    """Decide LTL[P], LTL[P,MOD] (with the least block length k), star-freeness and R/L/J-triviality,
    with a witness for every class the language is not in."""
    language = resolve_language(expression, alphabet)
    if language.detected:
        print(f"note: {expression!r} {language.detected}", file=sys.stderr)
    dfa = language_dfa(language, max_states=max_states)
    result = classify(dfa, max_monoid_size=max_monoid_size)
    payload = {"expression": language.expression, "kind": language.kind, **result.to_dict()}
    if json_output:
        print(json.dumps(payload, ensure_ascii=False))
        return
    _render(payload)


def _render(payload: dict) -> None:
    console = stdout_console(highlight=False)
    console.print(
        f"{payload['expression']} ({payload['kind']}) over {{{', '.join(payload['alphabet'])}}}: minimal DFA "
        f"{payload['states']} states, syntactic monoid {payload['monoid_size']} elements",
        markup=False,
    )
    table = Table()
    table.add_column("class")
    table.add_column("verdict")
    table.add_column("criterion")
    for key, label, meaning in _ROWS:
        verdict = "yes" if payload[key] else "no"
        if key == "ltl_p_mod" and payload[key]:
            verdict += f" (k = {payload['mod_k']})"
        table.add_row(label, verdict, meaning)
    console.print(table)
    console.print(
        f"stability: η(Σ^p) = η(Σ^(p+π)) first at p = {payload['stability_index']}, π = {payload['stability_period']}; "
        f"LTL[P,MOD] decided on A_k0 with k0 = {payload['k_bound']}",
        markup=False,
    )
    for key, label, _ in _ROWS:
        witness = payload["witness"].get(key)
        if witness is not None:
            console.print(f"not {label}: {witness['explanation']}", markup=False)

