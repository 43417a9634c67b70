"""ASTs <-> JSON-ready dictionaries ({"type": "And", "left": {...}, "right": {...}}), lossless."""

from __future__ import annotations

import dataclasses
import json

from formal_rope.lang.analysis import fold_ast
from formal_rope.lang.ast import FORMULA_TYPES, REGEX_TYPES, Formula, Regex

_NODE_TYPES = {cls.__name__: cls for cls in (*FORMULA_TYPES, *REGEX_TYPES)}
_CHILD_FIELDS = ("child", "left", "right")


def ast_to_dict(ast: Formula | Regex) -> dict:
    """A parsed formula or regex as nested JSON-ready dicts ({"type": node class, field: value, ...}).

    Lossless: `ast_from_dict` rebuilds the same AST (what `formalrope parse --json` prints).
    """

    def combine(node, children):
        fields = {field.name: getattr(node, field.name) for field in dataclasses.fields(node)}
        out: dict = {"type": type(node).__name__}
        child_results = iter(children)
        for name, value in fields.items():
            if name in _CHILD_FIELDS:
                out[name] = next(child_results)
            elif isinstance(value, tuple):
                out[name] = list(value)
            else:
                out[name] = value
        return out

    return fold_ast(ast, combine)  # type: ignore[return-value]


def ast_from_dict(data: dict) -> Formula | Regex:
    """Inverse of ast_to_dict (raises ValueError on an unknown node type)."""
    try:
        cls = _NODE_TYPES[data["type"]]
    except KeyError:
        raise ValueError(f"unknown AST node type {data.get('type')!r}") from None
    kwargs = {}
    for field in dataclasses.fields(cls):
        if field.name not in data:
            continue
        value = data[field.name]
        if field.name in _CHILD_FIELDS:
            value = ast_from_dict(value)
        elif isinstance(value, list):
            value = tuple(value)
        kwargs[field.name] = value
    return cls(**kwargs)


def json_text(value, indent: int | None = 2) -> str:
    """`json.dumps(value, ensure_ascii=False, indent=indent)` without recursion.

    The json module recurses once per nesting level, and an AST dictionary is as deep as the
    AST (a 2 000-symbol concatenation is 2 000 levels), so `parse --json` writes it with this.
    indent=None gives json.dumps's one-line form.
    """
    out: list[str] = []
    # Work items: str = text to emit; tuple = (value, depth) still to encode.
    work: list = [(value, 0)]
    while work:
        item = work.pop()
        if isinstance(item, str):
            out.append(item)
            continue
        current, depth = item
        if isinstance(current, (dict, list, tuple)) and current:
            is_dict = isinstance(current, dict)
            if indent is None:
                inner, outer = "", ""
            else:
                inner, outer = "\n" + " " * (indent * (depth + 1)), "\n" + " " * (indent * depth)
            entries = current.items() if is_dict else ((None, child) for child in current)
            forward: list = []
            for position, (key, child) in enumerate(entries):
                head = ((", " if indent is None else ",") if position else "") + inner
                if is_dict:
                    head += json.dumps(str(key), ensure_ascii=False) + ": "
                forward += [head, (child, depth + 1)]
            forward.append(outer + ("}" if is_dict else "]"))
            out.append("{" if is_dict else "[")
            work.extend(reversed(forward))
        else:
            out.append(json.dumps(current, ensure_ascii=False))
    return "".join(out)


__all__ = ["ast_to_dict", "ast_from_dict", "json_text"]
