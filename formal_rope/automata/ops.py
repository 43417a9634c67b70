"""DFA operations on numpy transition tables: completion, minimization, boolean combinations,
emptiness and language equivalence with a shortest counterexample.

Every function takes and returns complete `DFA` values. Exploration is layered breadth-first
search: a whole BFS layer is expanded with one table gather, so the Python loop runs once per
layer (the depth of the automaton), never once per state.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

from formal_rope.automata.dfa import DFA, require_dfa
from formal_rope.errors import FormalRopeError

DEFAULT_MAX_STATES = 10**6

# Dense visited bitmaps for product exploration are used up to this many pair codes (64 MiB).
_DENSE_PRODUCT_LIMIT = 1 << 26


# The commands that take --max-states: a limit error names them, since others (train, sample) have no
# such option and a bare "--max-states N" would fail there when followed.
MAX_STATES_COMMANDS = ("dfa", "accepts", "equiv", "classify", "compile")
MAX_STATES_OPTION_TEXT = f"--max-states N of {', '.join(MAX_STATES_COMMANDS[:-1])} or {MAX_STATES_COMMANDS[-1]}"


class TooManyStatesError(FormalRopeError):
    """A construction would need more states than the configured limit."""

    def __init__(self, limit: int, what: str = "the automaton"):
        self.limit = limit
        super().__init__(
            f"building {what} needs more than {limit:,} states (the limit); "
            f"raise it if you have the memory ({MAX_STATES_OPTION_TEXT}; max_states=N in Python)"
        )


@dataclass(frozen=True)
class EquivalenceResult:
    """`counterexample` is a shortest word in exactly one of the two languages (None if equal)."""

    equivalent: bool
    counterexample: tuple[str, ...] | None


def check_state_limit(n_states: int, max_states: int, what: str = "the automaton") -> None:
    if n_states > max_states:
        raise TooManyStatesError(max_states, what)


# ------------------------------------------------------------------ reachability and numbering
def discovery_order(transitions: np.ndarray, start: int) -> np.ndarray:
    """Reachable states in BFS discovery order (parents in order, symbols in alphabet order).

    This is the order a queue-based BFS would produce, so renumbering by it is canonical: two
    minimal DFAs of the same language over the same alphabet order get identical tables.
    """
    n_states = transitions.shape[0]
    seen = np.zeros(n_states, dtype=bool)
    seen[start] = True
    layers = [np.array([start], dtype=np.int64)]
    frontier = layers[0]
    while True:
        successors = transitions[frontier].ravel()
        successors = successors[~seen[successors]]
        if successors.size == 0:
            break
        _, first_index = np.unique(successors, return_index=True)
        frontier = successors[np.sort(first_index)]
        seen[frontier] = True
        layers.append(frontier)
    return np.concatenate(layers)


def _restrict(dfa: DFA, order: np.ndarray) -> DFA:
    """Keep the states in `order` (closed under transitions) and renumber them 0..len-1."""
    new_index = np.full(dfa.n_states, -1, dtype=np.int64)
    new_index[order] = np.arange(order.size, dtype=np.int64)
    return DFA(
        alphabet=dfa.alphabet,
        transitions=new_index[dfa.transitions[order]],
        start=int(new_index[dfa.start]),
        accepting=dfa.accepting[order],
    )


def trim_unreachable(dfa: DFA) -> DFA:
    """The reachable part, numbered in canonical BFS order."""
    require_dfa(dfa, "trim_unreachable", "dfa")
    return _restrict(dfa, discovery_order(dfa.transitions, dfa.start))


# --------------------------------------------------------------------------- minimization
def coaccessible_states(dfa: DFA) -> np.ndarray:
    """Bool per state: some accepting state is reachable from it (a prefix ending there extends to a member)."""
    live = np.asarray(dfa.accepting, dtype=bool).copy()
    while True:
        grown = live | live[dfa.transitions].any(axis=1)
        if (grown == live).all():
            return live
        live = grown


def minimize(dfa: DFA) -> DFA:
    """The minimal complete DFA of the same language, canonically numbered.

    Unreachable states are dropped and the Myhill-Nerode classes are found by partition
    refinement in O(n·|Σ|·log n): on large automata a few vectorized Moore rounds first (each
    one `np.unique` per symbol; they finish shallow automata such as Σ*aΣ^k outright), and
    Hopcroft's algorithm (`_hopcroft_blocks`) from there. The quotient is then renumbered in
    BFS discovery order, so equal languages over the same alphabet order give identical tables.
    """
    require_dfa(dfa, "minimize", "dfa")
    reachable = trim_unreachable(dfa)
    _, block = np.unique(reachable.accepting, return_inverse=True)
    block = np.asarray(block, dtype=np.int64).reshape(-1)
    if reachable.n_states >= _MOORE_MIN_STATES:
        block, stable = _moore_rounds(reachable.transitions, block, _MOORE_MAX_ROUNDS)
        if stable:
            return _quotient(reachable, block)
    return _quotient(reachable, _hopcroft_blocks(reachable.transitions, block))


# Moore rounds are vectorized (fast per state) but there can be n of them; Hopcroft's Python loop
# is slow per state but O(n log n) in all. Large automata get at most a constant number of
# rounds, and leave early when a round barely refines, so the total stays O(n·|Σ|·log n).
_MOORE_MIN_STATES = 4096
_MOORE_MAX_ROUNDS = 32


def moore_round(block: np.ndarray, transitions: np.ndarray) -> np.ndarray:
    """One Moore refinement: dense block ids of (block, successor blocks) signatures.

    The signature is folded in one successor column at a time: pair (key, successor block) -> one
    int64 -> dense rank via a 1-D unique (much faster than unique over rows).
    """
    n_states = transitions.shape[0]
    key = block
    for column in range(transitions.shape[1]):
        _, key = np.unique(key * n_states + block[transitions[:, column]], return_inverse=True)
        key = np.asarray(key, dtype=np.int64).reshape(-1)
    return key


def _moore_rounds(transitions: np.ndarray, block: np.ndarray, max_rounds: int) -> tuple[np.ndarray, bool]:
    """Refine dense block ids by Moore rounds: (refined blocks, whether they are stable).

    Stops after `max_rounds`, or early (unstable) once a round neither multiplies the number of
    blocks by 5/4 nor adds n/256 of them.
    """
    n_states = transitions.shape[0]
    n_blocks = int(block.max()) + 1
    for _ in range(max_rounds):
        block = moore_round(block, transitions)
        n_refined = int(block.max()) + 1
        if n_refined == n_blocks:
            return block, True
        if 4 * n_refined < 5 * n_blocks and n_refined - n_blocks < max(1, n_states // 256):
            return block, False  # neither geometric nor large progress: a long chain, say
        n_blocks = n_refined
    return block, False


def _quotient(reachable: DFA, block: np.ndarray) -> DFA:
    """The DFA on the blocks of a congruence `block` (dense ids 0..k-1), canonically numbered."""
    _, representative = np.unique(block, return_index=True)
    quotient = DFA(
        alphabet=reachable.alphabet,
        transitions=block[reachable.transitions[representative]],
        start=int(block[reachable.start]),
        accepting=reachable.accepting[representative],
    )
    return trim_unreachable(quotient)


def _inverse_transitions(transitions: np.ndarray) -> tuple[list[list[int]], list[list[int]]]:
    """Per symbol, the predecessors as CSR lists: predecessors of t on a are
    sources[a][offsets[a][t]:offsets[a][t + 1]]."""
    n_states = transitions.shape[0]
    sources, offsets = [], []
    for column in transitions.T:
        order = np.argsort(column, kind="stable")
        counts = np.bincount(column, minlength=n_states)
        offsets.append(np.concatenate([[0], np.cumsum(counts)]).tolist())
        sources.append(order.tolist())
    return sources, offsets


def _hopcroft_blocks(transitions: np.ndarray, initial: np.ndarray) -> np.ndarray:
    """Coarsest partition refining `initial` (dense block ids, at least the accepting split)
    that is compatible with the transitions (dense block ids).

    Hopcroft's algorithm on array-based partition refinement: the states of each block are a
    contiguous slice of `elements`; a splitter (block B, symbol a) marks the a-predecessors of B
    by swapping them to the front of their blocks, then every touched block splits into marked
    and unmarked parts. For each symbol, when (X, a) was still waiting both halves wait,
    otherwise only the smaller half is queued; so each state enters a splitter O(log n) times
    per symbol and the total work is O(n·|Σ|·log n). Initially every block but the largest
    waits (stability against all the others and against Q implies it against the last one).
    The loops are plain Python over lists: every step touches only a few states, where numpy's
    per-call cost would dominate.
    """
    n_states, n_symbols = transitions.shape
    n_initial = int(initial.max()) + 1
    order = np.argsort(initial, kind="stable")
    sizes = np.bincount(initial, minlength=n_initial)
    boundaries = np.concatenate([[0], np.cumsum(sizes)])
    elements = order.tolist()
    location = [0] * n_states
    for position, state in enumerate(elements):
        location[state] = position
    block_of = initial.tolist()
    first = boundaries[:-1].tolist()
    end = boundaries[1:].tolist()
    marked = [0] * n_initial
    if n_symbols == 0 or n_initial == 1:
        return np.asarray(block_of, dtype=np.int64)
    sources, offsets = _inverse_transitions(transitions)
    largest = int(np.argmax(sizes))
    waiting = [(block, symbol) for block in range(n_initial) if block != largest for symbol in range(n_symbols)]
    is_waiting = set(waiting)
    while waiting:
        splitter, symbol = waiting.pop()
        is_waiting.discard((splitter, symbol))
        symbol_sources, symbol_offsets = sources[symbol], offsets[symbol]
        touched = []
        for target in elements[first[splitter] : end[splitter]]:
            for predecessor in symbol_sources[symbol_offsets[target] : symbol_offsets[target + 1]]:
                block = block_of[predecessor]
                boundary = first[block] + marked[block]
                position = location[predecessor]
                if position < boundary:
                    continue  # already marked
                # Swap the predecessor to the end of the marked prefix of its block.
                other = elements[boundary]
                elements[boundary], elements[position] = predecessor, other
                location[predecessor], location[other] = boundary, position
                if marked[block] == 0:
                    touched.append(block)
                marked[block] += 1
        for block in touched:
            size_marked = marked[block]
            marked[block] = 0
            if size_marked == end[block] - first[block]:
                continue  # every state of the block has an a-successor in the splitter
            new_block = len(first)
            first.append(first[block])
            end.append(first[block] + size_marked)
            marked.append(0)
            first[block] += size_marked
            for state in elements[first[new_block] : end[new_block]]:
                block_of[state] = new_block
            new_is_smaller = size_marked <= end[block] - first[block]
            for any_symbol in range(n_symbols):
                if (block, any_symbol) in is_waiting:
                    queued = new_block
                else:
                    queued = new_block if new_is_smaller else block
                waiting.append((queued, any_symbol))
                is_waiting.add((queued, any_symbol))
    return np.asarray(block_of, dtype=np.int64)


def _minimize_moore(dfa: DFA) -> DFA:
    """Reference minimization by Moore's round-based refinement (quadratic on long chains).

    Kept for cross-checking `minimize` in tests: each round gives every state the signature
    (its block, its successors' blocks), renumbered densely with `np.unique`, until no block splits.
    """
    reachable = trim_unreachable(dfa)
    transitions = reachable.transitions
    _, block = np.unique(reachable.accepting, return_inverse=True)
    block = np.asarray(block, dtype=np.int64).reshape(-1)
    n_blocks = int(block.max()) + 1
    while True:
        block = moore_round(block, transitions)
        n_refined = int(block.max()) + 1
        if n_refined == n_blocks:
            break
        n_blocks = n_refined
    return _quotient(reachable, block)


# ------------------------------------------------------------------------- basic automata
def complete(
    alphabet: Sequence[str], transitions: np.ndarray, accepting: np.ndarray, start: int = 0
) -> DFA:
    """A complete DFA from a partial table where -1 marks a missing transition.

    Missing transitions go to a fresh rejecting sink (added only when something is missing).
    """
    table = np.asarray(transitions, dtype=np.int64)
    final = np.asarray(accepting, dtype=bool)
    missing = table < 0
    if missing.any():
        sink = table.shape[0]
        table = np.where(missing, sink, table)
        table = np.concatenate([table, np.full((1, table.shape[1]), sink, dtype=np.int64)])
        final = np.concatenate([final, [False]])
    return DFA(alphabet=tuple(alphabet), transitions=table, start=start, accepting=final)


def empty_language(alphabet: Sequence[str]) -> DFA:
    """The one-state DFA over `alphabet` that accepts no word (not even the empty one)."""
    return DFA(tuple(alphabet), np.zeros((1, len(alphabet)), dtype=np.int64), 0, np.array([False]))


def universal_language(alphabet: Sequence[str]) -> DFA:
    """The one-state DFA over `alphabet` that accepts every word (Σ*, the empty word included)."""
    return DFA(tuple(alphabet), np.zeros((1, len(alphabet)), dtype=np.int64), 0, np.array([True]))


def extend_alphabet(dfa: DFA, alphabet: Sequence[str]) -> DFA:
    """The same language over a larger (or reordered) alphabet: new symbols lead to a rejecting sink."""
    require_dfa(dfa, "extend_alphabet", "dfa")
    alphabet = tuple(alphabet)
    if alphabet == dfa.alphabet:
        return dfa
    missing = [symbol for symbol in dfa.alphabet if symbol not in alphabet]
    if missing:
        raise FormalRopeError(f"alphabet {alphabet} lacks the automaton's symbols {missing}")
    own_index = dfa.symbol_index()
    columns = [own_index.get(symbol, -1) for symbol in alphabet]
    table = np.full((dfa.n_states, len(alphabet)), -1, dtype=np.int64)
    for new_column, old_column in enumerate(columns):
        if old_column >= 0:
            table[:, new_column] = dfa.transitions[:, old_column]
    return complete(alphabet, table, dfa.accepting, dfa.start)


def union_alphabet(*alphabets: Sequence[str]) -> tuple[str, ...]:
    """Symbols of all alphabets, first-seen order (the first alphabet keeps its order)."""
    merged: dict[str, None] = {}
    for alphabet in alphabets:
        merged.update(dict.fromkeys(alphabet))
    return tuple(merged)


def complement(dfa: DFA) -> DFA:
    """Σ* minus the language, Σ = the DFA's alphabet."""
    require_dfa(dfa, "complement", "dfa")
    return DFA(dfa.alphabet, dfa.transitions, dfa.start, ~dfa.accepting)


# ------------------------------------------------------------------------------- products
_OPERATIONS: dict[str, Callable[[np.ndarray, np.ndarray], np.ndarray]] = {
    "and": np.logical_and,
    "or": np.logical_or,
    "xor": np.logical_xor,
    "diff": lambda left, right: left & ~right,
}


def product(
    a: DFA,
    b: DFA,
    op: str | Callable[[np.ndarray, np.ndarray], np.ndarray],
    max_states: int = DEFAULT_MAX_STATES,
) -> DFA:
    """The reachable product automaton; a pair is accepting when op(accept_a, accept_b).

    `op` is "and", "or", "xor", "diff" or a vectorized function of two bool arrays. When the
    alphabets differ, both automata are first extended to the union alphabet (a symbol unknown
    to one automaton sends it to a rejecting sink), so the result is about sets of strings.
    The result is not minimized; its states are in BFS discovery order.
    """
    require_dfa(a, "product", "a")
    require_dfa(b, "product", "b")
    combine = _OPERATIONS[op] if isinstance(op, str) else op
    if a.alphabet != b.alphabet:
        alphabet = a.alphabet if set(a.alphabet) == set(b.alphabet) else union_alphabet(a.alphabet, b.alphabet)
        a, b = extend_alphabet(a, alphabet), extend_alphabet(b, alphabet)
    n_b = b.n_states
    start_code = a.start * n_b + b.start

    def successors(codes: np.ndarray) -> np.ndarray:
        left, right = np.divmod(codes, n_b)
        return a.transitions[left] * n_b + b.transitions[right]

    codes, transitions = _explore_codes(start_code, successors, a.n_states * n_b, max_states, "the product automaton")
    left, right = np.divmod(codes, n_b)
    accepting = np.asarray(combine(a.accepting[left], b.accepting[right]), dtype=bool)
    return DFA(a.alphabet, transitions, 0, accepting)


def _explore_codes(
    start_code: int,
    successors: Callable[[np.ndarray], np.ndarray],
    code_space: int,
    max_states: int,
    what: str,
) -> tuple[np.ndarray, np.ndarray]:
    """Layered BFS over integer state codes; returns (codes in discovery order, transition table)."""
    if code_space <= _DENSE_PRODUCT_LIMIT:
        index_of = np.full(code_space, -1, dtype=np.int64)
        index_of[start_code] = 0
        discovered = [np.array([start_code], dtype=np.int64)]
        frontier = discovered[0]
        count = 1
        while frontier.size:
            targets = successors(frontier).ravel()
            fresh = targets[index_of[targets] < 0]
            if fresh.size == 0:
                break
            _, first = np.unique(fresh, return_index=True)
            frontier = fresh[np.sort(first)]
            check_state_limit(count + frontier.size, max_states, what)
            index_of[frontier] = np.arange(count, count + frontier.size)
            count += frontier.size
            discovered.append(frontier)
        codes = np.concatenate(discovered)
        return codes, index_of[successors(codes)]
    # Sparse code space: keep the visited codes sorted and look them up with searchsorted.
    discovered = [np.array([start_code], dtype=np.int64)]
    visited = discovered[0]
    frontier = visited
    while frontier.size:
        targets = successors(frontier).ravel()
        position = np.minimum(np.searchsorted(visited, targets), visited.size - 1)
        fresh = targets[visited[position] != targets]
        if fresh.size == 0:
            break
        _, first = np.unique(fresh, return_index=True)
        frontier = fresh[np.sort(first)]
        check_state_limit(visited.size + frontier.size, max_states, what)
        visited = np.sort(np.concatenate([visited, frontier]))
        discovered.append(frontier)
    codes = np.concatenate(discovered)
    sort_order = np.argsort(codes)
    targets = successors(codes)
    return codes, sort_order[np.searchsorted(codes[sort_order], targets)]


def intersection(a: DFA, b: DFA, max_states: int = DEFAULT_MAX_STATES) -> DFA:
    """The minimal DFA of L(a) ∩ L(b) (differing alphabets are merged; `max_states` caps the product)."""
    require_dfa(a, "intersection", "a")
    require_dfa(b, "intersection", "b")
    return minimize(product(a, b, "and", max_states))


def union(a: DFA, b: DFA, max_states: int = DEFAULT_MAX_STATES) -> DFA:
    """The minimal DFA of L(a) ∪ L(b) (differing alphabets are merged; `max_states` caps the product)."""
    require_dfa(a, "union", "a")
    require_dfa(b, "union", "b")
    return minimize(product(a, b, "or", max_states))


def difference(a: DFA, b: DFA, max_states: int = DEFAULT_MAX_STATES) -> DFA:
    """L(a) minus L(b)."""
    require_dfa(a, "difference", "a")
    require_dfa(b, "difference", "b")
    return minimize(product(a, b, "diff", max_states))


def symmetric_difference(a: DFA, b: DFA, max_states: int = DEFAULT_MAX_STATES) -> DFA:
    """The minimal DFA of the words in exactly one of L(a), L(b): empty iff a and b are equivalent."""
    require_dfa(a, "symmetric_difference", "a")
    require_dfa(b, "symmetric_difference", "b")
    return minimize(product(a, b, "xor", max_states))


# ----------------------------------------------------------------- emptiness, equivalence
def shortest_accepted(dfa: DFA) -> tuple[str, ...] | None:
    """A shortest accepted word (the least in alphabet order among the shortest), or None."""
    require_dfa(dfa, "shortest_accepted", "dfa")
    n_states = dfa.n_states
    parent = np.full(n_states, -1, dtype=np.int64)
    via_symbol = np.full(n_states, -1, dtype=np.int64)
    seen = np.zeros(n_states, dtype=bool)
    seen[dfa.start] = True
    frontier = np.array([dfa.start], dtype=np.int64)
    found = dfa.start if dfa.accepting[dfa.start] else -1
    n_symbols = dfa.n_symbols
    while found < 0 and frontier.size and n_symbols:
        targets = dfa.transitions[frontier].ravel()
        fresh_mask = ~seen[targets]
        if not fresh_mask.any():
            break
        flat_index = np.flatnonzero(fresh_mask)
        _, first = np.unique(targets[flat_index], return_index=True)
        flat_index = flat_index[np.sort(first)]
        new_states = targets[flat_index]
        parent[new_states] = frontier[flat_index // n_symbols]
        via_symbol[new_states] = flat_index % n_symbols
        seen[new_states] = True
        accepted = new_states[dfa.accepting[new_states]]
        if accepted.size:
            found = int(accepted[0])
        frontier = new_states
    if found < 0:
        return None
    word: list[str] = []
    state = found
    while state != dfa.start:
        word.append(dfa.alphabet[via_symbol[state]])
        state = int(parent[state])
    return tuple(reversed(word))


def is_empty(dfa: DFA) -> bool:
    """True when the DFA accepts no word at all (no accepting state is reachable from the start)."""
    require_dfa(dfa, "is_empty", "dfa")
    reachable = discovery_order(dfa.transitions, dfa.start)
    return not bool(dfa.accepting[reachable].any())


def equivalent(a: DFA, b: DFA, max_states: int = DEFAULT_MAX_STATES) -> EquivalenceResult:
    """Language equality; on inequality, a shortest word in exactly one language.

    Alphabets that differ are compared over their union (see `product`).
    """
    require_dfa(a, "equivalent", "a")
    require_dfa(b, "equivalent", "b")
    counterexample = shortest_accepted(product(a, b, "xor", max_states))
    return EquivalenceResult(counterexample is None, counterexample)
