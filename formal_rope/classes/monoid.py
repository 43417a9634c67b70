"""Transition monoid of a complete DFA and its Green's relations.

For the minimal complete DFA of a language L the transition monoid is the syntactic monoid of L
(Def. A.12 and the remark after it in the core paper). Elements are state maps t_x with
t_x[q] = q·x; the identity (the class of the empty word) is always element 0, so the monoid is
the syntactic *monoid*, not the semigroup Σ⁺/~ (they differ when no non-empty word acts as the
identity, e.g. for aΣ*).

Construction is a breadth-first search over words in shortlex order: every element keeps the
shortlex-least word that produces it (its parent element and last letter). Each BFS level is a
few array operations: all children of the frontier at once, deduplicated with one `np.unique`
over raw-byte row keys (numpy void views), then one dict probe per distinct child (rows hashed
as bytes) against the elements already known.

Green's relations come from strongly connected components (scipy.sparse.csgraph) of the right
Cayley graph (x → x·a: x R y iff xM = yM iff mutual reachability), the left Cayley graph
(x → a·x: L) and their union (x → x·a, x → a·x: J).
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass

import numpy as np
from scipy.sparse import csr_matrix
from scipy.sparse.csgraph import breadth_first_order, connected_components

from formal_rope.automata.dfa import DFA, require_dfa
from formal_rope.errors import FormalRopeError

DEFAULT_MAX_MONOID_SIZE = 200_000
MAX_TABLE_CELLS = 10**8  # elements × states kept in memory (≈ 0.8 GB as int64), whatever the size cap


class MonoidTooLargeError(FormalRopeError):
    """The transition monoid exceeds the configured size cap."""


@dataclass(frozen=True, eq=False)
class TransitionMonoid:
    """The transition monoid of a complete DFA, with shortlex-least words and Cayley graphs.

    elements  (size, n_states) state maps; elements[x, q] = q·x; row 0 is the identity
    parent    (size,) element whose word is this element's word minus the last letter (-1 for 1)
    letter    (size,) last letter of the element's word (-1 for the identity)
    right     (size, n_symbols) right[x, a] = index of x·a
    left      (size, n_symbols) left[x, a] = index of a·x
    """

    alphabet: tuple[str, ...]
    elements: np.ndarray
    parent: np.ndarray
    letter: np.ndarray
    right: np.ndarray
    left: np.ndarray

    @property
    def size(self) -> int:
        return int(self.elements.shape[0])

    @property
    def n_states(self) -> int:
        return int(self.elements.shape[1])

    def word(self, element: int) -> tuple[int, ...]:
        """The shortlex-least word (symbol indices) whose state map is `element`."""
        letters: list[int] = []
        current = int(element)
        while current != 0:
            letters.append(int(self.letter[current]))
            current = int(self.parent[current])
        return tuple(reversed(letters))

    def element_of(self, word: tuple[int, ...] | list[int]) -> int:
        """Index of the element a word of symbol indices evaluates to."""
        current = 0
        for symbol in word:
            current = int(self.right[current, symbol])
        return current


def _row_keys(rows: np.ndarray) -> np.ndarray:
    """One opaque void scalar per row, comparable and sortable as raw bytes."""
    rows = np.ascontiguousarray(rows)
    return rows.view(np.dtype((np.void, rows.dtype.itemsize * rows.shape[1]))).ravel()


def transition_monoid(dfa: DFA, max_size: int = DEFAULT_MAX_MONOID_SIZE) -> TransitionMonoid:
    """Enumerate the transition monoid of `dfa` (identity included) by BFS over words.

    Raises MonoidTooLargeError when more than `max_size` elements are found.
    """
    require_dfa(dfa, "transition_monoid", "dfa")
    n_states, n_symbols = dfa.n_states, dfa.n_symbols
    row_dtype = np.int16 if n_states <= np.iinfo(np.int16).max else np.int32
    delta = dfa.transitions.astype(row_dtype)
    identity = np.arange(n_states, dtype=row_dtype)

    level_rows = [identity[None, :]]
    parents = [np.array([-1], dtype=np.int64)]
    letters = [np.array([-1], dtype=np.int64)]
    right_rows: list[np.ndarray] = []
    known: dict[bytes, int] = {identity.tobytes(): 0}
    size = 1
    frontier_ids = np.zeros(1, dtype=np.int64)
    frontier_rows = identity[None, :]
    level_starts = [0]
    width = n_states * identity.itemsize

    while frontier_ids.size and n_symbols:
        # children[f, a, :] = state map of (frontier f)·a; frontier-major, letter-minor keeps the
        # first occurrence of each new element at its shortlex-least word.
        children = np.ascontiguousarray(delta[frontier_rows].transpose(0, 2, 1)).reshape(-1, n_states)
        _, first, inverse = np.unique(_row_keys(children), return_index=True, return_inverse=True)
        # One dict probe per distinct child: linear in the monoid size overall, whereas keeping
        # a sorted key array would re-sort all known rows at every level.
        blob = children[first].tobytes()
        unique_ids = np.fromiter(
            (known.get(blob[i * width : (i + 1) * width], -1) for i in range(first.size)), dtype=np.int64,
            count=first.size,
        )
        new = np.flatnonzero(unique_ids < 0)
        new = new[np.argsort(first[new], kind="stable")]
        unique_ids[new] = size + np.arange(new.size)
        child_ids = unique_ids[np.asarray(inverse).reshape(-1)]
        right_rows.append(child_ids.reshape(-1, n_symbols))
        if size + new.size > max_size:
            raise MonoidTooLargeError(
                f"the transition monoid has more than {max_size} elements (automaton with {n_states} states "
                f"over {n_symbols} symbols); raise the cap (classify --max-monoid-size N, "
                "max_monoid_size=N in Python) to classify this language"
            )
        if (size + new.size) * n_states > MAX_TABLE_CELLS:
            raise MonoidTooLargeError(
                f"the transition monoid has more than {size + new.size} elements on {n_states} states, more than "
                f"{MAX_TABLE_CELLS:.0e} table cells; this language is too large to classify in memory"
            )
        if new.size == 0:
            break
        for position, element in zip(new.tolist(), unique_ids[new].tolist()):
            known[blob[position * width : (position + 1) * width]] = element
        level_starts.append(size)
        size += new.size
        frontier_rows = children[first[new]]
        frontier_ids = unique_ids[new]
        level_rows.append(frontier_rows)
        letters.append(first[new] % n_symbols)
        parents.append(_previous_frontier_ids(level_starts, first[new] // n_symbols))

    elements = np.concatenate(level_rows).astype(np.int64)
    parent = np.concatenate(parents).astype(np.int64)
    letter = np.concatenate(letters).astype(np.int64)
    right = np.concatenate(right_rows) if right_rows else np.zeros((1, 0), dtype=np.int64)
    right = right.astype(np.int64)
    left = _left_cayley(right, parent, letter, level_starts, size)
    return TransitionMonoid(dfa.alphabet, elements, parent, letter, right, left)


def _previous_frontier_ids(level_starts: list[int], positions: np.ndarray) -> np.ndarray:
    """Element ids of positions inside the previous BFS level (levels are contiguous id ranges)."""
    return level_starts[-2] + positions.astype(np.int64)


def _left_cayley(right: np.ndarray, parent: np.ndarray, letter: np.ndarray, level_starts: list[int], size: int):
    """left[x, a] = a·x, from a·(y·b) = (a·y)·b with y = parent(x), level by level."""
    n_symbols = right.shape[1]
    left = np.zeros((size, n_symbols), dtype=np.int64)
    if n_symbols == 0:
        return left
    left[0] = right[0]
    bounds = list(level_starts[1:]) + [size]
    for start, stop in zip(bounds[:-1], bounds[1:]):
        ids = np.arange(start, stop)
        left[ids] = right[left[parent[ids]], letter[ids][:, None]]
    return left


# ------------------------------------------------------------------------------ Green's relations
def _graph(size: int, tables: list[np.ndarray]):
    """Sparse adjacency matrix with edges x → table[x, a] for every table and letter.

    Built directly in CSR form (every node has the same out-degree) with float64 data, the dtype
    scipy.sparse.csgraph works in, so no COO conversion or cast happens per call. Parallel edges
    are merged: scipy's strong-components routine loops forever on a CSR matrix with duplicate
    entries (seen with scipy 1.17).
    """
    targets = np.concatenate([table.reshape(size, -1) for table in tables], axis=1)
    degree = targets.shape[1]
    indptr = np.arange(0, size * degree + 1, degree, dtype=np.int64) if degree else np.zeros(size + 1, np.int64)
    data = np.ones(size * degree, dtype=np.float64)
    graph = csr_matrix((data, targets.ravel().astype(np.int64), indptr), shape=(size, size))
    graph.sum_duplicates()
    return graph


def strongly_connected_labels(size: int, tables: list[np.ndarray]) -> np.ndarray:
    """SCC label per node of the graph with edges x → table[x, a] for every table and letter."""
    if not tables or all(table.size == 0 for table in tables):
        return np.arange(size)
    _, labels = connected_components(_graph(size, tables), directed=True, connection="strong")
    return labels


def reachable_from(table: np.ndarray, source: int) -> np.ndarray:
    """Boolean mask of the nodes reachable (≥ 0 steps) from `source` along x → table[x, a]."""
    size = table.shape[0]
    mask = np.zeros(size, dtype=bool)
    if table.size == 0:
        mask[source] = True
        return mask
    order = breadth_first_order(_graph(size, [table]), source, directed=True, return_predecessors=False)
    mask[order] = True
    return mask


def shortest_path_letters(table: np.ndarray, source: int, target: int) -> tuple[int, ...]:
    """Letters of a shortest non-empty path source → target along x → table[x, a] (source ≠ target)."""
    if source == target:
        raise ValueError("source and target must differ")
    size = table.shape[0]
    _, predecessors = breadth_first_order(_graph(size, [table]), source, directed=True, return_predecessors=True)
    if predecessors[target] < 0:
        raise ValueError("target not reachable from source")
    letters: list[int] = []
    node = target
    while node != source:
        before = int(predecessors[node])
        letters.append(int(np.flatnonzero(table[before] == node)[0]))
        node = before
    return tuple(reversed(letters))


def r_classes(monoid: TransitionMonoid) -> np.ndarray:
    """R-class label per element (x R y iff xM = yM)."""
    return strongly_connected_labels(monoid.size, [monoid.right])


def l_classes(monoid: TransitionMonoid) -> np.ndarray:
    """L-class label per element (x L y iff Mx = My)."""
    return strongly_connected_labels(monoid.size, [monoid.left])


def j_classes(monoid: TransitionMonoid) -> np.ndarray:
    """J-class label per element (x J y iff MxM = MyM)."""
    return strongly_connected_labels(monoid.size, [monoid.right, monoid.left])


def h_classes(
    monoid: TransitionMonoid, r_labels: np.ndarray | None = None, l_labels: np.ndarray | None = None
) -> np.ndarray:
    """H-class label per element (H = R ∩ L); pass known R/L labels to avoid recomputing them."""
    r_labels = r_classes(monoid) if r_labels is None else r_labels
    l_labels = l_classes(monoid) if l_labels is None else l_labels
    _, labels = np.unique(np.stack([r_labels, l_labels], axis=1), axis=0, return_inverse=True)
    return np.asarray(labels).reshape(-1)


def is_trivial(labels: np.ndarray) -> bool:
    """Whether every class of a labelling is a single element."""
    return np.unique(labels).size == labels.size


def nontrivial_pair(labels: np.ndarray) -> tuple[int, int] | None:
    """Two distinct elements sharing a class, or None: the two smallest members of the class whose
    second-smallest member is smallest (ids follow shortlex order, so the words stay short)."""
    order = np.argsort(labels, kind="stable")
    sorted_labels = labels[order]
    repeated = np.flatnonzero(sorted_labels[1:] == sorted_labels[:-1])
    if repeated.size == 0:
        return None
    # Each class's members appear in increasing id order; pick the class whose second member is smallest.
    seconds = order[repeated + 1]
    best = int(np.argmin(seconds))
    label = sorted_labels[repeated[best]]
    members = np.flatnonzero(labels == label)
    return int(members[0]), int(members[1])


def connecting_words(
    monoid: TransitionMonoid, source: int, target: int, use_right: bool, use_left: bool
) -> tuple[tuple[int, ...], tuple[int, ...]]:
    """(u, v) with u·source·v = target, found by BFS in the chosen Cayley graph(s).

    Right edges append a letter to v, left edges prepend one to u. Raises ValueError when target
    is not reachable (callers only ask inside one Green class).
    """
    previous: dict[int, tuple[int, str, int]] = {source: (-1, "", -1)}
    queue = deque([source])
    while queue and target not in previous:
        node = queue.popleft()
        for side, table, enabled in (("r", monoid.right, use_right), ("l", monoid.left, use_left)):
            if not enabled:
                continue
            for symbol, successor in enumerate(table[node].tolist()):
                if successor not in previous:
                    previous[successor] = (node, side, symbol)
                    queue.append(successor)
    if target not in previous:
        raise ValueError("target not reachable from source")
    left_word: list[int] = []
    right_word: list[int] = []
    node = target
    while node != source:
        before, side, symbol = previous[node]
        # Walking backwards: the last right step is the last letter of v, the last left step the
        # first letter of u.
        (right_word if side == "r" else left_word).append(symbol)
        node = before
    right_word.reverse()
    return tuple(left_word), tuple(right_word)


# ------------------------------------------------------------------------------------ aperiodicity
def compose(first: np.ndarray, then: np.ndarray) -> np.ndarray:
    """Row-wise composition of state maps: apply `first`, then `then`."""
    return np.take_along_axis(then, first, axis=1)


def aperiodic_mask(monoid: TransitionMonoid, elements: np.ndarray | None = None) -> np.ndarray:
    """Per element (all, or the given ids): whether x^n = x^(n+1) for n = number of states.

    A map on n points has index at most n, so x^n already lies in x's cycle; x generates no
    non-trivial group exactly when that cycle has length 1.
    """
    maps = monoid.elements if elements is None else monoid.elements[elements]
    power = np.broadcast_to(np.arange(monoid.n_states), maps.shape).copy()
    base = maps.copy()
    exponent = monoid.n_states
    while exponent:
        if exponent & 1:
            power = compose(power, base)
        base = compose(base, base)
        exponent >>= 1
    return np.all(power == compose(power, maps), axis=1)


def first_non_aperiodic(monoid: TransitionMonoid, chunk: int = 256) -> int | None:
    """The least element id (shortlex-least word) with x^n ≠ x^(n+1), or None when aperiodic.

    Scans in chunks so that the usual case (a short word such as a single letter) stops early
    instead of powering every element of a large monoid.
    """
    for start in range(0, monoid.size, chunk):
        ids = np.arange(start, min(start + chunk, monoid.size))
        bad = np.flatnonzero(~aperiodic_mask(monoid, ids))
        if bad.size:
            return int(ids[bad[0]])
    return None


def index_and_period(monoid: TransitionMonoid, element: int) -> tuple[int, int]:
    """(i, m) minimal with x^i = x^(i+m), m ≥ 1 (i ≥ 1)."""
    row = monoid.elements[element]
    seen: dict[bytes, int] = {}
    power = row.copy()
    exponent = 1
    while power.tobytes() not in seen:
        seen[power.tobytes()] = exponent
        power = row[power]  # x^(e+1): apply x^e then x
        exponent += 1
    first = seen[power.tobytes()]
    return first, exponent - first
