"""CLI: `formalrope dfa`, `formalrope accepts`, `formalrope equiv` (thin layer over formal_rope.automata).

None of these commands imports torch: the automata stage needs only numpy.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import List, Optional

import typer
from rich.console import Console
from rich.table import Table

from formal_rope.automata import accepts, equivalent, language_dfa, to_dot, to_json, to_table, union_alphabet
from formal_rope.automata.membership import format_word
from formal_rope.commands.terminal import check_output_place, input_strings, stdout_console
from formal_rope.errors import FormalRopeError
from formal_rope.files import write_bytes_atomically
from formal_rope.lang.source import resolve_language

_EXPR_HELP = (
    "A language: a registry name, ltl:<formula>, re:<regex>, a .att file, or a bare expression "
    "(a formula if it applies P, H, Y, S or MOD, otherwise a regex). Its alphabet is its own symbols unless it "
    "names a registry entry or is one of the paper's five languages verbatim."
)
_ALPHABET_HELP = "Alphabet overriding the default (the symbols the expression mentions): 'ab', 'a,b' or 'foo bar'."
_MAX_STATES_HELP = "Refuse to build automata with more states than this."
_JSON_HELP = "Print JSON instead of a table."
_MAX_TABLE_ROWS = 200  # a terminal table of 10^5 rows helps nobody; --json/--dot give everything


def _resolve(expression: str, alphabet: Optional[str]):
    language = resolve_language(expression, alphabet)
    if language.detected:
        print(f"note: {expression!r} {language.detected}", file=sys.stderr)
    return language


def _build(language, max_states: int):
    """language_dfa with a spinner on stderr (shown only on a terminal): big automata take seconds."""
    with Console(stderr=True).status(f"building the automaton of {language.expression}…"):
        return language_dfa(language, max_states=max_states)


def _word_text(symbols, alphabet) -> str:
    """Symbols back to the string syntax `split_symbols` (and so `accepts`) reads."""
    return format_word(symbols, alphabet)


def dfa_command(
    expression: str = typer.Argument(..., metavar="EXPR", help=_EXPR_HELP),
    alphabet: Optional[str] = typer.Option(None, "--alphabet", "-a", help=_ALPHABET_HELP),
    dot: bool = typer.Option(
        False, "--dot", help="Print Graphviz DOT source (pipe into `dot -Tsvg`, which needs Graphviz's dot program)."
    ),
    svg: Optional[Path] = typer.Option(
        None, "--svg", help="Also draw the DFA into this SVG file as the results page draws it (no Graphviz "
        "needed; up to 24 states).",
    ),
    max_states: int = typer.Option(10**6, "--max-states", min=1, help=_MAX_STATES_HELP),
    json_output: bool = typer.Option(False, "--json", help=_JSON_HELP),
) -> None:
    """Build and print the minimal complete DFA of a language (→ marks the start, * accepting states)."""
    if dot and json_output:
        raise FormalRopeError("--dot and --json are two output formats; give one of them")
    if svg is not None:
        check_output_place(svg, "the DFA drawing")
    language = _resolve(expression, alphabet)
    dfa = _build(language, max_states)
    if svg is not None:
        # function-local: the page's module (pandas) loads only when a drawing is asked for
        from formal_rope.sweeps.results_page import dfa_svg_file

        write_bytes_atomically(svg, dfa_svg_file(dfa).encode(), "the DFA drawing")
        print(f"DFA drawing written to {svg}", file=sys.stderr)
    if dot:
        print(to_dot(dfa), end="")
        return
    if json_output:
        print(json.dumps({"expression": language.expression, "kind": language.kind, **to_json(dfa)}))
        return
    headers, rows = to_table(dfa)
    console = stdout_console(highlight=False)
    console.print(
        f"minimal DFA of {language.expression} ({language.kind}) over {{{', '.join(dfa.alphabet)}}}: "
        f"{dfa.n_states} state{'s' if dfa.n_states != 1 else ''} (→ start, * accepting)",
        markup=False,
    )
    table = Table()
    for header in headers:
        table.add_column(header, justify="right")
    for row in rows[:_MAX_TABLE_ROWS]:
        table.add_row(*row)
    console.print(table)
    if len(rows) > _MAX_TABLE_ROWS:
        console.print(
            f"… {len(rows) - _MAX_TABLE_ROWS} more states not shown (use --json or --dot for all)", markup=False
        )


def accepts_command(
    expression: str = typer.Argument(..., metavar="EXPR", help=_EXPR_HELP),
    strings: Optional[List[str]] = typer.Argument(
        None, metavar="STRING",
        help="Strings to test. Without any, one string per line is read from stdin (an empty line is ε).",
    ),
    alphabet: Optional[str] = typer.Option(None, "--alphabet", "-a", help=_ALPHABET_HELP),
    max_states: int = typer.Option(10**6, "--max-states", min=1, help=_MAX_STATES_HELP),
    json_output: bool = typer.Option(False, "--json", help="Print a JSON array of booleans in input order."),
) -> None:
    """Test membership of strings in a language (vectorized over the whole batch)."""
    language = _resolve(expression, alphabet)
    dfa = _build(language, max_states)
    strings = input_strings(strings)
    verdicts = accepts(dfa, list(strings)).tolist()
    if json_output:
        print(json.dumps(verdicts))
        return
    for string, verdict in zip(strings, verdicts):
        print(f"{'accept' if verdict else 'reject'}\t{string if string else 'ε'}")


def equiv_command(
    first: str = typer.Argument(..., metavar="EXPR1", help=_EXPR_HELP),
    second: str = typer.Argument(..., metavar="EXPR2", help=_EXPR_HELP),
    alphabet: Optional[str] = typer.Option(None, "--alphabet", "-a", help=_ALPHABET_HELP + " Applies to both."),
    max_states: int = typer.Option(10**6, "--max-states", min=1, help=_MAX_STATES_HELP),
    json_output: bool = typer.Option(
        False, "--json",
        help='Print {"equivalent", "counterexample" (str or null), "alphabets" (both), "alphabets_differ"}.',
    ),
) -> None:
    """Decide whether two languages are equal; otherwise print a shortest string in exactly one.

    When the two alphabets differ, both languages are compared as sets of strings over the union
    of the alphabets (a string using a symbol a language does not know is not in that language).
    """
    first_language = _resolve(first, alphabet)
    second_language = _resolve(second, alphabet)
    first_dfa = _build(first_language, max_states)
    second_dfa = _build(second_language, max_states)
    result = equivalent(first_dfa, second_dfa, max_states=max_states)
    symbols = union_alphabet(first_dfa.alphabet, second_dfa.alphabet)
    counterexample = None if result.counterexample is None else _word_text(result.counterexample, symbols)
    differ = set(first_dfa.alphabet) != set(second_dfa.alphabet)
    if json_output:
        print(json.dumps({
            "equivalent": result.equivalent, "counterexample": counterexample,
            "alphabets": [list(first_dfa.alphabet), list(second_dfa.alphabet)], "alphabets_differ": differ,
        }, ensure_ascii=False))
        return
    if differ:
        # Said first: a counterexample using a symbol one language lacks is about the alphabets.
        print(
            f"the alphabets differ: {first} is over {{{', '.join(first_dfa.alphabet)}}}, {second} over "
            f"{{{', '.join(second_dfa.alphabet)}}}; compared over their union {{{', '.join(symbols)}}} "
            "(--alphabet gives both the same)"
        )
    if result.equivalent:
        print(f"equivalent over {{{', '.join(symbols)}}}")
        return
    in_first = set(result.counterexample) <= set(first_dfa.alphabet) and bool(
        accepts(first_dfa, [list(result.counterexample)])[0]
    )
    owner, other = (first, second) if in_first else (second, first)
    shown = repr(counterexample) if counterexample else "ε"
    print(f"not equivalent: {shown} is in {owner} but not in {other}")

