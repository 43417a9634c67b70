"""Every file formal-rope writes gets the mode a plain open() gives under the process umask (0666
minus the umask), whichever command writes it and however (temporary files renamed into place,
pyarrow, zip, safetensors, matplotlib). Regression: `export` wrote model.safetensors with 0600."""

from __future__ import annotations

import os
import stat

import pytest

from tests.cli_support import run_main

TINY = ["--steps", "3", "--layers", "1", "--d-model", "8", "--heads", "2", "--batch-size", "4", "--n-per-length", "2",
        "--test-lengths", "41..42", "--checkpoint-every", "1"]
UMASK = 0o027  # not the usual 022: a mode fixed at 0644 (or 0600) would not pass


@pytest.fixture()
def umask():
    previous = os.umask(UMASK)
    try:
        yield UMASK
    finally:
        os.umask(previous)


def test_every_written_file_gets_the_umask_mode(tmp_path, umask, capsys):
    out = tmp_path / "written"
    commands = [
        ["sample", "(ab)*", "--lengths", "2..4", "--n", "4", "--out", str(out / "s.parquet")],
        ["sample", "(ab)*", "--lengths", "2..4", "--n", "4", "--format", "flare", "--out", str(out / "split")],
        ["sample", "(ab)*", "--lengths", "2..4", "--n", "4", "--format", "mlregtest", "--out", str(out / "ml.txt")],
        ["sample", "(ab)*", "--format", "flare", "--language-folder", "--split", "test=41..42:4",
         "--split", "training=0..6:8", "--split", "validation-short=0..6:4", "--split", "validation-long=7..8:4",
         "--out", str(out / "folder")],
        ["compile", "P(a)", "-a", "ab", "--out", str(out / "m.zip")],
        ["export", str(out / "m.zip"), "--out", str(out / "exported")],
        ["train", "--lang", "(ab)*", *TINY, "--out", str(out / "ck.zip"), "--state-dir", str(out / "state")],
        ["export", str(out / "ck.zip"), "--out", str(out / "exported-trained")],
        ["sweep", "--lang", "(ab)*", "--pe", "rope", "--seeds", "1", "--lrs", "1e-3", *TINY, "--keep-state",
         "--out", str(out / "sweep")],
        ["report", str(out / "sweep"), "--plot", str(out / "plots" / "n_star.png")],
    ]
    for argv in commands:
        code, _, err = run_main(capsys, [*argv, "--json"] if argv[0] not in ("report",) else argv)
        assert code == 0, (argv, err)
    files = [path for path in out.rglob("*") if path.is_file()]
    assert {"model.safetensors", "config.json", "model.py", "ck.zip", "n_star.png", "packs.json"} <= {
        path.name for path in files}
    assert any(path.suffix == ".state" for path in files)
    wrong = {str(path.relative_to(out)): oct(stat.S_IMODE(path.stat().st_mode)) for path in files
             if stat.S_IMODE(path.stat().st_mode) != 0o666 & ~umask}
    assert wrong == {}
    folders = {str(path.relative_to(out)): oct(stat.S_IMODE(path.stat().st_mode)) for path in out.rglob("*")
               if path.is_dir() and stat.S_IMODE(path.stat().st_mode) != 0o777 & ~umask}
    assert folders == {}
