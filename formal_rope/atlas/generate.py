"""Random languages of a chosen logic class, for the atlas: formulas of bounded depth drawn from a
fragment's grammar, kept only when the class decider puts them exactly in that class.

Families (`FAMILIES`):
  ltl_p       LTL[P] formulas (atoms, ¬, ∧, ∨, P) whose language is in LTL[P]
  ltl_p_mod   LTL[P,MOD] formulas with MOD_k^r for one period k whose language is in LTL[P,MOD] but not
              LTL[P], with least block length (the decider's `mod_k`) exactly k
  ltl_p_y     LTL[P,Y] formulas (P, Y, Y^2) whose language is not in LTL[P]: star-free, outside
              LTL[P,MOD] (what neither NoPE nor a period expresses, by the theory); not necessarily
              locally testable, since P may wrap Y
  counting    "the number of x is r mod p": regular, not star-free, not LTL[P,MOD] (the control no
              positional encoding of the theory expresses)

A draw is kept only if (1) the decider's verdict is the family's class exactly (not a smaller one),
(2) its minimal DFA is new up to equivalence among the languages already kept (canonical tables:
`minimize` numbers states in BFS order, so equal languages over the same alphabet have equal tables),
(3) it mentions every symbol of its alphabet, so the printed text resolves to the same language
without --alphabet, and (4) both classes (accepted and rejected strings) are non-empty at enough
training and test lengths for N* to be measured (`balanced_fraction`). Everything is driven by one
`random.Random(seed)`, so the same call gives the same languages.
"""

from __future__ import annotations

import random
from collections.abc import Iterable
from dataclasses import dataclass

import numpy as np

from formal_rope.automata.dfa import DFA
from formal_rope.automata.language import language_dfa
from formal_rope.classes.classify import Classification, classify
from formal_rope.errors import FormalRopeError
from formal_rope.lang.analysis import symbols_of
from formal_rope.lang.ast import And, Atom, Formula, Mod, Not, Or, Past, Yesterday
from formal_rope.lang.printer import format_ltl
from formal_rope.lang.source import resolve_language
from formal_rope.sampling.counts import labelled_graph, log_counts

FAMILIES = ("ltl_p", "ltl_p_mod", "ltl_p_y", "counting")
# RunConfig's default training and test lengths (train 0..40, test 41..500): a generated language must
# have strings of both classes at enough of these lengths to train on and to measure N* at. Length 0
# holds one string, never both classes, so the training range counted here starts at 1.
TRAIN_LENGTHS = (1, 40)
TEST_LENGTHS = (41, 500)
# Periodic languages (MOD at the readout: "the length is r mod k") have one class empty at k-1 of
# every k lengths; 1/5 keeps every period up to 5 while dropping languages that are almost one class.
MIN_BALANCED_FRACTION = 0.2
# Draws without a kept language after which the depth grows by one (at most MAX_EXTRA_DEPTH times): a
# depth-3 grammar over {a, b} holds only some 45 distinct LTL[P,MOD] languages of period 2.
STALL_DRAWS = 2_000
MAX_EXTRA_DEPTH = 2


@dataclass(frozen=True)
class GeneratedLanguage:
    """One kept draw: the `language` text (what --lang takes), its alphabet, family, intended period
    (None outside ltl_p_mod and counting), minimal DFA, the decider's verdicts, and the fraction of
    test lengths at which both classes are non-empty."""

    family: str
    language: str
    alphabet: tuple[str, ...]
    period: int | None
    dfa: DFA
    classification: Classification
    balanced_fraction: float


def dfa_key(dfa: DFA) -> tuple:
    """A hashable canonical form of a *minimal* DFA: equal keys ⇔ equal languages (same alphabet order)."""
    return (dfa.alphabet, dfa.start, dfa.transitions.tobytes(), dfa.transitions.shape, dfa.accepting.tobytes())


def both_classes_nonempty(dfa: DFA, lengths: tuple[int, int]) -> np.ndarray:
    """For each length in the inclusive range, whether some string of that length is accepted and
    some other is rejected (exact: log-space path counts are -inf exactly when a count is zero)."""
    low, high = lengths
    span = np.arange(low, high + 1)
    # One pass over the disjoint union of the accepting copy (start) and the rejecting copy (n + start).
    counts = log_counts(labelled_graph(dfa), high)
    return counts.nonempty(span, dfa.start) & counts.nonempty(span, dfa.n_states + dfa.start)


def balanced_fraction(dfa: DFA, lengths: tuple[int, int] = TEST_LENGTHS) -> float:
    """The fraction of lengths in the range at which both classes are non-empty."""
    return float(both_classes_nonempty(dfa, lengths).mean())


def in_family_class(family: str, verdict: Classification, period: int | None) -> bool:
    """Whether the decider puts the language exactly in the family's class (not a smaller one)."""
    if family == "ltl_p":
        return verdict.ltl_p
    if family == "ltl_p_mod":
        return not verdict.ltl_p and verdict.ltl_p_mod and verdict.mod_k == period
    if family == "ltl_p_y":
        # LTL[P,Y] is star-free, so outside LTL[P] it is outside LTL[P,MOD] too; checked, not assumed.
        return not verdict.ltl_p and not verdict.ltl_p_mod and verdict.star_free
    if family == "counting":
        return not verdict.ltl_p_mod and not verdict.star_free
    raise FormalRopeError(f"unknown language family {family!r}; choose one of {', '.join(FAMILIES)}")


# ------------------------------------------------------------------------------- random formulas
def random_formula(rng: random.Random, family: str, alphabet: tuple[str, ...], depth: int,
                   period: int | None = None) -> Formula:
    """A formula of at most `depth` nested operators from the family's grammar (one draw).

    Inner nodes are ¬, ∧, ∨ and P, plus Y and Y^2 for ltl_p_y; leaves are atoms, plus MOD_period^r for
    ltl_p_mod. Atoms appear only under a temporal operator: at the readout position no symbol is
    present, so a bare atom there is just false. ∧ and ∨ never join two equal operands, ¬¬φ is φ,
    and two different symbols are joined by ∨ (never both at one position)."""
    if family not in ("ltl_p", "ltl_p_mod", "ltl_p_y"):
        raise FormalRopeError(f"family {family!r} has no formula grammar (formula families: ltl_p, ltl_p_mod, ltl_p_y)")
    temporal = ["past"] + (["yesterday", "yesterday2"] if family == "ltl_p_y" else [])
    operators = ["not", "and", "or"] + 2 * temporal

    def leaf(inside: bool) -> Formula:
        if family == "ltl_p_mod" and (not inside or rng.random() < 0.4):
            return Mod(period, rng.randrange(period))
        if not inside:  # no MOD to stand alone at the readout: a temporal operator on an atom
            return apply(rng.choice(temporal), Atom(rng.choice(alphabet)))
        return Atom(rng.choice(alphabet))

    def apply(operator: str, child: Formula) -> Formula:
        return Past(child) if operator == "past" else Yesterday(child, 2 if operator == "yesterday2" else 1)

    def grow(budget: int, inside: bool, root: bool = False) -> Formula:
        if budget == 0 or (not root and rng.random() < 0.3):
            return leaf(inside)
        operator = rng.choice(operators)
        if operator == "not":
            child = grow(budget - 1, inside)
            return child.child if isinstance(child, Not) else Not(child)
        if operator in ("and", "or"):
            left, right = grow(budget - 1, inside), grow(budget - 1, inside)
            if left == right:
                return left
            if operator == "and" and isinstance(left, Atom) and isinstance(right, Atom):
                return Or(left, right)  # two symbols at one position: the conjunction would just be false
            return (And if operator == "and" else Or)(left, right)
        return apply(operator, grow(budget - 1, True))

    return grow(depth, False, root=True)


def counting_regex(symbol: str, alphabet: tuple[str, ...], modulus: int, residue: int) -> str:
    """The regex of "the number of `symbol`s is `residue` mod `modulus`" over `alphabet`."""
    others = [s for s in alphabet if s != symbol]
    rest = others[0] if len(others) == 1 else "[" + "".join(others) + "]"
    block = f"{rest}*{symbol}"
    prefix = "" if residue == 0 else f"{block}" if residue == 1 else f"({block}){{{residue}}}"
    return f"{prefix}(({block}){{{modulus}}})*{rest}*"


def _counting_candidates(rng: random.Random, alphabets: tuple[tuple[str, ...], ...]) -> Iterable[tuple[str, int]]:
    moduli = (2, 3, 4, 5)
    while True:
        alphabet = rng.choice(alphabets)
        modulus = rng.choice(moduli)
        yield "re:" + counting_regex(rng.choice(alphabet), alphabet, modulus, rng.randrange(modulus)), modulus


def _formula_candidates(rng: random.Random, family: str, alphabets, depth: list[int], period: int | None):
    while True:
        alphabet = rng.choice(alphabets)
        formula = random_formula(rng, family, alphabet, depth[0], period)
        # A formula that never mentions some symbol would resolve over a smaller alphabet (or need
        # --alphabet when it negates): not the language drawn, so it is not a candidate.
        yield ("ltl:" + format_ltl(formula) if symbols_of(formula) == alphabet else None), period


def generate_family(
    family: str,
    count: int,
    seed: int,
    *,
    period: int | None = None,
    depth: int = 3,
    alphabets: tuple[tuple[str, ...], ...] = (("a", "b"), ("a", "b", "c")),
    min_states: int = 3,
    min_balanced_fraction: float = MIN_BALANCED_FRACTION,
    max_draws: int = 100_000,
    known: set | None = None,
    stall_draws: int = STALL_DRAWS,
    max_extra_depth: int = MAX_EXTRA_DEPTH,
) -> tuple[GeneratedLanguage, ...]:
    """`count` languages of `family`, drawn with `random.Random(seed)` and filtered as the module says.

    depth: the formulas' nesting bound; after `stall_draws` draws without a new language it grows by one,
    at most `max_extra_depth` times, so large counts can be met (the default set never needs it).
    period: the intended least period k for ltl_p_mod (2..5 in the atlas); ignored elsewhere.
    min_states: the least size of the minimal complete DFA (drops near-trivial draws such as "contains a").
    known: canonical DFA keys (`dfa_key`) already taken; the kept languages' keys are added to it, so
    several families drawn in turn stay pairwise inequivalent. FormalRopeError when `max_draws` draws
    do not give `count` languages."""
    if family not in FAMILIES:
        raise FormalRopeError(f"unknown language family {family!r}; choose one of {', '.join(FAMILIES)}")
    if family == "ltl_p_mod" and (period is None or period < 2):
        raise FormalRopeError("family ltl_p_mod needs a period of at least 2 (period=2..5 in the atlas)")
    if family != "ltl_p_mod":
        period = None
    alphabets = tuple(tuple(sorted(alphabet)) for alphabet in alphabets)
    rng = random.Random(f"{family}:{period}:{seed}")
    current_depth = [depth]
    known = set() if known is None else known
    candidates = (
        _counting_candidates(rng, alphabets) if family == "counting"
        else _formula_candidates(rng, family, alphabets, current_depth, period)
    )
    kept: list[GeneratedLanguage] = []
    seen_texts: set[str] = set()
    since_kept = 0
    for _, (text, intended) in zip(range(max_draws), candidates):
        since_kept += 1
        if since_kept > stall_draws and current_depth[0] < depth + max_extra_depth:
            # The formulas of this depth are (nearly) exhausted: few new texts, fewer new languages.
            current_depth[0] += 1
            since_kept = 0
        if text is None or text in seen_texts:
            continue
        seen_texts.add(text)
        language = _accepted(family, text, intended, period, alphabets, min_states, min_balanced_fraction, known)
        if language is not None:
            since_kept = 0
            kept.append(language)
            known.add(dfa_key(language.dfa))
            if len(kept) == count:
                return tuple(kept)
    raise FormalRopeError(
        f"only {len(kept)} of {count} {family} languages{f' of period {period}' if period else ''} found in "
        f"{max_draws} draws (seed {seed}); lower the count, raise the depth or relax the filters"
    )


def _accepted(family, text, intended, period, alphabets, min_states, min_balanced_fraction, known):
    """The GeneratedLanguage for `text` when it passes every filter, else None."""
    resolved = resolve_language(text)
    if resolved.alphabet not in alphabets:  # a symbol of the alphabet is never mentioned
        return None
    dfa = language_dfa(resolved)
    if dfa.n_states < min_states or dfa_key(dfa) in known:
        return None
    verdict = classify(dfa)
    if not in_family_class(family, verdict, period):
        return None
    fraction = balanced_fraction(dfa)
    if fraction < min_balanced_fraction or balanced_fraction(dfa, TRAIN_LENGTHS) < min_balanced_fraction:
        return None
    return GeneratedLanguage(family, text, resolved.alphabet, intended, dfa, verdict, fraction)
