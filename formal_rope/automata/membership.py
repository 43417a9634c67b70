"""Vectorized membership: strings -> padded symbol-index matrices -> DFA runs over the whole batch.

A batch of n strings is a (n, max_len) int64 matrix padded with 0 plus a length vector. Running
the DFA is a loop over positions (never over strings): all n states advance together with one
gather from the flattened transition table per block of positions (see `run_encoded`).
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


def _all_plain_strings(strings: Sequence[Word]) -> bool:
    return all(isinstance(s, str) for s in strings)


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
    if n_strings and _single_character(alphabet) and _all_plain_strings(strings):
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


def _encode_characters(
    strings: list[str], alphabet: tuple[str, ...], dtype: type = np.int64
) -> tuple[np.ndarray, np.ndarray]:
    """encode_strings for plain strings over single-character symbols, with array ops only."""
    lengths = np.fromiter(map(len, strings), dtype=np.int64, count=len(strings))
    max_len = int(lengths.max(initial=0))
    matrix = np.zeros((len(strings), max_len), dtype=dtype)
    if int(lengths.sum()) == 0:
        return matrix, lengths
    joined = "".join(strings)
    codes, invalid = _character_codes(joined, alphabet)
    if invalid.any():
        bad = int(np.flatnonzero(invalid)[0])
        row = int(np.searchsorted(np.cumsum(lengths), bad, side="right"))
        column = bad - int(lengths[:row].sum())
        raise _unknown_symbol(joined[bad], column + 1, strings[row], alphabet)
    if int(lengths.min()) == max_len:
        if codes.dtype == matrix.dtype:
            return codes.reshape(len(strings), max_len), lengths
        matrix[:] = codes.reshape(len(strings), max_len)
    else:
        # Boolean-mask assignment fills row-major, i.e. in the order of the joined characters.
        matrix[np.arange(max_len)[None, :] < lengths[:, None]] = codes
    return matrix, lengths


def _character_codes(joined: str, alphabet: tuple[str, ...]) -> tuple[np.ndarray, np.ndarray]:
    """(symbol index of every character, mask of characters outside the alphabet)."""
    points = np.array([ord(symbol) for symbol in alphabet], dtype=np.int64)
    lowest = int(points.min())
    if joined.isascii():
        characters = np.frombuffer(joined.encode("ascii"), dtype=np.uint8)
        if (points == lowest + np.arange(len(alphabet))).all():
            # Sorted alphabet of consecutive characters ('01', 'ab', 'abcd'): the index is
            # character - first, a subtraction instead of a gather (smaller characters wrap
            # around above 255 - lowest, so one comparison finds every stranger).
            codes = characters - np.uint8(lowest)
            return codes, codes >= len(alphabet)
    else:
        characters = np.frombuffer(joined.encode("utf-32-le"), dtype=np.uint32)
    table_size = max(int(points.max()), int(characters.max())) + 1
    if table_size <= 1 << 22:
        lookup = np.full(table_size, -1, dtype=np.int64 if len(alphabet) >= 2**15 else np.int16)
        lookup[points] = np.arange(len(alphabet))
        codes = lookup[characters]
        return codes, codes < 0
    sort_order = np.argsort(points)
    sorted_points = points[sort_order]
    slot = np.minimum(np.searchsorted(sorted_points, characters), sorted_points.size - 1)
    return sort_order[slot], sorted_points[slot] != characters


# Blocked tables read several positions per gather; their width (columns) is capped so the table
# stays cache-sized, and building it costs far less than the gathers it saves.
_MAX_BLOCK_COLUMNS = 4096
_MAX_BLOCK_ENTRIES = 1 << 22


def _block_table(table: np.ndarray, block: int) -> np.ndarray:
    """Transition table on blocks of `block` symbols: column s1*w^(b-1) + ... + sb (w = width)."""
    blocked = table
    for _ in range(block - 1):
        blocked = table[blocked].reshape(table.shape[0], -1)  # (Q, w^j) -> (Q, w^j, w) -> (Q, w^(j+1))
    return blocked


def _block_length(n_states: int, width: int, max_len: int) -> int:
    block = 1
    while (
        block < max_len
        and width ** (block + 1) <= _MAX_BLOCK_COLUMNS
        and n_states * width ** (block + 1) <= _MAX_BLOCK_ENTRIES
    ):
        block += 1
    return block


def run_encoded(dfa: DFA, symbols: np.ndarray, lengths: np.ndarray) -> np.ndarray:
    """The state each encoded string reaches (int64 (n,)).

    The table gets an extra "stay" column that padding positions use, so no masking is needed
    in the loop. Positions are then grouped into blocks of b symbols read by one gather from a
    precomputed block table (b chosen so the table stays small): the Python loop runs
    ceil(max_len / b) times, each iteration one gather over the whole batch.
    """
    symbols = np.asarray(symbols)
    lengths = np.asarray(lengths, dtype=np.int64)
    n_strings = symbols.shape[0]
    max_len = symbols.shape[1] if symbols.ndim == 2 else 0
    n_states, width = dfa.n_states, dfa.n_symbols + 1
    table = np.concatenate([dfa.transitions, np.arange(n_states, dtype=np.int64)[:, None]], axis=1)
    block = _block_length(n_states, width, max_len)
    n_blocks = -(-max_len // block)
    index_type = np.int32 if n_states * width**block < 2**31 else np.int64
    code_type = np.int16 if width**block < 2**15 else index_type
    flat_table = _block_table(table, block).astype(index_type).ravel()
    # One contiguous pass casts the symbols to the smallest dtype and pads them with the stay
    # symbol; block codes are then combined row-major, and only the (block times smaller) code
    # matrix is transposed to position-major: transposing the symbols would dominate the run.
    padded_len = n_blocks * block
    pad = dfa.n_symbols
    grid_type = np.uint8 if width <= 256 else np.int32
    has_short_rows = bool((lengths < max_len).any())
    if symbols.dtype == grid_type and padded_len == max_len and not has_short_rows:
        grid = symbols  # already compact and unpadded: read it in place
    else:
        grid = np.empty((n_strings, padded_len), dtype=grid_type)
        grid[:, :max_len] = symbols
        grid[:, max_len:] = pad
        if has_short_rows:
            np.copyto(grid, pad, where=np.arange(padded_len)[None, :] >= lengths[:, None])
    grid = grid.reshape(n_strings, n_blocks, block)
    codes = grid[:, :, 0].astype(code_type)
    for offset in range(1, block):
        codes *= width
        codes += grid[:, :, offset]
    codes = np.ascontiguousarray(codes.T).astype(index_type)
    states = np.full(n_strings, dfa.start, dtype=index_type)
    flat_index = np.empty(n_strings, dtype=index_type)
    row_width = index_type(width**block)
    for code in codes:
        np.multiply(states, row_width, out=flat_index)
        flat_index += code
        np.take(flat_table, flat_index, out=states)
    return states.astype(np.int64)


def accepts_encoded(dfa: DFA, symbols: np.ndarray, lengths: np.ndarray) -> np.ndarray:
    """Membership of every encoded string (bool (n,)), vectorized across the batch.

    Symbol indices within each string's length must lie in 0..n_symbols-1 (a ValueError says
    otherwise); entries past the length are ignored, whatever padding value they hold.
    """
    symbols = np.asarray(symbols)
    lengths = np.asarray(lengths, dtype=np.int64)
    if symbols.size and (int(symbols.min()) < 0 or int(symbols.max()) >= dfa.n_symbols):
        # Padding past a string's length may hold anything (e.g. a PAD id); only check inside.
        inside = symbols[np.arange(symbols.shape[1])[None, :] < lengths[:, None]]
        if inside.size and (int(inside.min()) < 0 or int(inside.max()) >= dfa.n_symbols):
            raise ValueError(f"symbol indices must lie in 0..{dfa.n_symbols - 1} for alphabet {dfa.alphabet}")
    return dfa.accepting[run_encoded(dfa, symbols, lengths)]


def accepts(dfa: DFA, strings: Sequence[Word]) -> np.ndarray:
    """Membership of every string (bool (n,)); see `encode_strings` for accepted forms."""
    if isinstance(strings, str):
        raise TypeError("accepts expects a sequence of strings, not one string")
    alphabet = dfa.alphabet
    compact = (
        len(strings) > 0
        and len(alphabet) < 255
        and _single_character(alphabet)
        and _all_plain_strings(strings)
    )
    if compact:
        # Same encoding as encode_strings but in uint8: a quarter of the memory traffic.
        symbols, lengths = _encode_characters(list(strings), alphabet, np.uint8)
    else:
        symbols, lengths = encode_strings(strings, alphabet)
    return dfa.accepting[run_encoded(dfa, symbols, lengths)]
