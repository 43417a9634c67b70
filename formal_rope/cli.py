"""The `formalrope` command line: a thin Typer layer over the library.

Each command group lives in formal_rope/commands/<group>.py and exposes register(app). Heavy
imports (torch, pandas) happen inside the command functions so start-up stays fast.
"""

from __future__ import annotations

import sys

import typer

from formal_rope.errors import FormalRopeError

app = typer.Typer(
    name="formalrope",
    help="Formal languages, exact transformer constructions and positional-encoding experiments.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)

_COMMAND_MODULES = ("language", "automata", "classify", "sample", "certify", "compile", "train", "sweep", "phases", "export")


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
    """Console-script entry point: user errors become one paragraph on stderr and exit code 2.

    Click's own usage errors (missing argument, bad option) are handled by standalone mode, which
    prints the usage and exits with code 2 as well.
    """
    try:
        app(args=argv)
    except FormalRopeError as error:
        print(error.render(), file=sys.stderr)
        sys.exit(error.exit_code)
    except SystemExit as exit_:
        # Standalone mode always ends in SystemExit; success returns normally so that callers
        # (tests, scripts) can use main() as a function.
        if exit_.code not in (0, None):
            raise


if __name__ == "__main__":
    main()
