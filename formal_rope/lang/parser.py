"""Parse LTL[P,Y,S,MOD] formulas and regular expressions into the ASTs of `formal_rope.lang.ast`.

The grammars live in the repository's top-level `grammars/` folder (`ltl.lark`, `regex.lark`) and
are compiled once per process into LALR parsers with Lark's contextual lexer. Every failure, syntax
or semantic, becomes an `ExpressionError` that names the problem, points at a 1-based column and
says in words what was expected there.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Sequence

from lark import Lark, Token, Transformer_NonRecursive
from lark.exceptions import UnexpectedCharacters, UnexpectedEOF, UnexpectedInput, UnexpectedToken, VisitError

from formal_rope.errors import ExpressionError
from formal_rope.lang.ast import (
    And,
    AnySymbol,
    Atom,
    CharClass,
    Complement,
    Concat,
    Const,
    EmptySet,
    Epsilon,
    Formula,
    Historically,
    Iff,
    Implies,
    Intersect,
    Mod,
    Not,
    Optional_,
    Or,
    Past,
    Plus,
    Regex,
    Repeat,
    Since,
    Star,
    Symbol,
    Union_,
    Yesterday,
)

# The grammars live in the checkout's top-level grammars/ folder; an installed wheel may instead
# carry them inside the package (formal_rope/grammars/), which is tried second.
GRAMMAR_DIRS = (Path(__file__).resolve().parents[2] / "grammars", Path(__file__).resolve().parents[1] / "grammars")
GRAMMAR_DIR = GRAMMAR_DIRS[0]

# Character classes wider than this are almost certainly a typo ([a-Z], [0-z]).
MAX_CLASS_RANGE = 256

_SUPERSCRIPT_DIGITS = str.maketrans("⁰¹²³⁴⁵⁶⁷⁸⁹", "0123456789")
_SUBSCRIPT_DIGITS = str.maketrans("₀₁₂₃₄₅₆₇₈₉", "0123456789")


@functools.lru_cache(maxsize=None)
def grammar_parser(language: str) -> Lark:
    """The compiled LALR parser for 'ltl' or 'regex' (built once per process)."""
    for folder in GRAMMAR_DIRS:
        path = folder / f"{language}.lark"
        if path.is_file():
            return Lark(path.read_text(encoding="utf-8"), parser="lalr", lexer="contextual", start="start")
    raise FileNotFoundError(
        f"grammar {language}.lark not found in " + " or ".join(str(folder) for folder in GRAMMAR_DIRS)
    )


@dataclass(frozen=True)
class ParsedExpression:
    """An AST together with where each symbol first occurs (1-based columns), for error carets."""

    ast: Formula | Regex
    symbol_columns: dict[str, int]


# ------------------------------------------------------------------------------------ semantics
class _SemanticError(Exception):
    """Raised inside tree callbacks; converted to ExpressionError once the text is known."""

    def __init__(self, message: str, column: int | None, expected: str | None = None):
        super().__init__(message)
        self.message = message
        self.column = column
        self.expected = expected


def _unquote(token: Token) -> str:
    return str(token)[1:-1]


def _int(token: Token) -> int:
    return int(str(token))


class _Builder(Transformer_NonRecursive):
    """Shared bookkeeping: remembers the first column of every symbol."""

    def __init__(self) -> None:
        super().__init__()
        self.symbol_columns: dict[str, int] = {}

    def _see(self, symbol: str, token: Token) -> str:
        self.symbol_columns.setdefault(symbol, token.column)
        return symbol

    def group(self, children):
        return children[1]


class _LtlBuilder(_Builder):
    # Definitions are transformed in text order (the transformer walks the tree left to right,
    # children before parents), so each @name is known by the time a later one reads it, and every
    # reference is the same object: the formula stays a DAG however often a definition is used.
    def __init__(self) -> None:
        super().__init__()
        self.definitions: dict[str, Formula] = {}

    def start(self, children):
        return children[-1]

    def definition(self, children):
        name, body = str(children[0]), children[2]
        if name in self.definitions:
            raise _SemanticError(f"{name} is defined twice", children[0].column, "a new name for this definition")
        self.definitions[name] = body
        return None

    def ref(self, children):
        token = children[0]
        name = str(token)
        if name not in self.definitions:
            known = ", ".join(self.definitions) or "none so far"
            raise _SemanticError(f"{name} is not defined before this use (definitions: {known})", token.column,
                                 f"a name defined earlier with '{name} := formula;'")
        return self.definitions[name]

    def atom(self, children):
        return Atom(self._see(str(children[0]), children[0]))

    def quoted_atom(self, children):
        return Atom(self._see(_unquote(children[0]), children[0]))

    def true(self, _children):
        return Const(True)

    def false(self, _children):
        return Const(False)

    def not_(self, children):
        return Not(children[1])

    def past(self, children):
        return Past(children[1])

    def historically(self, children):
        return Historically(children[1])

    def yesterday(self, children):
        # children: Y | Y ^ count | Y SUPERSCRIPT ; returns (k, column of k)
        if len(children) == 1:
            return (1, children[0].column)
        if len(children) == 2:
            token = children[1]
            return (int(str(token).translate(_SUPERSCRIPT_DIGITS)), token.column)
        return children[2]

    def yesterday_apply(self, children):
        k, column = children[0]
        if k < 1:
            raise _SemanticError(f"Y^{k} needs k >= 1 (Y^k looks k positions back)", column, "a whole number k >= 1")
        return Yesterday(children[1], k)

    def count(self, children):
        token = children[0] if len(children) == 1 else children[1]
        return (_int(token), token.column)

    def mod(self, children):
        if len(children) == 1:  # MOD₂⁰
            token = children[0]
            text = str(token)[3:]
            split = next(i for i, ch in enumerate(text) if ch not in "₀₁₂₃₄₅₆₇₈₉")
            m = int(text[:split].translate(_SUBSCRIPT_DIGITS))
            r = int(text[split:].translate(_SUPERSCRIPT_DIGITS))
            m_column = r_column = token.column
        elif len(children) == 5 and isinstance(children[2], tuple):  # MOD _ count ^ count
            (m, m_column), (r, r_column) = children[2], children[4]
        else:  # MOD ( INT , INT )
            m, m_column = _int(children[2]), children[2].column
            r, r_column = _int(children[4]), children[4].column
        if m < 1:
            raise _SemanticError(f"MOD_{m}^{r} needs a modulus m >= 1", m_column, "a modulus m >= 1")
        if r >= m:
            raise _SemanticError(
                f"MOD_{m}^{r} needs a residue 0 <= r < m (write MOD_{m}^{r % m})", r_column,
                f"a residue r in 0..{m - 1}",
            )
        return Mod(m, r)

    def and_(self, children):
        return And(children[0], children[2])

    def or_(self, children):
        return Or(children[0], children[2])

    def implies(self, children):
        return Implies(children[0], children[2])

    def iff(self, children):
        return Iff(children[0], children[2])

    def since(self, children):
        return Since(children[0], children[2])


class _RegexBuilder(_Builder):
    def symbol(self, children):
        return Symbol(self._see(str(children[0]), children[0]))

    def quoted_symbol(self, children):
        return Symbol(self._see(_unquote(children[0]), children[0]))

    def epsilon(self, _children):
        return Epsilon()

    def epsilon_parens(self, _children):
        return Epsilon()

    def empty_set(self, _children):
        return EmptySet()

    def any_symbol(self, _children):
        return AnySymbol()

    def char_class(self, children):
        items = children[1:-1]
        if not items:  # [] is the ASCII spelling of the empty set
            return EmptySet()
        return CharClass(_merge_class_items(items), False)

    def negated_class(self, children):
        return CharClass(_merge_class_items(children[2:-1]), True)

    def class_symbol(self, children):
        return [self._see(str(children[0]), children[0])]

    def class_quoted(self, children):
        return [self._see(_unquote(children[0]), children[0])]

    def class_range(self, children):
        low, high = children[0], children[2]
        if ord(str(low)) > ord(str(high)):
            raise _SemanticError(
                f"empty range {low}-{high} in a character class", low.column, "a range x-y with x <= y"
            )
        if ord(str(high)) - ord(str(low)) >= MAX_CLASS_RANGE:
            raise _SemanticError(
                f"range {low}-{high} spans more than {MAX_CLASS_RANGE} characters", low.column,
                "a small range such as a-z or 0-9",
            )
        symbols = [chr(code) for code in range(ord(str(low)), ord(str(high)) + 1)]
        # Only letters and digits can be symbols; a range like 9-A skips the punctuation between.
        return [self._see(symbol, low) for symbol in symbols if symbol.isalnum() and symbol not in "εΣ"]

    def star(self, children):
        return Star(children[0])

    def plus(self, children):
        return Plus(children[0])

    def optional(self, children):
        return Optional_(children[0])

    def exact(self, children):
        n = _int(children[0])
        return (n, n)

    def between(self, children):
        return (_int(children[0]), _int(children[2]))

    def at_least(self, children):
        return (_int(children[0]), None)

    def at_most(self, children):
        return (0, _int(children[1]))

    def repeat(self, children):
        child, brace, (low, high) = children[0], children[1], children[2]
        if high is not None and high < low:
            raise _SemanticError(
                f"repetition {{{low},{high}}} has its upper bound below its lower bound", brace.column,
                "{n,m} with n <= m",
            )
        return Repeat(child, low, high)

    def complement(self, children):
        return Complement(children[1])

    def complement_suffix(self, children):
        return Complement(children[0])

    def concat(self, children):
        return Concat(children[0], children[1])

    def union(self, children):
        return Union_(children[0], children[2])

    def intersect(self, children):
        return Intersect(children[0], children[2])


def _merge_class_items(items: list[list[str]]) -> tuple[str, ...]:
    """Class members in the order written, duplicates dropped."""
    return tuple(dict.fromkeys(symbol for item in items for symbol in item))


# ------------------------------------------------------------------------------- error words
_LTL_OPERAND = {"ATOM", "QUOTED", "TRUE", "FALSE", "NOT", "PAST", "HIST", "YESTERDAY", "MOD", "MOD_SCRIPT", "LPAR",
                "REF"}
_LTL_BINARY = {"AND": "&", "OR": "|", "IMPLIES": "->", "IFF": "<->", "SINCE": "S"}
_REGEX_OPERAND = {"SYMBOL", "QUOTED", "EPSILON", "EMPTYSET", "ANY", "LPAR", "LBRACKET", "COMPLEMENT"}
_REGEX_POSTFIX = {"STAR": "*", "PLUS": "+", "QMARK": "?", "LBRACE": "{n,m}", "COMPLEMENT_SUFFIX": "^c"}
_REGEX_BINARY = {"UNION": "|", "INTERSECT": "&"}
_SINGLE = {
    "RPAR": "')'",
    "RBRACE": "'}'",
    "RBRACKET": "']'",
    "CARET": "'^'",
    "UNDERSCORE": "'_'",
    "COMMA": "','",
    "SEMI": "';' (ending a definition)",
    "DEFINE": "':=' (a definition @name := formula;)",
    "DASH": "'-'",
    "INT": "a whole number",
    "SUPERSCRIPT": "superscript digits",
    "$END": "the end of the expression",
}


_RANGE_END = "a letter or digit ending the range (as in a-z or 0-9); to make '-' a class member, quote it: [a'-']"


def _incomplete_range(language: str, text: str, position: int, expected: set[str]) -> ExpressionError | None:
    """`[a-]`, `[a-`: the parser can only take a range's upper end, so say that, at the '-'."""
    if language != "regex" or expected != {"SYMBOL"}:
        return None
    dash = text.rfind("-", 0, position)
    if dash < 0:
        return None
    low = text[:dash].rstrip()[-1:]
    return ExpressionError(
        text, f"incomplete range {low}- in a character class: '-' must be followed by the range's last symbol",
        dash + 1, _RANGE_END,
    )


def describe_expected(language: str, names: set[str] | frozenset[str]) -> str:
    """Lark terminal names -> a short human phrase ("a formula (...) or ')'")."""
    names = set(names)
    phrases: list[str] = []
    if language == "ltl":
        if names & _LTL_OPERAND:
            phrases.append("a formula (an atom, 'quoted atom', true, false, MOD_m^r, '(' or one of ! P H Y)")
        binary = [symbol for name, symbol in _LTL_BINARY.items() if name in names]
        if binary:
            phrases.append("an operator (" + " ".join(binary) + ")")
        if "LBRACE" in names:
            phrases.append("'{'")
    else:
        if names == {"SYMBOL"}:  # only after the '-' of a class range: nothing else can follow it
            return _RANGE_END
        if "CARET" in names and "RBRACKET" in names:  # just after '['
            phrases.append("a class member (a symbol, a range a-z, or ^ to negate)")
            names -= {"SYMBOL", "QUOTED", "CARET"}
        elif "RBRACKET" in names and "SYMBOL" in names:
            phrases.append("a class member (a symbol or a range a-z)")
            names -= {"SYMBOL", "QUOTED"}
        if names & _REGEX_OPERAND:
            phrases.append("a regular expression (a symbol, 'quoted name', ε, ∅, Σ or ., '(', '[' or ~)")
        postfix = [symbol for name, symbol in _REGEX_POSTFIX.items() if name in names]
        if postfix:
            phrases.append("a postfix operator (" + " ".join(postfix) + ")")
        binary = [symbol for name, symbol in _REGEX_BINARY.items() if name in names]
        if binary:
            phrases.append("an operator (" + " ".join(binary) + ")")
    for name, words in _SINGLE.items():
        if name in names and not (language == "regex" and name == "CARET" and "RBRACKET" in names):
            phrases.append(words)
    phrases = list(dict.fromkeys(phrases))
    if not phrases:
        return ", ".join(sorted(names)) or "nothing more"
    if len(phrases) == 1:
        return phrases[0]
    return ", ".join(phrases[:-1]) + " or " + phrases[-1]


def _open_paren_columns(text: str, end: int) -> list[int]:
    """1-based columns of '(' left open in text[:end] (quoted names skipped)."""
    stack: list[int] = []
    quote: str | None = None
    for index, char in enumerate(text[:end]):
        if quote:
            if char == quote:
                quote = None
        elif char in "'\"":
            quote = char
        elif char == "(":
            stack.append(index + 1)
        elif char == ")" and stack:
            stack.pop()
    return stack


def _acceptable(error: UnexpectedInput, fallback: set[str]) -> set[str]:
    """Terminals the parser would accept at the error (exact, unlike LALR's merged lookaheads)."""
    interactive = getattr(error, "interactive_parser", None)
    if interactive is not None:
        try:
            return set(interactive.accepts())
        except Exception:  # pragma: no cover - fall back to Lark's own (coarser) set
            pass
    return set(fallback)


_FUTURE_OPERATORS = frozenset("FGXUWR")


def _future_operator(language: str, text: str, token: Token, position: int) -> tuple[str, int] | None:
    """('F', column) for F(a), X a or a U b: the user wrote future-time LTL, which is not supported."""
    if language != "ltl":
        return None
    if token.type == "ATOM" and str(token) in _FUTURE_OPERATORS:
        return str(token), token.column
    if token.type in _LTL_OPERAND:
        before = text[:position].rstrip()
        if before and before[-1] in _FUTURE_OPERATORS and (len(before) == 1 or not before[-2].isalnum()):
            return before[-1], len(before)
    return None


def _syntax_error(language: str, text: str, error: UnexpectedInput) -> ExpressionError:
    what = "formula" if language == "ltl" else "regular expression"
    if isinstance(error, UnexpectedCharacters):
        column = error.column
        char = text[error.pos_in_stream] if 0 <= error.pos_in_stream < len(text) else error.char
        result = ExpressionError(
            text, f"unexpected character {char!r} in the {what}", column,
            describe_expected(language, _acceptable(error, error.allowed or set())),
        )
        result.progress = error.pos_in_stream
        return result
    if isinstance(error, UnexpectedEOF) or (isinstance(error, UnexpectedToken) and error.token.type == "$END"):
        expected = _acceptable(error, set(error.expected or ()))
        open_columns = _open_paren_columns(text, len(text))
        incomplete = _incomplete_range(language, text, len(text), expected)
        if incomplete is not None:
            result = incomplete
        elif "RPAR" in expected and open_columns:
            result = ExpressionError(
                text,
                f"unbalanced parentheses: '(' at column {open_columns[-1]} is never closed",
                open_columns[-1],
                "')' before the end of the expression",
            )
        else:
            stripped = text.rstrip()
            if not stripped:
                message = f"empty {what}"
            else:
                message = f"the {what} ends too early, after {stripped[-1]!r}"
            result = ExpressionError(text, message, len(stripped) + 1, describe_expected(language, expected))
        result.progress = len(text)
        return result
    assert isinstance(error, UnexpectedToken)
    token = error.token
    column = token.column
    position = token.start_pos if token.start_pos is not None else column - 1
    future = _future_operator(language, text, token, position)
    incomplete = _incomplete_range(language, text, position, _acceptable(error, set(error.expected)))
    if incomplete is not None:
        incomplete.progress = position
        return incomplete
    if token.type == "RPAR" and not _open_paren_columns(text, position):
        message = "unbalanced parentheses: this ')' has no matching '('"
        expected = "an operator or the end of the expression (remove the ')' or add a '(' before it)"
    elif future is not None:
        letter, column = future
        message = (
            f"{letter} looks like a future-time operator; formulas here are past-time LTL"
            f" (P, H, Y, S and MOD; quote a symbol named like an operator: '{letter}')"
        )
        expected = describe_expected(language, _acceptable(error, set(error.expected)))
    else:
        message = f"unexpected {str(token)!r} in the {what}"
        expected = describe_expected(language, _acceptable(error, set(error.expected)))
    result = ExpressionError(text, message, column, expected)
    result.progress = position
    return result


def _parse(language: str, text: str, builder_factory: Callable[[], _Builder]) -> ParsedExpression:
    if not isinstance(text, str):
        raise TypeError(f"expected an expression string, got {type(text).__name__}")
    what = "formula" if language == "ltl" else "regular expression"
    if not text.strip():
        error = ExpressionError(text, f"empty {what}", None, "a " + what)
        error.progress = 0
        raise error
    try:
        tree = grammar_parser(language).parse(text)
    except UnexpectedInput as error:
        raise _syntax_error(language, text, error) from None
    builder = builder_factory()
    try:
        ast = builder.transform(tree)
    except VisitError as error:
        original = error.orig_exc
        if isinstance(original, _SemanticError):
            failure = ExpressionError(text, original.message, original.column, original.expected)
            failure.progress = len(text)
            raise failure from None
        raise
    return ParsedExpression(ast, dict(builder.symbol_columns))


def parse_ltl_with_columns(text: str) -> ParsedExpression:
    """Parse a formula, also returning the first column of each atom."""
    return _parse("ltl", text, _LtlBuilder)


def parse_regex_with_columns(text: str) -> ParsedExpression:
    """Parse a regular expression, also returning the first column of each symbol."""
    return _parse("regex", text, _RegexBuilder)


def plus_union_columns(text: str) -> tuple[int, ...]:
    """1-based columns of each '+' a regular expression reads as union (`a+b*` = a|b*), where Python's
    `re` would read one-or-more; () for an expression that does not parse or uses '+' only as a postfix."""
    if "+" not in text:
        return ()
    try:
        tree = grammar_parser("regex").parse(text)
    except UnexpectedInput:
        return ()
    # An explicit stack: lark's scan_values recurses once per level and a long concatenation is a
    # tree thousands of levels deep.
    columns, pending = [], [tree]
    while pending:
        for child in pending.pop().children:
            if isinstance(child, Token):
                if child.type == "UNION" and child == "+":
                    columns.append(child.column)
            elif hasattr(child, "children"):
                pending.append(child)
    return tuple(sorted(columns))


def check_alphabet(text: str, parsed: ParsedExpression, alphabet: Sequence[str]) -> None:
    """Every symbol the expression mentions must be in the alphabet (caret at the first offender)."""
    alphabet = tuple(alphabet)
    if not alphabet:
        raise ExpressionError(text, "the alphabet is empty", None, "at least one symbol in the alphabet")
    allowed = set(alphabet)
    outside = [(column, symbol) for symbol, column in parsed.symbol_columns.items() if symbol not in allowed]
    if outside:
        column, symbol = min(outside)
        shown = "{" + ", ".join(alphabet) + "}"
        raise ExpressionError(
            text, f"symbol {symbol!r} is not in the alphabet {shown}", column,
            "a symbol of the alphabet: " + ", ".join(alphabet),
        )


def parse_ltl(text: str, alphabet: Sequence[str] | None = None) -> Formula:
    """Parse an LTL[P,Y,S,MOD] formula; with an alphabet, every atom must belong to it."""
    parsed = parse_ltl_with_columns(text)
    if alphabet is not None:
        check_alphabet(text, parsed, alphabet)
    return parsed.ast  # type: ignore[return-value]


def parse_regex(text: str, alphabet: Sequence[str] | None = None) -> Regex:
    """Parse a regular expression; with an alphabet, every symbol must belong to it."""
    parsed = parse_regex_with_columns(text)
    if alphabet is not None:
        check_alphabet(text, parsed, alphabet)
    return parsed.ast  # type: ignore[return-value]
