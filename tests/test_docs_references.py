"""What a clone reads must exist in a clone: no file of the project points at the workspace folder
that lies beside this checkout and nowhere else (the README once cited the papers by a path into it;
it cites them by title and author now)."""

from __future__ import annotations

import subprocess
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
SIBLING = "shared"  # the workspace folder beside this checkout; a clone elsewhere has none
# Assembled here so this file itself holds no such path and every file, tests included, is checked.
OUTSIDE = (f"../{SIBLING}", f"/work/{SIBLING}")


def test_no_project_file_points_outside_the_clone():
    listed = subprocess.run(["git", "ls-files", "--cached", "--others", "--exclude-standard"], cwd=REPO,
                            capture_output=True, text=True, check=True).stdout.split()
    offenders = []
    for name in listed:
        path = REPO / name
        if not path.is_file() or path.stat().st_size > 2_000_000:
            continue
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
