"""Vectorized membership: strings -> padded symbol-index matrices -> one table gather per position.

A batch of n strings is a (n, max_len) int64 matrix padded with 0 plus a length vector. Running
the DFA is a loop over positions (not strings): all n states advance with one gather from the
flattened transition table, and rows past their length keep their state.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

import numpy as np

from formal_rope.automata.dfa import DFA
from formal_rope.errors import FormalRopeError

_TOKEN = re.compile(r"\S+")

Word = str | Sequence[str]


def _single_character(alphabet: Sequence[str]) -> bool:
    return all(len(symbol) == 1 for symbol in alphabet)


def _unknown_symbol(symbol: str, column: int, string: str, alphabet: Sequence[str]) -> FormalRopeError:
    shown = ", ".join(repr(s) for s in alphabet)
    return FormalRopeError(
        f"error: unknown symbol {symbol!r} at column {column} of {string!r}; the alphabet is {{{shown}}}"
    )


def split_symbols(string: str, alphabet: Sequence[str]) -> list[str]:
    """The symbols of `string`.

    With single-character symbols every character is one symbol ("abba"); when some symbol is
    longer than one character, symbols are whitespace-separated tokens ("long a long").
    An unknown symbol raises FormalRopeError naming it and its 1-based column.
    """
    known = set(alphabet)
    if _single_character(alphabet):
        for column, character in enumerate(string, start=1):
            if character not in known:
                raise _unknown_symbol(character, column, string, alphabet)
        return list(string)
    symbols = []
    for match in _TOKEN.finditer(string):
        if match.group() not in known:
            raise _unknown_symbol(match.group(), match.start() + 1, string, alphabet)
        symbols.append(match.group())
    return symbols


def encode_strings(strings: Sequence[Word], alphabet: Sequence[str]) -> tuple[np.ndarray, np.ndarray]:
    """(symbols int64 (n, max_len) padded with 0, lengths int64 (n,)).

    Elements may be strings (split with `split_symbols`) or sequences of symbols. For plain
    strings over single-character alphabets, the whole batch is converted with array ops.
    """
    alphabet = tuple(alphabet)
    n_strings = len(strings)
    if n_strings and _single_character(alphabet) and all(isinstance(s, str) for s in strings):
        return _encode_characters(list(strings), alphabet)
    index = {symbol: position for position, symbol in enumerate(alphabet)}
    rows: list[list[int]] = []
    for string in strings:
        symbols = split_symbols(string, alphabet) if isinstance(string, str) else list(string)
        try:
            rows.append([index[symbol] for symbol in symbols])
        except KeyError as error:
            column = symbols.index(error.args[0]) + 1
            raise _unknown_symbol(error.args[0], column, " ".join(symbols), alphabet) from None
    lengths = np.array([len(row) for row in rows], dtype=np.int64)
    matrix = np.zeros((n_strings, int(lengths.max(initial=0))), dtype=np.int64)
    for row_index, row in enumerate(rows):
        matrix[row_index, : len(row)] = row
    return matrix, lengths


def _encode_characters(strings: list[str], alphabet: tuple[str, ...]) -> tuple[np.ndarray, np.ndarray]:
    lengths = np.fromiter((len(s) for s in strings), dtype=np.int64, count=len(strings))
    max_len = int(lengths.max(initial=0))
    matrix = np.zeros((len(strings), max_len), dtype=np.int64)
    total = int(lengths.sum())
    if total == 0:
        return matrix, lengths
    code_points = np.frombuffer("".join(strings).encode("utf-32-le"), dtype=np.uint32).astype(np.int64)
    alphabet_points = np.array([ord(symbol) for symbol in alphabet], dtype=np.int64)
    sort_order = np.argsort(alphabet_points)
    sorted_points = alphabet_points[sort_order]
    slot = np.minimum(np.searchsorted(sorted_points, code_points), sorted_points.size - 1)
    valid = sorted_points[slot] == code_points
    row_of = np.repeat(np.arange(len(strings)), lengths)
    offsets = np.cumsum(lengths) - lengths
    column_of = np.arange(total) - np.repeat(offsets, lengths)
    if not valid.all():
        bad = int(np.flatnonzero(~valid)[0])
        string = strings[row_of[bad]]
        raise _unknown_symbol(chr(code_points[bad]), int(column_of[bad]) + 1, string, alphabet)
    matrix[row_of, column_of] = sort_order[slot]
    return matrix, lengths


def run_encoded(dfa: DFA, symbols: np.ndarray, lengths: np.ndarray) -> np.ndarray:
    """The state each encoded string reaches (int64 (n,))."""
    symbols = np.asarray(symbols, dtype=np.int64)
    lengths = np.asarray(lengths, dtype=np.int64)
    n_symbols = dfa.n_symbols
    flat_table = dfa.transitions.ravel()
    states = np.full(symbols.shape[0], dfa.start, dtype=np.int64)
    for position in range(symbols.shape[1] if symbols.ndim == 2 else 0):
        active = lengths > position
        advanced = flat_table[states * n_symbols + symbols[:, position]]
        states = np.where(active, advanced, states)
    return states


def accepts_encoded(dfa: DFA, symbols: np.ndarray, lengths: np.ndarray) -> np.ndarray:
    """Membership of every encoded string (bool (n,)), vectorized across the batch."""
    return dfa.accepting[run_encoded(dfa, symbols, lengths)]


def accepts(dfa: DFA, strings: Sequence[Word]) -> np.ndarray:
    """Membership of every string (bool (n,)); see `encode_strings` for accepted forms."""
    if isinstance(strings, str):
        raise TypeError("accepts expects a sequence of strings, not one string")
    symbols, lengths = encode_strings(strings, dfa.alphabet)
    return accepts_encoded(dfa, symbols, lengths)
