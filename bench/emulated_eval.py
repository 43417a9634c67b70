"""Emulated-format evaluation vs native torch fp32 on the same compiled model and strings.

Prints the wall time of both and the ratio emulated/native (target: <= 10x), for fp32 emulation
(numpy float32 fast path) and bf16 emulation (float64 + rounding after every op), and checks that
both modes agree on every string.

    python bench/emulated_eval.py [--length 1000] [--strings 8] [--formula 'P(a) & MOD_2^0']
"""

from __future__ import annotations

import argparse
import time

import numpy as np


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--formula", default="!P((a & MOD_2^0) | (b & MOD_2^1)) & MOD_2^1")
    parser.add_argument("--alphabet", default="ab")
    parser.add_argument("--length", type=int, default=1000)
    parser.add_argument("--strings", type=int, default=8)
    parser.add_argument("--repeats", type=int, default=2)
    args = parser.parse_args()

    import torch

    torch.set_num_threads(1)
    from formal_rope.compiler import compile_formula
    from formal_rope.lang.parser import parse_ltl
    from formal_rope.model.evaluate import evaluate

    alphabet = tuple(args.alphabet)
    formula = parse_ltl(args.formula, alphabet=alphabet)
    rng = np.random.default_rng(0)
    strings = ["".join(rng.choice(alphabet, size=args.length)) for _ in range(args.strings)]

    def best_time(model, fmt, mode):
        best, result = float("inf"), None
        for _ in range(args.repeats):
            start = time.perf_counter()
            result = evaluate(model, strings, fmt=fmt, mode=mode)
            best = min(best, time.perf_counter() - start)
        return best, result

    print(f"formula {args.formula!r}, {args.strings} strings of length {args.length}, torch threads = 1")
    compiled = compile_formula(formula, alphabet, fmt="fp32")
    native_time, native = best_time(compiled.ir, "fp32", "native")
    print(f"native fp32 (torch):            {native_time:8.3f} s   [baseline]")
    for fmt in ("fp32", "bf16"):
        model = compiled.ir if fmt == "fp32" else compile_formula(formula, alphabet, fmt=fmt).ir
        emulated_time, emulated = best_time(model, fmt, "emulated")
        agree = bool(np.array_equal(emulated.accepted, native.accepted))
        print(f"emulated {fmt:5s}:                 {emulated_time:8.3f} s   ratio {emulated_time / native_time:6.2f}x"
              f"   agrees with native fp32: {agree}")


if __name__ == "__main__":
    main()
