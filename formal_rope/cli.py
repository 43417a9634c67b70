"""The `formalrope` command line: a thin Typer layer over the library.

Each command is a top-level function in formal_rope/commands/<module>.py, listed in COMMANDS with
its one-line summary. A command's module is imported only when that command runs (its --help
included), so the modules import the library at their top while `formalrope --help` and every
other command start without it (torch, numpy, pandas).
"""

from __future__ import annotations

import importlib
import json
import os
import sys
from typing import Iterator, Mapping, NamedTuple

try:
    import typer
    import typer.main
    from typer.core import TyperCommand, TyperGroup

    from formal_rope import __version__
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


class CommandEntry(NamedTuple):
    """Where a command lives, and the line `formalrope --help` lists it with (the first paragraph
    of its docstring; tests/test_cli_commands.py checks that the two agree)."""

    module: str  # formal_rope.commands.<module>
    function: str  # its top-level command function
    summary: str


# The commands in the order `formalrope --help` lists them (after `version`, defined below).
COMMANDS: dict[str, CommandEntry] = {
    "languages": CommandEntry(
        "languages", "languages_command",
        "List the registry of named languages (the core paper's languages and LTL examples)."),
    "parse": CommandEntry(
        "parse", "parse_command",
        "Parse an expression and show its AST, canonical form, kind, LTL fragment and alphabet."),
    "dfa": CommandEntry(
        "automata", "dfa_command",
        "Build and print the minimal complete DFA of a language (→ marks the start, * accepting states)."),
    "accepts": CommandEntry(
        "automata", "accepts_command",
        "Test membership of strings in a language (vectorized over the whole batch)."),
    "equiv": CommandEntry(
        "automata", "equiv_command",
        "Decide whether two languages are equal; otherwise print a shortest string in exactly one."),
    "classify": CommandEntry(
        "classify", "classify_command",
        "Decide LTL[P], LTL[P,MOD] (with the least block length k), star-freeness and R/L/J-triviality,\n"
        "with a witness for every class the language is not in."),
    "sample": CommandEntry(
        "sample", "sample_command",
        "Sample labelled strings of exact lengths, uniformly inside and outside the language."),
    "certify": CommandEntry(
        "certify", "certify_command",
        "Certify the length up to which a k-offset RoPE head picks its target by a margin of f_large (eq. 10)."),
    "formula": CommandEntry(
        "formula", "formula_command",
        "Print an LTL[P] or LTL[P,MOD] formula for any language (regex, registry name, .att), checked equivalent."),
    "compile": CommandEntry(
        "compile", "compile_command",
        "Compile a formula or any LTL[P,MOD] language into an exact finite-precision transformer, checked on its DFA."),
    "run": CommandEntry("run", "run_command", "Classify strings with a saved model."),
    "train": CommandEntry(
        "train", "train_command",
        "Train a transformer classifier, evaluate per-length accuracy and N*, and save a checkpoint."),
    "sweep": CommandEntry(
        "sweep", "sweep",
        "Run a grid of training runs (languages × PEs × bases × seeds × lrs × --set axes); rerunning skips "
        "finished runs."),
    "report": CommandEntry(
        "report", "report",
        "Aggregate a results folder like the core paper's Tables 4–5: max/mean/std of accuracy, N* and NNCH's "
        "score (uniform strings, lengths 42..500)."),
    "reproduce": CommandEntry(
        "reproduce", "reproduce",
        "Rerun a table of the core paper (sweeps/<table>.toml): train, evaluate 41…500, print the table, write "
        "Parquet and a plot."),
    "attack": CommandEntry(
        "attack", "attack_command",
        "Search a saved model for misclassified strings (worst-case N*): mutate the sampled test strings toward "
        "the model's wrong class, enumerate small classes exactly."),
    "phases": CommandEntry(
        "phases", "phases_command",
        "Decompose each rotary head's scores S_ij = scale·Σ_p ρ_p cos δ_p and check them against the model."),
    "export": CommandEntry(
        "export", "export_command",
        "Export a saved model as plain PyTorch: load it with `import model; model.load(DIR).classify([...])`."),
    "atlas": CommandEntry(
        "atlas", "atlas",
        "Put the theory's prediction beside training over a language set: plan, run (resumable), agreement tables."),
}


def load_command(name: str):
    """The Click command `name` of COMMANDS, built from its module (imported here, not before)."""
    entry = COMMANDS[name]
    module = importlib.import_module(f"formal_rope.commands.{entry.module}")
    holder = _App()
    holder.command(name)(getattr(module, entry.function))
    info = next(info for info in holder.registered_commands
                if (info.name or typer.main.get_command_name(info.callback.__name__)) == name)
    return typer.main.get_command_from_info(
        info, pretty_exceptions_short=app.pretty_exceptions_short, rich_markup_mode=app.rich_markup_mode)


class _LazyCommands(Mapping):
    """A group's commands: those defined in this file, then COMMANDS, each built when first looked up."""

    def __init__(self, defined: dict):
        self._defined = tuple(defined)  # the listed order: these first, then COMMANDS, loaded or not
        self._built = dict(defined)

    def __getitem__(self, name: str):
        if name not in self._built:
            if name not in COMMANDS:
                raise KeyError(name)
            self._built[name] = load_command(name)
        return self._built[name]

    def __iter__(self) -> Iterator[str]:
        yield from self._defined
        yield from COMMANDS

    def __len__(self) -> int:
        return len(self._defined) + len(COMMANDS)


class _Group(TyperGroup):
    """The `formalrope` group: a command is imported when it runs; --help lists the summaries."""

    def __init__(self, **kwargs) -> None:
        super().__init__(**kwargs)
        self.commands = _LazyCommands(self.commands)

    def get_params(self, ctx) -> list:
        return _hide_flag_types(super().get_params(ctx))

    def list_commands(self, ctx) -> list[str]:
        return list(self.commands)  # the names alone: Typer's own reads every command (.items())

    def get_command(self, ctx, cmd_name: str):
        """What the help lists: a command of COMMANDS not yet loaded stands as its summary."""
        built = self.commands._built
        if cmd_name in COMMANDS and cmd_name not in built:
            return TyperCommand(name=cmd_name, help=COMMANDS[cmd_name].summary)
        return built.get(cmd_name)

    def resolve_command(self, ctx, args: list[str]):
        """The command that runs: loaded now (its module imported)."""
        name, command, rest = super().resolve_command(ctx, args)
        return name, (self.commands[name] if name is not None else command), rest


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

@app.callback()
def _group() -> None:
    # A callback makes Typer build a group however few commands this file defines (COMMANDS come later).
    pass


@app.command()
def version(json_output: bool = typer.Option(False, "--json", help="Print a JSON object.")) -> None:
    """Print the formal-rope version."""
    if json_output:
        print(json.dumps({"version": __version__}))
    else:
        print(f"formal-rope {__version__}")


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
