"""Classes stage: decide LTL[P], LTL[P,MOD], star-freeness and Green-triviality of a regular language.

`classify(dfa)` is the entry point; the submodules expose the two independent criteria:
`podfa` (automaton side: PODFA / PODFA_k) and `monoid` + `varieties` (syntactic monoid side:
Green's relations, aperiodicity, the stable semigroup and QR).
"""

from formal_rope.classes.classify import Classification, classify, format_word
from formal_rope.classes.monoid import (
    DEFAULT_MAX_MONOID_SIZE,
    MonoidTooLargeError,
    TransitionMonoid,
    aperiodic_mask,
    h_classes,
    j_classes,
    l_classes,
    r_classes,
    transition_monoid,
)
from formal_rope.classes.podfa import (
    CycleStructure,
    StateCycle,
    block_cycle,
    cycle_structure,
    is_podfa,
    k_automaton,
    least_podfa_block_length,
)
from formal_rope.classes.varieties import (
    LengthSets,
    block_semigroup_r_cycle,
    is_block_semigroup_r_trivial,
    least_r_trivial_block_length,
    length_sets,
)

__all__ = [
    "DEFAULT_MAX_MONOID_SIZE",
    "Classification",
    "CycleStructure",
    "LengthSets",
    "MonoidTooLargeError",
    "StateCycle",
    "TransitionMonoid",
    "aperiodic_mask",
    "block_cycle",
    "block_semigroup_r_cycle",
    "classify",
    "cycle_structure",
    "format_word",
    "h_classes",
    "is_block_semigroup_r_trivial",
    "is_podfa",
    "j_classes",
    "k_automaton",
    "l_classes",
    "least_podfa_block_length",
    "least_r_trivial_block_length",
    "length_sets",
    "r_classes",
    "transition_monoid",
]
