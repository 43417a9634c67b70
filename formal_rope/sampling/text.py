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
