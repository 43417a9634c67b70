"""The commands' terminal I/O: input strings read one way everywhere, a Rich console for stdout
that never squeezes tables when piped, and the output helpers several commands share.

Rich assumes 80 columns when stdout is not a terminal, so `formalrope … | less` or `> file` got
tables folded into narrow columns. Piped output has no width to respect: tables and lines keep
their natural width (an explicit COLUMNS still wins, as on a terminal).
"""

from __future__ import annotations

import math
import os
import sys
from pathlib import Path
from typing import Sequence

from rich.console import Console

from formal_rope import limits
from formal_rope.errors import FormalRopeError
from formal_rope.files import output_path, probe_output

# Wider than any table the commands print; Rich pads nothing but a table's title to this.
PIPED_WIDTH = 10_000


def stdout_console(**options):
    """A rich Console on stdout: the terminal's width on a terminal, unlimited when piped."""
    console = Console(**options)
    if not console.is_terminal and "COLUMNS" not in os.environ and "width" not in options:
        console = Console(width=PIPED_WIDTH, **options)
    return console


def alphabet_text(alphabet) -> str:
    """An alphabet as a set: {a, b}."""
    return "{" + ", ".join(alphabet) + "}"


def describe_lengths(lengths: list[int]) -> str:
    """The lengths as written back: consecutive runs as ranges ('1, 3, 7, 20', '41..500', '1..3, 10')."""
    parts: list[str] = []
    ordered = sorted(lengths)
    start = 0
    for index in range(1, len(ordered) + 1):
        if index == len(ordered) or ordered[index] != ordered[index - 1] + 1:
            low, high = ordered[start], ordered[index - 1]
            parts.append(str(low) if low == high else (f"{low}, {high}" if high == low + 1 else f"{low}..{high}"))
            start = index
    return ", ".join(parts)


def json_ready(value):
    """NaN/inf (a diverged or failed run's accuracy, a diverged loss) -> None, so --json output is
    strict JSON that every parser accepts (json.dumps would write the non-standard token NaN)."""
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, dict):
        return {key: json_ready(item) for key, item in value.items()}
    if isinstance(value, (list, tuple)):
        return [json_ready(item) for item in value]
    return value


def input_strings(strings: Sequence[str] | None) -> list[str]:
    """The strings a command classifies: its arguments, or else one per line of stdin (an empty
    line is the empty string, a trailing CR is dropped). Each string is then read into symbols by
    the model or DFA exactly as `accepts` does (`formal_rope.automata.membership.split_symbols`)."""
    if strings:
        return list(strings)
    if sys.stdin is None or sys.stdin.isatty():
        raise FormalRopeError("give strings as arguments or one per line on stdin")
    text = sys.stdin.read(limits.MAX_TEXT_INPUT_BYTES + 1)  # characters: at least as many bytes
    if len(text) > limits.MAX_TEXT_INPUT_BYTES:
        raise FormalRopeError(f"the strings on stdin hold more than {limits.describe('MAX_TEXT_INPUT_BYTES')} allows")
    lines = text.split("\n")
    if lines[-1] == "":
        lines.pop()  # the newline that ends the last line starts no new string
    return [line.removesuffix("\r") for line in lines]


def prepare_out(path, what: str):
    """Check an --out file path before the work that fills it: not a directory, and its folder
    exists or can be created (every --out creates missing parent folders) and takes a file."""
    text = str(path)
    path = Path(path)
    if path.is_dir() or text.endswith(("/", "\\")):
        raise FormalRopeError(f"cannot write {what} {text}: it is a directory (give a file name inside it)")
    _check_parent_folders(path, what)
    try:
        probe_output(path, what)  # also refuses a FIFO or device in the way (a symlink: its target)
    except OSError as error:
        raise FormalRopeError(f"cannot write {what} {path}: {error.strerror or error}") from None
    return path


def prepare_out_folder(path, what: str):
    """Check an --out folder path before the work that fills it: not an existing file, no file in
    the way of its parent folders, and it can be created and written."""
    path = Path(path)
    if path.is_file():
        raise FormalRopeError(f"cannot write {what} {path}: it is a file, and this format writes a folder")
    _check_parent_folders(path, what)
    target = output_path(path, what, folder=True)  # a FIFO or device in the way; a symlink: its target
    try:
        target.mkdir(parents=True, exist_ok=True)
        probe_output(target / ".formal-rope-probe", what)
    except OSError as error:
        raise FormalRopeError(f"cannot write {what} {path}: {error.strerror or error}") from None
    return path


def check_output_place(path, what: str, *, folder: bool = False) -> Path:
    """Check, before any work and without writing anything, that `what` can be written at `path`: a
    file (or with `folder`, a folder) there or nothing, and the nearest existing folder on the way
    writable. FormalRopeError naming the place otherwise (exit 2, one line)."""
    given = Path(os.path.expanduser(os.fspath(path)))
    if not folder and (given.is_dir() or str(path).endswith(("/", "\\"))):
        raise FormalRopeError(f"cannot write {what} {path}: it is a folder (give a file name inside it)")
    _check_parent_folders(given, what)
    target = output_path(given, what, folder=folder)  # a FIFO, a device, a file where a folder goes
    existing = target if target.is_dir() else next(p for p in target.parents if p.exists())
    if not existing.is_dir():
        raise FormalRopeError(f"cannot write {what} {path}: {existing} is a file, not a folder")
    probe = existing / f".formal-rope-probe.{os.getpid()}.{os.urandom(4).hex()}"
    try:  # a file made and removed at once (permissions alone do not tell root, or a read-only mount)
        os.close(os.open(probe, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666))
        os.unlink(probe)
    except OSError as error:
        raise FormalRopeError(f"cannot write {what} {path}: {existing}: {error.strerror or error}") from None
    return given


def _check_parent_folders(path, what: str) -> None:
    """A file where a folder of `path` should be gets a message that names it (mkdir says only
    'File exists')."""
    for parent in path.parents:
        if parent.exists():
            if not parent.is_dir():
                raise FormalRopeError(f"cannot write {what} {path}: {parent} is a file, not a folder")
            return
