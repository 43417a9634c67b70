"""The `formalrope` command line: a thin Typer layer over the library.

Each command group lives in formal_rope/commands/<group>.py and exposes register(app). Heavy
imports (torch, pandas) happen inside the command functions so start-up stays fast.
"""

from __future__ import annotations

import os
import sys

import typer
from typer.core import TyperCommand, TyperGroup

from formal_rope.errors import FormalRopeError


def _hide_flag_types(params: list) -> list:
    """Typer's help shows every option's type (`--json <bool>`), which reads as if a flag took a
    value; a flag's metavar replaces that type, and an empty one hides it (flags never show a
    metavar anywhere else)."""
    for param in params:
        if getattr(param, "is_flag", False) and param.metavar is None:
            param.metavar = ""
    return params


class _Command(TyperCommand):
    def get_params(self, ctx) -> list:
        return _hide_flag_types(super().get_params(ctx))


class _Group(TyperGroup):
    def get_params(self, ctx) -> list:
        return _hide_flag_types(super().get_params(ctx))


class _App(typer.Typer):
    """A Typer app whose commands default to `_Command` (help without flag types)."""

    def command(self, *args, **kwargs):
        kwargs.setdefault("cls", _Command)
        return super().command(*args, **kwargs)


app = _App(
    cls=_Group,
    name="formalrope",
    help="Formal languages, exact transformer constructions and positional-encoding experiments.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)

_COMMAND_MODULES = (
    "language", "automata", "classify", "sample", "certify", "compile", "train", "sweep", "attack", "phases",
    "export",
)


def _register_commands() -> None:
    import importlib

    for name in _COMMAND_MODULES:
        try:
            module = importlib.import_module(f"formal_rope.commands.{name}")
        except ModuleNotFoundError as error:
            if error.name == f"formal_rope.commands.{name}":
                continue  # command group not built yet
            raise
        module.register(app)


@app.command()
def version(json_output: bool = typer.Option(False, "--json", help="Print a JSON object.")) -> None:
    """Print the formal-rope version."""
    from formal_rope import __version__

    if json_output:
        import json

        print(json.dumps({"version": __version__}))
    else:
        print(f"formal-rope {__version__}")


_register_commands()


def main(argv: list[str] | None = None) -> None:
    """Console-script entry point: every error is one paragraph on stderr starting with `error: `.

    User errors (FormalRopeError) and Click's usage errors (unknown option, missing argument, bad
    value) exit with code 2, never with a traceback; commands that end with typer.Exit(n) exit n.
    Success returns normally, so that callers (tests, scripts) can use main() as a function.
    """
    try:
        status = app(args=argv, standalone_mode=False)
    except FormalRopeError as error:
        _print_error(error.render())
        sys.exit(error.exit_code)
    except typer.Abort as error:
        # Click turns every EOFError into Abort; no command prompts, so one means that some input
        # ended early (a truncated file), which is the user's input to fix, not an interruption.
        cause = error.__cause__ or error.__context__
        if isinstance(cause, EOFError):
            _print_error(f"error: an input ended early ({cause or 'EOFError'}): a file it reads is empty or truncated")
            sys.exit(2)
        _print_error("error: aborted")
        sys.exit(1)
    except typer.TyperException as error:
        # Typer's (vendored Click) usage errors: an unknown option, a missing argument, a value of
        # the wrong type. Typed by duck (format_message, exit_code, ctx): the classes are private.
        context = getattr(error, "ctx", None)
        if type(error).__name__ == "NoArgsIsHelpError" and context is not None:
            print(context.get_help())  # `formalrope` alone prints the overview, as --help does
            sys.exit(2)  # but no command ran (Click's convention)
        message = error.format_message() if hasattr(error, "format_message") else str(error)
        hint = ""
        if context is not None:
            usage = context.get_usage().removeprefix("Usage: ")
            hint = f"\n  usage: {usage}\n  see: {context.command_path} --help"
        _print_error(f"error: {message}{hint}")
        sys.exit(getattr(error, "exit_code", 2))
    except BrokenPipeError:
        # `formalrope … | head`: the reader left; stop quietly like other Unix tools.
        sys.stderr = open(os.devnull, "w")  # noqa: SIM115 - Python flushes stdio again at exit
        sys.stdout = open(os.devnull, "w")  # noqa: SIM115
        sys.exit(1)
    if isinstance(status, int) and status != 0:  # typer.Exit(n) returns n outside standalone mode
        sys.exit(status)


def _print_error(text: str) -> None:
    sys.stdout.flush()  # anything a command printed before failing comes first
    print(text, file=sys.stderr)


if __name__ == "__main__":
    main()
