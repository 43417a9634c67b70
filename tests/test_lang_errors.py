"""Bad input becomes an ExpressionError with the right column, a named problem and expected words;
random junk never escapes as another exception type."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from formal_rope.errors import ExpressionError
from formal_rope.lang import parse_ltl, parse_regex


def _error(parse, text, alphabet=None) -> ExpressionError:
    with pytest.raises(ExpressionError) as info:
        parse(text, alphabet)
    return info.value


@pytest.mark.parametrize(
    "parse, text, column, message_part, expected_part",
    [
        (parse_ltl, "(a&b", 1, "never closed", "')'"),
        (parse_ltl, "P((a)", 2, "never closed", "')'"),
        (parse_ltl, "a)", 2, "no matching '('", "remove"),
        (parse_ltl, "a ?? b", 3, "unexpected character '?'", "an operator"),
        (parse_ltl, "a b", 3, "unexpected 'b'", "an operator"),
        (parse_ltl, "a &", 4, "ends too early", "a formula"),
        (parse_ltl, "a & & b", 5, "unexpected '&'", "a formula"),
        (parse_ltl, "MOD_0^1", 5, "modulus m >= 1", "m >= 1"),
        (parse_ltl, "MOD(0,0)", 5, "modulus m >= 1", "m >= 1"),
        (parse_ltl, "MOD_2^2", 7, "0 <= r < m", "0..1"),
        (parse_ltl, "P(a) & MOD_{3}^{5}", 17, "0 <= r < m", "0..2"),
        (parse_ltl, "Y^0(a)", 3, "k >= 1", "k >= 1"),
        (parse_ltl, "b & Y^{0}(a)", 8, "k >= 1", "k >= 1"),
        (parse_ltl, "MOD_", 5, "ends too early", "a whole number"),
        (parse_ltl, "a S", 4, "ends too early", "a formula"),
        (parse_ltl, "a # b", 3, "unexpected character '#'", "an operator"),
        (parse_ltl, "F(a)", 1, "future-time operator", "an operator"),
        (parse_ltl, "a U b", 3, "future-time operator", "an operator"),
        (parse_ltl, "P(a) & X b", 8, "future-time operator", "an operator"),
        (parse_regex, "a{3,2}", 2, "upper bound below", "n <= m"),
        (parse_regex, "(ab", 1, "never closed", "')'"),
        (parse_regex, "ab)", 3, "no matching '('", "remove"),
        (parse_regex, "a ! b", 3, "unexpected character '!'", "postfix operator"),
        (parse_regex, "*a", 1, "unexpected '*'", "a regular expression"),
        (parse_regex, "a|", 3, "ends too early", "a regular expression"),
        (parse_regex, "[ab", 4, "ends too early", "']'"),
        (parse_regex, "[d-a]", 2, "empty range", "x <= y"),
        # A range missing its upper end names the range at its '-', not "a regular expression".
        (parse_regex, "[a-]", 3, "incomplete range a-", "ending the range"),
        (parse_regex, "[a-", 3, "incomplete range a-", "ending the range"),
        (parse_regex, "[xa-'b']", 4, "incomplete range a-", "quote it"),
        (parse_regex, "a{", 3, "ends too early", "a whole number"),
    ],
)
def test_error_names_problem_column_and_expectation(parse, text, column, message_part, expected_part):
    error = _error(parse, text)
    assert error.column == column
    assert message_part in error.message
    assert expected_part in (error.expected or "")
    rendered = error.render()
    # The caret sits under the offending column of the echoed expression.
    echo_line, caret_line = rendered.splitlines()[1:3]
    offset = echo_line.index(text)
    assert caret_line.index("^") == offset + column - 1


def test_symbol_outside_alphabet_points_at_its_first_use():
    error = _error(parse_regex, "ab(cb)*c", ("a", "b"))
    assert error.column == 4 and "'c'" in error.message and "{a, b}" in error.message
    error = _error(parse_ltl, "P(a) & Y('long name')", ["a"])
    assert error.column == 10 and "'long name'" in error.message
    error = _error(parse_regex, "[ax]b", ("a", "b"))
    assert error.column == 3


def test_class_symbols_and_quoted_symbols_count_for_the_alphabet():
    assert parse_regex("[ab]'xy'", ("a", "b", "xy")) is not None
    with pytest.raises(ExpressionError):
        parse_regex("[^ab]", ("a",))


def test_empty_alphabet_and_empty_expression():
    assert "alphabet is empty" in _error(parse_regex, "a", ()).message
    assert "empty formula" in _error(parse_ltl, "   ").message
    assert "empty regular expression" in _error(parse_regex, "").message


def test_non_string_input_is_a_type_error():
    with pytest.raises(TypeError):
        parse_ltl(None)  # type: ignore[arg-type]


JUNK = st.text(alphabet="ab()|&*+?!~^{}[],.-_0123SPYHMODΣε∅→¬'x ", max_size=24)


@given(JUNK)
def test_random_ltl_text_parses_or_raises_expression_error_with_valid_column(text):
    try:
        parse_ltl(text)
    except ExpressionError as error:
        assert error.column is None or 1 <= error.column <= len(text) + 1
        assert error.message


@given(JUNK)
def test_random_regex_text_parses_or_raises_expression_error_with_valid_column(text):
    try:
        parse_regex(text)
    except ExpressionError as error:
        assert error.column is None or 1 <= error.column <= len(text) + 1
        assert error.message
