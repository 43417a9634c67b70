"""N* evaluation of one trained run vs the naive per-length loop, measured in the same run.

Ours: formal_rope.evaluation.evaluate_model with eval_mode "nstar": test sets sampled lazily in blocks,
each length's set classified in one forward pass over its distinct strings (in memory-bounded chunks),
stopping at the first imperfect length.
Baseline: for every length 41..500, sample that length's set, run all its strings through the model
in one forward pass, record the accuracy; compute N* at the end.

Both see the same test strings (same eval seed) and must agree on N*. Times are process CPU seconds.

    python bench/nstar_eval.py [--lang "(ab)*"] [--pe rope_p] [--steps 300] [--json]
"""

from __future__ import annotations

import argparse
import json
import time

import numpy as np
import torch

from formal_rope.evaluation.length_generalization import n_star
from formal_rope.evaluation.pack_evaluation import evaluate_model
from formal_rope.run_config.config import RunConfig
from formal_rope.runs import run_training
from formal_rope.training.model import encode_fixed_length
from formal_rope.training.resolve import resolve_dfa
from formal_rope.training.scales import scale_overrides


def naive_nstar(model, config: RunConfig, dfa) -> tuple[int, list[float]]:
    from formal_rope.sampling import test_set

    model.eval()
    lengths, accuracies = [], []
    with torch.no_grad():
        for length in range(config.test_min_length, config.test_max_length + 1):
            labelled = test_set(dfa, length, config.n_per_length, config.eval_seed)
            tokens, readout = encode_fixed_length(labelled.symbols, model.n_symbols)
            logits = model(tokens, readout)
            predictions = (logits[:, 1] > logits[:, 0]).numpy()
            lengths.append(length)
            accuracies.append(float(np.mean(predictions == labelled.labels)))
    return n_star(lengths, accuracies), accuracies


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--lang", default="(ab)*")
    parser.add_argument("--pe", default="rope_p")
    parser.add_argument("--steps", type=int, default=None, help="Training steps (default: the quick scale's).")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    torch.set_num_threads(1)
    overrides = scale_overrides("quick")
    if args.steps is not None:
        overrides["steps"] = args.steps
    config = RunConfig(language=args.lang, pe=args.pe, **overrides).with_(eval_mode="nstar", test_max_length=41)
    result, model = run_training(config, progress=False)  # trains (and evaluates one length)
    config = config.with_(test_max_length=500)
    dfa = resolve_dfa(config)

    started = time.process_time()
    ours = evaluate_model(model, config, dfa, mode="nstar")
    ours_s = time.process_time() - started
    started = time.process_time()
    naive, _ = naive_nstar(model, config, dfa)
    naive_s = time.process_time() - started
    if naive != ours.n_star:
        raise SystemExit(f"N* disagrees: ours {ours.n_star}, naive {naive}")
    report = {
        "language": args.lang,
        "pe": args.pe,
        "steps": config.steps,
        "n_star": ours.n_star,
        "lengths_evaluated_ours": len(ours.per_length),
        "lengths_evaluated_naive": config.test_max_length - config.test_min_length + 1,
        "ours_cpu_s": round(ours_s, 2),
        "naive_cpu_s": round(naive_s, 2),
        "speedup": round(naive_s / max(ours_s, 1e-9), 2),
    }
    if args.json:
        print(json.dumps(report))
        return
    for key, value in report.items():
        print(f"{key:>24}: {value}")


if __name__ == "__main__":
    main()
