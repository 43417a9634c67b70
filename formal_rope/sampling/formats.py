"""Labelled string sets in other tools' formats: FLaRe folders and MLRegTest string files (no torch).

FLaRe (Butoi et al., ICLR 2025, "Training Neural Networks as Recognizers of Formal Languages"; the
benchmark in github.com/rycolab/flare, written by rycolab/neural-network-recognizers) stores each
split as a folder of line-aligned plain-text files:

  main.tok               one string per line, symbols separated by single spaces ("" = empty string)
  labels.txt             1 (in the language) or 0, one per line
  num-edits.txt          one line per *negative*, in order: the number of random edits that made it
                         from a positive, or an empty line for a uniformly drawn string
  log-probabilities.txt  one line per *positive*: its natural-log probability under the split's
                         positive distribution (uniform length over the split's lengths, then
                         uniform among the strings of that length in the language)
  next-symbols.jsonl     one JSON array per *positive* with len+1 entries {"s": the symbols that keep
                         the prefix extendable to a member, sorted and space-joined, "e": prefix is a member}

A language folder holds its training split at the top level and the others under datasets/<split>/
(validation-short, validation-long, test, test-short-held-out, test-edit-distance).

MLRegTest (van der Poel et al., JMLR 2024) stores each split as one file `<language>_<Split>.txt`
(Train, Dev, TestSR, TestSA, TestLR, TestLA) with lines `string<TAB>TRUE|FALSE`, the string's
single-character symbols concatenated.

Strings stay int64 symbol-index arrays (PAD after a string's end), as in the rest of the sampling
stage; malformed files raise `DataFormatError` (a FormalRopeError) naming the file and the line.
"""

from __future__ import annotations

import hashlib
import json
import math
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Sequence

import numpy as np

from formal_rope.errors import FormalRopeError
from formal_rope.sampling.datasets import LabeledSet
from formal_rope.sampling.walker import PAD

FLARE_STRINGS = "main.tok"
FLARE_LABELS = "labels.txt"
FLARE_NUM_EDITS = "num-edits.txt"
FLARE_LOG_PROBABILITIES = "log-probabilities.txt"
FLARE_NEXT_SYMBOLS = "next-symbols.jsonl"
FLARE_TEST_SPLIT = Path("datasets") / "test"
MLREGTEST_TRAIN_SUFFIX = "_Train.txt"
MLREGTEST_TEST_PATTERN = "_Test*.txt"
MLREGTEST_LABELS = {"TRUE": True, "FALSE": False}
FORMATS = ("flare", "mlregtest", "parquet")


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


def labeled_sets(files: Sequence[StringFile]) -> list[LabeledSet]:
    """The strings of several files (same alphabet) grouped into one LabeledSet per length, increasing.

    Near-miss information is not part of these formats, so every set has n_near_miss = 0."""
    if not files:
        return []
    merged = files[0] if len(files) == 1 else _concatenate(files)
    sets = []
    for length, rows in merged.length_groups():
        block = merged.block(length, rows)
        labels = merged.labels[rows]
        block.setflags(write=False)
        labels.setflags(write=False)
        sets.append(LabeledSet(length, block, labels, 0, None))
    return sets


def _concatenate(files: Sequence[StringFile]) -> StringFile:
    flat = np.concatenate([f.flat for f in files])
    bases = np.cumsum([0] + [len(f.flat) for f in files[:-1]])
    offsets = np.concatenate([[0]] + [f.offsets[1:] + base for f, base in zip(files, bases)])
    return StringFile(
        " + ".join(f.path for f in files), files[0].alphabet, flat, offsets.astype(np.int64),
        np.concatenate([f.labels for f in files]), np.concatenate([f.lines for f in files]), files[0].label_path,
    )


# ------------------------------------------------------------------------------------------ text
def _read_text(path: Path) -> str:
    try:
        return path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise DataFormatError(path, None, "no such file") from None
    except UnicodeDecodeError as error:
        line = path.read_bytes()[: error.start].count(b"\n") + 1
        raise DataFormatError(path, line, f"not UTF-8 text ({error.reason})") from None
    except OSError as error:
        raise DataFormatError(path, None, f"cannot read it: {error.strerror or error}") from None


def _split_lines(text: str) -> list[str]:
    """Lines without their line ends (a final newline ends the last line; "\r\n" is one line end)."""
    lines = text.split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    return [line[:-1] if line.endswith("\r") else line for line in lines]


def _lines(path: Path) -> list[str]:
    return _split_lines(_read_text(path))


def _code_points(text: str) -> np.ndarray:
    """The characters of `text` as integers (one byte each when the text is ASCII)."""
    if text.isascii():
        return np.frombuffer(text.encode("ascii"), dtype=np.uint8)
    return np.frombuffer(text.encode("utf-32-le"), dtype=np.uint32)


@dataclass(frozen=True)
class _Words:
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


def _character_words(path: Path, strings: Sequence[str], labels: np.ndarray, lines: np.ndarray,
                     label_path: Path | None = None) -> _Words:
    lengths = np.fromiter(map(len, strings), dtype=np.int64, count=len(strings))
    return _Words(path, labels, lines, codes=_code_points("".join(strings)), lengths=lengths, label_path=label_path)


def _index_dtype(n_symbols: int):
    return np.uint8 if n_symbols <= 256 else (np.int16 if n_symbols <= 32767 else np.int64)


def _encode(words: _Words, alphabet: Sequence[str]) -> StringFile:
    """Symbol indices for `words` over `alphabet`; an unknown symbol names its file and line."""
    alphabet = tuple(alphabet)
    dtype = _index_dtype(len(alphabet))
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
        return StringFile(str(words.path), alphabet, flat.astype(dtype), offsets, words.labels, words.lines, _label_path(words))
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
    return StringFile(str(words.path), alphabet, flat, offsets, words.labels, words.lines, _label_path(words))


def _label_path(words: _Words) -> str | None:
    return None if words.label_path is None else str(words.label_path)


def _unknown(path: Path, line: int, symbol: str, alphabet: Sequence[str]):
    shown = ", ".join(repr(s) for s in alphabet)
    raise DataFormatError(path, line, f"symbol {symbol!r} is not in the alphabet {{{shown}}}")


def _infer_alphabet(parsed: Sequence[_Words]) -> tuple[str, ...]:
    vocabulary: set[str] = set()
    for words in parsed:
        vocabulary |= words.vocabulary()
    return tuple(sorted(vocabulary))


# ------------------------------------------------------------------------------------------ FLaRe
def _read_flare_words(directory: Path) -> _Words:
    strings_path, labels_path = directory / FLARE_STRINGS, directory / FLARE_LABELS
    for path in (strings_path, labels_path):
        if not path.is_file():
            raise DataFormatError(path, None, f"missing: a FLaRe split folder holds {FLARE_STRINGS} and {FLARE_LABELS}")
    strings = _lines(strings_path)
    label_lines = _lines(labels_path)
    if len(strings) != len(label_lines):
        shorter, longer = (labels_path, strings_path) if len(label_lines) < len(strings) else (strings_path, labels_path)
        first = min(len(strings), len(label_lines)) + 1
        raise DataFormatError(
            shorter, None,
            f"has {min(len(strings), len(label_lines))} lines but {longer.name} has {max(len(strings), len(label_lines))}; "
            f"line {first} of {longer.name} has no partner (the files must be line-aligned)",
        )
    labels = np.empty(len(label_lines), dtype=bool)
    for number, value in enumerate(label_lines, start=1):
        stripped = value.strip()
        if stripped not in ("0", "1"):
            raise DataFormatError(labels_path, number, f"expected a label 0 or 1, got {value!r}")
        labels[number - 1] = stripped == "1"
    lines = np.arange(1, len(strings) + 1, dtype=np.int64)
    joined, n_tokens = [], 0
    for line in strings:
        tokens = line.split()
        n_tokens += len(tokens)
        joined.append("".join(tokens))
    if n_tokens == sum(map(len, joined)):  # every token is one character: the separators can go
        return _character_words(strings_path, joined, labels, lines, labels_path)
    return _Words(strings_path, labels, lines, tokens=[line.split() for line in strings], label_path=labels_path)


def read_flare_split(directory: str | Path, alphabet: Sequence[str] | None = None) -> StringFile:
    """The labelled strings of one FLaRe split folder (main.tok + labels.txt; the per-string extras
    are not needed to train or test and are not read). Without `alphabet`, the alphabet is the
    sorted set of tokens in main.tok (FLaRe builds its vocabulary the same way)."""
    words = _read_flare_words(Path(directory))
    return _encode(words, alphabet if alphabet is not None else _infer_alphabet([words]))


def _check_flare_symbols(alphabet: Sequence[str]) -> None:
    for symbol in alphabet:
        if not symbol or any(character.isspace() for character in symbol):
            raise FormalRopeError(
                f"symbol {symbol!r} cannot be written in FLaRe's main.tok, whose tokens are separated by "
                "whitespace; rename it (multi-character symbols without blanks are fine)"
            )


def coaccessible_states(dfa) -> np.ndarray:
    """Bool per state: some accepting state is reachable from it (a prefix ending there extends to a member)."""
    live = np.asarray(dfa.accepting, dtype=bool).copy()
    while True:
        grown = live | live[dfa.transitions].any(axis=1)
        if (grown == live).all():
            return live
        live = grown


def _next_symbol_fragments(dfa) -> list[str]:
    """Per DFA state, FLaRe's next-symbols entry {"s": sorted valid next symbols, "e": accepting}."""
    live = coaccessible_states(dfa)
    fragments = []
    for state in range(dfa.n_states):
        valid = sorted(dfa.alphabet[a] for a in range(dfa.n_symbols) if live[dfa.transitions[state, a]])
        entry = {"s": " ".join(valid), "e": bool(dfa.accepting[state])}
        fragments.append(json.dumps(entry, separators=(",", ":"), ensure_ascii=False))
    return fragments


def _state_paths(dfa, symbols: np.ndarray) -> np.ndarray:
    """States (n, L+1) visited by strings (n, L) of one length, start state first."""
    n, length = symbols.shape
    states = np.empty((n, length + 1), dtype=np.int64)
    states[:, 0] = dfa.start
    for position in range(length):
        states[:, position + 1] = dfa.transitions[states[:, position], symbols[:, position]]
    return states


def _flare_lines(labeled: LabeledSet, tokens: np.ndarray) -> list[str]:
    if labeled.length == 0:
        return [""] * len(labeled)
    return [" ".join(row) for row in tokens[labeled.symbols].tolist()]


def _write_text(path: Path, lines: Sequence[str]) -> None:
    temporary = path.with_name(f".{path.name}.tmp")
    with open(temporary, "w", encoding="utf-8", newline="\n") as handle:
        for line in lines:
            handle.write(line)
            handle.write("\n")
    os.replace(temporary, path)


def _flare_rows(sets: Sequence[LabeledSet], dfa, next_symbols: bool):
    """Per set, the lines of each FLaRe file (generated set by set, so that a large split is
    streamed to disk rather than held as text)."""
    from formal_rope.sampling.counts import count_strings

    tokens = np.array(dfa.alphabet, dtype=object)
    fragments = np.array(_next_symbol_fragments(dfa), dtype=object) if next_symbols else None
    positive_lengths = sum(bool(labeled.labels.any()) for labeled in sets)
    for labeled in sets:
        rows = {
            FLARE_STRINGS: _flare_lines(labeled, tokens),
            FLARE_LABELS: ["1" if label else "0" for label in labeled.labels.tolist()],
            # One line per negative: near-misses are one substitution away from a positive.
            FLARE_NUM_EDITS: ["1" if flag else "" for flag in labeled.near_miss[~labeled.labels].tolist()],
        }
        n_positive = int(labeled.labels.sum())
        if n_positive:
            # Uniform length over the split's lengths that have positives, then uniform within the length.
            value = -math.log(positive_lengths) - math.log(count_strings(dfa, labeled.length))
            rows[FLARE_LOG_PROBABILITIES] = [repr(value)] * n_positive
            if fragments is not None:
                paths = _state_paths(dfa, labeled.symbols[labeled.labels])
                rows[FLARE_NEXT_SYMBOLS] = ["[" + ",".join(row) + "]" for row in fragments[paths].tolist()]
        yield rows


def write_flare_split(directory: str | Path, sets: Sequence[LabeledSet], dfa, *, next_symbols: bool = True) -> list[Path]:
    """Write `sets` (strings of `dfa`'s language, e.g. from `test_sets`) as one FLaRe split folder.

    Files: main.tok, labels.txt, num-edits.txt (near-misses are one substitution from a positive:
    "1"; uniform negatives: empty), log-probabilities.txt and, unless next_symbols=False,
    next-symbols.jsonl. Rows are in the sets' order. Returns the paths written."""
    _check_flare_symbols(dfa.alphabet)
    directory = Path(directory)
    names = [FLARE_STRINGS, FLARE_LABELS, FLARE_NUM_EDITS, FLARE_LOG_PROBABILITIES] + ([FLARE_NEXT_SYMBOLS] if next_symbols else [])
    paths = [directory / name for name in names]
    temporaries = [path.with_name(f".{path.name}.tmp") for path in paths]
    try:
        directory.mkdir(parents=True, exist_ok=True)
        handles = [open(t, "w", encoding="utf-8", newline="\n") for t in temporaries]
        try:
            for rows in _flare_rows(sets, dfa, next_symbols):
                for name, handle in zip(names, handles):
                    for line in rows.get(name, ()):
                        handle.write(line)
                        handle.write("\n")
        finally:
            for handle in handles:
                handle.close()
        for temporary, path in zip(temporaries, paths):
            os.replace(temporary, path)  # never leave half-written files under FLaRe's names
    except OSError as error:
        for temporary in temporaries:
            temporary.unlink(missing_ok=True)
        raise FormalRopeError(f"cannot write the FLaRe split {str(directory)!r}: {error.strerror or error}") from None
    return paths


# -------------------------------------------------------------------------------------- MLRegTest
def _mlregtest_words(path: Path, rows: list[str], labels: np.ndarray, lines: np.ndarray,
                     alphabet: Sequence[str] | None) -> _Words:
    """Words of MLRegTest-style strings: characters over single-character alphabets, else
    blank-separated symbols (quoted as in expressions when needed)."""
    from formal_rope.automata.membership import split_symbols, symbol_tokens

    if alphabet is not None:
        characters = all(len(symbol) == 1 for symbol in alphabet)
    else:
        characters = not any(any(c.isspace() for c in row) for row in rows)
    if characters:
        return _character_words(path, rows, labels, lines)
    words = []
    for row, line in zip(rows, lines.tolist()):
        try:
            words.append(split_symbols(row, alphabet) if alphabet is not None else symbol_tokens(row))
        except FormalRopeError as error:
            raise DataFormatError(path, line, str(error).removeprefix("")) from None
    return _Words(path, labels, lines, tokens=words)


def _read_mlregtest_words(path: Path, alphabet: Sequence[str] | None) -> _Words:
    rows: list[str] = []
    text_lines = _lines(path)
    labels = np.empty(len(text_lines), dtype=bool)
    for number, text in enumerate(text_lines, start=1):
        string, tab, label = text.rpartition("\t")
        if not tab:
            raise DataFormatError(path, number, f"expected string<TAB>TRUE or string<TAB>FALSE, got {text!r}")
        value = MLREGTEST_LABELS.get(label.strip())
        if value is None:
            raise DataFormatError(path, number, f"expected the label TRUE or FALSE after the tab, got {label!r}")
        if "\t" in string:
            raise DataFormatError(path, number, f"more than one tab in {text!r}; expected string<TAB>TRUE|FALSE")
        rows.append(string)
        labels[number - 1] = value
    return _mlregtest_words(path, rows, labels, np.arange(1, len(rows) + 1, dtype=np.int64), alphabet)


def read_mlregtest_file(path: str | Path, alphabet: Sequence[str] | None = None) -> StringFile:
    """The labelled strings of one MLRegTest file (`string<TAB>TRUE|FALSE` lines).

    Strings over single-character symbols are concatenated (MLRegTest's own files); strings with
    blanks are read as blank-separated symbols (how `sample --format mlregtest` writes
    multi-character symbols). Without `alphabet` it is the sorted set of symbols in the file."""
    words = _read_mlregtest_words(Path(path), alphabet)
    return _encode(words, alphabet if alphabet is not None else _infer_alphabet([words]))


def _check_line_symbols(alphabet: Sequence[str]) -> None:
    for symbol in alphabet:
        if "\t" in symbol or "\n" in symbol or "\r" in symbol:
            raise FormalRopeError(f"symbol {symbol!r} contains a tab or a line break and cannot be written as a text line")


def mlregtest_lines(sets: Sequence[LabeledSet], alphabet: Sequence[str]) -> list[str]:
    """`string<TAB>TRUE|FALSE` lines for the sets' rows (strings as `sampling.decode` writes them)."""
    from formal_rope.sampling.text import decode

    _check_line_symbols(alphabet)
    lines: list[str] = []
    for labeled in sets:
        for word, label in zip(decode(labeled.symbols, alphabet), labeled.labels.tolist()):
            lines.append(f"{word}\t{'TRUE' if label else 'FALSE'}")
    return lines


def write_mlregtest_file(path: str | Path, sets: Sequence[LabeledSet], alphabet: Sequence[str]) -> Path:
    """Write `sets` as one MLRegTest string file (name it `<language>_<Split>.txt`, e.g. `x_TestLR.txt`)."""
    path = Path(path)
    lines = mlregtest_lines(sets, alphabet)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        _write_text(path, lines)
    except OSError as error:
        raise FormalRopeError(f"cannot write {str(path)!r}: {error.strerror or error}") from None
    return path


# ---------------------------------------------------------------------------------------- Parquet
def read_parquet_strings(path: str | Path, alphabet: Sequence[str] | None = None) -> StringFile:
    """The labelled strings of a Parquet file written by `formalrope sample --out FILE.parquet`
    (columns string, label, ...). "Lines" are 1-based rows."""
    import pyarrow.parquet as pq

    path = Path(path)
    try:
        table = pq.read_table(path, columns=["string", "label"])
    except FileNotFoundError:
        raise DataFormatError(path, None, "no such file") from None
    except Exception as error:  # pyarrow raises several types for non-Parquet or column-less files
        raise DataFormatError(path, None, f"not a Parquet file with columns string and label ({error})") from None
    rows = table.column("string").to_pylist()
    labels = table.column("label").to_pylist()
    for number, (string, label) in enumerate(zip(rows, labels), start=1):
        if not isinstance(string, str) or not isinstance(label, bool):
            raise DataFormatError(path, number, f"row has string {string!r} and label {label!r}; expected text and a boolean")
    words = _mlregtest_words(path, rows, np.array(labels, dtype=bool), np.arange(1, len(rows) + 1, dtype=np.int64), alphabet)
    return _encode(words, alphabet if alphabet is not None else _infer_alphabet([words]))


def write_parquet_file(path: str | Path, sets: Sequence[LabeledSet], alphabet: Sequence[str]) -> Path:
    """Write `sets` as Parquet with columns string, label, length, near_miss (what `sample --out` writes)."""
    import pandas as pd

    from formal_rope.sampling.text import decode

    path = Path(path)
    strings: list[str] = []
    for labeled in sets:
        strings.extend(decode(labeled.symbols, alphabet))

    def column(pick, dtype):
        return np.concatenate([pick(labeled) for labeled in sets]) if sets else np.zeros(0, dtype)

    frame = pd.DataFrame({
        "string": strings,
        "label": column(lambda s: s.labels, bool),
        "length": column(lambda s: np.full(len(s), s.length, dtype=np.int64), np.int64),
        "near_miss": column(lambda s: s.near_miss, bool),
    })
    temporary = path.with_name(path.name + ".tmp")
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        frame.to_parquet(temporary, index=False)
        temporary.replace(path)  # never leave a half-written file under the requested name
    except OSError as error:
        raise FormalRopeError(f"cannot write {str(path)!r}: {error.strerror or error}") from None
    return path


def write_sets(fmt: str, out: str | Path, sets: Sequence[LabeledSet], dfa, *, next_symbols: bool = True) -> list[Path]:
    """Write `sets` of `dfa`'s language in format `fmt`: flare (a split folder), mlregtest (one
    file) or parquet (one file). Returns the paths written."""
    if fmt == "flare":
        return write_flare_split(out, sets, dfa, next_symbols=next_symbols)
    if fmt == "mlregtest":
        return [write_mlregtest_file(out, sets, dfa.alphabet)]
    if fmt == "parquet":
        return [write_parquet_file(out, sets, dfa.alphabet)]
    raise FormalRopeError(f"unknown data format {fmt!r}; expected one of {', '.join(FORMATS)}")


# ------------------------------------------------------------------------------------ whole sets
@dataclass(frozen=True, eq=False)
class Dataset:
    """Training and test strings read from a FLaRe language folder or an MLRegTest language.

    `files` are every file read (training first); `content_hash` is a SHA-256 prefix over their
    names and bytes, so a run records exactly which data it used."""

    format: str
    root: str
    alphabet: tuple[str, ...]
    train: StringFile
    tests: tuple[StringFile, ...]
    files: tuple[str, ...]
    content_hash: str

    def test_sets(self) -> list[LabeledSet]:
        """All test strings, one LabeledSet per length, increasing."""
        return labeled_sets(self.tests)

    def training_batch(self, rng: np.random.Generator, batch_size: int, rows: np.ndarray | None = None):
        """A balanced batch from the training file, like `sampling.training_batch`: ceil(B/2) rows
        drawn uniformly with replacement among its positives and floor(B/2) among its negatives,
        rows shuffled. `rows` (increasing indices) restricts the draw to those strings (the run's
        training lengths); None draws from all. No positive or no negative is a FormalRopeError."""
        from formal_rope.sampling.datasets import TrainingBatch

        labels = self.train.labels
        if rows is None:
            positives, negatives = np.flatnonzero(labels), np.flatnonzero(~labels)
        else:
            positives, negatives = rows[labels[rows]], rows[~labels[rows]]
        n_negative = batch_size // 2
        n_positive = batch_size - n_negative
        for name, rows, wanted in (("positive", positives, n_positive), ("negative", negatives, n_negative)):
            if wanted and not rows.size:
                raise FormalRopeError(
                    f"the training data {self.train.path} has no {name} string, so balanced batches cannot be drawn"
                )
        chosen = np.concatenate((
            positives[rng.integers(0, max(positives.size, 1), n_positive)] if n_positive else positives[:0],
            negatives[rng.integers(0, max(negatives.size, 1), n_negative)] if n_negative else negatives[:0],
        ))
        chosen = chosen[rng.permutation(batch_size)]
        symbols, lengths = self.train.padded(chosen)
        return TrainingBatch(symbols, lengths, labels[chosen].copy())


@dataclass(frozen=True)
class DataFiles:
    """Where a dataset's training and test strings are (see `locate_dataset`)."""

    format: str
    root: str
    train: Path  # FLaRe: the training split folder; MLRegTest: the _Train.txt file
    tests: tuple[Path, ...]  # FLaRe: the test split folder; MLRegTest: the _Test*.txt files


def locate_dataset(path: str | Path) -> DataFiles:
    """Find training and test data under `path`:

    * a FLaRe language folder: main.tok + labels.txt (training) and datasets/test/ (test);
    * an MLRegTest language: `DIR/<language>` naming `<language>_Train.txt` and its `_Test*.txt`
      files (TestSR, TestSA, TestLR, TestLA, all used for testing), or a folder holding exactly
      one `*_Train.txt`."""
    path = Path(path)
    if path.is_dir() and (path / FLARE_STRINGS).is_file():
        test = path / FLARE_TEST_SPLIT
        if not (test / FLARE_STRINGS).is_file():
            raise FormalRopeError(
                f"{path} looks like a FLaRe language folder ({FLARE_STRINGS} at the top is its training split) "
                f"but has no test split {test}/{FLARE_STRINGS}; write one with "
                f"`formalrope sample LANG --lengths 41..500 --format flare --out {test}`"
            )
        return DataFiles("flare", str(path), path, (test,))
    if path.is_dir():
        trains = sorted(path.glob("*" + MLREGTEST_TRAIN_SUFFIX))
        if len(trains) != 1:
            found = "no" if not trains else f"{len(trains)}"
            raise FormalRopeError(
                f"{path} is neither a FLaRe language folder (no {FLARE_STRINGS}) nor an MLRegTest folder with one "
                f"language ({found} *{MLREGTEST_TRAIN_SUFFIX} files); give DIR/<language> to pick one MLRegTest language"
            )
        prefix = trains[0].with_name(trains[0].name[: -len(MLREGTEST_TRAIN_SUFFIX)])
    else:
        prefix = path
    train = prefix.with_name(prefix.name + MLREGTEST_TRAIN_SUFFIX)
    if not train.is_file():
        raise FormalRopeError(
            f"no data at {path}: expected a FLaRe language folder (main.tok, labels.txt, datasets/test/) or an "
            f"MLRegTest language DIR/<language> with <language>{MLREGTEST_TRAIN_SUFFIX} and <language>_Test*.txt"
        )
    tests = tuple(sorted(prefix.parent.glob(prefix.name + MLREGTEST_TEST_PATTERN)))
    if not tests:
        raise FormalRopeError(f"{train} has no test files beside it ({prefix.name}{MLREGTEST_TEST_PATTERN})")
    return DataFiles("mlregtest", str(prefix), train, tests)


def _content_hash(files: Sequence[Path], root: Path) -> str:
    digest = hashlib.sha256()
    for path in files:
        try:
            name = str(path.relative_to(root))
        except ValueError:
            name = path.name
        digest.update(name.encode("utf-8") + b"\0")
        digest.update(path.read_bytes())
        digest.update(b"\0")
    return digest.hexdigest()[:16]


def load_dataset(path: str | Path, alphabet: Sequence[str] | None = None) -> Dataset:
    """Read a FLaRe language folder or an MLRegTest language (see `locate_dataset`).

    With `alphabet` every symbol must belong to it (DataFormatError naming file and line);
    without, the alphabet is the sorted set of symbols in all the files read."""
    located = locate_dataset(path)
    if located.format == "flare":
        parsed = [_read_flare_words(located.train), *(_read_flare_words(test) for test in located.tests)]
        files = [p for split in (located.train, *located.tests) for p in (split / FLARE_STRINGS, split / FLARE_LABELS)]
        root = Path(located.root)
    else:
        parsed = [_read_mlregtest_words(p, alphabet) for p in (located.train, *located.tests)]
        files = [located.train, *located.tests]
        root = Path(located.root).parent
    chosen = tuple(alphabet) if alphabet is not None else _infer_alphabet(parsed)
    if not chosen:
        raise FormalRopeError(f"the data at {path} holds no symbols, so no alphabet can be learnt; give --lang or --alphabet")
    encoded = [_encode(words, chosen) for words in parsed]
    return Dataset(
        format=located.format,
        root=located.root,
        alphabet=chosen,
        train=encoded[0],
        tests=tuple(encoded[1:]),
        files=tuple(str(p) for p in files),
        content_hash=_content_hash(files, root),
    )


def check_labels(strings: StringFile, dfa) -> None:
    """FormalRopeError at the first line whose label disagrees with `dfa`'s language (same alphabet)."""
    from formal_rope.automata.membership import accepts_encoded
    from formal_rope.sampling.text import decode

    if tuple(dfa.alphabet) != tuple(strings.alphabet):
        raise FormalRopeError(
            f"{strings.path} is read over {{{', '.join(strings.alphabet)}}} but the language is over "
            f"{{{', '.join(dfa.alphabet)}}}"
        )
    wrong = []
    for length, rows in strings.length_groups():
        members = accepts_encoded(dfa, strings.block(length, rows), np.full(len(rows), length))
        wrong.append(rows[members != strings.labels[rows]])
    wrong = np.sort(np.concatenate(wrong)) if wrong else np.zeros(0, dtype=np.int64)
    if wrong.size:
        row = int(wrong[0])
        symbols, lengths = strings.padded([row])
        word = decode(symbols, strings.alphabet, lengths)[0]
        said = "in the language" if strings.labels[row] else "not in the language"
        actual = "rejects" if strings.labels[row] else "accepts"
        line = int(strings.lines[row])
        where = "" if strings.label_path is None else f" ({strings.label_path}:{line})"
        raise DataFormatError(
            strings.path, line,
            f"the label{where} says {word!r} is {said}, but the language {actual} it "
            f"({wrong.size} of {len(strings)} labels in this file disagree with the language)",
        )
