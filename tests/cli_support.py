"""Shared helpers for the CLI tests (imported by tests/test_*_cli.py; holds no tests)."""

from __future__ import annotations

import io
import subprocess
import sys

from formal_rope.cli import main


def run_main(capsys, argv, *, stdin: str | None = None, monkeypatch=None) -> tuple[int, str, str]:
    """Run the real `formalrope` entry point in-process: (exit code, stdout, stderr)."""
    if stdin is not None:
        monkeypatch.setattr(sys, "stdin", io.StringIO(stdin))
    code = 0
    try:
        main(list(argv))
    except SystemExit as exit_:
        code = exit_.code or 0
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def main_call(argv: list[str]) -> str:
    """Python source defining run() as the real entry point on argv (for torch_free_stdout)."""
    return f"from formal_rope.cli import main\nrun = lambda: main({argv!r})\n"


def torch_free_stdout(call: str) -> str:
    """Run `call` (source defining run()) in a fresh interpreter, assert that torch was never
    imported, and return what it printed."""
    script = (
        "import sys\n"
        + call
        + "try:\n"
        "    run()\n"
        "except SystemExit:\n"
        "    pass\n"
        "assert 'torch' not in sys.modules, 'torch was imported'\n"
        "print('torch-free')\n"
    )
    result = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    assert "torch-free" in result.stdout
    return result.stdout
