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
from itertools import chain

import numpy as np

from formal_rope.automata.dfa import DFA, require_dfa
from formal_rope.automata.ops import (
    DEFAULT_MAX_STATES,
    TooManyStatesError,
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
        # Balanced chain steps by (operator, id(left), id(right)). Equal operands share one DFA
        # through `cache`, so the many equal pairs of a chain such as ab|abab|ababab… are built
        # once. Every DFA named in a key stays referenced (cache or a value here): ids stay valid.
        self.joined: dict[tuple[type, int, int], DFA] = {}

    def build(self, node: Regex) -> DFA:
        # Iterative post-order so that long concatenation chains do not hit the recursion limit.
        # A chain of one associative operator (abcd… = ((ab)c)d…, a|b|c…, a&b&c…) is one step
        # whose operands are combined as a balanced tree: n symbols cost O(n log n) automaton
        # work instead of the O(n²) of growing the left operand one symbol at a time.
        stack: list[tuple[Regex, bool]] = [(node, False)]
        while stack:
            current, expanded = stack.pop()
            if current in self.cache:
                continue
            operands = _chain_operands(current)
            if expanded or not operands:
                self.cache[current] = self._combine(current, operands)
                continue
            stack.append((current, True))
            stack.extend((operand, False) for operand in operands if operand not in self.cache)
        return self.cache[node]

    # ---------------------------------------------------------------------------------
    def _combine(self, node: Regex, operands: tuple[Regex, ...]) -> DFA:
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
        if isinstance(node, (Concat, Union_, Intersect)):
            layer = [self.cache[operand] for operand in operands]
            while len(layer) > 1:  # pairwise, keeping the order (concatenation is not commutative)
                paired = [self._join(type(node), layer[i], layer[i + 1]) for i in range(0, len(layer) - 1, 2)]
                layer = paired + layer[len(layer) - len(layer) % 2 :]
            return layer[0]
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
        raise FormalRopeError(f"not a regular expression node: {node!r}")

    def _join(self, kind: type, left: DFA, right: DFA) -> DFA:
        key = (kind, id(left), id(right))
        if key not in self.joined:
            if kind is Concat:
                self.joined[key] = concatenate(left, right, self.max_states)
            else:
                how = "or" if kind is Union_ else "and"
                self.joined[key] = minimize(product(left, right, how, self.max_states))
        return self.joined[key]

    def _known(self, symbol: str) -> str:
        if symbol not in self.alphabet:
            raise FormalRopeError(
                f"the expression mentions symbol {symbol!r}, which is not in the alphabet "
                f"{{{', '.join(self.alphabet)}}}"
            )
        return symbol

    def _symbol_set(self, symbols: set[str]) -> DFA:
        """start --s--> accept for s in `symbols`; everything else to a sink (then minimized)."""
        hit = np.array([symbol in symbols for symbol in self.alphabet], dtype=bool)
        transitions = np.full((3, len(self.alphabet)), 2, dtype=np.int64)
        transitions[0, hit] = 1
        return minimize(DFA(self.alphabet, transitions, 0, np.array([False, True, False])))


def _chain_operands(node: Regex) -> tuple[Regex, ...]:
    """The operands, left to right, of the maximal chain of node's operator below node (for
    Concat, Union_ and Intersect, which are associative); the children of any other node."""
    kind = type(node)
    if kind not in (Concat, Union_, Intersect):
        return ast_children(node)
    operands = []
    pending = [node]
    while pending:
        current = pending.pop()
        if type(current) is kind:
            pending += [current.right, current.left]
        else:
            operands.append(current)
    return tuple(operands)


def _epsilon(alphabet: tuple[str, ...]) -> DFA:
    if not alphabet:  # no symbol leads to the sink: ε is all of Σ* = {ε}
        return DFA(alphabet, np.zeros((1, 0), dtype=np.int64), 0, np.array([True]))
    transitions = np.ones((2, len(alphabet)), dtype=np.int64)
    return DFA(alphabet, transitions, 0, np.array([True, False]))


# ------------------------------------------------------------- NFA glue + subset construction
# The glued NFAs are given as per-symbol successor lists: successors[column][state] is the tuple of
# NFA states reached from `state` on that symbol. Subsets of large NFAs are frozensets, so memory
# grows with the subset sizes, not with the NFA's size (a bitset per subset costs n bits: n² bits
# for the chain automata of a{n}, gigabytes at n = 10⁵).


def _live_states(successors: list[list[tuple[int, ...]]], accepting: list[bool], n_states: int) -> list[bool]:
    """Which NFA states can reach an accepting state."""
    predecessors: list[list[int]] = [[] for _ in range(n_states)]
    for column in successors:
        for source, targets in enumerate(column):
            for target in targets:
                predecessors[target].append(source)
    live = list(accepting)
    stack = [state for state in range(n_states) if accepting[state]]
    while stack:
        for source in predecessors[stack.pop()]:
            if not live[source]:
                live[source] = True
                stack.append(source)
    return live


# Up to this many NFA states a subset is a Python int bitset (n/8 bytes, fastest to OR);
# beyond it a frozenset, whose size follows the subset rather than the NFA.
_BITSET_MAX_NFA_STATES = 4096


def _determinize(
    alphabet: tuple[str, ...],
    successors: list[list[tuple[int, ...]]],
    start: tuple[int, ...],
    accepting: list[bool],
    max_states: int,
) -> DFA:
    """Subset construction of an ε-free NFA (see the successor lists above).

    NFA states that cannot reach acceptance are dropped from every subset first: they do not
    change the language, and keeping them would split equivalent subsets before minimization.
    """
    live = _live_states(successors, accepting, len(accepting))
    successors = [[tuple(t for t in targets if live[t]) for targets in column] for column in successors]
    start = tuple(state for state in start if live[state])
    if len(accepting) <= _BITSET_MAX_NFA_STATES:
        rows, is_final = _subsets_as_bitsets(successors, start, accepting, max_states)
    else:
        rows, is_final = _subsets_as_sets(successors, start, accepting, max_states)
    transitions = np.array(rows, dtype=np.int64).reshape(len(rows), len(alphabet))
    return minimize(DFA(alphabet, transitions, 0, np.array(is_final, dtype=bool)))


def _reachable_subsets(start_subset, step, max_states: int) -> tuple[list[list[int]], list]:
    """Subsets reachable from `start_subset` in BFS order and their transition rows (indices);
    `step(subset)` lists the successor subset under each symbol, in alphabet order."""
    index_of = {start_subset: 0}
    subsets = [start_subset]
    rows: list[list[int]] = []
    for subset in subsets:  # grows while it is walked
        row = []
        for target in step(subset):
            known = index_of.get(target)
            if known is None:
                known = len(subsets)
                index_of[target] = known
                subsets.append(target)
                check_state_limit(len(subsets), max_states, "the expression's automaton")
            row.append(known)
        rows.append(row)
    return rows, subsets


def _subsets_as_bitsets(successors, start, accepting, max_states) -> tuple[list[list[int]], list[bool]]:
    """Reachable subsets as int bitsets: transition rows, acceptance."""
    columns = [[sum(1 << t for t in set(targets)) for targets in column] for column in successors]
    final = sum(1 << state for state, is_final in enumerate(accepting) if is_final)

    def step(subset: int) -> list[int]:
        members = []
        bits = subset
        while bits:
            low = bits & -bits
            members.append(low.bit_length() - 1)
            bits ^= low
        targets = []
        for column in columns:
            target = 0
            for member in members:
                target |= column[member]
            targets.append(target)
        return targets

    rows, subsets = _reachable_subsets(sum(1 << state for state in set(start)), step, max_states)
    return rows, [bool(subset & final) for subset in subsets]


def _subsets_as_sets(successors, start, accepting, max_states) -> tuple[list[list[int]], list[bool]]:
    """As _subsets_as_bitsets, with frozenset subsets."""
    final = frozenset(state for state, is_final in enumerate(accepting) if is_final)

    def step(members: frozenset) -> list[frozenset]:
        return [frozenset(chain.from_iterable(map(column.__getitem__, members))) for column in successors]

    rows, subsets = _reachable_subsets(frozenset(start), step, max_states)
    return rows, [not final.isdisjoint(subset) for subset in subsets]


def concatenate(a: DFA, b: DFA, max_states: int = DEFAULT_MAX_STATES) -> DFA:
    """Minimal DFA of L(a)·L(b) (same alphabet).

    NFA: a's states then b's (shifted by n_a); reading into an accepting state of a may also
    jump to b's start (the ε-move folded into the symbol step).
    """
    require_dfa(a, "concatenate", "a")
    require_dfa(b, "concatenate", "b")
    n_a = a.n_states
    b_start = n_a + b.start
    a_accepting = a.accepting.tolist()
    successors = []
    for column in range(a.n_symbols):
        targets = [(t, b_start) if a_accepting[t] else (t,) for t in a.transitions[:, column].tolist()]
        targets += [(n_a + t,) for t in b.transitions[:, column].tolist()]
        successors.append(targets)
    start = (a.start, b_start) if a_accepting[a.start] else (a.start,)
    accepting = [False] * n_a + b.accepting.tolist()
    return _determinize(a.alphabet, successors, start, accepting, max_states)


def kleene_star(a: DFA, max_states: int = DEFAULT_MAX_STATES) -> DFA:
    """Minimal DFA of L(a)*.

    NFA: a's states plus a fresh accepting start n_a behaving like a's start; reading into an
    accepting state may also restart at a's start.
    """
    require_dfa(a, "kleene_star", "a")
    n_a = a.n_states
    a_accepting = a.accepting.tolist()
    successors = []
    for column in range(a.n_symbols):
        targets = [(t, a.start) if a_accepting[t] else (t,) for t in a.transitions[:, column].tolist()]
        targets.append(targets[a.start])
        successors.append(targets)
    return _determinize(a.alphabet, successors, (n_a,), a_accepting + [True], max_states)


def repeat(a: DFA, low: int, high: int | None, max_states: int = DEFAULT_MAX_STATES) -> DFA:
    """Minimal DFA of L(a){low,high} (high None: unbounded)."""
    require_dfa(a, "repeat", "a")
    if low < 0 or (high is not None and high < low):
        raise FormalRopeError(f"invalid repetition {{{low},{'' if high is None else high}}}: need 0 <= low <= high")
    _check_repetition(a, low, high, max_states)
    epsilon = _epsilon(a.alphabet)
    head = power(a, low, max_states)
    if high is None:
        return concatenate(head, kleene_star(a, max_states), max_states)
    optional = minimize(product(a, epsilon, "or", max_states))
    return concatenate(head, power(optional, high - low, max_states), max_states)


def word_lengths(a: DFA) -> tuple[int | None, int | None]:
    """(length of the shortest nonempty word of L(a), length of the longest word of L(a)): None for
    the first when L(a) holds no nonempty word, None for the second when L(a) is infinite (or empty).
    One pass over the live states (those from which a word is accepted), linear in the transitions."""
    n_states = a.n_states
    transitions = a.transitions.tolist()
    accepting = np.asarray(a.accepting, dtype=bool)
    predecessors: list[list[int]] = [[] for _ in range(n_states)]
    for state, row in enumerate(transitions):
        for target in row:
            predecessors[target].append(state)
    live = accepting.copy()
    stack = np.flatnonzero(accepting).tolist()
    while stack:
        for source in predecessors[stack.pop()]:
            if not live[source]:
                live[source] = True
                stack.append(source)
    if not live[a.start]:
        return None, None
    # Shortest nonempty word: breadth-first from the start's successors over live states.
    shortest = None
    seen = np.zeros(n_states, dtype=bool)
    frontier = sorted({target for target in transitions[a.start] if live[target]})
    depth = 1
    while frontier and shortest is None:
        if any(accepting[state] for state in frontier):
            shortest = depth
            break
        for state in frontier:
            seen[state] = True
        frontier = sorted({t for state in frontier for t in transitions[state] if live[t] and not seen[t]})
        depth += 1
    # Longest word: the live part must be acyclic (Kahn's order), then the longest path from the start.
    indegree = np.zeros(n_states, dtype=np.int64)
    for state in range(n_states):
        if live[state]:
            for target in transitions[state]:
                if live[target]:
                    indegree[target] += 1
    order = [state for state in range(n_states) if live[state] and indegree[state] == 0]
    longest_to = np.full(n_states, -1, dtype=np.int64)
    longest_to[a.start] = 0
    visited = 0
    while order:
        state = order.pop()
        visited += 1
        for target in transitions[state]:
            if not live[target]:
                continue
            if longest_to[state] >= 0:
                longest_to[target] = max(longest_to[target], longest_to[state] + 1)
            indegree[target] -= 1
            if indegree[target] == 0:
                order.append(target)
    if visited < int(live.sum()):
        return shortest, None  # a cycle through live states: infinitely many words
    return shortest, int(longest_to[accepting & live].max())


def _check_repetition(a: DFA, low: int, high: int | None, max_states: int) -> None:
    """TooManyStatesError before building L(a){low,high} when its minimal DFA needs more than
    `max_states` states anyway: an automaton whose shortest word has n symbols has at least n + 1
    states (and so has one of a finite language whose longest word has n). a{10^20} used to run on."""
    shortest, longest = word_lengths(a)
    bound, why = 0, ""
    if shortest is not None and not a.accepting[a.start]:
        bound, why = low * shortest + 1, f"its shortest word has {low * shortest:,} symbols"
    if high is not None and longest is not None and high * longest + 1 > bound:
        bound, why = high * longest + 1, f"its longest word has {high * longest:,} symbols"
    if bound > max_states:
        shown = f"{{{low}}}" if high == low else f"{{{low},{'' if high is None else high}}}"
        raise TooManyStatesError(max_states, f"the repetition {shown}'s automaton ({why}, so it has at least "
                                             f"{bound:,} states)")


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
