"""The LTL[P,MOD] formulas the compiler is checked on (tests, bench/compiled_suite.py, docs/compiler.md).

Each entry: formula text, alphabet, and (for the paper's languages) a regular expression of the
same language, so the formula itself is cross-checked against an independent DFA.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Example:
    formula: str
    alphabet: tuple[str, ...]
    regex: str | None = None
    note: str = ""


# At the readout position N+1, MOD_2^1 holds iff N is even (positions count from 1, SPEC §1).
LTL_P_MOD_EXAMPLES: tuple[Example, ...] = (
    Example("MOD_2^1", ("a",), "(aa)*", "(aa)*: N even <=> N+1 odd"),
    Example("!P((a & MOD_2^0) | (b & MOD_2^1)) & MOD_2^1", ("a", "b"), "(ab)*",
            "(ab)*: a only at odd, b only at even positions, even length"),
    Example("P(a & !P(true))", ("a", "b"), "aΣ*", "aΣ*: the first position holds a"),
    Example("P(a) & MOD_2^0", ("a", "b"), None, "some a, odd length"),
    Example("P(a)", ("a", "b"), "Σ*aΣ*", "some a"),
    Example("H(a)", ("a", "b"), "a*", "only a's"),
    Example("P(a & P(b))", ("a", "b"), "Σ*bΣ*aΣ*", "an a after a b"),
    Example("MOD_3^1", ("a", "b"), "(ΣΣΣ)*", "length divisible by 3"),
    Example("P(b & MOD_2^0)", ("a", "b"), None, "a b at an even position"),
    Example("!P(a & MOD_3^0) & P(b)", ("a", "b", "c"), None, "no a at a multiple of 3, some b"),
    Example("P(c & !P(a))", ("a", "b", "c"), None, "a c before the first a"),
    Example("MOD_2^1 <-> P(a)", ("a", "b"), None, "even length iff some a"),
    Example("P(a & MOD_2^1 & P(b & MOD_2^0))", ("a", "b"), None, "a at odd position after b at even position"),
    Example("H(a -> MOD_2^1)", ("a", "b"), None, "every a at an odd position"),
    Example("P(P(a) & b) & !P(c)", ("a", "b", "c"), None, "a b after an a, no c"),
    Example("MOD_5^0 & H(!c)", ("a", "b", "c"), None, "length = 4 mod 5, no c"),
    Example("MOD_4^1 | P(a & MOD_4^3)", ("a", "b"), None, "length = 0 mod 4, or an a at a position = 3 mod 4"),
)
