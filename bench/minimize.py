"""Minimization benchmark: `minimize` (Hopcroft; on large automata after at most 32 vectorized
Moore rounds) vs the pure Moore reference `_minimize_moore`.

Both run in this process on the same automata; the tables must be identical. Cases:
  counter    a cycle of N states (default 20,001) with one accepting state, nothing merges:
             Moore needs N rounds, Hopcroft O(N log N) work
  a{K}       the minimal DFA of a{K} (K = 3000) over {a, b}, states randomly renumbered
  doubled    two interleaved copies of a mod-M counter (M = 5001) that must merge
  Σ*aΣ{S}    2^(S+1) states (S = 15), states randomly renumbered: shallow and wide, where the
             vectorized Moore rounds alone finish (checks that this case did not get slower)
  MLRegTest  all .att automata of data/mlregtest, minimized one after another

    python bench/minimize.py [--counter 20001] [--repeat-length 3000] [--mlregtest DIR]
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

import numpy as np

from formal_rope.automata import DFA, load_att, minimize, regex_to_dfa
from formal_rope.automata.ops import _minimize_moore
from formal_rope.lang.ast import AnySymbol, Concat, Repeat, Star, Symbol


def renumbered(dfa: DFA, rng: np.random.Generator) -> DFA:
    order = rng.permutation(dfa.n_states)
    inverse = np.argsort(order)
    return DFA(dfa.alphabet, inverse[dfa.transitions[order]], int(inverse[dfa.start]), dfa.accepting[order])


def timed(function, automata: list[DFA]) -> tuple[float, list[DFA]]:
    start = time.perf_counter()
    results = [function(dfa) for dfa in automata]
    return time.perf_counter() - start, results


def same(left: DFA, right: DFA) -> bool:
    return np.array_equal(left.transitions, right.transitions) and np.array_equal(left.accepting, right.accepting)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--counter", type=int, default=20_001, help="states of the counter cycle")
    parser.add_argument("--repeat-length", type=int, default=3000, help="K in a{K}")
    parser.add_argument("--suffix", type=int, default=15, help="S in Σ*aΣ{S}")
    parser.add_argument("--doubled", type=int, default=5001, help="M (odd), the period of the doubled counter")
    default_dir = Path(__file__).resolve().parent.parent / "data" / "mlregtest"
    parser.add_argument("--mlregtest", type=Path, default=default_dir, help="folder of .att files")
    args = parser.parse_args()
    rng = np.random.default_rng(0)

    n = args.counter
    counter = DFA(("a",), ((np.arange(n) + 1) % n)[:, None], 0, np.arange(n) == 0)
    chain = renumbered(regex_to_dfa(Repeat(Symbol("a"), args.repeat_length, args.repeat_length), ("a", "b")), rng)
    m = args.doubled
    # copy A state i -> copy B state i+1 -> copy A state i+2 ...; for odd M all 2M states are
    # reachable and a^k is accepted iff k = 0 mod M, so the two copies merge into M states.
    successor = np.concatenate([m + (np.arange(m) + 1) % m, (np.arange(m) + 1) % m])
    doubled = DFA(("a",), successor[:, None], 0, np.tile(np.arange(m) == 0, 2))
    suffix = Concat(Concat(Star(AnySymbol()), Symbol("a")), Repeat(AnySymbol(), args.suffix, args.suffix))
    shallow = renumbered(regex_to_dfa(suffix, ("a", "b")), rng)
    cases = [
        (f"counter ({n:,} states)", [counter]),
        (f"a{{{args.repeat_length}}} ({chain.n_states:,} states)", [chain]),
        (f"doubled ({2 * m:,} states)", [doubled]),
        (f"Σ*aΣ{{{args.suffix}}} ({shallow.n_states:,} states)", [shallow]),
    ]
    files = sorted(args.mlregtest.glob("*.att")) if args.mlregtest.is_dir() else []
    if files:
        cases.append((f"MLRegTest ({len(files)} files)", [load_att(path) for path in files]))
    else:
        print(f"(no .att files in {args.mlregtest}; MLRegTest case left out)")

    header = f"{'case':28} {'minimal':>8} {'minimize':>10} {'moore':>10} {'moore/minimize':>15}"
    print(header)
    print("-" * len(header))
    for name, automata in cases:
        hopcroft_time, ours = timed(minimize, automata)
        moore_time, reference = timed(_minimize_moore, automata)
        if not all(same(a, b) for a, b in zip(ours, reference)):
            raise SystemExit(f"{name}: minimize and the Moore reference disagree")
        states = sum(dfa.n_states for dfa in ours)
        print(f"{name:28} {states:8,} {hopcroft_time:9.3f}s {moore_time:9.3f}s {moore_time / hopcroft_time:14.1f}x")


if __name__ == "__main__":
    main()
