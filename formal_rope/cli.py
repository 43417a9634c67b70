"""The `formalrope` command line: a thin Typer layer over the library.

Each command group lives in formal_rope/commands/<group>.py and exposes register(app). Heavy
imports (torch, pandas) happen inside the command functions so start-up stays fast.
"""

from __future__ import annotations

import os
import sys

try:
    import typer
    from typer.core import TyperCommand, TyperGroup

    from formal_rope.errors import EXIT_CODES, EXIT_FAILED, EXIT_INTERRUPTED, FormalRopeError, Interrupted
except KeyboardInterrupt:  # Ctrl-C while the command line starts: nothing ran yet
    print("interrupted: before the command started; nothing was written", file=sys.stderr)
    sys.exit(130)

# A Ctrl-C that stops a command leaves only what is whole: every output appears complete or not at all.
NOTHING_KEPT = "no output was written (files appear only when complete); run the command again"


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


def _exit_code_table() -> str:
    return "Exit codes: " + "; ".join(f"{code} {meaning}" for code, meaning in EXIT_CODES) + "."


app = _App(
    cls=_Group,
    name="formalrope",
    help="Formal languages, exact transformer constructions and positional-encoding experiments.",
    epilog=_exit_code_table(),
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)

_COMMAND_MODULES = (
    "language", "automata", "classify", "sample", "certify", "compile", "train", "sweep", "report", "reproduce",
    "attack", "phases", "export",
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
    Ctrl-C prints one `interrupted:` line (what was kept, how to continue) and exits 130; an output
    that cannot be written (stdout on a full disk or /dev/full) is one `error:` line, exit 1. Success
    returns normally, so that callers (tests, scripts) can use main() as a function.
    """
    stdout = sys.stdout
    sys.stdout = _GuardedStdout(stdout)
    try:
        try:
            status = app(args=argv, standalone_mode=False)
            sys.stdout.flush()  # a full stdout fails here, inside the handlers, not at interpreter exit
        except KeyboardInterrupt:  # outside a command (Typer turns one inside into Exit(130))
            raise Interrupted(NOTHING_KEPT) from None
        finally:
            if isinstance(sys.stdout, _GuardedStdout):
                sys.stdout = stdout
    except StdoutError as error:
        _silence_stdout()
        _print_error(f"error: cannot write the output to standard output: {error}")
        sys.exit(EXIT_FAILED)
    except Interrupted as interruption:
        _print_error(interruption.render())
        _exit(interruption.exit_code)
    except FormalRopeError as error:
        _print_error(error.render())
        _exit(error.exit_code)
    except typer.Abort as error:
        # Click turns every EOFError into Abort; no command prompts, so one means that some input
        # ended early (a truncated file), which is the user's input to fix, not an interruption.
        cause = error.__cause__ or error.__context__
        if isinstance(cause, EOFError):
            _print_error(f"error: an input ended early ({cause or 'EOFError'}): a file it reads is empty or truncated")
            _exit(2)
        _print_error("error: aborted")
        _exit(1)
    except typer.TyperException as error:
        # Typer's (vendored Click) usage errors: an unknown option, a missing argument, a value of
        # the wrong type. Typed by duck (format_message, exit_code, ctx): the classes are private.
        context = getattr(error, "ctx", None)
        if type(error).__name__ == "NoArgsIsHelpError" and context is not None:
            print(context.get_help())  # `formalrope` alone prints the overview, as --help does
            _exit(2)  # but no command ran (Click's convention)
        message = error.format_message() if hasattr(error, "format_message") else str(error)
        hint = ""
        if context is not None:
            usage = context.get_usage().removeprefix("Usage: ")
            hint = f"\n  usage: {usage}\n  see: {context.command_path} --help"
        _print_error(f"error: {message}{hint}")
        _exit(getattr(error, "exit_code", 2))
    except BrokenPipeError:
        # `formalrope … | head`: the reader left; stop quietly like other Unix tools.
        _silence_stdout()
        sys.exit(1)
    if status == EXIT_INTERRUPTED:  # Typer's answer to a Ctrl-C inside a command that kept nothing
        _print_error("interrupted: " + NOTHING_KEPT)
    if isinstance(status, int) and status != 0:  # typer.Exit(n) returns n outside standalone mode
        _exit(status)


class StdoutError(Exception):
    """Writing the command's output to stdout failed (a full disk, /dev/full): not the input's fault."""


class _GuardedStdout:
    """sys.stdout while a command runs: a write or flush that fails raises StdoutError, so that main
    tells the output's failure (one line) from any other OSError. A closed pipe stays a
    BrokenPipeError (`| head`: stop quietly). Everything else is the wrapped stream's."""

    def __init__(self, stream):
        self._stream = stream

    def write(self, text):
        try:
            return self._stream.write(text)
        except BrokenPipeError:
            raise
        except OSError as error:
            raise StdoutError(error.strerror or str(error)) from None

    def flush(self):
        try:
            return self._stream.flush()
        except BrokenPipeError:
            raise
        except OSError as error:
            raise StdoutError(error.strerror or str(error)) from None

    def __getattr__(self, name):
        return getattr(self._stream, name)


def _silence_stdout() -> None:
    """Point stdout at /dev/null, so that what is still buffered is flushed there at exit and Python
    prints no second error about it."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
    except (OSError, ValueError, AttributeError):
        sys.stdout = open(os.devnull, "w")  # noqa: SIM115 - Python flushes stdio again at exit


def _exit(code: int) -> None:
    """sys.exit(code) after flushing stdout; a stdout that cannot take it is silenced (the command's
    own message was printed already)."""
    try:
        sys.stdout.flush()
    except OSError:
        _silence_stdout()
    sys.exit(code)


def _print_error(text: str) -> None:
    try:
        sys.stdout.flush()  # anything a command printed before failing comes first
    except OSError:
        _silence_stdout()
    print(text, file=sys.stderr)


if __name__ == "__main__":
    main()
