"""Every command the README and docs/ show runs as written, so a doc cannot drift from the code.

The commands are the lines starting with `$ ` in the ```console blocks of README.md and docs/*.md.
Each document's lines run in order in one fresh folder (they feed on each other: `compile ... --out
m.zip`, then `run m.zip`), whose `sweeps/` is the checkout's (the docs are read from a clone's root).
A line whose shown output starts with `error:` must exit 2 and print that first line; every other
line must exit 0, and where its shown output is plain JSON, print exactly that JSON.

Three explicit tables say where a line does not run exactly as printed:
- TINY: options the test adds to (or whose values it replaces in) training, sweep, reproduce and
  attack lines, so they train for 2 steps and test two lengths: the commands, their options and
  their outputs' shapes are checked, not what quick scale learns.
- PIPES: pipes into tools CI may lack (`dot`): the pipe is dropped and the output checked instead.
- SKIPPED: lines that need what CI lacks (a Ray cluster, an S3 bucket), each with its reason.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.cli_support import run_main

REPO = Path(__file__).resolve().parent.parent
DOCUMENTS = ("README.md", *sorted(f"docs/{p.name}" for p in (REPO / "docs").glob("*.md")))

# Lines not run, each with why (matched against the command line without its `$ `).
SKIPPED = {
    "formalrope reproduce table4 --scale paper --backend ray --address auto --state-dir s3://bucket/state":
        "needs a Ray cluster (--address auto) and an S3 bucket",
    'formalrope train --lang "(ab)*" --scale paper --checkpoint-every 5000 --state-dir s3://bucket/state':
        "needs an S3 bucket (and is a paper-scale run, shown interrupted)",
    'formalrope train --lang "(ab)*" --scale paper --checkpoint-every 5000 --state-dir s3://bucket/state --resume':
        "needs an S3 bucket",
    "python bench/emulated_eval.py --length 2000 --strings 4":
        "a benchmark (minutes of emulated arithmetic), not a command of the tool",
}

# Options added to a subcommand's line, or whose value replaces the line's own: 2 training steps, two
# test lengths, few test strings, no NNCH samples, a small search budget (None: a flag). `--scale
# paper` becomes `--scale quick` (the paper's model is GPU-sized).
_TRAINING = {"--steps": "2", "--test-lengths": "41..42", "--n-per-length": "2", "--nnch-samples": "0"}
TINY: dict[str, dict[str, str | None]] = {
    "train": {**_TRAINING, "--quiet": None},
    "sweep": _TRAINING,
    # reproduce has no option for the test lengths: every table evaluates all of 41..500 per run, so
    # each reproduce line is checked with --dry-run (the table, every option and each run's config),
    # and one (REPRODUCE_RUN) is also run for real with the fewest steps, seeds and strings.
    "reproduce": {"--dry-run": None},
    "attack": {"--budget": "4"},
}
REPRODUCE_RUN = "formalrope reproduce table2 --eval worst-case"
REPRODUCE_TINY = {"--steps": "2", "--seeds": "1", "--n-per-length": "1", "--nnch-samples": "0",
                  "--worst-case-budget": "2"}
# Added where a line runs the worst-case search (--eval worst-case): a small budget.
WORST_CASE_TINY = {"--worst-case-budget": "4"}
# Attack lines over long explicit ranges: the range shrinks (a compiled model's emulated search over
# 2,000 lengths is minutes).
ATTACK_LENGTHS = {"41..500": "41..44", "1..2000": "1..50"}
# A `--data` run tests on its files' strings: it takes no --n-per-length or --nnch-samples.
DATA_FREE = ("--n-per-length", "--nnch-samples")
# Pipes into tools CI may lack: without the tool, the pipe is dropped and the output must start so.
PIPES = {"dot": "digraph"}


@dataclass(frozen=True)
class DocLine:
    document: str
    number: int
    command: str  # without the `$ `
    shown: tuple[str, ...]  # the output lines the doc shows below it


def doc_lines(document: str) -> list[DocLine]:
    """The `$ ` lines of `document`'s console blocks, with the output shown under each."""
    lines = (REPO / document).read_text(encoding="utf-8").splitlines()
    found: list[DocLine] = []
    fence = None
    command, number, shown = None, 0, []
    for index, line in enumerate(lines, 1):
        stripped = line.strip()
        if stripped.startswith("```"):
            if fence is not None and command is not None:
                found.append(DocLine(document, number, command, tuple(shown)))
            command = None
            fence = stripped[3:] if fence is None else None
            continue
        if fence != "console":
            continue
        if stripped.startswith("$ "):
            if command is not None:
                found.append(DocLine(document, number, command, tuple(shown)))
            command, number, shown = stripped[2:], index, []
        elif command is not None:
            shown.append(line)
    return found


def shell_blocks_outside_console(document: str) -> list[int]:
    """Line numbers of `$ formalrope` lines in fenced blocks that are not ```console."""
    lines = (REPO / document).read_text(encoding="utf-8").splitlines()
    fence, found = None, []
    for index, line in enumerate(lines, 1):
        stripped = line.strip()
        if stripped.startswith("```"):
            fence = stripped[3:] if fence is None else None
        elif fence is not None and fence != "console" and stripped.startswith("$ formalrope"):
            found.append(index)
    return found


def _with_options(argv: list[str], options: dict[str, str | None], *, drop: tuple[str, ...] = ()) -> list[str]:
    """argv with each option of `options` set to its value (replaced where present, else appended)."""
    out = list(argv)
    for name in drop:
        if name in out:
            del out[out.index(name):out.index(name) + 2]
    for name, value in options.items():
        if name in drop:
            continue
        if name in out:
            if value is not None:
                out[out.index(name) + 1] = value
        else:
            out += [name] if value is None else [name, value]
    return out


def tiny(argv: list[str]) -> list[str]:
    """The TINY rewrite of a `formalrope ...` argv (unchanged for commands that do not train)."""
    if len(argv) < 2 or argv[1] not in TINY:
        return argv
    options = TINY[argv[1]]
    argv = [argv[0], *("quick" if a == "paper" and before == "--scale" else a for before, a in zip(argv, argv[1:]))]
    if argv[1] == "attack" and "--lengths" in argv:
        at = argv.index("--lengths") + 1
        argv[at] = ATTACK_LENGTHS.get(argv[at], argv[at])
    if any("worst-case" in a for a in argv):
        options = {**options, **WORST_CASE_TINY}
    return _with_options(argv, options, drop=DATA_FREE if "--data" in argv else ())


def test_every_shell_line_of_the_docs_is_in_a_console_block():
    """The runner reads ```console blocks: a `$ formalrope` line elsewhere would escape it."""
    outside = {document: shell_blocks_outside_console(document) for document in DOCUMENTS}
    assert {d: n for d, n in outside.items() if n} == {}


def test_every_skipped_line_is_still_in_the_docs():
    commands = {line.command.split("  #")[0].strip() for d in DOCUMENTS for line in doc_lines(d)}
    assert set(SKIPPED) <= commands
    assert REPRODUCE_RUN in commands


def test_the_tiny_rewrite():
    assert tiny(["formalrope", "train", "--lang", "(ab)*", "--scale", "paper", "--steps", "300"]) == [
        "formalrope", "train", "--lang", "(ab)*", "--scale", "quick", "--steps", "2", "--test-lengths", "41..42",
        "--n-per-length", "2", "--nnch-samples", "0", "--quiet"]
    assert "--n-per-length" not in tiny(["formalrope", "train", "--data", "ab", "--n-per-length", "3"])
    attack = tiny(["formalrope", "attack", "y.zip", "--lengths", "1..2000"])
    assert attack[3:] == ["--lengths", "1..50", "--budget", "4"]
    assert tiny(["formalrope", "run", "m.zip", "--steps"]) == ["formalrope", "run", "m.zip", "--steps"]


def test_the_docs_python_is_the_interpreter_running_the_tests(tmp_path, capsys, monkeypatch):
    """A document's `python -c ...` line runs with sys.executable, also in a virtual environment
    (where a link to its python, started from another folder, would be the bare base interpreter)."""
    folder = tmp_path / "work"
    folder.mkdir()
    runner = _Runner(folder, capsys, monkeypatch)
    for name in ("python", "python3"):
        code, out, _ = runner.run(f"{name} -c 'import sys; print(sys.prefix); print(sys.executable)'")
        prefix, _ = out.split("\n", 1)
        assert code == 0 and prefix == sys.prefix


class _Runner:
    """Runs one document's lines in order in `folder` (in this process where a line is one
    `formalrope` call, in bash otherwise, with `formalrope` and `python` on its PATH)."""

    def __init__(self, folder: Path, capsys, monkeypatch) -> None:
        self.cwd = folder
        self.capsys, self.monkeypatch = capsys, monkeypatch
        bin_dir = folder.parent / "bin"
        bin_dir.mkdir(exist_ok=True)
        wrapper = bin_dir / "formalrope"
        wrapper.write_text(f'#!/bin/sh\nexec "{sys.executable}" -m formal_rope.cli "$@"\n')
        wrapper.chmod(0o755)
        # A script, not a symbolic link: a virtual environment's python started through a link in
        # another folder finds no pyvenv.cfg beside it and runs as the bare base interpreter.
        for name in ("python", "python3"):
            (bin_dir / name).write_text(f'#!/bin/sh\nexec "{sys.executable}" "$@"\n')
            (bin_dir / name).chmod(0o755)
        self.env = {**os.environ, "PATH": f"{bin_dir}{os.pathsep}{os.environ['PATH']}",
                    "PYTHONPATH": os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH")])),
                    "OMP_NUM_THREADS": "1"}

    def run(self, command: str) -> tuple[int, str, str]:
        """(exit code, stdout, stderr) of one command line (parts joined by && run in order)."""
        code, out, err = 0, "", ""
        for part in command.split(" && "):
            code, part_out, part_err = self._run_part(part)
            out, err = out + part_out, err + part_err
            if code != 0:
                break
        return code, out, err

    def _run_part(self, part: str) -> tuple[int, str, str]:
        argv = shlex.split(part, comments=True)
        if argv[:1] == ["cd"] and len(argv) == 2:
            target = (self.cwd / argv[1]).resolve()
            if not target.is_dir():
                return 1, "", f"cd: {argv[1]}: no such folder"
            self.cwd = target
            return 0, "", ""
        discard = argv[-2:] == [">", "/dev/null"] or argv[-1:] == [">/dev/null"]
        if discard:
            argv = argv[:-2] if argv[-2:] == [">", "/dev/null"] else argv[:-1]
        for tool, starts in PIPES.items():
            if f"| {tool} " in part and shutil.which(tool) is None:
                argv = shlex.split(part.split("|")[0], comments=True)
                code, out, err = self._in_process(argv)
                assert code != 0 or out.lstrip().startswith(starts), out[:200]
                return code, "", err
        if argv[:1] == ["formalrope"] and not set(argv) & {"|", ">", "<", ";", "2>&1"}:
            code, out, err = self._in_process(argv)
            return code, "" if discard else out, err
        done = subprocess.run(["bash", "-c", part], cwd=self.cwd, env=self.env, capture_output=True, text=True,
                              timeout=300)
        return done.returncode, done.stdout, done.stderr

    def _in_process(self, argv: list[str]) -> tuple[int, str, str]:
        self.monkeypatch.chdir(self.cwd)
        return run_main(self.capsys, argv[1:])


def _normal(text: str) -> str:
    return " ".join(text.split())


def _shown_json(shown: tuple[str, ...]):
    text = "\n".join(shown).strip()
    if not text or "..." in text or "…" in text:
        return None
    try:
        return json.loads(text)
    except ValueError:
        return None


def _expected_error(shown: tuple[str, ...]) -> str | None:
    """The doc's error line (up to an ellipsis), when the shown output is an error."""
    first = next((line for line in shown if line.strip()), "")
    if not first.lstrip().startswith("error:"):
        return None
    return _normal(re.split(r"…|\.\.\.", first)[0])


@pytest.mark.slow
@pytest.mark.parametrize("document", DOCUMENTS)
def test_the_doc_commands_run_as_written(document, tmp_path, capsys, monkeypatch):
    lines = doc_lines(document)
    if not lines:
        pytest.skip(f"{document} shows no commands")
    folder = tmp_path / "clone"
    folder.mkdir()
    (folder / "sweeps").symlink_to(REPO / "sweeps")
    runner = _Runner(folder, capsys, monkeypatch)
    failures = []
    for line in lines:
        command = line.command.split("  #")[0].strip()
        if command in SKIPPED:
            continue
        error = _expected_error(line.shown)
        parts = []
        for part in command.split(" && "):
            head, redirect = re.fullmatch(r"(.*?)(\s*>\s*/dev/null)?", part).groups()
            argv = shlex.split(head, comments=True)
            rewritten = tiny(argv) if argv[:1] == ["formalrope"] and error is None else argv
            parts.append(part if rewritten == argv else shlex.join(rewritten) + (redirect or ""))
        code, out, err = runner.run(" && ".join(parts))
        output = out + err
        where = f"{document}:{line.number}: {command}"
        if error is not None:
            if code != 2 or error not in _normal(output):
                failures.append(f"{where}\n  expected exit 2 and {error!r}, got {code}: {output[-600:]}")
            continue
        if code != 0:
            failures.append(f"{where}\n  exit {code}: {output[-1500:]}")
            continue
        shown = _shown_json(line.shown)
        if shown is not None and " && ".join(parts) == command:
            try:
                actual = json.loads(out)
            except ValueError:
                actual = out
            if actual != shown:
                failures.append(f"{where}\n  shows {shown!r}, prints {out[:600]!r}")
        if command == REPRODUCE_RUN:
            argv = _with_options(shlex.split(command), REPRODUCE_TINY)
            code, out, err = runner.run(shlex.join(argv))
            output = out + err
            if code != 0:
                failures.append(f"{where} (run for real)\n  exit {code}: {output[-1500:]}")
    assert failures == [], "\n".join(failures)
