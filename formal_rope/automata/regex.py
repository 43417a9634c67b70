"""Regular expression AST -> minimal DFA, compositionally.

Every subexpression becomes a minimal complete DFA over the whole alphabet. Symbol sets (a
symbol, Σ, [abc], [^ab]) are 3-state automata; union, intersection and complement are products
and flips of the accepting vector (ops.py); concatenation and star go through an ε-free NFA
glued from the operands' DFAs and a subset construction. Minimizing after every step keeps the
intermediate automata small, and every construction checks `max_states` while it explores, so a
blow-up is refused early with TooManyStatesError instead of exhausting memory.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from formal_rope.automata.dfa import DFA
from formal_rope.automata.ops import (
    DEFAULT_MAX_STATES,
    check_state_limit,
    complement,
    empty_language,
    minimize,
    product,
)
from formal_rope.errors import FormalRopeError
from formal_rope.lang.ast import (
    AnySymbol,
    CharClass,
    Complement,
    Concat,
    EmptySet,
    Epsilon,
    Intersect,
    Optional_,
    Plus,
    Regex,
    Repeat,
    Star,
    Symbol,
    Union_,
)
from formal_rope.lang.ast import children as ast_children


def regex_to_dfa(regex: Regex, alphabet: Sequence[str], max_states: int = DEFAULT_MAX_STATES) -> DFA:
    """The minimal complete DFA of the regex's language over `alphabet`.

    Negated classes [^ab] and Σ are relative to `alphabet`; complement is relative to Σ*.
    """
    return _Builder(tuple(alphabet), max_states).build(regex)


class _Builder:
    def __init__(self, alphabet: tuple[str, ...], max_states: int):
        self.alphabet = alphabet
        self.max_states = max_states
        self.cache: dict[Regex, DFA] = {}

    def build(self, node: Regex) -> DFA:
        # Iterative post-order so that long concatenation chains do not hit the recursion limit.
        stack: list[tuple[Regex, bool]] = [(node, False)]
        while stack:
            current, expanded = stack.pop()
            if current in self.cache:
                continue
            children = ast_children(current)
            if expanded or not children:
                self.cache[current] = self._combine(current)
                continue
            stack.append((current, True))
            stack.extend((child, False) for child in children if child not in self.cache)
        return self.cache[node]

    # ---------------------------------------------------------------------------------
    def _combine(self, node: Regex) -> DFA:
        alphabet, limit = self.alphabet, self.max_states
        if isinstance(node, Symbol):
            return self._symbol_set({self._known(node.symbol)})
        if isinstance(node, AnySymbol):
            return self._symbol_set(set(alphabet))
        if isinstance(node, CharClass):
            listed = {self._known(symbol) for symbol in node.symbols}
            return self._symbol_set(set(alphabet) - listed if node.negated else listed)
        if isinstance(node, Epsilon):
            return _epsilon(alphabet)
        if isinstance(node, EmptySet):
            return empty_language(alphabet)
        if isinstance(node, Concat):
            return concatenate(self.cache[node.left], self.cache[node.right], limit)
        if isinstance(node, Union_):
            return minimize(product(self.cache[node.left], self.cache[node.right], "or", limit))
        if isinstance(node, Intersect):
            return minimize(product(self.cache[node.left], self.cache[node.right], "and", limit))
        if isinstance(node, Complement):
            return complement(self.cache[node.child])
        if isinstance(node, Star):
            return kleene_star(self.cache[node.child], limit)
        if isinstance(node, Plus):
            child = self.cache[node.child]
            return concatenate(child, kleene_star(child, limit), limit)
        if isinstance(node, Optional_):
            return minimize(product(self.cache[node.child], _epsilon(alphabet), "or", limit))
        if isinstance(node, Repeat):
            return repeat(self.cache[node.child], node.low, node.high, limit)
        raise FormalRopeError(f"error: not a regular expression node: {node!r}")

    def _known(self, symbol: str) -> str:
        if symbol not in self.alphabet:
            raise FormalRopeError(
                f"error: the expression mentions symbol {symbol!r}, which is not in the alphabet {{{', '.join(self.alphabet)}}}"
            )
        return symbol

    def _symbol_set(self, symbols: set[str]) -> DFA:
        """start --s--> accept for s in `symbols`; everything else to a sink (then minimized)."""
        hit = np.array([symbol in symbols for symbol in self.alphabet], dtype=bool)
        transitions = np.full((3, len(self.alphabet)), 2, dtype=np.int64)
        transitions[0, hit] = 1
        return minimize(DFA(self.alphabet, transitions, 0, np.array([False, True, False])))


def _epsilon(alphabet: tuple[str, ...]) -> DFA:
    if not alphabet:  # no symbol leads to the sink: ε is all of Σ* = {ε}
        return DFA(alphabet, np.zeros((1, 0), dtype=np.int64), 0, np.array([True]))
    transitions = np.ones((2, len(alphabet)), dtype=np.int64)
    return DFA(alphabet, transitions, 0, np.array([True, False]))


# ------------------------------------------------------------- NFA glue + subset construction
def _live_states(successors: list[list[int]], accepting_bits: int, n_states: int) -> int:
    """Bitset of NFA states from which an accepting state is reachable."""
    predecessors: list[set[int]] = [set() for _ in range(n_states)]
    for column in successors:
        for source, targets in enumerate(column):
            bits = targets
            while bits:
                low = bits & -bits
                predecessors[low.bit_length() - 1].add(source)
                bits ^= low
    live = accepting_bits
    stack = [q for q in range(n_states) if accepting_bits >> q & 1]
    while stack:
        for source in predecessors[stack.pop()]:
            if not live >> source & 1:
                live |= 1 << source
                stack.append(source)
    return live


def _determinize(
    alphabet: tuple[str, ...],
    successors: list[list[int]],
    start_bits: int,
    accepting_bits: int,
    n_states: int,
    max_states: int,
) -> DFA:
    """Subset construction of an ε-free NFA given as per-symbol successor bitsets.

    NFA states that cannot reach acceptance are dropped from every subset first: they do not
    change the language, and keeping them would split equivalent subsets before minimization.
    """
    live = _live_states(successors, accepting_bits, n_states)
    successors = [[targets & live for targets in column] for column in successors]
    start_bits &= live
    index_of = {start_bits: 0}
    subsets = [start_bits]
    rows: list[list[int]] = []
    position = 0
    while position < len(subsets):
        subset = subsets[position]
        position += 1
        members = []
        bits = subset
        while bits:
            low = bits & -bits
            members.append(low.bit_length() - 1)
            bits ^= low
        row = []
        for column in successors:
            target = 0
            for member in members:
                target |= column[member]
            known = index_of.get(target)
            if known is None:
                known = len(subsets)
                index_of[target] = known
                subsets.append(target)
                check_state_limit(len(subsets), max_states, "the expression's automaton")
            row.append(known)
        rows.append(row)
    accepting = np.array([bool(subset & accepting_bits) for subset in subsets], dtype=bool)
    transitions = np.array(rows, dtype=np.int64).reshape(len(subsets), len(alphabet))
    return minimize(DFA(alphabet, transitions, 0, accepting))


def _bits(states: np.ndarray) -> int:
    total = 0
    for state in np.flatnonzero(states):
        total |= 1 << int(state)
    return total


def concatenate(a: DFA, b: DFA, max_states: int = DEFAULT_MAX_STATES) -> DFA:
    """Minimal DFA of L(a)·L(b) (same alphabet).

    NFA: a's states then b's (shifted by n_a); reading into an accepting state of a may also
    jump to b's start (the ε-move folded into the symbol step).
    """
    n_a = a.n_states
    b_start = 1 << (n_a + b.start)
    successors = []
    for column in range(a.n_symbols):
        targets = [
            (1 << int(t)) | (b_start if a.accepting[t] else 0) for t in a.transitions[:, column]
        ] + [1 << (n_a + int(t)) for t in b.transitions[:, column]]
        successors.append(targets)
    start_bits = (1 << a.start) | (b_start if a.accepting[a.start] else 0)
    accepting_bits = _bits(b.accepting) << n_a
    return _determinize(a.alphabet, successors, start_bits, accepting_bits, n_a + b.n_states, max_states)


def kleene_star(a: DFA, max_states: int = DEFAULT_MAX_STATES) -> DFA:
    """Minimal DFA of L(a)*.

    NFA: a's states plus a fresh accepting start n_a behaving like a's start; reading into an
    accepting state may also restart at a's start.
    """
    n_a = a.n_states
    restart = 1 << a.start
    successors = []
    for column in range(a.n_symbols):
        targets = [(1 << int(t)) | (restart if a.accepting[t] else 0) for t in a.transitions[:, column]]
        targets.append(targets[a.start])
        successors.append(targets)
    accepting_bits = _bits(a.accepting) | (1 << n_a)
    return _determinize(a.alphabet, successors, 1 << n_a, accepting_bits, n_a + 1, max_states)


def repeat(a: DFA, low: int, high: int | None, max_states: int = DEFAULT_MAX_STATES) -> DFA:
    """Minimal DFA of L(a){low,high} (high None: unbounded)."""
    if low < 0 or (high is not None and high < low):
        raise FormalRopeError(f"error: invalid repetition {{{low},{'' if high is None else high}}}: need 0 <= low <= high")
    epsilon = _epsilon(a.alphabet)
    head = power(a, low, max_states)
    if high is None:
        return concatenate(head, kleene_star(a, max_states), max_states)
    optional = minimize(product(a, epsilon, "or", max_states))
    return concatenate(head, power(optional, high - low, max_states), max_states)


def power(a: DFA, exponent: int, max_states: int = DEFAULT_MAX_STATES) -> DFA:
    """Minimal DFA of L(a)^exponent by repeated squaring (O(log exponent) concatenations)."""
    result = _epsilon(a.alphabet)
    base = a
    while exponent:
        if exponent & 1:
            result = concatenate(result, base, max_states)
        exponent >>= 1
        if exponent:
            base = concatenate(base, base, max_states)
    return result
