"""Vectorized membership (blocked tables, padding, compact dtypes) vs a per-string walk."""

from __future__ import annotations

import re

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from formal_rope.automata import DFA, accepts, accepts_encoded, encode_strings, run_encoded
from formal_rope.errors import FormalRopeError

ALPHABETS = [("a", "b"), ("b", "a"), ("0", "1", "2"), ("x", "a"), ("α", "β", "γ"), ("a",), tuple("abcdefghijklmnop")]


@st.composite
def dfa_and_words(draw):
    alphabet = draw(st.sampled_from(ALPHABETS))
    n_states = draw(st.integers(1, 40))
    table = np.array(
        draw(
            st.lists(st.integers(0, n_states - 1), min_size=n_states * len(alphabet), max_size=n_states * len(alphabet))
        )
    ).reshape(n_states, len(alphabet))
    accepting = np.array(draw(st.lists(st.booleans(), min_size=n_states, max_size=n_states)))
    dfa = DFA(alphabet, table, draw(st.integers(0, n_states - 1)), accepting)
    words = draw(st.lists(st.lists(st.sampled_from(alphabet), max_size=40).map("".join), min_size=1, max_size=20))
    return dfa, words


def walk(dfa: DFA, word: str) -> bool:
    index = dfa.symbol_index()
    return bool(dfa.accepting[dfa.run([index[c] for c in word])])


@given(dfa_and_words())
def test_accepts_matches_walk(case):
    dfa, words = case
    expected = [walk(dfa, w) for w in words]
    assert accepts(dfa, words).tolist() == expected
    symbols, lengths = encode_strings(words, dfa.alphabet)
    assert accepts_encoded(dfa, symbols, lengths).tolist() == expected
    # Other integer dtypes and sequences of symbols give the same answer.
    assert accepts_encoded(dfa, symbols.astype(np.int16), lengths).tolist() == expected
    assert accepts(dfa, [list(w) for w in words]).tolist() == expected


def test_large_alphabet_and_many_states():
    rng = np.random.default_rng(1)
    alphabet = tuple(f"s{i}" for i in range(300))
    dfa = DFA(alphabet, rng.integers(0, 5000, (5000, 300)), 0, rng.random(5000) < 0.5)
    words = [" ".join(rng.choice(alphabet, size=k)) for k in (0, 1, 7, 33)]
    expected = []
    for word in words:
        index = dfa.symbol_index()
        expected.append(bool(dfa.accepting[dfa.run([index[s] for s in word.split()])]))
    assert accepts(dfa, words).tolist() == expected


def test_run_encoded_returns_states():
    dfa = DFA(("a",), np.array([[1], [2], [0]]), 0, np.array([True, False, False]))
    symbols, lengths = encode_strings(["a" * k for k in range(9)], ("a",))
    assert run_encoded(dfa, symbols, lengths).tolist() == [k % 3 for k in range(9)]


def test_empty_batch_and_empty_strings():
    dfa = DFA(("a",), np.array([[0]]), 0, np.array([True]))
    assert accepts(dfa, []).shape == (0,)
    assert accepts(dfa, ["", ""]).tolist() == [True, True]
    with pytest.raises(TypeError):
        accepts(dfa, "a")


@pytest.mark.parametrize(
    "alphabet, text, symbol, column", [(("a", "b"), "ab`", "`", 3), (("b", "c"), "bca", "a", 3), (("α",), "αx", "x", 2)]
)
def test_unknown_characters_are_found_on_every_path(alphabet, text, symbol, column):
    dfa = DFA(alphabet, np.zeros((1, len(alphabet)), dtype=np.int64), 0, np.array([True]))
    with pytest.raises(FormalRopeError, match=f"{symbol!r} at column {column}"):
        accepts(dfa, [alphabet[0], text])
    with pytest.raises(FormalRopeError, match=f"{symbol!r} at column {column}"):
        encode_strings([alphabet[0], text], alphabet)


def test_accepts_encoded_rejects_out_of_range_indices():
    dfa = DFA(("a", "b"), np.zeros((1, 2), dtype=np.int64), 0, np.array([True]))
    with pytest.raises(ValueError, match="0..1"):
        accepts_encoded(dfa, np.array([[0, 2]]), np.array([2]))


def test_padding_value_past_length_is_ignored():
    dfa = DFA(("a", "b"), np.array([[1, 0], [1, 1]]), 0, np.array([False, True]))
    symbols = np.array([[1, -1, -1], [0, 7, 7], [1, 1, 0]])
    assert accepts_encoded(dfa, symbols, np.array([1, 1, 3])).tolist() == [False, True, True]


# ------------------------------------------------------------------ packed path vs blocked
from formal_rope.automata.membership import _run_blocked  # noqa: E402


@pytest.mark.parametrize("n_symbols", [1, 2, 3, 4, 5, 16, 17, 200])
@pytest.mark.parametrize("n_states", [1, 3, 9, 70, 300])
def test_packed_runs_match_blocked_runs(n_symbols, n_states):
    rng = np.random.default_rng(n_symbols * 1000 + n_states)
    dfa = DFA(
        tuple(f"s{i}" for i in range(n_symbols)), rng.integers(0, n_states, (n_states, n_symbols)),
        int(rng.integers(n_states)), rng.random(n_states) < 0.5,
    )
    # Equal lengths (16-bit codes plus a tail), a few lengths (dense groups), many (stay column).
    for lengths in ([53] * 40, [0, 17, 17, 64, 5] * 6, list(range(45))):
        lengths = np.array(lengths)
        symbols = rng.integers(0, n_symbols, (lengths.size, int(lengths.max())))
        symbols[np.arange(symbols.shape[1])[None, :] >= lengths[:, None]] = -1  # garbage padding
        expected = _run_blocked(dfa, symbols, lengths)
        assert run_encoded(dfa, symbols, lengths).tolist() == expected.tolist()
        assert run_encoded(dfa, symbols.astype(np.int16), lengths).tolist() == expected.tolist()
    walked = [dfa.run(row[:k]) for row, k in zip(symbols, lengths)]
    assert expected.tolist() == walked


@pytest.mark.parametrize("alphabet", [("0", "1"), ("b", "a"), ("a", "b", "c"), tuple("abcdefghij"), ("a",), (" ", "!")])
def test_character_batches_of_long_equal_strings(alphabet):
    rng = np.random.default_rng(len(alphabet))
    dfa = DFA(alphabet, rng.integers(0, 5, (5, len(alphabet))), 0, np.array([True, False, True, False, False]))
    for lengths in ([301] * 700, [300, 301] * 350, [5, 0, 31, 130] * 100):
        words = ["".join(rng.choice(alphabet, size=k)) for k in lengths]
        expected = [walk(dfa, w) for w in words[:60]]
        verdicts = accepts(dfa, words)
        assert verdicts[:60].tolist() == expected
        symbols, encoded_lengths = encode_strings(words, alphabet)
        assert accepts_encoded(dfa, symbols, encoded_lengths).tolist() == verdicts.tolist()


@pytest.mark.parametrize("stranger, column", [("\x00", 7), ("c", 300), ("`", 1), ("é", 150), ("\x7f", 2)])
def test_strangers_in_long_equal_strings_are_named(stranger, column):
    dfa = DFA(("a", "b"), np.zeros((1, 2), dtype=np.int64), 0, np.array([True]))
    words = ["ab" * 150] * 900
    bad = list(words[613])
    bad[column - 1] = stranger
    words[613] = "".join(bad)
    with pytest.raises(FormalRopeError, match=re.escape(f"{stranger!r} at column {column}")):
        accepts(dfa, words)


@pytest.mark.parametrize(
    "text, symbols",
    [
        ("'long name' b", ["long name", "b"]),
        ('"long name"  b  \'long name\'', ["long name", "b", "long name"]),
        ("b it's", ["b", "it's"]),
        ("", []),
    ],
)
def test_quoted_symbols_in_strings_read_as_in_expressions(text, symbols):
    from formal_rope.automata.membership import format_word, split_symbols

    alphabet = ("long name", "b", "it's")
    assert split_symbols(text, alphabet) == symbols
    assert split_symbols(format_word(symbols, alphabet), alphabet) == symbols


@pytest.mark.parametrize("text, column", [("b 'long name", 3), ("'long name'b", 1)])
def test_unterminated_or_glued_quotes_are_user_errors_with_a_column(text, column):
    from formal_rope.automata.membership import split_symbols

    with pytest.raises(FormalRopeError, match=f"column {column} of"):
        split_symbols(text, ("long name", "b"))
