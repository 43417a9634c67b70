"""Named languages with fixed alphabets: the core paper's training languages (Table 1 and §3.4) plus
LTL formulas that define some of them, so regex and formula pipelines can be cross-checked.

A registry alphabet applies only when the user names the entry (`aa_star`) or types one of the core
paper's five languages verbatim (`PAPER_EXPRESSIONS`: `(aa)*`, `(ab)*`, `aΣ*`, `Σ*a`, `Σ*abΣ*`),
which then denote the paper's languages (SPEC §2); `lookup` finds exactly those. Any other
expression is over its own symbols; `lookup_ast` only recognizes that a parsed expression over a
given alphabet *is* a registry language (the ASCII `a.*` over {a, b} is `a_sigma_star`), for notes.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass

from formal_rope.lang.ast import Formula, Regex
from formal_rope.lang.parser import parse_ltl, parse_regex


@dataclass(frozen=True)
class RegistryEntry:
    """One named language: its expression (regex or LTL text), fixed alphabet, description and source.

    `ast` parses the expression (cached); `resolve_language` turns a name or expression into an entry.
    """

    name: str
    expression: str
    kind: str  # "regex" | "ltl"
    alphabet: tuple[str, ...]
    description: str
    source: str  # where the language comes from

    @property
    def ast(self) -> Formula | Regex:
        return _entry_ast(self.name)


_PAPER = "core paper, Table 1"
_PARITY = "core paper, §3.4 and Prop. B.3"
_LC25 = "Li & Cotterell 2025, §E.1.2 and Table 1"

REGISTRY: tuple[RegistryEntry, ...] = (
    RegistryEntry("aa_star", "(aa)*", "regex", ("a",), "even length: a repeated an even number of times", _PAPER),
    RegistryEntry("ab_star", "(ab)*", "regex", ("a", "b"), "ab repeated (ab)^n, n >= 0", _PAPER),
    RegistryEntry("a_sigma_star", "aΣ*", "regex", ("a", "b"), "starts with a", _PAPER),
    RegistryEntry("sigma_star_a", "Σ*a", "regex", ("a", "b"), "ends with a", _PAPER),
    RegistryEntry("contains_ab", "Σ*abΣ*", "regex", ("a", "b", "c"), "contains the factor ab (|Σ| = 3)", _PAPER),
    RegistryEntry(
        "contains_ab_binary", "Σ*abΣ*", "regex", ("a", "b"), "contains the factor ab over {a,b} (|Σ| = 2)",
        "core paper, Prop. B.2",
    ),
    # (aa)* read over {a, b}. The paper's Table 1 gives (aa)* the defining property "even length" and
    # puts every language over an alphabet with |Σ| > 1; over {a, b} that is (ΣΣ)*, not the literal
    # regex (aa)* (a's only: a different language, which also forbids b). `aa_star` above stays the
    # unary reading over {a} (SPEC §2), where both readings coincide; its runs keep their ids.
    RegistryEntry(
        "aa_star_ab", "(ΣΣ)*", "regex", ("a", "b"),
        "(aa)* over {a,b} as the paper reads it (Table 1: even length, |Σ| > 1): every string of even length; "
        "aa_star is the unary reading over {a}, where the literal regex and 'even length' agree",
        "core paper, Table 1 and App. E.1",
    ),
    RegistryEntry("parity", "(0*10*1)*0*", "regex", ("0", "1"), "Parity: an even number of 1s", _PARITY),
    RegistryEntry("parity_odd", "0*1(0*10*1)*0*", "regex", ("0", "1"), "an odd number of 1s", _PARITY),
    RegistryEntry(
        "aa_star_ltl", "MOD_2^1", "ltl", ("a",), "(aa)* as a formula: N+1 odd at the readout, i.e. N even",
        "core paper, Prop. 3.2",
    ),
    RegistryEntry(
        "ab_star_ltl",
        "MOD_2^1 & !P(a & MOD_2^0) & !P(b & MOD_2^1)",
        "ltl",
        ("a", "b"),
        "(ab)* as a formula: N even, a at odd and b at even positions",
        "core paper, Prop. 3.2",
    ),
    RegistryEntry(
        "a_sigma_star_ltl", "P(a & !P(a | b))", "ltl", ("a", "b"), "aΣ* as a formula: some a with nothing before it",
        "LTL[P]",
    ),
    RegistryEntry(
        "sigma_star_a_ltl", "Y(a)", "ltl", ("a", "b"), "Σ*a as a formula: the last symbol is a", "core paper, Table 1"
    ),
    RegistryEntry(
        "contains_ab_ltl", "P(b & Y(a))", "ltl", ("a", "b", "c"), "Σ*abΣ* as a formula: some b right after an a",
        "core paper, §3.4",
    ),
    RegistryEntry(
        "has_a_odd_length", "P(a) & MOD_2^0", "ltl", ("a", "b"), "contains an a and has odd length (N+1 even)",
        "LTL[P,MOD] example",
    ),
    RegistryEntry("a_since_b", "a S b", "ltl", ("a", "b", "c"), "a b followed only by a's: Σ*ba*", "LTL[S] example"),
    # Li & Cotterell (NeurIPS 2025), §E.1.2: their regular languages (CNT, aⁿbⁿ, is not regular), each
    # over the smallest alphabet that keeps its class. Their RDP/LDP symbols b0, b1, b2 are written x,
    # y, z and a1, a2 are a, b (single-character symbols); LT/PT take |Σ| = 3 where |Σ| > 2 matters.
    *(RegistryEntry(name, expression, "regex", tuple(alphabet), description, _LC25)
      for name, expression, alphabet, description in (
          ("lc_parity", "a*(ba*ba*)*", "ab", "PARITY: an even number of b (regular, not star-free)"),
          ("lc_dyck12", "(a(ab)*b)*", "ab", "DYCK(1,2): Dyck-1 of depth at most 2 (star-free, not LTL[P])"),
          ("lc_dyck11", "(ab)*", "ab", "DYCK(1,1): (ab)* (star-free, not LTL[P])"),
          ("lc_lt2", "Σ*abΣ*", "abc", "LT-2: contains the factor ab, |Σ| = 3 (star-free, not LTL[P])"),
          ("lc_rdp1", "[ay]*ax*", "axy", "RDP-1: (Σ∖{b0})* a (Σ∖{a,b1})*, b0 = x, b1 = y (LTL[P,F], not LTL[P])"),
          ("lc_last", "Σ*b", "ab", "LAST: ends with b (LTL[P,F], not LTL[P])"),
          ("lc_pt2", "Σ*aΣ*bΣ*", "abc", "PT-2: the subsequence ab, |Σ| = 3 (LTL[P])"),
          ("lc_lt1", "Σ*aΣ*", "ab", "LT-1: contains an a (LTL[P])"),
          ("lc_ldp1", "y*a[ax]*", "axy", "LDP-1: (Σ∖{a,b0})* a (Σ∖{b1})*, b0 = x, b1 = y (LTL[P])"),
          ("lc_ldp2", "[byz]*a[axz]*b[abxy]*", "abxyz",
           "LDP-2: (Σ∖{a1,b0})* a1 (Σ∖{a2,b1})* a2 (Σ∖{b2})*, a1 = a, a2 = b, b0 = x, b1 = y, b2 = z (LTL[P])"),
          ("lc_first", "bΣ*", "ab", "FIRST: begins with b (LTL[P])"),
      )),
)


# The core paper's five training languages (Table 1), the only expressions that bring a registry
# alphabet when typed (blanks ignored): Σ*abΣ* is over {a, b, c} there, not its own {a, b}.
PAPER_EXPRESSIONS = ("(aa)*", "(ab)*", "aΣ*", "Σ*a", "Σ*abΣ*")


def registry_entries() -> tuple[RegistryEntry, ...]:
    """Every registered language, in the order `formalrope languages` lists them."""
    return REGISTRY


def _by_name() -> dict[str, RegistryEntry]:
    return {entry.name: entry for entry in REGISTRY}


@functools.lru_cache(maxsize=None)
def _entry_ast(name: str) -> Formula | Regex:
    entry = _by_name()[name]
    parse = parse_ltl if entry.kind == "ltl" else parse_regex
    return parse(entry.expression, entry.alphabet)


def _preferring(matches: list[RegistryEntry], alphabet) -> RegistryEntry | None:
    """The match over `alphabet` (as a set: order does not change the language), else the first.

    Σ*abΣ* is both contains_ab ({a,b,c}) and contains_ab_binary ({a,b}); with --alphabet ab the
    expression names the latter."""
    if alphabet is not None:
        for entry in matches:
            if set(entry.alphabet) == set(alphabet):
                return entry
    return matches[0] if matches else None


def lookup(text: str, alphabet=None) -> RegistryEntry | None:
    """The entry named `text`, else, when `text` is one of the paper's five languages verbatim
    (`PAPER_EXPRESSIONS`, blanks ignored), its entry: the one over `alphabet` when given and one
    exists (Σ*abΣ* over {a, b} is contains_ab_binary), otherwise the paper's. None for anything else."""
    key = text.strip()
    by_name = _by_name()
    if key in by_name:
        return by_name[key]
    compact = "".join(key.split())
    if compact not in PAPER_EXPRESSIONS:
        return None
    return _preferring([entry for entry in REGISTRY if entry.kind == "regex" and entry.expression == compact], alphabet)


def lookup_ast(kind: str, ast: Formula | Regex, alphabet) -> RegistryEntry | None:
    """The entry of this kind whose parsed expression equals `ast` over `alphabet` (as a set), i.e.
    the registry language this expression denotes (a.* over {a, b} -> a_sigma_star); else None."""
    for entry in REGISTRY:
        if entry.kind == kind and entry.ast == ast and set(entry.alphabet) == set(alphabet):
            return entry
    return None


def registry_names() -> tuple[str, ...]:
    """The registered language names (`aa_star`, `ab_star`, ...), in registry order."""
    return tuple(entry.name for entry in REGISTRY)
