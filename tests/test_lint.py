"""The tree passes `ruff check` with the configuration in pyproject.toml (E, F, W, I; 120 columns)."""

from __future__ import annotations

import importlib.util
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
LINTED = ("formal_rope", "tests", "bench", "docs", "cli.py")


@pytest.mark.skipif(importlib.util.find_spec("ruff") is None, reason="ruff is not installed (pip install -e '.[test]')")
def test_ruff_check_is_clean():
    done = subprocess.run(
        [sys.executable, "-m", "ruff", "check", "--no-cache", *LINTED],
        cwd=REPO, capture_output=True, text=True, timeout=120,
    )
    assert done.returncode == 0, done.stdout + done.stderr
