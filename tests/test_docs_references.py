"""What a clone reads must exist in a clone: no file of the project points at the workspace folder
that lies beside this checkout and nowhere else (the README once cited the papers by a path into it;
it cites them by title and author now)."""

from __future__ import annotations

import subprocess
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent


def _outside_paths() -> tuple[str, ...]:
    """Paths into the folders that lie beside this checkout (whatever they are on this machine):
    a clone elsewhere has none of them, so no project file may name one. Read from the file system
    rather than written here, so this file holds no such path and is checked like every other."""
    siblings = [p.name for p in REPO.parent.iterdir()
                if p.is_dir() and p.resolve() != REPO and not p.name.startswith(".")]
    return tuple(needle for name in siblings for needle in (f"../{name}/", f"{REPO.parent}/{name}/"))


def test_no_project_file_points_outside_the_clone():
    listed = subprocess.run(["git", "ls-files", "--cached", "--others", "--exclude-standard"], cwd=REPO,
                            capture_output=True, text=True, check=True).stdout.split()
    outside = _outside_paths()
    offenders = []
    for name in listed:
        path = REPO / name
        if not path.is_file() or path.stat().st_size > 2_000_000:
            continue
        try:
            text = path.read_text(encoding="utf-8")
        except UnicodeDecodeError:
            continue
        offenders += [f"{name}: {needle}" for needle in outside if needle in text]
    assert offenders == []


def test_the_readme_cites_the_three_papers_by_title():
    readme = (REPO / "README.md").read_text(encoding="utf-8")
    for title in ("Disentangling the Expressivity of RoPE", "Journey Operators for Structured\nMulti-Axis Composition",
                  "Phase Structure in\nRotary Attention"):
        assert " ".join(title.split()) in " ".join(readme.split()), title
