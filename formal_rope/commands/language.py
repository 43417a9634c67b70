"""CLI: `languages` (the registry) and `parse` (read an expression, show how it was understood)."""

from __future__ import annotations

import json
from typing import Optional

import typer

from formal_rope.commands.terminal import stdout_console

_INDENTED_JSON_MAX_DEPTH = 64

STYLE_HELP = "Print formulas/regexes with Unicode operators (¬ ∧ ∨ → ↔ ⊤ ⊥ Σ ε ∅) or ASCII ones (! & | -> <-> . () [])."


def _alphabet_text(alphabet) -> str:
    return "{" + ", ".join(alphabet) + "}"


def _canonical(language, style: Optional[str]) -> str | None:
    from formal_rope.lang.printer import format_ltl, format_regex

    if language.ast is None:
        return None
    if language.kind == "ltl":
        return format_ltl(language.ast, style or "ascii")
    return format_regex(language.ast, style or "unicode")


def _node_label(node) -> str:
    import dataclasses

    from formal_rope.lang.printer import quote_symbol

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


def _rich_tree(ast, title: str):
    from rich.markup import escape
    from rich.tree import Tree

    from formal_rope.lang.analysis import fold_ast

    def combine(node, children):
        branch = Tree(escape(_node_label(node)))
        for child in children:
            branch.children.append(child)
        return branch

    root = Tree(escape(title))
    root.children.append(fold_ast(ast, combine))
    return root


def _class_summaries(language) -> tuple[dict | None, str | None]:
    """(facts about the language's minimal DFA and classes, or a note why they are missing)."""
    try:
        from formal_rope.automata import language_dfa
    except ImportError as error:  # automata stage not built yet
        return None, f"automata stage unavailable ({error})"
    facts: dict = {}
    dfa = language_dfa(language)
    facts["states"] = dfa.n_states
    try:
        from formal_rope.classes import classify
    except ImportError:
        return facts, "class columns need formal_rope.classes.classify (not available yet)"
    from formal_rope.errors import FormalRopeError

    try:
        facts["classes"] = _classes_of(classify(dfa))
    except FormalRopeError as error:  # e.g. a syntactic monoid too large to enumerate
        return facts, f"classes of {language.label} not computed: {error}"
    return facts, None


def _classes_of(report) -> dict:
    """A JSON-able view of a classification (formal_rope.classes.Classification), witnesses left out."""
    data = report.to_dict() if hasattr(report, "to_dict") else dict(report)
    data.pop("witness", None)
    data.pop("alphabet", None)
    return data


def _mark(value) -> str:
    return "-" if value is None else ("yes" if value else "no")


def _mod_cell(classes: dict) -> str:
    if not classes.get("ltl_p_mod"):
        return _mark(classes.get("ltl_p_mod"))
    return f"yes (k={classes.get('mod_k')})" if classes.get("mod_k") else "yes"


def register(app: typer.Typer) -> None:
    @app.command("languages")
    def languages_command(
        json_output: bool = typer.Option(False, "--json", help="Print a JSON list instead of a table."),
        classes: bool = typer.Option(
            True, "--classes/--no-classes", help="Build each language's minimal DFA and report its size and classes."
        ),
    ) -> None:
        """List the registry of named languages (the core paper's languages and LTL examples)."""
        from formal_rope.lang.registry import registry_entries
        from formal_rope.lang.source import resolve_language

        rows = []
        note = None
        for entry in registry_entries():
            row = {
                "name": entry.name,
                "expression": entry.expression,
                "kind": entry.kind,
                "alphabet": list(entry.alphabet),
                "description": entry.description,
                "source": entry.source,
            }
            if classes:
                facts, note = _class_summaries(resolve_language(entry.name))
                if facts:
                    row.update(facts)
            rows.append(row)
        if json_output:
            print(json.dumps(rows, ensure_ascii=False, indent=2))
            return

        from rich.console import Console
        from rich.markup import escape
        from rich.table import Table

        table = Table(title="Registry languages", show_lines=False)
        for column in ("name", "expression", "alphabet", "kind"):
            table.add_column(column, overflow="fold", no_wrap=column == "name")
        with_states = any("states" in row for row in rows)
        with_classes = any("classes" in row for row in rows)
        if with_states:
            table.add_column("states", justify="right")
        if with_classes:
            for column in ("LTL[P]", "LTL[P,MOD]", "star-free"):
                table.add_column(column)
        table.add_column("description", overflow="fold")
        for row in rows:
            cells = [
                escape(row["name"]), escape(row["expression"]), escape(_alphabet_text(row["alphabet"])), row["kind"]
            ]
            if with_states:
                cells.append(str(row.get("states", "")))
            if with_classes:
                found = row.get("classes", {})
                cells += [_mark(found.get("ltl_p")), _mod_cell(found), _mark(found.get("star_free"))]
            cells.append(escape(row["description"]))
            table.add_row(*cells)
        console = stdout_console()
        console.print(table)
        if note:
            Console(stderr=True).print(f"note: {note}")

    @app.command("parse")
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
        from formal_rope.errors import FormalRopeError
        from formal_rope.lang.analysis import fold_ast, ltl_fragment
        from formal_rope.lang.serialize import ast_to_dict, json_text
        from formal_rope.lang.source import resolve_language

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
            depth = (
                fold_ast(language.ast, lambda node, below: 1 + max(below, default=0)) if language.ast is not None else 0
            )
            # Indented JSON of a deep AST grows with depth² (every line carries its depth in
            # blanks), so ASTs deeper than this print on one line; both are the same JSON.
            print(json_text(payload, indent=2 if depth <= _INDENTED_JSON_MAX_DEPTH else None))
            return

        from rich.markup import escape
        from rich.table import Table

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
        facts.add_row("alphabet", escape(_alphabet_text(language.alphabet)))
        if language.name:
            facts.add_row("name", language.name)
        if language.path:
            facts.add_row("path", escape(language.path))
        console.print(facts)
        if language.ast is not None:
            depth = fold_ast(language.ast, lambda node, below: 1 + max(below, default=0))
            # Rich indents 4 columns per level and silently folds or drops what does not fit, so a
            # deeper tree would be drawn wrong rather than cut visibly.
            if 4 * depth + 16 > console.width:
                console.print(
                    f"AST: {depth} levels deep, too deep to draw in {console.width} columns; --json prints it"
                )
            else:
                console.print(_rich_tree(language.ast, "AST"))
