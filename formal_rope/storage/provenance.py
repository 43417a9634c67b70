"""Provenance recorded with every run and checkpoint: the software versions and the source commit."""

from __future__ import annotations

import platform
import subprocess
from pathlib import Path

import numpy as np

import formal_rope


def software_versions() -> dict:
    """The versions a result was computed with: formal_rope, torch, numpy and Python."""
    import torch  # keeps torch off the torch-free sweeps stage, which records the commit from here

    return {
        "formal_rope": formal_rope.__version__,
        "torch": torch.__version__,
        "numpy": np.__version__,
        "python": platform.python_version(),
    }


def source_commit() -> str | None:
    """The git commit of the formal_rope source tree (HEAD), or None outside a git checkout."""
    try:
        out = subprocess.run(
            ["git", "rev-parse", "HEAD"], cwd=Path(__file__).resolve().parent, capture_output=True, text=True, timeout=5
        )
    except (OSError, subprocess.SubprocessError):
        return None
    return out.stdout.strip() or None if out.returncode == 0 else None
