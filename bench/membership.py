"""Membership benchmark: vectorized DFA vs a Python loop over re.fullmatch (same strings).

For each language, n strings of length L (default 10^4 x 500; half members, half near-misses
or uniform strings) are classified three ways, timed in this run (best of --repeats):
  dfa (strings)   formal_rope.automata.accepts on the list of Python strings: everything from
                  the list to the bool verdicts is timed (type checks, string -> byte
                  conversion, validation, packing, the run, the accepting lookup)
  dfa (encoded)   accepts_encoded on the int64 matrix from encode_strings (the sampling/training
                  path; encoding not timed, index validation and the run timed)
  re loop         [pattern.fullmatch(s) is not None for s in strings] with an equivalent compiled
                  pattern on the same strings (compilation not timed)
The verdicts must agree; the ratios re / dfa are printed. The DFA is built (not timed) once.

    python bench/membership.py [--strings 10000] [--length 500] [--repeats 3]
"""

from __future__ import annotations

import argparse
import re
import time

import numpy as np

from formal_rope.automata import accepts, accepts_encoded, encode_strings, regex_to_dfa
from formal_rope.lang.ast import AnySymbol, Concat, Repeat, Star, Symbol

SIGMA_STAR = Star(AnySymbol())
ODD_ONES = Concat(Star(Symbol("0")), Concat(Symbol("1"), Star(Symbol("0"))))

# name, regex AST, alphabet, equivalent Python pattern, member generator
LANGUAGES = [
    ("parity (odd #1)", Concat(ODD_ONES, Star(Concat(ODD_ONES, ODD_ONES))), ("0", "1"), r"0*1(?:0*10*1)*0*", None),
    ("(ab)*", Star(Concat(Symbol("a"), Symbol("b"))), ("a", "b"), r"(?:ab)*", lambda length: "ab" * (length // 2)),
    ("(aa)*", Star(Concat(Symbol("a"), Symbol("a"))), ("a",), r"(?:aa)*", lambda length: "a" * length),
    (
        "Σ*abΣ*", Concat(SIGMA_STAR, Concat(Concat(Symbol("a"), Symbol("b")), SIGMA_STAR)), ("a", "b", "c"),
        r"[abc]*ab[abc]*", None,
    ),
    ("Σ*a", Concat(SIGMA_STAR, Symbol("a")), ("a", "b"), r"[ab]*a", None),
    ("Σ*aΣ^5", Concat(Concat(SIGMA_STAR, Symbol("a")), Repeat(AnySymbol(), 5, 5)), ("a", "b"), r"[ab]*a[ab]{5}", None),
]


def make_strings(alphabet, member, n_strings: int, length: int, rng: np.random.Generator) -> list[str]:
    """Uniform strings, or (when a member generator is given) half members and half near-misses."""
    if member is None or len(alphabet) == 1:
        lengths = [length] * n_strings if member is None else [length - (i % 2) for i in range(n_strings)]
        return ["".join(rng.choice(alphabet, size=k)) for k in lengths]
    strings = []
    for index in range(n_strings):
        word = list(member(length))
        if index % 2:  # near-miss: one substitution somewhere in the string
            position = int(rng.integers(len(word)))
            word[position] = alphabet[(alphabet.index(word[position]) + 1) % len(alphabet)]
        strings.append("".join(word))
    return strings


def best_time(function, repeats: int) -> tuple[float, object]:
    best, result = float("inf"), None
    for _ in range(repeats):
        start = time.perf_counter()
        result = function()
        best = min(best, time.perf_counter() - start)
    return best, result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--strings", type=int, default=10_000)
    parser.add_argument("--length", type=int, default=500)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    rng = np.random.default_rng(0)
    print(f"{args.strings} strings of length {args.length}, best of {args.repeats}")
    header = f"{'language':18} {'dfa strings':>12} {'dfa encoded':>12} {'re loop':>10} {'re/dfa':>8} {'re/encoded':>11}"
    print(header)
    print("-" * len(header))
    for name, regex, alphabet, pattern, member in LANGUAGES:
        dfa = regex_to_dfa(regex, alphabet)
        strings = make_strings(alphabet, member, args.strings, args.length, rng)
        symbols, lengths = encode_strings(strings, alphabet)
        compiled = re.compile(pattern)
        dfa_time, dfa_verdicts = best_time(lambda: accepts(dfa, strings), args.repeats)
        encoded_time, encoded_verdicts = best_time(lambda: accepts_encoded(dfa, symbols, lengths), args.repeats)
        re_time, re_verdicts = best_time(lambda: [compiled.fullmatch(s) is not None for s in strings], args.repeats)
        if dfa_verdicts.tolist() != re_verdicts or encoded_verdicts.tolist() != re_verdicts:
            raise SystemExit(f"{name}: DFA and re disagree")
        print(
            f"{name:18} {dfa_time * 1e3:10.1f}ms {encoded_time * 1e3:10.1f}ms {re_time * 1e3:8.1f}ms "
            f"{re_time / dfa_time:7.1f}x {re_time / encoded_time:10.1f}x   ({int(dfa_verdicts.sum())} members)"
        )


if __name__ == "__main__":
    main()
