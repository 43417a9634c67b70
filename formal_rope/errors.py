"""User-facing errors. The CLI prints them as one paragraph and exits with code 2 (no traceback).

A message says what is wrong without any prefix; `render()` adds the `error: ` the CLI prints, so
the prefix appears exactly once whichever layer raised the error. `Interrupted` is not an error: a
command that was stopped (Ctrl-C) raises it to say what it kept and how to continue (exit 130).

The command line's exit codes are `EXIT_CODES` (shown in `formalrope --help` and the README).
"""

from __future__ import annotations

EXIT_OK = 0
EXIT_FAILED = 1  # a run failed, or the output could not be written (a full disk, /dev/full)
EXIT_BAD_INPUT = 2  # an error in the input: expression, option, file (FormalRopeError)
EXIT_NODE_LOST = 3  # a sweep's backend lost the node its runs ran on (sweeps.backends.SweepStopped)
EXIT_INTERRUPTED = 130  # Ctrl-C (SIGINT), 128 + 2 as shells report it
EXIT_CODES = (
    (EXIT_OK, "success"),
    (EXIT_FAILED, "a run failed, or the output could not be written"),
    (EXIT_BAD_INPUT, "bad input: an expression, option or file (one `error:` paragraph)"),
    (EXIT_NODE_LOST, "a sweep's backend lost its node (the finished runs are kept)"),
    (EXIT_INTERRUPTED, "interrupted (Ctrl-C): one `interrupted:` line says what was kept and how to continue"),
)


class Interrupted(Exception):
    """A command stopped by Ctrl-C; `kept` says what it kept and how to continue (one line)."""

    exit_code = EXIT_INTERRUPTED

    def __init__(self, kept: str):
        self.kept = kept
        super().__init__(kept)

    def render(self) -> str:
        return "interrupted: " + self.kept


class FormalRopeError(Exception):
    """An error caused by the user's input (expression, option, file), not by a bug."""

    exit_code = EXIT_BAD_INPUT

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
