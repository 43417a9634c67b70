"""Numbers typed by a user (option values, ranges, lists): written with ASCII digits only.

Python's int() and float() also read other scripts' digits ('１２' is 12, '٣' is 3), so a value
copied from a full-width or right-to-left text would be accepted as a different-looking number.
These raise ValueError for such text, as int() and float() do for text that is no number, so the
callers' messages stay what they are. (The command line's integer and float options are read by
Typer through pydantic, which accepts ASCII digits only already.)
"""

from __future__ import annotations


def int_text(text: str) -> int:
    """int(text) for text written in ASCII; ValueError otherwise."""
    if not str(text).isascii():
        raise ValueError(f"{text!r} is not written with ASCII digits")
    return int(text)


def float_text(text: str) -> float:
    """float(text) for text written in ASCII; ValueError otherwise."""
    if not str(text).isascii():
        raise ValueError(f"{text!r} is not written with ASCII digits")
    return float(text)
