"""What a clone reads must exist in a clone: no file of the project points at the workspace's
`../shared` folder (the README cited the papers as `../shared/papers/`; it cites them by title and
author now)."""

from __future__ import annotations

import subprocess
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
OUTSIDE = ("../shared", "/work/shared")


def test_no_project_file_points_outside_the_clone():
    listed = subprocess.run(["git", "ls-files", "--cached", "--others", "--exclude-standard"], cwd=REPO,
                            capture_output=True, text=True, check=True).stdout.split()
    offenders = []
    for name in listed:
        path = REPO / name
        if name.startswith("tests/") or not path.is_file() or path.stat().st_size > 2_000_000:
            continue  # the tests name the strings they look for
        try:
            text = path.read_text(encoding="utf-8")
        except UnicodeDecodeError:
            continue
        offenders += [f"{name}: {needle}" for needle in OUTSIDE if needle in text]
    assert offenders == []


def test_the_readme_cites_the_three_papers_by_title():
    readme = (REPO / "README.md").read_text(encoding="utf-8")
    for title in ("Disentangling the Expressivity of RoPE", "Journey Operators for Structured\nMulti-Axis Composition",
                  "Phase Structure in\nRotary Attention"):
        assert " ".join(title.split()) in " ".join(readme.split()), title
