"""Vectorized membership: strings -> padded symbol-index matrices -> DFA runs over the whole batch.

A batch of n strings is a (n, max_len) int64 matrix padded with 0 plus a length vector. Running
the DFA is a loop over positions (never over strings): all n states advance together with one
gather from the flattened transition table per block of positions (see `run_encoded`).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence

import numpy as np

from formal_rope.automata.dfa import DFA, require_dfa
from formal_rope.errors import FormalRopeError

# A token of a blank-separated string: a quoted symbol (followed by a blank or the end), a bare
# run of non-blanks not starting with a quote, or (bad) an opening quote that is never closed.
_TOKEN = re.compile(
    r"""(?P<quoted>'[^'\n]+'(?=\s|$)|"[^"\n]+"(?=\s|$))|(?P<bare>[^\s'"]\S*)|(?P<bad>['"]\S*)"""
)
_NEEDS_QUOTES = re.compile(r"\s")

Word = str | Sequence[str]


def _single_character(alphabet: Sequence[str]) -> bool:
    return all(len(symbol) == 1 for symbol in alphabet)


def _unknown_symbol(symbol: str, column: int, string: str, alphabet: Sequence[str]) -> FormalRopeError:
    shown = ", ".join(repr(s) for s in alphabet)
    return FormalRopeError(
        f"unknown symbol {symbol!r} at column {column} of {string!r}; the alphabet is {{{shown}}}"
    )


def _all_plain_strings(strings: Sequence[Word]) -> bool:
    # One isinstance check per distinct type, not per string.
    return all(issubclass(kind, str) for kind in set(map(type, strings)))


def split_symbols(string: str, alphabet: Sequence[str]) -> list[str]:
    """The symbols of `string`.

    With single-character symbols every character is one symbol ("abba"). When some symbol is
    longer than one character, symbols are blank-separated tokens ("long a long"), and a token may
    be quoted exactly as in expressions ('long name' or "it's"), which is how a symbol containing
    blanks, or starting with a quote, is written. `format_word` is the inverse.
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
        column = match.start() + 1
        if match.group("bad") is not None:
            raise FormalRopeError(
                f"the quote at column {column} of {string!r} does not enclose a symbol (unterminated, or glued to "
                "the next token); a quoted symbol ends with the "
                "same quote character it starts with ('long name' or \"it's\") and is followed by a blank or the end"
            )
        quoted = match.group("quoted")
        symbol = quoted[1:-1] if quoted is not None else match.group("bare")
        if symbol not in known:
            raise _unknown_symbol(symbol, column, string, alphabet)
        symbols.append(symbol)
    return symbols


def symbol_tokens(string: str) -> list[str]:
    """The blank-separated symbols of `string` (quotes removed), without checking them against an
    alphabet: how `split_symbols` reads a string over multi-character symbols. Used to learn an
    alphabet from data files; an unterminated quote raises FormalRopeError."""
    tokens = []
    for match in _TOKEN.finditer(string):
        if match.group("bad") is not None:
            raise FormalRopeError(
                f"the quote at column {match.start() + 1} of {string!r} does not enclose a symbol "
                "(unterminated, or glued to the next token)"
            )
        quoted = match.group("quoted")
        tokens.append(quoted[1:-1] if quoted is not None else match.group("bare"))
    return tokens


def symbol_token(symbol: str) -> str:
    """How `split_symbols` reads `symbol` back in a blank-separated string: bare, or quoted as in
    expressions when it contains a blank or starts with a quote character."""
    if not symbol:
        raise FormalRopeError("an empty symbol cannot be written in a string")
    if not _NEEDS_QUOTES.search(symbol) and symbol[0] not in "'\"":
        return symbol
    if "\n" in symbol or ("'" in symbol and '"' in symbol):
        raise FormalRopeError(
            f"symbol {symbol!r} cannot be written in a string: it needs quotes (it contains a blank or starts "
            "with a quote) but contains a newline or both quote characters"
        )
    quote = '"' if "'" in symbol else "'"
    return f"{quote}{symbol}{quote}"


def format_word(symbols: Sequence[str], alphabet: Sequence[str]) -> str:
    """Symbols -> the string syntax `split_symbols` reads: concatenated over single-character
    alphabets, else blank-separated tokens, quoted where a symbol needs it (see `symbol_token`)."""
    if _single_character(alphabet):
        return "".join(symbols)
    return " ".join(map(symbol_token, symbols))


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


def _raw_byte_table(dfa: DFA) -> tuple[np.ndarray, int, int] | None:
    """(table whose column is a character's low k bits, lowest and highest code point) for
    alphabets of ASCII characters with consecutive code points ("01", "ab", "ba", "abcd"),
    else None. Consecutive code points differ in their low k bits (k = bits for |Σ|), so the
    raw bytes of the strings index the table without any translation pass."""
    points = [ord(symbol) for symbol in dfa.alphabet]
    if not points or min(points) == 0 or max(points) >= 128 or max(points) - min(points) + 1 != len(points):
        return None
    bits = _bits_per_symbol(len(points))
    table = np.zeros((dfa.n_states, 1 << bits), dtype=np.int64)
    table[:, [point % (1 << bits) for point in points]] = dfa.transitions
    return table, min(points), max(points)


def _run_characters(dfa: DFA, strings: list[str]) -> np.ndarray:
    """run_encoded for plain strings over single characters, on the packed path.

    For ASCII alphabets of consecutive characters, strings of each length (up to 4 distinct
    lengths) are copied by numpy, a chunk of rows at a time, straight into byte rows that are
    validated with a min and a max and packed with no translation pass. Other alphabets and
    batches are encoded to symbol indices first.
    """
    lengths = np.fromiter(map(len, strings), dtype=np.int64, count=len(strings))
    equal = lengths.size == 0 or int(lengths.min()) == int(lengths.max())
    distinct = lengths[:1] if equal else np.unique(lengths)
    raw = _raw_byte_table(dfa)
    if raw is None or distinct.size > 4:
        symbols, lengths = _encode_characters(strings, dfa.alphabet, np.uint8)
        return _run_packed_rows(dfa, symbols, lengths)
    table, lowest, highest = raw

    def read_rows(group: list[str], length: int) -> Callable[[int, int], np.ndarray]:
        def read(first: int, stop: int) -> np.ndarray:
            rows = np.array(group[first:stop], dtype=f"S{length}").view(np.uint8).reshape(-1, length)
            if int(rows.min()) < lowest or int(rows.max()) > highest:
                raise _Stranger
            return rows

        return read

    states = np.full(len(strings), dfa.start, dtype=np.int64)
    try:
        for length in distinct.tolist():
            if length == 0:
                continue
            rows = np.flatnonzero(lengths == length) if distinct.size > 1 else np.arange(len(strings))
            group = strings if distinct.size == 1 else [strings[i] for i in rows.tolist()]
            states[rows] = _run_packed_chunks(table, dfa.start, rows.size, length, read_rows(group, length), True)
    except (_Stranger, UnicodeEncodeError):
        _encode_characters(strings, dfa.alphabet, np.uint8)  # raises, naming the first stranger
        raise
    return states


class _Stranger(Exception):
    """A character outside the alphabet was seen (the slow path then names it)."""


def _character_codes(joined: str, alphabet: tuple[str, ...]) -> tuple[np.ndarray, np.ndarray]:
    """(symbol index of every character, mask of characters outside the alphabet)."""
    if not alphabet:  # the empty alphabet: every character is a stranger
        return np.zeros(len(joined), dtype=np.int16), np.ones(len(joined), dtype=bool)
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


# ------------------------------------------------------------------ packed dense runs
# The fast path runs equal-length rows of byte-sized column codes. Symbols are packed k bits
# each (k = 1, 2, 4 or 8) into byte codes with SIMD-friendly array arithmetic, pairs of bytes
# are read as one 16-bit code when the table on 16-bit codes stays cache-sized, and then one
# gather per code column advances the whole batch. Gathers cost ~4 ns per element in numpy while
# arithmetic passes cost well under 1 ns, so the work is arranged to gather once per 8-16
# symbols per string, never once per symbol.
_MAX_WIDE_TABLE_ENTRIES = 1 << 19
_MAX_PACKED_TABLE_ENTRIES = 1 << 22
_PACK_CHUNK_BYTES = 1 << 18


def _bits_per_symbol(n_columns: int) -> int:
    for bits in (1, 2, 4, 8):
        if n_columns <= 1 << bits:
            return bits
    raise ValueError("the packed path handles at most 256 columns")


def _packed_path_fits(n_states: int, n_columns: int) -> bool:
    return n_columns <= 256 and n_states * 256 <= _MAX_PACKED_TABLE_ENTRIES


def _double_table(table: np.ndarray) -> np.ndarray:
    """Table on codes of twice as many symbols: column a + W*b reads block a, then block b."""
    n_states, width = table.shape
    return np.ascontiguousarray(table[table].transpose(0, 2, 1)).reshape(n_states, width * width)


def _pack_bytes(flat: np.ndarray, bits: int, low_bits_only: bool = False) -> np.ndarray:
    """Pack uint8 values, 8/bits per byte, the first value in the lowest bits.

    Values must be < 2^bits, or with `low_bits_only` only their low `bits` bits count (raw
    character bytes whose low bits identify the symbol).
    """
    if bits == 8:
        return flat
    if bits == 1:
        return np.packbits(flat & np.uint8(1) if low_bits_only else flat, bitorder="little")
    if bits == 2:
        words = flat.view(np.uint32)
        words = words & np.uint32(0x03030303) if low_bits_only else words.copy()
        words |= words >> np.uint32(6)
        words |= words >> np.uint32(12)
    else:
        words = flat.view(np.uint16)
        words = words & np.uint16(0x0F0F) if low_bits_only else words.copy()
        words |= words >> np.uint16(4)
    return words.astype(np.uint8)


def _run_packed(table: np.ndarray, start: int, grid: np.ndarray, low_bits_only: bool = False) -> np.ndarray:
    """States reached from `start` after reading every row of `grid` (uint8 (m, length), values
    are column indices of `table` (n_states, n_columns), n_columns <= 256); int64 (m,).

    With `low_bits_only`, only the low k bits of each grid value are the column index, k the
    bits needed for n_columns rounded up to 1, 2, 4 or 8 (see `_raw_byte_table`)."""
    # Each chunk is cast on its own, so int64 symbol matrices never get a full uint8 copy.
    return _run_packed_chunks(
        table,
        start,
        grid.shape[0],
        grid.shape[1],
        lambda first, stop: grid[first:stop].astype(np.uint8, copy=False),
        low_bits_only,
    )


def _run_packed_chunks(
    table: np.ndarray,
    start: int,
    n_rows: int,
    length: int,
    read_rows: Callable[[int, int], np.ndarray],
    low_bits_only: bool = False,
) -> np.ndarray:
    """`_run_packed` on rows produced chunk by chunk: read_rows(first, stop) gives the uint8
    (stop - first, length) rows first..stop-1 (stop may exceed n_rows)."""
    n_states, n_columns = table.shape
    state_type = np.uint8 if n_states <= 256 else np.uint16 if n_states <= 1 << 16 else np.int32
    bits = _bits_per_symbol(n_columns)
    per_byte = 8 // bits
    single = np.zeros((n_states, 1 << bits), dtype=state_type)
    single[:, :n_columns] = table
    block_table = single
    for _ in range(per_byte.bit_length() - 1):
        block_table = _double_table(block_table)
    per_code = per_byte
    if n_states * (1 << 16) <= min(_MAX_WIDE_TABLE_ENTRIES, n_rows * length // per_byte) and length >= 2 * per_byte:
        block_table = _double_table(block_table)
        per_code = 2 * per_byte
    states = np.full(n_rows, start, dtype=state_type)
    packed_length = length - length % per_code
    if n_rows == 0 or length == 0:
        return states.astype(np.int64)
    # Rows are read and packed in chunks: the temporaries stay cache-sized and are recycled by
    # the allocator instead of page-faulting in fresh memory on every call.
    code_type = np.uint16 if per_code != per_byte else np.uint8
    codes_per_row = packed_length // per_code
    codes = np.empty((n_rows, codes_per_row), dtype=code_type)
    tail = np.empty((n_rows, length - packed_length), dtype=np.uint8)
    rows_per_chunk = max(1, _PACK_CHUNK_BYTES // length)
    for first_row in range(0, n_rows, rows_per_chunk):
        part = read_rows(first_row, first_row + rows_per_chunk)
        if packed_length:
            main = np.ascontiguousarray(part[:, :packed_length])
            packed = _pack_bytes(main.reshape(-1), bits, low_bits_only).view(code_type)
            codes[first_row : first_row + rows_per_chunk] = packed.reshape(-1, codes_per_row)
        tail[first_row : first_row + rows_per_chunk] = part[:, packed_length:]
    index = np.empty(n_rows, dtype=np.intp)
    # Code-major tables: the flat index is code * n_states + state.
    flat_table = np.ascontiguousarray(block_table.T).reshape(-1)
    for column_codes in np.ascontiguousarray(codes.T):
        np.multiply(column_codes, n_states, out=index, dtype=np.intp)
        index += states
        np.take(flat_table, index, out=states)
    flat_single = np.ascontiguousarray(single.T).reshape(-1)
    column_mask = np.uint8((1 << bits) - 1)
    for column_symbols in np.ascontiguousarray(tail.T):
        np.multiply(column_symbols & column_mask, n_states, out=index, dtype=np.intp)
        index += states
        np.take(flat_single, index, out=states)
    return states.astype(np.int64)


def _run_packed_rows(dfa: DFA, grid: np.ndarray, lengths: np.ndarray) -> np.ndarray:
    """Packed runs of a padded integer grid (entries past a row's length are ignored).

    Equal lengths run in place; a few distinct lengths run as dense groups; otherwise the
    padding is overwritten with an extra "stay" column (the identity on states).
    """
    n_rows, max_len = grid.shape
    if n_rows == 0:
        return np.zeros(0, dtype=np.int64)
    shortest = int(lengths.min())
    if shortest == int(lengths.max()):
        return _run_packed(dfa.transitions, dfa.start, grid[:, :shortest])
    distinct = np.unique(lengths)
    if distinct.size <= 4:
        states = np.empty(n_rows, dtype=np.int64)
        for length in distinct.tolist():
            rows = np.flatnonzero(lengths == length)

            def read(first: int, stop: int, rows: np.ndarray = rows, length: int = length) -> np.ndarray:
                return grid[rows[first:stop], :length].astype(np.uint8, copy=False)

            states[rows] = _run_packed_chunks(dfa.transitions, dfa.start, rows.size, length, read)
        return states
    stay = dfa.n_symbols
    table = np.concatenate([dfa.transitions, np.arange(dfa.n_states, dtype=np.int64)[:, None]], axis=1)
    padded = grid.astype(np.uint8)
    np.copyto(padded, np.uint8(stay), where=np.arange(max_len)[None, :] >= lengths[:, None])
    return _run_packed(table, dfa.start, padded)


def _packed_path_applies(dfa: DFA) -> bool:
    return _packed_path_fits(dfa.n_states, dfa.n_symbols + 1)


def run_encoded(dfa: DFA, symbols: np.ndarray, lengths: np.ndarray) -> np.ndarray:
    """The state each encoded string reaches (int64 (n,)).

    Automata with at most 16,384 states and alphabets of at most 255 symbols take the packed
    path (`_run_packed`): symbols packed 1-8 bits each, one gather per 8-16 symbols over the
    whole batch. Others use `_run_blocked`. The Python loop runs once per block of positions,
    never once per string.
    """
    require_dfa(dfa, "run_encoded", "dfa")
    symbols = np.asarray(symbols)
    lengths = np.asarray(lengths, dtype=np.int64)
    if _packed_path_applies(dfa) and symbols.ndim == 2:
        # Entries past a row's length may hold anything; the packed path never reads them.
        return _run_packed_rows(dfa, symbols, lengths)
    return _run_blocked(dfa, symbols, lengths)


def _run_blocked(dfa: DFA, symbols: np.ndarray, lengths: np.ndarray) -> np.ndarray:
    """run_encoded for large automata or alphabets: a stay column for padding and block tables
    of as many symbols as keep the table small, one gather per block over the batch."""
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


def _indices_below(symbols: np.ndarray, bound: int) -> bool:
    """Whether every entry lies in 0..bound-1; one pass for integer arrays (read as unsigned,
    negative entries are huge, so the maximum alone decides)."""
    if symbols.dtype.kind == "i":
        symbols = symbols.view(symbols.dtype.str.replace("i", "u"))
    if symbols.dtype.kind == "u":
        return int(symbols.max()) < bound
    return int(symbols.min()) >= 0 and int(symbols.max()) < bound


def accepts_encoded(dfa: DFA, symbols: np.ndarray, lengths: np.ndarray) -> np.ndarray:
    """Membership of every encoded string (bool (n,)), vectorized across the batch.

    Symbol indices within each string's length must lie in 0..n_symbols-1 (a ValueError says
    otherwise); entries past the length are ignored, whatever padding value they hold.
    """
    require_dfa(dfa, "accepts_encoded", "dfa")
    symbols = np.asarray(symbols)
    lengths = np.asarray(lengths, dtype=np.int64)
    if symbols.size and not _indices_below(symbols, dfa.n_symbols):
        # Padding past a string's length may hold anything (e.g. a PAD id); only check inside.
        inside = symbols[np.arange(symbols.shape[1])[None, :] < lengths[:, None]]
        if inside.size and (int(inside.min()) < 0 or int(inside.max()) >= dfa.n_symbols):
            raise ValueError(f"symbol indices must lie in 0..{dfa.n_symbols - 1} for alphabet {dfa.alphabet}")
    return dfa.accepting[run_encoded(dfa, symbols, lengths)]


def accepts(dfa: DFA, strings: Sequence[Word]) -> np.ndarray:
    """Membership of every string (bool (n,)); see `encode_strings` for accepted forms."""
    require_dfa(dfa, "accepts", "dfa")
    if isinstance(strings, str):
        raise TypeError("accepts expects a sequence of strings, not one string")
    alphabet = dfa.alphabet
    compact = (
        len(strings) > 0
        and len(alphabet) < 255
        and _single_character(alphabet)
        and _all_plain_strings(strings)
    )
    if compact and _packed_path_applies(dfa):
        return dfa.accepting[_run_characters(dfa, list(strings))]
    if compact:
        # Same encoding as encode_strings but in uint8: a quarter of the memory traffic.
        symbols, lengths = _encode_characters(list(strings), alphabet, np.uint8)
    else:
        symbols, lengths = encode_strings(strings, alphabet)
    return dfa.accepting[run_encoded(dfa, symbols, lengths)]
