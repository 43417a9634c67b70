"""Accept margins of RoPE_P on (ab)* by length: why some quick-recipe seeds stop short of N* = 500.

Trains RoPE_P on (ab)* at quick scale for seeds 0-4 twice, with the quick recipe (uniform training
negatives) and with every training negative a near-miss (the stability experiment's
"all negatives near-misses" variant), each recipe as one pack of five, as `reproduce stability`
packs them with --workers 1. For every run it prints N* and, at lengths 42, 100, 200, ..., 500, the
accept margin logit(accept) - logit(reject) of the worst positive (smallest margin) and of the
worst near-miss negative (largest margin), over 64 test strings per length (half positives, a
quarter near-misses). A run accepts a string when its margin is > 0, so N* ends where the worst
positive's margin falls below 0 or the worst near-miss's rises above it.

    python docs/margins.py [--seeds 5] [--markdown]

docs/findings.md ("Stable RoPE_P") quotes its output; about 6 minutes on one core.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # the checkout's package, installed or not

LENGTHS = (42, 100, 200, 300, 400, 500)
RECIPES = {"quick recipe": {}, "all negatives near-misses": {"train_near_miss_fraction": 1.0}}


def margins(model, sets, n_symbols: int):
    """Per run and length: (min margin of a positive, max margin of a near-miss negative)."""
    import numpy as np
    import torch

    from formal_rope.training.model import encode_fixed_length

    rows = []
    with torch.no_grad():
        for labeled in sets:
            tokens, readout = encode_fixed_length(labeled.symbols, n_symbols)
            count = tokens.shape[0]
            logits = model(tokens[None].expand(model.runs, count, -1), readout[None].expand(model.runs, count))
            margin = (logits[..., 1] - logits[..., 0]).numpy()
            positive = np.asarray(labeled.labels, dtype=bool)
            near = labeled.near_miss
            rows.append((margin[:, positive].min(axis=1), margin[:, near].max(axis=1)))
    return rows


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, default=5)
    parser.add_argument("--markdown", action="store_true", help="print one Markdown table")
    args = parser.parse_args()

    import torch

    torch.set_num_threads(1)
    from formal_rope.run_config import RunConfig
    from formal_rope.runs import run_pack
    from formal_rope.sampling.datasets import test_sets
    from formal_rope.training import scale_overrides
    from formal_rope.training.resolve import resolve_dfa

    base = RunConfig("(ab)*", pe="rope_p", **scale_overrides("quick"))
    dfa = resolve_dfa(base)
    sets = test_sets(dfa, LENGTHS, n_per_length=64, seed=1)
    header = ["(ab)*, RoPE_P", "seed", "N*", *(f"length {n}" for n in LENGTHS)]
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    for recipe, overrides in RECIPES.items():
        configs = [base.with_(seed=seed, **overrides) for seed in range(args.seeds)]
        results, model = run_pack(configs)
        per_length = margins(model, sets, len(dfa.alphabet))
        for run, result in enumerate(results):
            cells = [f"{low[run]:+.2f} / {high[run]:+.2f}" for low, high in per_length]
            lines.append(f"| {recipe} | {result.config.seed} | {result.n_star} | " + " | ".join(cells) + " |")
            if not args.markdown:
                print(lines[-1], flush=True)
    if args.markdown:
        print("min positive margin / max near-miss margin per length:")
        print("\n".join(lines))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
