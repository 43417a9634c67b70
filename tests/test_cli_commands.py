"""The command table (cli.COMMANDS): a command's module loads only when that command runs, the help
lists each command by the summary its docstring starts with, and command modules share helpers only
through run_options and terminal."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest
import typer.main

from formal_rope.cli import COMMANDS, app, load_command

COMMANDS_DIR = Path(__file__).resolve().parent.parent / "formal_rope" / "commands"
SHARED = {"formal_rope.commands.run_options", "formal_rope.commands.terminal", "formal_rope.commands.sweep_display"}


@pytest.mark.parametrize("name", list(COMMANDS))
def test_the_listed_summary_is_the_commands_own_first_paragraph(name):
    command = load_command(name)
    assert command.name == name
    assert COMMANDS[name].summary == (command.help or "").split("\n\n")[0]


def test_the_group_holds_every_command_in_the_listed_order():
    group = typer.main.get_command(app)
    assert list(group.commands) == ["version", *COMMANDS]
    assert group.commands["classify"].params  # looked up by name: the real command, options and all
    assert list(group.commands) == ["version", *COMMANDS]  # loading one keeps the order


def _modules_loaded_by(argv: list[str]) -> list[str]:
    script = (
        "import sys\nfrom formal_rope.cli import main\ntry:\n"
        f"    main({argv!r})\nexcept SystemExit:\n    pass\n"
        "print(sorted(m for m in sys.modules if m.startswith('formal_rope.commands.') or m in ('torch', 'numpy')))\n"
    )
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    return eval(done.stdout.strip().splitlines()[-1])


def test_the_overview_loads_no_command_module():
    assert _modules_loaded_by(["--help"]) == []
    assert _modules_loaded_by([]) == []  # `formalrope` alone prints the overview too


def test_a_command_loads_its_own_module_only():
    loaded = _modules_loaded_by(["classify", "--help"])
    assert "formal_rope.commands.classify" in loaded and "torch" not in loaded
    assert not [module for module in loaded if module.startswith("formal_rope.commands.")
                and module not in SHARED | {"formal_rope.commands.classify"}]


def test_no_command_module_imports_another_ones_helpers():
    offenders = []
    for path in sorted(COMMANDS_DIR.glob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom) and node.module:
                targets = [node.module] if node.module != "formal_rope.commands" else [
                    f"formal_rope.commands.{alias.name}" for alias in node.names]
                offenders += [f"{path.name} imports {target}" for target in targets
                              if target.startswith("formal_rope.commands.") and target not in SHARED]
    assert offenders == []
