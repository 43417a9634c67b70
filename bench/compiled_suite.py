"""Compiled-model suite: every example LTL[P,MOD] formula, and Y heads, verified against the DFA.

Part A: each formula of formal_rope.compiler.examples compiled in fp32, bf16 and fp16 and verified
(exhaustive short strings + sampled strings up to --verify-to) in emulated arithmetic, plus native
torch bf16/fp16. Part B: Y^k heads: the compiler's scale C per format, ideal vs realized certified
range, and where the model first disagrees with the DFA. Prints Markdown tables (docs/compiler.md).

    python bench/compiled_suite.py [--verify-to 2000] [--quick]
"""

from __future__ import annotations

import argparse
import time


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--verify-to", type=int, default=2000)
    parser.add_argument("--quick", action="store_true", help="verify-to 200, fewer strings (smoke run)")
    parser.add_argument("--part", choices=("A", "B", "AB"), default="AB")
    args = parser.parse_args()
    verify_to = 200 if args.quick else args.verify_to

    import torch

    torch.set_num_threads(1)
    from formal_rope.compiler import compile_formula
    from formal_rope.compiler.examples import LTL_P_MOD_EXAMPLES
    from formal_rope.compiler.verify import verify_compiled
    from formal_rope.lang.parser import parse_ltl

    runs = [("fp32", "emulated", 10, 4), ("bf16", "emulated", 8, 2), ("fp16", "emulated", 8, 2),
            ("bf16", "native", 8, 4), ("fp16", "native", 8, 4)]
    if "A" in args.part:
        print(f"## Part A: LTL[P,MOD] formulas (sampled up to length {verify_to})\n")
        print("| formula | Σ | layers | heads | d_model | " + " | ".join(f"{f} {m}" for f, m, _, _ in runs) + " |")
        print("|---|---|---|---|---|" + "---|" * len(runs))
        for example in LTL_P_MOD_EXAMPLES:
            formula = parse_ltl(example.formula, alphabet=example.alphabet)
            cells = []
            shape = None
            for fmt, mode, exhaustive, per_length in runs:
                started = time.perf_counter()
                compiled = compile_formula(formula, example.alphabet, fmt=fmt)
                shape = shape or (len(compiled.ir.layers), compiled.ir.n_heads, compiled.ir.d_model)
                result = verify_compiled(compiled, fmt=fmt, mode=mode, exhaustive_up_to=exhaustive,
                                         verify_to=verify_to, per_length=per_length)
                seconds = time.perf_counter() - started
                if result.first_disagreement is None:
                    cells.append(f"{result.verified_strings} ok (≤{result.verified_max_length}, {seconds:.0f}s)")
                else:
                    cells.append(f"**first failure at length {result.first_disagreement.length}** "
                                 f"({result.disagreements}/{result.verified_strings})")
            cell = example.formula.replace("|", "\\|")  # a | inside a Markdown table cell
            print(f"| `{cell}` | {''.join(example.alphabet)} | {shape[0]} | {shape[1]} | {shape[2]} | "
                  + " | ".join(cells) + " |", flush=True)
        print()

    if "B" in args.part:
        from formal_rope.certify import certified_range

        print("## Part B: Y^k heads (g = 1 unless noted; C chosen by the compiler)\n")
        print(
            "| formula | format | g | C | ideal N_max | realized N_max | paper bound | verified "
            "(emulated) | first disagreement |"
        )
        print("|---|---|---|---|---|---|---|---|---|")
        cases = [("Y(a) & P(b)", 1.0), ("Y^2(a)", 1.0), ("Y(a) & P(b)", 0.5)]
        for text, freq in cases:
            for fmt in ("fp32", "bf16", "fp16"):
                formula = parse_ltl(text, alphabet=("a", "b"))
                compiled = compile_formula(formula, ("a", "b"), fmt=fmt, freq=freq)
                report = next(c for c in compiled.constructs if c.construct == "Y")
                k = int(next(n.offset for n in compiled.dag.nodes if n.kind == "yesterday"))
                paper = certified_range(k, freq, report.scale, fmt, "ideal").paper_sufficient_bound
                result = verify_compiled(compiled, fmt=fmt, mode="emulated", exhaustive_up_to=8,
                                         verify_to=min(verify_to, 2000), per_length=2 if fmt == "bf16" else 4)
                first = result.first_disagreement
                where = (
                    "none"
                    if first is None
                    else (
                        f"length {first.length} "
                        f"({'inside' if first.inside_certified_range else 'outside'} the certified range)"
                    )
                )
                print(f"| `{text}` | {fmt} | {freq:g} | {report.scale:g} | {report.certified_ideal} | "
                      f"{report.certified_length}{'+' if report.certified_is_lower_bound else ''} | {paper} | "
                      f"{result.verified_strings} strings ≤ {result.verified_max_length} | {where} |", flush=True)


if __name__ == "__main__":
    main()
