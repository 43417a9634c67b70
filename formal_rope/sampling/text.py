"""Text at the edges: symbol-index arrays <-> strings.

Single-character alphabets (the common case) map to plain concatenation ("abba"). When any symbol is
longer than one character, symbols are separated by single spaces, and a symbol containing a blank
(or starting with a quote) is quoted as in expressions ('long name'), so the text can be split back
unambiguously: this is the syntax `formalrope accepts` reads (`automata.membership.split_symbols`).
"""

from __future__ import annotations

from typing import Sequence

import numpy as np

from formal_rope.automata.membership import encode_strings, format_word, symbol_token
from formal_rope.sampling.walker import PAD


def _single_characters(alphabet: Sequence[str]) -> bool:
    return all(len(symbol) == 1 and symbol != "\x00" for symbol in alphabet)


def decode(symbols: np.ndarray, alphabet: Sequence[str], lengths: np.ndarray | None = None) -> list[str]:
    """Rows of symbol indices -> strings. Positions holding PAD (or at/after `lengths[i]`) are dropped."""
    symbols = np.asarray(symbols, dtype=np.int64)
    if symbols.ndim != 2:
        raise ValueError(f"symbols must be 2-D (n, width), got shape {symbols.shape}")
    n_rows, width = symbols.shape
    present = symbols != PAD
    if lengths is not None:
        present &= np.arange(width)[None, :] < np.asarray(lengths)[:, None]
    if _single_characters(alphabet):
        # Pad with NUL and view each row as one fixed-width unicode string: numpy strips trailing
        # NULs, and PAD only ever appears after a string's end.
        table = np.array(list(alphabet) + ["\x00"], dtype="<U1")
        characters = table[np.where(present, symbols, len(alphabet))]
        if width == 0:
            return [""] * n_rows
        return np.ascontiguousarray(characters).view(f"<U{width}").ravel().tolist()
    if all(len(symbol) == 1 for symbol in alphabet):  # e.g. NUL among the symbols: still concatenated
        names = np.array(list(alphabet), dtype=object)
        return [format_word(names[row[mask]], alphabet) for row, mask in zip(symbols, present)]
    # Each symbol's written form once, not once per occurrence.
    tokens = np.array([symbol_token(symbol) for symbol in alphabet], dtype=object)
    return [" ".join(tokens[row[mask]]) for row, mask in zip(symbols, present)]


def encode(texts: Sequence[str], alphabet: Sequence[str]) -> tuple[np.ndarray, np.ndarray]:
    """Strings -> (symbols (n, max_len) int64 padded with PAD, lengths (n,) int64); inverse of decode.

    Tokenisation and unknown-symbol errors (FormalRopeError naming the symbol and its column) come
    from `formal_rope.automata.encode_strings`; only the padding value differs (PAD instead of 0)."""
    symbols, lengths = encode_strings(list(texts), alphabet)
    symbols[np.arange(symbols.shape[1])[None, :] >= lengths[:, None]] = PAD
    return symbols, lengths


# ---------------------------------------------------------------------------------- strings shown
# One rule for every place a string is displayed (terminal, Markdown, the results page): in full
# when it fits, else run-length compressed ('b^39 a b'), else cut with a visible mark that says how
# much is left out. A cut that hides the end of a string can flip what it means: 'b^39 a b' (a
# positive) cut to 40 characters read 'bbb…ba'.
SHOWN_LIMIT = 80  # characters a displayed string may take before it is compressed or cut
EMPTY_STRING = "ε"
CUT_MARK = "…"
COMPRESS_FROM = 16  # shorter strings are shown as they are ('aaaa', not 'a^4')


def _symbols_of(text: str) -> list[str]:
    """A string's symbols: characters, or space-separated names when the text is spaced (alphabets
    with a multi-character symbol, as `decode` writes them)."""
    return text.split(" ") if " " in text else list(text)


def _runs(symbols: list[str]) -> list[tuple[str, int]]:
    runs: list[tuple[str, int]] = []
    for symbol in symbols:
        if runs and runs[-1][0] == symbol:
            runs[-1] = (symbol, runs[-1][1] + 1)
        else:
            runs.append((symbol, 1))
    return runs


def _run_token(symbol: str, count: int) -> str:
    return symbol if count == 1 else f"{symbol}^{count}"


def run_length(text: str) -> str:
    """The run-length form of a string: maximal runs of one symbol as `s^n`, single symbols as
    themselves, separated by spaces ('bbbab' -> 'b^3 a b'); ε for the empty string.
    `expand_run_length` inverts it."""
    if not text:
        return EMPTY_STRING
    return " ".join(_run_token(symbol, count) for symbol, count in _runs(_symbols_of(text)))


def expand_run_length(form: str) -> str:
    """The string a `run_length` form stands for. Symbols are concatenated when each is a single
    character, else joined with spaces (the spaced text `decode` writes for longer symbols; a spaced
    text all of whose symbols are single characters cannot occur there)."""
    if form == EMPTY_STRING:
        return ""
    symbols: list[str] = []
    for token in form.split(" "):
        symbol, caret, count = token.rpartition("^")
        if caret and count.isdigit() and symbol:
            symbols.extend([symbol] * int(count))
        else:
            symbols.append(token)
    return "".join(symbols) if all(len(symbol) == 1 for symbol in symbols) else " ".join(symbols)


def shown_string(text: str, limit: int = SHOWN_LIMIT) -> str:
    """How a string is displayed: its run-length form where that is at most half as long (and the
    string longer than COMPRESS_FROM: 'b^39 a b', not 41 characters to count), else in full if it
    takes at most `limit` characters, else the run-length form if that fits, else the shorter of
    the two cut at a symbol boundary and marked: '<start> … (+N of L symbols not shown)'. ε for the
    empty string. Never cut without the mark."""
    if not text:
        return EMPTY_STRING
    compressed = run_length(text)
    if len(text) > COMPRESS_FROM and 2 * len(compressed) <= len(text) and len(compressed) <= limit:
        return compressed
    if len(text) <= limit:
        return text
    if len(compressed) <= limit:
        return compressed
    spaced = " " in text
    total = len(_symbols_of(text))
    if len(compressed) < len(text) or spaced:
        pieces = [(_run_token(symbol, count), count) for symbol, count in _runs(_symbols_of(text))]
        separator = " "
    else:
        pieces = [(symbol, 1) for symbol in text]
        separator = ""
    kept, shown_symbols, width = [], 0, 0
    budget = max(1, limit - len(f" {CUT_MARK} (+{total} of {total} symbols not shown)"))
    for piece, count in pieces:
        extra = len(piece) + (len(separator) if kept else 0)
        if kept and width + extra > budget:
            break
        kept.append(piece)
        shown_symbols += count
        width += extra
    return f"{separator.join(kept)} {CUT_MARK} (+{total - shown_symbols} of {total} symbols not shown)"
