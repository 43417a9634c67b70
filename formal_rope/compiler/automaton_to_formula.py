"""Stage ``automaton_to_formula``: a minimal DFA in LTL[P] (a PODFA) → an LTL[P] formula DAG.

Li & Cotterell's Lemma C.1, with only P (SPEC §1: P(φ) at n means φ at some j < n, j ≥ 1).
For a partially ordered DFA the run never returns to a state it left, so "the automaton is in
state q before reading position n" (in_q at n: the state after w1..w(n-1)) is

  q = q0:  in_q0 = ¬P(L_q0)                       no earlier symbol left q0
  q ≠ q0:  in_q  = E_q ∧ ¬P(E_q ∧ L_q)            q was entered and has not been left since
           E_q   = P(∨_{q' → q} in_q' ∧ A(q', q))  some earlier position, in a predecessor q',
                                                    read a symbol that enters q

where L_q is "the symbol here leaves q" and A(q', q) is "the symbol here leads q' to q". The
"left" test needs no since: if E_q holds at some l < n and w_l leaves q, then either the run was
in q at l (and left it there) or it had already left q, so "left before n" = P(E_q ∧ L_q). Each
in_q uses in_q' only for strict predecessors, so the definitions are well founded; depth grows
with the longest chain of the partial order (two P per state on it).

Acceptance is read at the readout position N+1: the disjunction of in_q over the final states, or
the negated disjunction over the others when that is smaller. A set S of states closed under
successors (an up-set: once in S the run stays in S) has the shorter test
in_S = P(∨_{q' ∉ S} in_q' ∧ A(q', S)); it is used when the final or the non-final states form
one. Subformulas are Python objects shared between their users, so the formula is a DAG
(`formula_to_dag` and `ltl_to_dfa` work on its distinct subformulas); dead states (from which no
final state is reachable) are never described, constants are folded as they are built, and a
symbol set is written as the shorter of its atoms' disjunction and the negated disjunction of the
others (only inside P, where a position always holds a symbol; at N+1 none does).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from formal_rope.automata.dfa import DFA, require_dfa
from formal_rope.automata.ops import coaccessible_states, minimize
from formal_rope.classes.classify import podfa_witness
from formal_rope.classes.podfa import block_cycle
from formal_rope.errors import FormalRopeError
from formal_rope.lang.ast import And, Atom, Const, Formula, Not, Or, Past
from formal_rope.lang.metrics import formula_metrics

TRUE, FALSE = Const(True), Const(False)


class NotInFragmentError(FormalRopeError):
    """The language is outside the requested fragment; `fragment_class` names it, the message gives the witness."""

    def __init__(self, message: str, fragment_class: str):
        self.fragment_class = fragment_class
        super().__init__(message)


# --------------------------------------------------------------------------- folding builders
def _folded(node, absorbing: Formula, neutral: Formula, left: Formula, right: Formula) -> Formula:
    """`node(left, right)` with constants folded: the absorbing element wins, the neutral one drops,
    and a subformula joined with itself (the same shared object) is itself."""
    if left == absorbing or right == absorbing:
        return absorbing
    if left == neutral:
        return right
    if right == neutral or left is right:
        return left
    return node(left, right)


def conjunction(left: Formula, right: Formula) -> Formula:
    return _folded(And, FALSE, TRUE, left, right)


def disjunction(left: Formula, right: Formula) -> Formula:
    return _folded(Or, TRUE, FALSE, left, right)


def negation(child: Formula) -> Formula:
    if isinstance(child, Const):
        return Const(not child.value)
    if isinstance(child, Not):
        return child.child
    return Not(child)


def past(child: Formula) -> Formula:
    return FALSE if child == FALSE else Past(child)


def any_of(parts: list[Formula]) -> Formula:
    """Left-nested disjunction of `parts` (folded); FALSE when empty."""
    result = FALSE
    for part in parts:
        result = disjunction(result, part)
    return result


def symbol_set(symbols: list[int], alphabet: tuple[str, ...]) -> Formula:
    """"The symbol here is one of `symbols`", valid at positions 1..N (inside P): the shorter of the
    atoms' disjunction and the negated disjunction of the other symbols."""
    chosen = sorted(set(symbols))
    if not chosen:
        return FALSE
    others = [s for s in range(len(alphabet)) if s not in set(chosen)]
    if not others:
        return TRUE
    if len(others) < len(chosen):
        return negation(any_of([Atom(alphabet[s]) for s in others]))
    return any_of([Atom(alphabet[s]) for s in chosen])


# ------------------------------------------------------------------------------ construction
@dataclass(frozen=True)
class AutomatonFormula:
    """The formula of a PODFA's language and what it was built from.

    `state_formulas[q]` is in_q for every state the acceptance formula uses (None otherwise).
    """

    formula: Formula
    dfa: DFA  # the minimal complete DFA the formula describes
    state_formulas: tuple[Formula | None, ...]
    live: tuple[bool, ...]


def _successors(dfa: DFA) -> list[set[int]]:
    return [set(dfa.transitions[q].tolist()) - {q} for q in range(dfa.n_states)]


def _is_up_set(members: np.ndarray, successors: list[set[int]]) -> bool:
    return all(members[t] for q in np.flatnonzero(members).tolist() for t in successors[q])


def podfa_to_formula(dfa: DFA) -> AutomatonFormula:
    """Lemma C.1 on the minimal DFA of `dfa`'s language (see the module docstring).

    Raises NotInFragmentError (naming the class and the PODFA witness) when the minimal DFA is not
    partially ordered, i.e. the language is not in LTL[P].
    """
    require_dfa(dfa, "podfa_to_formula", "dfa")
    minimal = minimize(dfa)
    cycle = block_cycle(minimal, 1)
    if cycle is not None:
        raise NotInFragmentError(
            "the language is not in LTL[P]: " + podfa_witness(minimal)["explanation"], "not LTL[P]"
        )
    alphabet = minimal.alphabet
    n_states, table = minimal.n_states, minimal.transitions
    live = coaccessible_states(minimal)
    successors = _successors(minimal)
    start = minimal.start
    formulas: dict[int, Formula] = {}

    def entering(target_members: np.ndarray) -> Formula:
        """∨ over the states q' outside the set of in_q' ∧ (the symbol leads q' into the set)."""
        parts = []
        for source in range(n_states):
            if target_members[source]:
                continue
            symbols = np.flatnonzero(target_members[table[source]]).tolist()
            if symbols:
                parts.append(conjunction(state(source), symbol_set(symbols, alphabet)))
        return any_of(parts)

    def state(q: int) -> Formula:
        # Iterative over the partial order: predecessors first (chains can be hundreds long).
        pending = [q]
        while pending:
            current = pending[-1]
            if current in formulas:
                pending.pop()
                continue
            predecessors = [p for p in range(n_states) if p != current and current in successors[p]
                            and p not in formulas]
            if current != start and predecessors:
                pending.extend(predecessors)
                continue
            pending.pop()
            leaving = [s for s in range(len(alphabet)) if table[current, s] != current]
            if current == start:
                formulas[current] = negation(past(symbol_set(leaving, alphabet)))
                continue
            members = np.zeros(n_states, dtype=bool)
            members[current] = True
            entered = past(entering(members))
            left = past(conjunction(entered, symbol_set(leaving, alphabet)))
            formulas[current] = conjunction(entered, negation(left))
        return formulas[q]

    def inside(members: np.ndarray) -> Formula:
        """The run is in one of `members` at the readout (a disjunction of state formulas, or the
        entry test of an up-set)."""
        if not members.any():
            return FALSE
        if members[start] and _is_up_set(members, successors):
            return TRUE  # every reachable state lies above the start state
        if _is_up_set(members, successors):
            return past(entering(members))
        return any_of([state(q) for q in np.flatnonzero(members).tolist()])

    accepting = np.asarray(minimal.accepting, dtype=bool)
    direct = inside(accepting)
    # The complement describes the non-final states, dead ones included: worth it when they are few
    # or form an up-set (a forbidden pattern, once seen, is never unseen).
    rejecting = ~accepting
    formula = direct
    if _is_up_set(rejecting, successors) or rejecting.sum() < accepting.sum():
        complement = negation(inside(rejecting))
        if formula_metrics(complement).dag_size < formula_metrics(direct).dag_size:
            formula = complement
    state_formulas = tuple(formulas.get(q) for q in range(n_states))
    return AutomatonFormula(formula, minimal, state_formulas, tuple(bool(x) for x in live))
