"""Abstract syntax trees for the two expression languages (frozen, hashable dataclasses).

LTL[P,Y,S,MOD] formulas are evaluated at positions 1..N+1 of bos w1..wN eos (SPEC section 1).
Regular expressions denote sets of strings over an alphabet of symbols (SPEC section 2).
Binary connectives are binary nodes (not n-ary) so that printing and re-parsing is the identity.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Union


# ----------------------------------------------------------------------------- LTL
@dataclass(frozen=True)
class Atom:
    """w_i = symbol."""

    symbol: str


@dataclass(frozen=True)
class Const:
    value: bool


@dataclass(frozen=True)
class Not:
    child: "Formula"


@dataclass(frozen=True)
class And:
    left: "Formula"
    right: "Formula"


@dataclass(frozen=True)
class Or:
    left: "Formula"
    right: "Formula"


@dataclass(frozen=True)
class Implies:
    left: "Formula"
    right: "Formula"


@dataclass(frozen=True)
class Iff:
    left: "Formula"
    right: "Formula"


@dataclass(frozen=True)
class Past:
    """P(child): exists j < i with child at j."""

    child: "Formula"


@dataclass(frozen=True)
class Yesterday:
    """Y^k(child): i > k and child at i - k (k >= 1)."""

    child: "Formula"
    k: int = 1


@dataclass(frozen=True)
class Since:
    """left S right: exists j < i with right at j and left at every j < l < i."""

    left: "Formula"
    right: "Formula"


@dataclass(frozen=True)
class Historically:
    """H(child): child at every j < i (= not P not child)."""

    child: "Formula"


@dataclass(frozen=True)
class Mod:
    """MOD_m^r: i = r (mod m), positions counted from 1; m >= 1."""

    m: int
    r: int


Formula = Union[Atom, Const, Not, And, Or, Implies, Iff, Past, Yesterday, Since, Historically, Mod]
FORMULA_TYPES = (Atom, Const, Not, And, Or, Implies, Iff, Past, Yesterday, Since, Historically, Mod)


# --------------------------------------------------------------------------- regex
@dataclass(frozen=True)
class Symbol:
    symbol: str


@dataclass(frozen=True)
class Epsilon:
    """The empty string."""


@dataclass(frozen=True)
class EmptySet:
    """The empty language."""


@dataclass(frozen=True)
class AnySymbol:
    """Sigma or '.': any one symbol of the alphabet."""


@dataclass(frozen=True)
class CharClass:
    """[abc] (negated=False) or [^ab] (negated=True, relative to the alphabet)."""

    symbols: tuple[str, ...]
    negated: bool = False


@dataclass(frozen=True)
class Concat:
    left: "Regex"
    right: "Regex"


@dataclass(frozen=True)
class Union_:
    left: "Regex"
    right: "Regex"


@dataclass(frozen=True)
class Star:
    child: "Regex"


@dataclass(frozen=True)
class Plus:
    child: "Regex"


@dataclass(frozen=True)
class Optional_:
    child: "Regex"


@dataclass(frozen=True)
class Repeat:
    """child{low} (high == low) or child{low,high}; high None means unbounded ({low,})."""

    child: "Regex"
    low: int
    high: int | None


@dataclass(frozen=True)
class Intersect:
    left: "Regex"
    right: "Regex"


@dataclass(frozen=True)
class Complement:
    """~r or (r)^c, relative to Sigma*."""

    child: "Regex"


Regex = Union[Symbol, Epsilon, EmptySet, AnySymbol, CharClass, Concat, Union_, Star, Plus, Optional_, Repeat, Intersect, Complement]
REGEX_TYPES = (Symbol, Epsilon, EmptySet, AnySymbol, CharClass, Concat, Union_, Star, Plus, Optional_, Repeat, Intersect, Complement)


_CHILD_FIELDS = ("child", "left", "right")


def children(node: Formula | Regex) -> tuple:
    """The direct sub-expressions of a formula or regex node, left before right."""
    return tuple(getattr(node, field) for field in _CHILD_FIELDS if hasattr(node, field))
