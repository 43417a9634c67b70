"""Abstract syntax trees for the two expression languages (frozen, hashable dataclasses).

LTL[P,Y,S,MOD] formulas are evaluated at positions 1..N+1 of bos w1..wN eos (SPEC section 1).
Regular expressions denote sets of strings over an alphabet of symbols (SPEC section 2).
Binary connectives are binary nodes (not n-ary) so that printing and re-parsing is the identity.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Union


class _Node:
    """Structural equality and hashing that never recurse, so ASTs thousands of levels deep (a
    2 000-symbol concatenation is a 2 000-deep left spine) work as dict keys and compare equal.

    Children are always built before their parents, so each node's hash is computed once, at
    construction, from its children's stored hashes (O(1) per node). Nodes are declared with
    `eq=False` so that the dataclass machinery keeps these methods instead of generating the
    recursive field-tuple versions.
    """

    def __post_init__(self) -> None:
        values = tuple(getattr(self, name) for name in self.__dataclass_fields__)
        object.__setattr__(self, "_hash", hash((type(self).__name__, values)))

    def __hash__(self) -> int:
        return self._hash

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, _Node):
            return NotImplemented
        pending = [(self, other)]
        while pending:
            left, right = pending.pop()
            if left is right:
                continue
            if type(left) is not type(right) or left._hash != right._hash:
                return False
            for name in left.__dataclass_fields__:
                mine, theirs = getattr(left, name), getattr(right, name)
                if isinstance(mine, _Node) and isinstance(theirs, _Node):
                    pending.append((mine, theirs))
                elif isinstance(mine, _Node) or isinstance(theirs, _Node) or mine != theirs:
                    return False
        return True

    def __reduce__(self):
        # Rebuild through the constructor, so the stored hash is recomputed in the new process
        # (string hashes are salted per process).
        return type(self), tuple(getattr(self, name) for name in self.__dataclass_fields__)


# ----------------------------------------------------------------------------- LTL
@dataclass(frozen=True, eq=False)
class Atom(_Node):
    """w_i = symbol."""

    symbol: str


@dataclass(frozen=True, eq=False)
class Const(_Node):
    value: bool


@dataclass(frozen=True, eq=False)
class Not(_Node):
    child: "Formula"


@dataclass(frozen=True, eq=False)
class And(_Node):
    left: "Formula"
    right: "Formula"


@dataclass(frozen=True, eq=False)
class Or(_Node):
    left: "Formula"
    right: "Formula"


@dataclass(frozen=True, eq=False)
class Implies(_Node):
    left: "Formula"
    right: "Formula"


@dataclass(frozen=True, eq=False)
class Iff(_Node):
    left: "Formula"
    right: "Formula"


@dataclass(frozen=True, eq=False)
class Past(_Node):
    """P(child): exists j < i with child at j."""

    child: "Formula"


@dataclass(frozen=True, eq=False)
class Yesterday(_Node):
    """Y^k(child): i > k and child at i - k (k >= 1)."""

    child: "Formula"
    k: int = 1


@dataclass(frozen=True, eq=False)
class Since(_Node):
    """left S right: exists j < i with right at j and left at every j < l < i."""

    left: "Formula"
    right: "Formula"


@dataclass(frozen=True, eq=False)
class Historically(_Node):
    """H(child): child at every j < i (= not P not child)."""

    child: "Formula"


@dataclass(frozen=True, eq=False)
class Mod(_Node):
    """MOD_m^r: i = r (mod m), positions counted from 1; m >= 1."""

    m: int
    r: int


Formula = Union[Atom, Const, Not, And, Or, Implies, Iff, Past, Yesterday, Since, Historically, Mod]
FORMULA_TYPES = (Atom, Const, Not, And, Or, Implies, Iff, Past, Yesterday, Since, Historically, Mod)


# --------------------------------------------------------------------------- regex
@dataclass(frozen=True, eq=False)
class Symbol(_Node):
    symbol: str


@dataclass(frozen=True, eq=False)
class Epsilon(_Node):
    """The empty string."""


@dataclass(frozen=True, eq=False)
class EmptySet(_Node):
    """The empty language."""


@dataclass(frozen=True, eq=False)
class AnySymbol(_Node):
    """Sigma or '.': any one symbol of the alphabet."""


@dataclass(frozen=True, eq=False)
class CharClass(_Node):
    """[abc] (negated=False) or [^ab] (negated=True, relative to the alphabet)."""

    symbols: tuple[str, ...]
    negated: bool = False


@dataclass(frozen=True, eq=False)
class Concat(_Node):
    left: "Regex"
    right: "Regex"


@dataclass(frozen=True, eq=False)
class Union_(_Node):
    left: "Regex"
    right: "Regex"


@dataclass(frozen=True, eq=False)
class Star(_Node):
    child: "Regex"


@dataclass(frozen=True, eq=False)
class Plus(_Node):
    child: "Regex"


@dataclass(frozen=True, eq=False)
class Optional_(_Node):
    child: "Regex"


@dataclass(frozen=True, eq=False)
class Repeat(_Node):
    """child{low} (high == low) or child{low,high}; high None means unbounded ({low,})."""

    child: "Regex"
    low: int
    high: int | None


@dataclass(frozen=True, eq=False)
class Intersect(_Node):
    left: "Regex"
    right: "Regex"


@dataclass(frozen=True, eq=False)
class Complement(_Node):
    """~r or (r)^c, relative to Sigma*."""

    child: "Regex"


Regex = Union[
    Symbol, Epsilon, EmptySet, AnySymbol, CharClass, Concat, Union_, Star, Plus, Optional_, Repeat, Intersect,
    Complement,
]
REGEX_TYPES = (
    Symbol, Epsilon, EmptySet, AnySymbol, CharClass, Concat, Union_, Star, Plus, Optional_, Repeat, Intersect,
    Complement,
)


_CHILD_FIELDS = ("child", "left", "right")


def children(node: Formula | Regex) -> tuple:
    """The direct sub-expressions of a formula or regex node, left before right."""
    return tuple(getattr(node, field) for field in _CHILD_FIELDS if hasattr(node, field))
