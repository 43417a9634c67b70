"""CLI: `languages` — the registry of named languages, with each one's minimal DFA and classes."""

from __future__ import annotations

import json

import typer
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from formal_rope.automata import language_dfa
from formal_rope.classes import classify
from formal_rope.commands.terminal import alphabet_text, stdout_console
from formal_rope.errors import FormalRopeError
from formal_rope.lang.registry import registry_entries
from formal_rope.lang.source import resolve_language


def languages_command(
    json_output: bool = typer.Option(False, "--json", help="Print a JSON list instead of a table."),
    classes: bool = typer.Option(
        True, "--classes/--no-classes", help="Build each language's minimal DFA and report its size and classes."
    ),
) -> None:
    """List the registry of named languages (the core paper's languages and LTL examples)."""
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
            row.update(facts)
        rows.append(row)
    if json_output:
        print(json.dumps(rows, ensure_ascii=False, indent=2))
        return
    stdout_console().print(_table(rows))
    if note:
        Console(stderr=True).print(f"note: {note}")


def _table(rows: list[dict]) -> Table:
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
        cells = [escape(row["name"]), escape(row["expression"]), escape(alphabet_text(row["alphabet"])), row["kind"]]
        if with_states:
            cells.append(str(row.get("states", "")))
        if with_classes:
            found = row.get("classes", {})
            cells += [_mark(found.get("ltl_p")), _mod_cell(found), _mark(found.get("star_free"))]
        cells.append(escape(row["description"]))
        table.add_row(*cells)
    return table


def _class_summaries(language) -> tuple[dict, str | None]:
    """(facts about the language's minimal DFA and classes, or a note why the classes are missing)."""
    dfa = language_dfa(language)
    facts: dict = {"states": dfa.n_states}
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
