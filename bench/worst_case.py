"""The worst-case search's cost per length against plain sampled evaluation of as many strings.

Trains one quick-scale run (or loads a checkpoint with --model), then at each length: the search
(`formal_rope.evaluation.engine.search`, starting from the run's own 16-string test set, `--budget`
strings beyond it) is timed, and so is plain sampled evaluation of the same number of strings
(`sampling.test_sets` draws them balanced, `evaluation.length_generalization.predict_pack`
classifies them): sampling plus one batched forward pass, what N* evaluation does per length.
Both in this process, one after the other, single-threaded; times are process CPU seconds.

    python bench/worst_case.py [--lang "(ab)*"] [--pe rope_p] [--steps 1000] [--budget 256] [--json]
"""

from __future__ import annotations

import argparse
import json
import time

import torch

from formal_rope.evaluation.engine import SearchSettings, search
from formal_rope.evaluation.length_generalization import predict_pack
from formal_rope.evaluation.models import PackScorer
from formal_rope.run_config.config import RunConfig
from formal_rope.runs import run_training
from formal_rope.sampling.datasets import test_sets
from formal_rope.training.resolve import resolve_dfa
from formal_rope.training.scales import scale_overrides
from formal_rope.training.trained_classifier import load_checkpoint

LENGTHS = (41, 100, 200, 300, 400, 500)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--lang", default="(ab)*")
    parser.add_argument("--pe", default="rope_p")
    parser.add_argument("--steps", type=int, default=None, help="Training steps (default: the quick scale's).")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--model", default=None, help="A trained checkpoint instead of training one.")
    parser.add_argument("--budget", type=int, default=256)
    parser.add_argument("--lengths", default=",".join(map(str, LENGTHS)))
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    torch.set_num_threads(1)
    if args.model is not None:
        loaded = load_checkpoint(args.model)
        model, config = loaded.model, loaded.config
    else:
        overrides = scale_overrides("quick")
        if args.steps is not None:
            overrides["steps"] = args.steps
        config = RunConfig(language=args.lang, pe=args.pe, seed=args.seed, **overrides).with_(test_max_length=41)
        _, model = run_training(config, progress=False)
    dfa = resolve_dfa(config)
    model.eval()
    scorer = PackScorer(model)
    rows = []
    for length in (int(text) for text in args.lengths.split(",")):
        start = test_sets(dfa, [length], config.n_per_length, config.eval_seed)
        settings = SearchSettings(budget=args.budget, seed=0)
        began = time.process_time()
        (found,) = search(scorer, dfa, start, settings=settings)
        search_s = time.process_time() - began
        entry = found.per_length[0]
        began = time.process_time()
        (plain,) = test_sets(dfa, [length], entry.tried, 1)
        predict_pack(model, plain.symbols)
        plain_s = time.process_time() - began
        rows.append({
            "length": length, "strings": entry.tried, "failures": entry.failures,
            "enumerated": ",".join(entry.enumerated) or "-", "search_cpu_s": round(search_s, 3),
            "sampled_eval_cpu_s": round(plain_s, 3), "ratio": round(search_s / max(plain_s, 1e-9), 2),
        })
    report = {"language": config.language, "pe": config.pe, "steps": config.steps, "budget": args.budget,
              "start_strings": config.n_per_length, "per_length": rows}
    if args.json:
        print(json.dumps(report))
        return
    print(f"{config.language} {config.pe}, {config.steps} steps; search budget {args.budget} strings per length "
          f"beyond {config.n_per_length} start strings")
    header = ("length", "strings", "failures", "enumerated", "search_cpu_s", "sampled_eval_cpu_s", "ratio")
    print("  ".join(f"{name:>18}" for name in header))
    for row in rows:
        print("  ".join(f"{row[name]!s:>18}" for name in header))


if __name__ == "__main__":
    main()
