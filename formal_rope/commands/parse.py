"""CLI: `parse` — read an expression and show how it was understood."""

from __future__ import annotations

import dataclasses
from typing import Optional

import typer
from rich.markup import escape
from rich.table import Table
from rich.tree import Tree

from formal_rope.commands.terminal import alphabet_text, stdout_console
from formal_rope.errors import FormalRopeError
from formal_rope.lang.analysis import fold_ast, ltl_fragment
from formal_rope.lang.printer import format_ltl, format_regex, quote_symbol
from formal_rope.lang.serialize import ast_to_dict, json_text
from formal_rope.lang.source import resolve_language

_INDENTED_JSON_MAX_DEPTH = 64

STYLE_HELP = "Print formulas/regexes with Unicode operators (¬ ∧ ∨ → ↔ ⊤ ⊥ Σ ε ∅) or ASCII ones (! & | -> <-> . () [])."


def parse_command(
    expression: str = typer.Argument(
        ..., help="A registry name, ltl:<formula>, re:<regex>, a .att file, or a bare expression (auto-detected)."
    ),
    alphabet: Optional[str] = typer.Option(
        None, "--alphabet", "-a", help="Alphabet, as 'ab' or 'a,b' (default: the symbols the expression mentions)."
    ),
    kind: Optional[str] = typer.Option(
        None, "--kind", "-k", help="Force the reading: 'ltl' or 'regex' (default: auto-detect bare expressions)."
    ),
    unicode: Optional[bool] = typer.Option(None, "--unicode/--ascii", help=STYLE_HELP),
    json_output: bool = typer.Option(False, "--json", help="Print a JSON object (AST as nested objects)."),
) -> None:
    """Parse an expression and show its AST, canonical form, kind, LTL fragment and alphabet."""
    if kind is not None and kind not in ("ltl", "regex"):
        raise FormalRopeError(f"--kind must be 'ltl' or 'regex', got {kind!r}")
    language = resolve_language(expression, alphabet, force_kind=kind)
    style = None if unicode is None else ("unicode" if unicode else "ascii")
    canonical = _canonical(language, style)
    fragment = ltl_fragment(language.ast) if language.kind == "ltl" else None
    if language.detected:
        typer.echo(f"note: {language.detected}", err=True)
    if json_output:
        payload = {
            "spec": language.spec,
            "kind": language.kind,
            "expression": language.expression,
            "canonical": canonical,
            "fragment": fragment,
            "alphabet": list(language.alphabet),
            "name": language.name,
            "path": language.path,
            "detected": language.detected,
            "ast": ast_to_dict(language.ast) if language.ast is not None else None,
        }
        depth = _depth(language.ast) if language.ast is not None else 0
        # Indented JSON of a deep AST grows with depth² (every line carries its depth in
        # blanks), so ASTs deeper than this print on one line; both are the same JSON.
        print(json_text(payload, indent=2 if depth <= _INDENTED_JSON_MAX_DEPTH else None))
        return
    _render(language, canonical, fragment)


def _render(language, canonical: str | None, fragment: str | None) -> None:
    console = stdout_console()
    facts = Table.grid(padding=(0, 2))
    facts.add_column(style="bold")
    facts.add_column()
    kind_words = {"ltl": "LTL formula", "regex": "regular expression", "att": "automaton file (OpenFst text)"}
    facts.add_row("kind", f"{language.kind} ({kind_words[language.kind]})")
    if canonical is not None:
        facts.add_row("canonical", escape(canonical))
    if fragment is not None:
        facts.add_row("fragment", fragment)
    facts.add_row("alphabet", escape(alphabet_text(language.alphabet)))
    if language.name:
        facts.add_row("name", language.name)
    if language.path:
        facts.add_row("path", escape(language.path))
    console.print(facts)
    if language.ast is not None:
        depth = _depth(language.ast)
        # Rich indents 4 columns per level and silently folds or drops what does not fit, so a
        # deeper tree would be drawn wrong rather than cut visibly.
        if 4 * depth + 16 > console.width:
            console.print(f"AST: {depth} levels deep, too deep to draw in {console.width} columns; --json prints it")
        else:
            console.print(_rich_tree(language.ast, "AST"))


def _depth(ast) -> int:
    return fold_ast(ast, lambda node, below: 1 + max(below, default=0))


def _canonical(language, style: Optional[str]) -> str | None:
    if language.ast is None:
        return None
    if language.kind == "ltl":
        return format_ltl(language.ast, style or "ascii")
    return format_regex(language.ast, style or "unicode")


def _node_label(node) -> str:
    name = type(node).__name__.rstrip("_")
    params = []
    for field in dataclasses.fields(node):
        if field.name in ("child", "left", "right"):
            continue
        value = getattr(node, field.name)
        if field.name == "symbol":
            params.append(quote_symbol(value))
        elif field.name == "symbols":
            params.append("[" + ("^" if node.negated else "") + "".join(quote_symbol(s) for s in value) + "]")
        elif field.name == "negated":
            continue
        else:
            params.append(f"{field.name}={value}")
    return name + (" " + " ".join(params) if params else "")


def _rich_tree(ast, title: str) -> Tree:
    def combine(node, children):
        branch = Tree(escape(_node_label(node)))
        for child in children:
            branch.children.append(child)
        return branch

    root = Tree(escape(title))
    root.children.append(fold_ast(ast, combine))
    return root
