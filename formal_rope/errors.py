"""User-facing errors. The CLI prints them as one paragraph and exits with code 2 (no traceback).

A message says what is wrong without any prefix; `render()` adds the `error: ` the CLI prints, so
the prefix appears exactly once whichever layer raised the error.
"""

from __future__ import annotations


class FormalRopeError(Exception):
    """An error caused by the user's input (expression, option, file), not by a bug."""

    exit_code = 2

    def render(self) -> str:
        """The paragraph the CLI prints on stderr: `error: ` followed by the message."""
        return "error: " + str(self)


class ExpressionError(FormalRopeError):
    """A syntax or semantic error inside an expression, with the column to point at.

    `column` is 1-based (None when the error concerns the whole expression).
    """

    def __init__(self, expression: str, message: str, column: int | None = None, expected: str | None = None):
        self.expression = expression
        self.message = message
        self.column = column
        self.expected = expected
        super().__init__(self._body())

    def _body(self) -> str:
        lines = [self.message]
        lines.append(f"  in expression: {self.expression}")
        if self.column is not None:
            # Align the caret under the offending character of the echoed expression.
            lines.append("  " + " " * len("in expression: ") + " " * (self.column - 1) + "^")
        if self.expected:
            lines.append(f"  expected: {self.expected}")
        return "\n".join(lines)
