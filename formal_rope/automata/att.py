"""Loading OpenFst AT&T text acceptors (the MLRegTest `.att` format) as complete DFAs.

Format: `src dst in out [weight]` lines are transitions (an acceptor has in == out; the input
label is used; the 3-field acceptor form `src dst label` is read too), `state [weight]` lines are
final states. The initial state is the state the FIRST line names (its source state, or the state
of a final-state line), as OpenFst's `fstcompile` reads the format: it is not always state 0 (18
MLRegTest files start elsewhere, e.g. 04.04.Zp.3.1.6.att at state 2). Files describe partial DFAs;
missing transitions go to a rejecting sink. A weight of `inf` (the tropical semiring's zero) means
the arc or final state is absent; finite weights are kept (the language is the automaton's support).
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import numpy as np

from formal_rope.automata.dfa import DFA
from formal_rope.automata.ops import complete
from formal_rope.errors import FormalRopeError
from formal_rope.files import read_bounded_text

_EPSILON_LABELS = {"<eps>", "<epsilon>", "ε"}


def _state_id(field: str, path: Path, line_number: int) -> int:
    try:
        value = int(field)
    except ValueError:
        raise FormalRopeError(f"{path}:{line_number}: state {field!r} is not a non-negative integer") from None
    if value < 0:
        raise FormalRopeError(f"{path}:{line_number}: state {field!r} is not a non-negative integer")
    return value


def _present(field: str, path: Path, line_number: int) -> bool:
    """Whether a weighted line exists in the language: OpenFst's tropical/log weight `inf` is the
    semiring zero, i.e. no arc and no final state (reading it as present accepted strings the
    automaton rejects); any finite weight is kept (the language is the support)."""
    try:
        weight = float(field)
    except ValueError:
        raise FormalRopeError(f"{path}:{line_number}: weight {field!r} is not a number") from None
    if weight != weight or weight == float("-inf"):
        raise FormalRopeError(f"{path}:{line_number}: weight {field!r} is not a tropical weight (a number or inf)")
    return weight != float("inf")


def load_att(path: str | Path, alphabet: Sequence[str] | None = None) -> DFA:
    """The complete DFA described by an AT&T text file (not minimized). As `fstcompile` does, the
    first line's state is the start and is renumbered 0; the other states that occur follow in
    increasing order of their numbers.

    `alphabet` defaults to the labels used in the file, sorted; when given it fixes the symbol
    order and may add symbols the file never uses (they lead to the sink). Unreadable files,
    malformed lines, ε-labels and nondeterminism raise FormalRopeError naming the file and line.
    A file with no lines has no initial state (`fstcompile` makes it the FST without a start
    state): an error. A file of final-state lines only is read as `fstcompile` reads it (the first
    line's state is initial, so the language is {ε} or empty) but has no labels, so it needs an
    explicit `alphabet`.
    """
    path = Path(path)
    try:
        text = read_bounded_text(path, "MAX_TEXT_INPUT_BYTES", "the automaton file")
    except (OSError, UnicodeDecodeError) as error:
        raise FormalRopeError(f"cannot read automaton file {path}: {error}") from None
    arcs: list[tuple[int, int, str, int]] = []
    finals: set[int] = set()
    initial: int | None = None
    for line_number, line in enumerate(text.splitlines(), start=1):
        fields = line.split()
        if not fields:
            continue
        if len(fields) in (1, 2):
            state = _state_id(fields[0], path, line_number)
            if initial is None:
                initial = state
            if len(fields) == 1 or _present(fields[1], path, line_number):
                finals.add(state)
        elif len(fields) in (3, 4, 5):
            source = _state_id(fields[0], path, line_number)
            target = _state_id(fields[1], path, line_number)
            if initial is None:
                initial = source  # even when the arc itself is absent (weight inf), as fstcompile reads it
            # 3 fields: acceptor arc `src dst label`; 4-5: transducer arc `src dst in out [weight]`.
            label, output = fields[2], fields[3] if len(fields) > 3 else fields[2]
            if len(fields) == 5 and not _present(fields[4], path, line_number):
                continue  # weight inf: the arc is the semiring zero, i.e. absent
            if label in _EPSILON_LABELS:
                raise FormalRopeError(f"{path}:{line_number}: ε-transitions are not supported (label {label!r})")
            if output != label:
                raise FormalRopeError(
                    f"{path}:{line_number}: input label {label!r} differs from output label {output!r}; "
                    "only acceptors are supported"
                )
            arcs.append((source, target, label, line_number))
        else:
            raise FormalRopeError(
                f"{path}:{line_number}: expected 'src dst label', 'src dst in out [weight]' or 'state "
                f"[weight]', got {line.strip()!r}"
            )
    if initial is None:
        raise FormalRopeError(f"{path}: no states and so no initial state (empty automaton file)")
    used = sorted({label for _, _, label, _ in arcs})
    if alphabet is None:
        if not used:
            raise FormalRopeError(
                f"{path}: no transitions, so the file names no symbols; give the alphabet explicitly"
            )
        alphabet = tuple(used)
    else:
        alphabet = tuple(alphabet)
        unknown = [label for label in used if label not in set(alphabet)]
        if unknown:
            raise FormalRopeError(f"{path}: labels {unknown} are not in the alphabet {{{', '.join(alphabet)}}}")
    column_of = {symbol: index for index, symbol in enumerate(alphabet)}
    # State numbers are labels, not sizes: the initial state becomes row 0 (as fstcompile renumbers
    # it), the other states that occur follow in increasing order (the identity for the usual dense
    # files that start at 0), so that a file naming state 10^11 needs one row for it, not 10^11.
    others = finals | {state for source, target, _, _ in arcs for state in (source, target)}
    used = [initial, *sorted(others - {initial})]
    row_of = {state: row for row, state in enumerate(used)}
    table = np.full((len(used), len(alphabet)), -1, dtype=np.int64)
    for source, target, label, line_number in arcs:
        row, column = row_of[source], column_of[label]
        existing = table[row, column]
        if existing >= 0 and existing != row_of[target]:
            raise FormalRopeError(
                f"{path}:{line_number}: nondeterministic: state {source} already goes to {used[existing]} on {label!r}"
            )
        table[row, column] = row_of[target]
    accepting = np.zeros(len(used), dtype=bool)
    accepting[[row_of[state] for state in finals]] = True
    return complete(alphabet, table, accepting, start=0)  # row 0 is the first line's state
