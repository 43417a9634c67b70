"""Resolve what a user wrote after `--lang` into a `Language`: an expression, its kind, its AST and
its alphabet.

Accepted forms, tried in this order (SPEC §2):
  ltl:<formula>   re:<regex> (also regex:)   a path ending in .att (OpenFst text acceptor)
  a registry name (aa_star), or one of the paper's five languages verbatim ((aa)*, aΣ*, Σ*abΣ*, …)
  a bare expression: a formula when it contains a temporal application (P(, Y(, Y^k(, H(, a
  binary S, MOD_) -- a parse error with a caret if it does not parse as one -- or when it parses as
  a formula using P, H, Y, S or MOD; otherwise a regex.
Default alphabet: the symbols the expression mentions (sorted). A registry alphabet applies only to
a named entry or a verbatim paper language, and the note (`Language.detected`) says so. An explicit
alphabet overrides both and must contain every mentioned symbol.
"""

from __future__ import annotations

import difflib
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Sequence

from formal_rope.errors import ExpressionError, FormalRopeError
from formal_rope.files import read_bounded_text
from formal_rope.lang.analysis import needs_explicit_alphabet, symbols_of, uses_temporal_or_mod
from formal_rope.lang.ast import Formula, Regex
from formal_rope.lang.parser import (
    ParsedExpression,
    check_alphabet,
    parse_ltl_with_columns,
    parse_regex_with_columns,
    plus_union_columns,
)
from formal_rope.lang.printer import format_ltl, format_regex
from formal_rope.lang.registry import RegistryEntry, lookup, lookup_ast, registry_names

KINDS = ("ltl", "regex", "att")
READ_AS_LTL = "read as an LTL formula"
READ_AS_REGEX = "read as a regular expression"

_PREFIXES = {"ltl:": "ltl", "re:": "regex", "regex:": "regex"}
# Text that only makes sense in a formula: used to pick which error to show when neither parses.
_LTL_HINT = re.compile(r"MOD|->|<->|=>|[!¬→↔∧∨⊤⊥]|\btrue\b|\bfalse\b|(?<![\w'])[PYSH](?![\w'])")


@dataclass(frozen=True)
class Language:
    """A resolved language source. `ast` is None for .att automata."""

    spec: str
    kind: str  # 'ltl' | 'regex' | 'att'
    expression: str
    alphabet: tuple[str, ...]
    ast: Formula | Regex | None
    name: str | None = None
    path: str | None = None
    detected: str | None = None

    @property
    def label(self) -> str:
        """A short human/file-friendly label: the registry name, the file stem, or the expression."""
        if self.name:
            return self.name
        if self.path:
            return Path(self.path).stem
        return self.expression


def _split_outside_quotes(text: str, is_separator) -> list[str]:
    """Split at separator characters, except inside a quoted item ('a,b', "long name"): a quote
    opens only at the start of an item (so it's stays one item) and closes at the same quote."""
    items: list[str] = []
    current: list[str] = []
    quote = None
    for ch in text:
        if quote is not None:
            current.append(ch)
            quote = None if ch == quote else quote
        elif is_separator(ch):
            items.append("".join(current))
            current = []
        else:
            if ch in "'\"" and not "".join(current).strip():
                quote = ch
            current.append(ch)
    items.append("".join(current))
    return items


def same_alphabet(first: Sequence[str], second: Sequence[str]) -> bool:
    """Whether two alphabets hold the same symbols; their order does not change a language."""
    return set(first) == set(second)


def parse_alphabet(text: str | Sequence[str]) -> tuple[str, ...]:
    """'a,b' / 'a b' / 'ab' / ['a', 'b'] -> ('a', 'b'), order kept, duplicates dropped.

    Commas or blanks separate multi-character symbols; a quoted symbol ('long name', 'a,b') keeps its
    blanks and commas. Without separators each character is a symbol. An empty alphabet is an error."""
    if isinstance(text, str):
        raw = text.strip()
        if _split_outside_quotes(raw, lambda ch: ch == ",") != [raw]:
            items = [item.strip() for item in _split_outside_quotes(raw, lambda ch: ch == ",")]
        elif _split_outside_quotes(raw, str.isspace) != [raw]:
            items = [item for item in _split_outside_quotes(raw, str.isspace) if item]
        elif len(raw) >= 2 and raw[0] == raw[-1] and raw[0] in "'\"":
            items = [raw]
        else:
            items = list(raw)
        items = [item[1:-1] if len(item) >= 2 and item[0] == item[-1] and item[0] in "'\"" else item for item in items]
        items = [item for item in items if item]
    else:
        items = [str(item) for item in text]
        if any(not item for item in items):
            raise FormalRopeError("the alphabet contains an empty symbol")
    alphabet = tuple(dict.fromkeys(items))
    if not alphabet:
        raise FormalRopeError(f"the alphabet {text!r} is empty; give at least one symbol, e.g. --alphabet ab")
    return alphabet


def att_alphabet(path: str | Path, required: bool = True) -> tuple[str, ...]:
    """The input labels of an OpenFst text acceptor (lines 'src dst in [out [weight]]'), sorted.

    A file without transitions raises (its alphabet is unknown) unless `required` is False, when
    it gives () -- for callers that have an explicit alphabet.
    """
    labels: set[str] = set()
    path = Path(path)
    try:
        text = read_bounded_text(path, "MAX_TEXT_INPUT_BYTES", "the automaton file")
    except (OSError, UnicodeDecodeError) as error:
        raise FormalRopeError(f"cannot read automaton file {path}: {error}") from None
    for number, line in enumerate(text.splitlines(), start=1):
        fields = line.split()
        if len(fields) >= 3 and len(fields) <= 5:
            labels.add(fields[2])
        elif len(fields) > 5:
            raise FormalRopeError(
                f"{path}:{number}: expected 'src dst in [out [weight]]' or a final state, got {line!r}"
            )
    if not labels and required:
        raise FormalRopeError(f"{path} has no transitions, so its alphabet is unknown; "
                              "pass the alphabet (--alphabet / alphabet=)")
    return tuple(sorted(labels))


def _finish(
    spec: str,
    kind: str,
    expression: str,
    parsed: ParsedExpression,
    alphabet: tuple[str, ...] | None,
    entry: RegistryEntry | None,
    detected: str | None,
) -> Language:
    ast = parsed.ast
    if kind == "regex" and entry is None:
        union_note = _plus_union_note(expression, ast)
        if union_note:
            detected = (detected or READ_AS_REGEX) + union_note
    if alphabet is None:
        if entry is not None:  # a named entry or a verbatim paper language: its fixed alphabet
            alphabet = entry.alphabet
        else:
            mentioned = symbols_of(ast)
            if needs_explicit_alphabet(ast) or not mentioned:
                what = "formula" if kind == "ltl" else "regular expression"
                reason = (
                    "mentions no symbols"
                    if not mentioned
                    else f"mentions only {mentioned[0]!r} but refers to other symbols "
                    + (
                        "(through negation, ->, <->, H or true)"
                        if kind == "ltl"
                        else "(through Σ, ., [^..] or complement)"
                    )
                )
                raise ExpressionError(
                    expression,
                    f"the {what} {reason}, so its alphabet cannot be inferred",
                    None,
                    "an explicit alphabet, e.g. --alphabet ab",
                )
            alphabet = mentioned
    check_alphabet(expression, parsed, alphabet)
    if entry is None or not same_alphabet(alphabet, entry.alphabet):
        # Not a registry alphabet, but the expression over its alphabet may still *be* a registry
        # language (a.* over {a, b}); say so, which changes nothing about the language.
        entry = lookup_ast(kind, ast, alphabet)
        if entry is not None and detected is not None:
            detected += f"; same as registry language {entry.name} over {{{', '.join(entry.alphabet)}}}"
    name = entry.name if entry is not None else None
    return Language(spec, kind, expression, tuple(alphabet), ast, name, None, detected)


def _parse_kind(kind: str, text: str) -> ParsedExpression:
    return parse_ltl_with_columns(text) if kind == "ltl" else parse_regex_with_columns(text)


def _from_entry(spec: str, entry: RegistryEntry, alphabet: tuple[str, ...] | None, force_kind: str | None) -> Language:
    if force_kind is not None and entry.kind != force_kind:
        wanted = "an LTL formula" if force_kind == "ltl" else "a regular expression"
        raise FormalRopeError(
            f"{spec!r} is the registry language {entry.name} ({entry.kind}: "
            f"{entry.expression}); {wanted} is needed here"
        )
    note = (
        f"registry language {entry.name}: {entry.expression} over the registry's alphabet "
        f"{{{', '.join(entry.alphabet)}}} (--alphabet gives another)"
    )
    if alphabet is not None and not same_alphabet(alphabet, entry.alphabet):
        note = (
            f"registry expression {entry.expression} ({entry.name} uses {{{', '.join(entry.alphabet)}}}),"
            f" here over the given alphabet {{{', '.join(alphabet)}}}"
        )
        # The same expression over this alphabet may be another registry language: name it.
        twin = lookup_ast(entry.kind, entry.ast, alphabet)
        if twin is not None and same_alphabet(alphabet, twin.alphabet):
            note += f", which is registry language {twin.name}"
            entry = twin
    return _finish(spec, entry.kind, entry.expression, _parse_kind(entry.kind, entry.expression), alphabet, entry, note)


def _regex_reading_hints(text: str, ltl_error: ExpressionError | None) -> str:
    """Extra words for the stderr note when a bare text was probably not meant as a regex."""
    hints = []
    if ltl_error is not None and "future-time" in ltl_error.message:
        hints.append(ltl_error.message.split(";")[0] + ", so this is not a formula")
    if re.fullmatch(r"[A-Za-z0-9_]{3,}", text):
        close = difflib.get_close_matches(text, registry_names(), n=1, cutoff=0.75)
        if close:
            hints.append(f"not a registry name; did you mean {close[0]}?")
    return "".join(f" ({hint})" for hint in hints)


_QUOTED = re.compile(r"'[^'\n]*'|\"[^\"\n]*\"")
# Temporal applications that make a bare expression a formula (SPEC §2); matched on the text with
# quoted names blanked out, so a symbol 'P' or "MOD_x" never counts.
_APPLICATION = re.compile(r"MOD\s*(?:_|\(|[₀-₉])|[PH]\s*\(|Y\s*(?:\^\s*\{?\s*\d+\s*\}?|[⁰¹²³⁴-⁹]+)?\s*\(")


def _is_operand_end(char: str) -> bool:
    return (char.isalnum() and char not in "εΣ∅") or char in ")⊤⊥'\""


def _is_operand_start(char: str) -> bool:
    return (char.isalnum() and char not in "εΣ∅") or char in "(!~¬⊤⊥'\""


def temporal_application(text: str) -> tuple[str, int] | None:
    """(what, 1-based column) of the first temporal application in `text` -- `P(`, `H(`, `Y(`,
    `Y^k(`, `MOD_`/`MOD(`, or an `S` between two operands -- outside quoted names; None if none."""
    masked = _QUOTED.sub(lambda match: "q" * len(match.group()), text)
    found = [(match.start(), "".join(match.group().split())) for match in _APPLICATION.finditer(masked)]
    for index, char in enumerate(masked):
        if char != "S":
            continue
        before, after = masked[:index].rstrip(), masked[index + 1 :].lstrip()
        if before and after and _is_operand_end(before[-1]) and _is_operand_start(after[0]):
            found.append((index, "a binary S"))
            break
    if not found:
        return None
    position, what = min(found)
    return what, position + 1


def _detect(text: str) -> tuple[str, ParsedExpression, str]:
    """Bare expression (SPEC §2): a formula if it contains a temporal application (then it must
    parse as one), otherwise a regex -- also when the text would parse as a formula through the
    `P φ` spelling (`Pa`, `HI`), which only `ltl:` selects; the stderr note then says so."""
    ltl_error: ExpressionError | None = None
    try:
        parsed_ltl = parse_ltl_with_columns(text)
    except ExpressionError as error:
        ltl_error, parsed_ltl = error, None
    application = temporal_application(text)
    if application is not None and parsed_ltl is not None:
        return "ltl", parsed_ltl, ""
    if application is not None:
        what, column = application
        raise ExpressionError(
            ltl_error.expression,
            ltl_error.message
            + f" (read as a formula because of {what!r} at column {column}; write "
            f"re:{text.strip()} to read it as a regex)",
            ltl_error.column,
            ltl_error.expected,
        ) from None
    try:
        parsed_regex = parse_regex_with_columns(text)
    except ExpressionError as regex_error:
        if re.fullmatch(r"[A-Za-z0-9_]{3,}", text):
            close = difflib.get_close_matches(text, registry_names(), n=3, cutoff=0.6)
            if close:
                raise FormalRopeError(
                    f"{text!r} is not a registry language; did you mean {' or '.join(close)}?"
                    " (formalrope languages lists them)"
                ) from None
        if parsed_ltl is not None:
            raise ExpressionError(
                regex_error.expression,
                regex_error.message
                + f" (as an LTL formula it parses but uses no P, H, Y, S or MOD, so it was read as a regex;"
                f" write ltl:{text.strip()} to use it as a formula)",
                regex_error.column,
                regex_error.expected,
            ) from None
        assert ltl_error is not None
        ltl_progress = getattr(ltl_error, "progress", 0)
        regex_progress = getattr(regex_error, "progress", 0)
        if ltl_progress > regex_progress or (ltl_progress == regex_progress and _LTL_HINT.search(text)):
            raise ltl_error from None
        raise
    hints = _regex_reading_hints(text, ltl_error)
    if parsed_ltl is not None and uses_temporal_or_mod(parsed_ltl.ast):
        hints += (f" (it would also parse as the formula {format_ltl(parsed_ltl.ast)}, but has no temporal "
                  f"application such as P(...); write ltl:{text.strip()} to read it as that formula)")
    return "regex", parsed_regex, hints


def _plus_union_note(expression: str, ast: Regex) -> str:
    """A hint when the expression uses '+' between operands, which is union here (SPEC: a+b = a|b)
    and one-or-more in Python's `re`: the same text would be another language there."""
    if not plus_union_columns(expression):
        return ""
    return (f" ('+' between operands is union here: {expression.strip()} = {format_regex(ast, 'ascii')}, not Python's "
            "one-or-more; write (r+) for one or more r, e.g. (a+)b)")


def resolve_language(spec: str, alphabet: Sequence[str] | str | None = None, force_kind: str | None = None) -> Language:
    """Turn a --lang value into a Language (see the module docstring for the accepted forms).

    force_kind='ltl' always reads a formula (the 'ltl:' prefix is optional); 'regex' likewise.
    `Language.detected` is the note the CLI prints on stderr: how a bare expression was read, and
    which registry entry and alphabet were used when one applies."""
    if force_kind not in (None, "ltl", "regex"):
        raise ValueError(f"force_kind must be None, 'ltl' or 'regex', got {force_kind!r}")
    explicit = parse_alphabet(alphabet) if alphabet is not None else None
    text = spec.strip()
    if not text:
        raise FormalRopeError(
            "empty language; give a registry name, an expression, ltl:<formula>, re:<regex> or a .att file"
        )

    for prefix, kind in _PREFIXES.items():
        if text.lower().startswith(prefix):
            if force_kind is not None and kind != force_kind:
                raise FormalRopeError(f"{spec!r} is a {kind} source, but an {force_kind} expression is needed here")
            expression = text[len(prefix) :].strip()
            entry = lookup(expression, explicit)
            if entry is not None and entry.kind == kind and entry.name != expression:  # re:(aa)*, not re:aa_star
                return _from_entry(spec, entry, explicit, force_kind)
            return _finish(spec, kind, expression, _parse_kind(kind, expression), explicit, None, None)

    if text.lower().endswith(".att") or (force_kind is None and "/" in text and Path(text).is_file()):
        if force_kind is not None:
            raise FormalRopeError(f"{spec!r} is an automaton file; an {force_kind} expression is needed here")
        return _from_att(spec, text, explicit)

    entry = lookup(text, explicit)
    if entry is not None and (force_kind is None or entry.kind == force_kind or entry.name == text):
        return _from_entry(spec, entry, explicit, force_kind)

    if force_kind is not None:
        return _finish(spec, force_kind, text, _parse_kind(force_kind, text), explicit, None, None)

    kind, parsed, hints = _detect(text)
    detected = (READ_AS_LTL if kind == "ltl" else READ_AS_REGEX) + hints
    return _finish(spec, kind, text, parsed, explicit, None, detected)


# The project's root (data/ lives there): a relative automaton path that names one of the project's
# files (data/mlregtest/..., as atlas results store them) means that file from any working directory.
PROJECT_ROOT = Path(__file__).resolve().parents[2]


class AutomatonNotFoundError(FormalRopeError):
    """A .att path that names no file: neither where the command runs nor in the project."""


def automaton_path(text: str) -> Path:
    """The file a written .att path names: absolute or relative to the working directory, else (for a
    relative path the working directory lacks) relative to the project root, so a stored run means the
    same language wherever it is read. FormalRopeError when neither holds the file, or when both hold
    different files of that name (the answer would depend on where the command runs)."""
    path = Path(text).expanduser()
    project = PROJECT_ROOT / path if not path.is_absolute() else None
    in_project = project is not None and project.is_file()
    if path.is_file():
        if in_project and path.resolve() != project.resolve() and path.read_bytes() != project.read_bytes():
            raise FormalRopeError(
                f"automaton file {text!r} is ambiguous: {path.resolve()} (in the working directory) and {project} "
                "(in the project) differ; give an absolute path"
            )
        return path
    if in_project:
        return project
    problem = "is not a file" if path.exists() else "not found"
    where = "" if path.is_absolute() else f" (looked in the working directory and in {PROJECT_ROOT})"
    raise AutomatonNotFoundError(f"automaton file {text!r} {problem}{where}")


def _from_att(spec: str, text: str, explicit: tuple[str, ...] | None) -> Language:
    path = automaton_path(text)
    labels = att_alphabet(path, required=explicit is None)
    if explicit is not None:
        missing = [label for label in labels if label not in explicit]
        if missing:
            raise FormalRopeError(
                f"{path} reads {', '.join(missing)}, which the alphabet {{{', '.join(explicit)}}} does not contain"
            )
        alphabet = explicit
    else:
        alphabet = labels
    return Language(spec, "att", str(path), alphabet, None, path.stem, str(path), None)


def resolve_formula_first(spec: str, alphabet: Sequence[str] | str | None = None) -> Language:
    """A language for commands that read formulas first (`compile`, `formula`): the text as an LTL
    formula when it is one (so `a & b` stays the formula it always was there), otherwise any
    language source: a regex, a registry name, a `.att` file (`resolve_language`)."""
    try:
        return resolve_language(spec, alphabet, force_kind="ltl")
    except FormalRopeError:
        pass  # not a formula: resolve it like any --lang, whose error (if any) explains the reading
    return resolve_language(spec, alphabet)


def stored_language(language: Language) -> str:
    """The spelling of a language to record in a model file, readable from any working directory:
    a .att file outside the project by its absolute path, everything else as written."""
    if language.kind == "att" and language.path is not None:
        path = Path(language.path).resolve()
        try:
            return str(path.relative_to(PROJECT_ROOT))
        except ValueError:
            return str(path)
    return language.spec
