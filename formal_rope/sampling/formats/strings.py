"""Labelled strings read from files, before and after encoding: what every dataset format shares.

A format's reader turns its files into `Words` (each string's characters or symbol names, its
label and the line it came from); `encode_words` maps them onto an alphabet as one `StringFile`
(symbol indices back to back, one byte per symbol for small alphabets), and an unknown symbol is a
`DataFormatError` naming the file and the line. Writers share `write_lines` (atomic text files).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Sequence

import numpy as np

from formal_rope.automata.membership import split_symbols, symbol_tokens
from formal_rope.errors import FormalRopeError
from formal_rope.files import atomic_file, read_bounded
from formal_rope.sampling.datasets import LabeledSet
from formal_rope.sampling.walker import PAD


class DataFormatError(FormalRopeError):
    """A data file that cannot be read: the message names the file and the 1-based line."""

    def __init__(self, path: str | Path, line: int | None, message: str) -> None:
        self.path = str(path)
        self.line = line
        where = f"{self.path}:{line}" if line is not None else self.path
        super().__init__(f"{where}: {message}")


@dataclass(frozen=True, eq=False)
class StringFile:
    """Labelled strings read from one file, in file order.

    The symbols of all strings are stored back to back (`flat`, the smallest integer dtype that
    holds the alphabet; string i is flat[offsets[i]:offsets[i+1]]), so a paper-size test file costs
    one byte per symbol rather than a padded int64 matrix. labels (n,) bool; lines (n,) the 1-based
    line (or Parquet row) each string came from in `path`."""

    path: str
    alphabet: tuple[str, ...]
    flat: np.ndarray
    offsets: np.ndarray
    labels: np.ndarray
    lines: np.ndarray
    label_path: str | None = None  # where the labels are when not on the strings' lines (FLaRe's labels.txt)

    def __len__(self) -> int:
        return int(self.labels.shape[0])

    @property
    def lengths(self) -> np.ndarray:
        return np.diff(self.offsets)

    def padded(self, rows: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
        """(symbols (k, longest) int64 with PAD after each end, lengths (k,)) of `rows` (default all)."""
        rows = np.arange(len(self)) if rows is None else np.asarray(rows, dtype=np.int64)
        starts, lengths = self.offsets[rows], self.lengths[rows]
        width = int(lengths.max(initial=0))
        columns = np.arange(width)[None, :]
        inside = columns < lengths[:, None]
        symbols = np.full((len(rows), width), PAD, dtype=np.int64)
        symbols[inside] = self.flat[(starts[:, None] + columns)[inside]]
        return symbols, lengths

    def length_groups(self) -> list[tuple[int, np.ndarray]]:
        """(length, rows in file order) for each distinct length, increasing."""
        lengths = self.lengths
        order = np.argsort(lengths, kind="stable")
        bounds = np.flatnonzero(np.diff(lengths[order])) + 1
        return [(int(lengths[group[0]]), group) for group in np.split(order, bounds) if group.size]

    def block(self, length: int, rows: np.ndarray) -> np.ndarray:
        """Symbols (len(rows), length) int64 of rows that all have `length` symbols."""
        return self.flat[self.offsets[rows][:, None] + np.arange(length)[None, :]].astype(np.int64)

    def by_length(self) -> list[LabeledSet]:
        """One LabeledSet per distinct length, increasing (rows keep file order within a length)."""
        return labeled_sets([self])

    def runs(self) -> list[LabeledSet]:
        """The strings in file order as LabeledSets of consecutive rows of one length, so that a
        writer given them writes the rows in this file's order (`write_flare_split(dir, f.runs(), dfa)`)."""
        lengths = self.lengths
        bounds = np.concatenate(([0], np.flatnonzero(np.diff(lengths)) + 1, [len(self)])).astype(np.int64)
        runs = []
        for start, stop in zip(bounds[:-1].tolist(), bounds[1:].tolist()):
            if stop > start:
                rows = np.arange(start, stop)
                runs.append(
                    LabeledSet(int(lengths[start]), self.block(int(lengths[start]), rows), self.labels[rows], 0)
                )
        return runs


def labeled_sets(files: Sequence[StringFile]) -> list[LabeledSet]:
    """The strings of several files (same alphabet) grouped into one LabeledSet per length, increasing.

    Near-miss information is not part of these formats, so every set has n_near_miss = 0."""
    if not files:
        return []
    merged = files[0] if len(files) == 1 else concatenate_files(files)
    sets = []
    for length, rows in merged.length_groups():
        block = merged.block(length, rows)
        labels = merged.labels[rows]
        block.setflags(write=False)
        labels.setflags(write=False)
        sets.append(LabeledSet(length, block, labels, 0, None))
    return sets


def concatenate_files(files: Sequence[StringFile]) -> StringFile:
    """One StringFile holding the strings of `files` (same alphabet) in order."""
    flat = np.concatenate([f.flat for f in files])
    bases = np.cumsum([0] + [len(f.flat) for f in files[:-1]])
    offsets = np.concatenate([[0]] + [f.offsets[1:] + base for f, base in zip(files, bases)])
    return StringFile(
        " + ".join(f.path for f in files), files[0].alphabet, flat, offsets.astype(np.int64),
        np.concatenate([f.labels for f in files]), np.concatenate([f.lines for f in files]), files[0].label_path,
    )


# ------------------------------------------------------------------------------------- text files
def read_text(path: Path) -> str:
    """The UTF-8 text of `path` (at most MAX_TEXT_INPUT_BYTES); a missing, unreadable, too large or
    non-UTF-8 file names itself (and the line)."""
    try:
        data = read_bounded(path, "MAX_TEXT_INPUT_BYTES", "the data file")
    except FileNotFoundError:
        raise DataFormatError(path, None, "no such file") from None
    except OSError as error:
        raise DataFormatError(path, None, f"cannot read it: {error.strerror or error}") from None
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as error:
        line = data[: error.start].count(b"\n") + 1
        raise DataFormatError(path, line, f"not UTF-8 text ({error.reason})") from None


def split_lines(text: str) -> list[str]:
    """Lines without their line ends (a final newline ends the last line; "\r\n" is one line end)."""
    lines = text.split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    return [line[:-1] if line.endswith("\r") else line for line in lines]


def read_lines(path: Path) -> list[str]:
    return split_lines(read_text(path))


def write_lines(path: Path, lines: Sequence[str]) -> None:
    """Write `lines`, each ended by "\n", as UTF-8; the file appears under its name only when complete."""
    with atomic_file(path, "the data file") as temporary:
        with open(temporary, "w", encoding="utf-8", newline="\n") as handle:
            for line in lines:
                handle.write(line)
                handle.write("\n")


def check_line_symbols(alphabet: Sequence[str]) -> None:
    """FormalRopeError for a symbol that would break a one-string-per-line file (a tab or a line break)."""
    for symbol in alphabet:
        if "\t" in symbol or "\n" in symbol or "\r" in symbol:
            raise FormalRopeError(
                f"symbol {symbol!r} contains a tab or a line break and cannot be written as a text line"
            )


# ------------------------------------------------------------------------------ words -> symbols
def _code_points(text: str) -> np.ndarray:
    """The characters of `text` as integers (one byte each when the text is ASCII)."""
    if text.isascii():
        return np.frombuffer(text.encode("ascii"), dtype=np.uint8)
    return np.frombuffer(text.encode("utf-32-le"), dtype=np.uint32)


@dataclass(frozen=True)
class Words:
    """Strings of a file before encoding: either single-character symbols (`codes`, the code points
    of all strings back to back, with `lengths`) or lists of symbol names (`tokens`)."""

    path: Path
    labels: np.ndarray
    lines: np.ndarray
    codes: np.ndarray | None = None
    label_path: Path | None = None
    lengths: np.ndarray | None = None
    tokens: list | None = None

    def vocabulary(self) -> set[str]:
        if self.codes is not None:
            if self.codes.dtype == np.uint8:  # a presence table: no sort, no int64 copy of the codes
                seen = np.zeros(256, dtype=bool)
                seen[self.codes] = True
                present = np.flatnonzero(seen)
            else:
                present = np.unique(self.codes)
            return {chr(code) for code in present.tolist()}
        return {symbol for word in self.tokens for symbol in word}


def character_words(path: Path, strings: Sequence[str], labels: np.ndarray, lines: np.ndarray,
                    label_path: Path | None = None) -> Words:
    """Words whose every character is one symbol."""
    lengths = np.fromiter(map(len, strings), dtype=np.int64, count=len(strings))
    return Words(path, labels, lines, codes=_code_points("".join(strings)), lengths=lengths, label_path=label_path)


def text_words(path: Path, rows: list[str], labels: np.ndarray, lines: np.ndarray,
               alphabet: Sequence[str] | None) -> Words:
    """Words of strings written as `sampling.decode` writes them: characters over single-character
    alphabets, else blank-separated symbols (quoted as in expressions when needed)."""
    if alphabet is not None:
        characters = all(len(symbol) == 1 for symbol in alphabet)
    else:
        characters = not any(any(c.isspace() for c in row) for row in rows)
    if characters:
        return character_words(path, rows, labels, lines)
    words = []
    for row, line in zip(rows, lines.tolist()):
        try:
            words.append(split_symbols(row, alphabet) if alphabet is not None else symbol_tokens(row))
        except FormalRopeError as error:
            raise DataFormatError(path, line, str(error)) from None
    return Words(path, labels, lines, tokens=words)


def _index_dtype(n_symbols: int):
    return np.uint8 if n_symbols <= 256 else (np.int16 if n_symbols <= 32767 else np.int64)


def encode_words(words: Words, alphabet: Sequence[str]) -> StringFile:
    """Symbol indices for `words` over `alphabet`; an unknown symbol names its file and line."""
    alphabet = tuple(alphabet)
    dtype = _index_dtype(len(alphabet))
    label_path = None if words.label_path is None else str(words.label_path)
    if words.codes is not None and all(len(symbol) == 1 for symbol in alphabet):
        offsets = np.concatenate(([0], np.cumsum(words.lengths))).astype(np.int64)
        points = np.array([ord(symbol) for symbol in alphabet], dtype=np.int64)
        if words.codes.dtype == np.uint8:  # ASCII text: one table lookup per symbol
            table = np.full(256, -1, dtype=np.int64)
            table[points[points < 256]] = np.flatnonzero(points < 256)
            flat = table[words.codes]
            found = flat >= 0
        else:
            sorter = np.argsort(points)
            position = np.minimum(np.searchsorted(points[sorter], words.codes), max(len(points) - 1, 0))
            found = points[sorter][position] == words.codes if len(points) else np.zeros(len(words.codes), bool)
            flat = sorter[position] if len(points) else position
        if not found.all():
            first = int(np.argmin(found))
            row = int(np.searchsorted(offsets, first, side="right")) - 1
            _unknown(words.path, int(words.lines[row]), chr(int(words.codes[first])), alphabet)
        return StringFile(str(words.path), alphabet, flat.astype(dtype), offsets, words.labels, words.lines, label_path)
    rows = words.tokens
    if rows is None:  # characters, but the alphabet has longer symbols: each character is one symbol
        text = "".join(chr(c) for c in words.codes.tolist())
        bounds = np.concatenate(([0], np.cumsum(words.lengths)))
        rows = [list(text[a:b]) for a, b in zip(bounds[:-1].tolist(), bounds[1:].tolist())]
    index = {symbol: position for position, symbol in enumerate(alphabet)}
    for row, line in zip(rows, words.lines.tolist()):
        for symbol in row:
            if symbol not in index:
                _unknown(words.path, line, symbol, alphabet)
    lengths = np.fromiter(map(len, rows), dtype=np.int64, count=len(rows))
    flat = np.fromiter((index[s] for row in rows for s in row), dtype=np.int64, count=int(lengths.sum())).astype(dtype)
    offsets = np.concatenate(([0], np.cumsum(lengths))).astype(np.int64)
    return StringFile(str(words.path), alphabet, flat, offsets, words.labels, words.lines, label_path)


def _unknown(path: Path, line: int, symbol: str, alphabet: Sequence[str]):
    shown = ", ".join(repr(s) for s in alphabet)
    raise DataFormatError(path, line, f"symbol {symbol!r} is not in the alphabet {{{shown}}}")


def infer_alphabet(parsed: Sequence[Words]) -> tuple[str, ...]:
    """The sorted set of symbols in all `parsed` files."""
    vocabulary: set[str] = set()
    for words in parsed:
        vocabulary |= words.vocabulary()
    return tuple(sorted(vocabulary))


def encode_inferred(words: Words, alphabet: Sequence[str] | None) -> StringFile:
    """`encode_words` over `alphabet`, or over the file's own sorted symbols when it is None."""
    return encode_words(words, alphabet if alphabet is not None else infer_alphabet([words]))
