"""Human-readable views of a DFA: Graphviz source and table rows (rendered with Rich by the CLI)."""

from __future__ import annotations

import json

from formal_rope.automata.dfa import DFA, require_dfa


def _quote(text: str) -> str:
    # A JSON string literal is a valid DOT quoted string, provided non-ASCII characters stay
    # literal: Graphviz does not read \uXXXX escapes (it drew "u03b1" for α).
    return json.dumps(text, ensure_ascii=False)


def _edge_symbol(symbol: str) -> str:
    """A symbol in a comma-joined edge label: quoted as in expressions ('a,b') when a comma, blank or
    leading quote would otherwise make the label ambiguous; JSON-escaped if it holds both quotes."""
    if "," not in symbol and not any(ch.isspace() for ch in symbol) and symbol[:1] not in ("'", '"'):
        return symbol
    if "'" not in symbol:
        return f"'{symbol}'"
    if '"' not in symbol:
        return f'"{symbol}"'
    return json.dumps(symbol, ensure_ascii=False)


def to_dot(dfa: DFA, name: str = "dfa") -> str:
    """Graphviz DOT source: double circles accept, parallel edges merged into one labelled edge
    whose label lists the symbols separated by commas (symbols with commas are quoted: 'a,b')."""
    require_dfa(dfa, "to_dot", "dfa")
    lines = [f"digraph {_quote(name)} {{", "  rankdir=LR;", '  __start [shape=point, label=""];']
    for state in range(dfa.n_states):
        shape = "doublecircle" if dfa.accepting[state] else "circle"
        lines.append(f"  {state} [shape={shape}];")
    lines.append(f"  __start -> {dfa.start};")
    edges: dict[tuple[int, int], list[str]] = {}
    for state in range(dfa.n_states):
        for column, symbol in enumerate(dfa.alphabet):
            edges.setdefault((state, int(dfa.transitions[state, column])), []).append(symbol)
    for (source, target), symbols in edges.items():
        lines.append(f"  {source} -> {target} [label={_quote(','.join(map(_edge_symbol, symbols)))}];")
    lines.append("}")
    return "\n".join(lines) + "\n"


def to_table(dfa: DFA) -> tuple[list[str], list[list[str]]]:
    """(column headers, rows): state (→ marks the start, * accepting), then one target per symbol."""
    require_dfa(dfa, "to_table", "dfa")
    headers = ["state", *dfa.alphabet]
    rows = []
    for state in range(dfa.n_states):
        mark = ("→" if state == dfa.start else "") + ("*" if dfa.accepting[state] else "")
        rows.append([f"{mark}{state}", *(str(int(t)) for t in dfa.transitions[state])])
    return headers, rows


def to_json(dfa: DFA) -> dict:
    """A JSON-serialisable description of the DFA."""
    require_dfa(dfa, "to_json", "dfa")
    return {
        "alphabet": list(dfa.alphabet),
        "n_states": dfa.n_states,
        "start": dfa.start,
        "accepting": [int(s) for s in dfa.accepting.nonzero()[0]],
        "transitions": dfa.transitions.tolist(),
    }
