"""What NNCH's score costs a run: evaluation with `nnch_samples` uniform strings per length vs none,
relative to the whole run (training + balanced evaluation), measured in the same process.

One quick-scale pack (the settings `reproduce` runs: 2 layers, d_model 32, 1,000 steps, 16 balanced
strings per length at 41..500) is trained once without NNCH's strings; then its evaluation is timed
alternately with 0 and with each requested count, `--repeats` times each, and the overhead of a count
is (median eval with it - median eval without) / (training + median eval without): how much longer
`reproduce` takes with that default. Times are process CPU seconds (single-threaded torch).

    python bench/nnch_overhead.py [--lang "(ab)*"] [--pe rope] [--runs 1] [--samples 2,4,8] [--repeats 3] [--json]
"""

from __future__ import annotations

import argparse
import json
import statistics
import time

import torch

from formal_rope.evaluation.pack_evaluation import evaluate_pack
from formal_rope.run_config.config import RunConfig
from formal_rope.runs import run_pack
from formal_rope.training.data import run_data
from formal_rope.training.resolve import resolve_runs
from formal_rope.training.scales import scale_overrides


def timed_eval(model, configs, dfa) -> float:
    started = time.process_time()
    evaluate_pack(model, configs, [run_data(c, dfa) for c in configs])
    return time.process_time() - started


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--lang", default="(ab)*")
    parser.add_argument("--pe", default="rope")
    parser.add_argument("--runs", type=int, default=1, help="Runs in the pack (seeds 0..runs-1).")
    parser.add_argument("--samples", default="2,4,8", help="NNCH strings per length to time, comma-separated.")
    parser.add_argument("--steps", type=int, default=None, help="Training steps (default: the quick scale's).")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    torch.set_num_threads(1)
    overrides = scale_overrides("quick")
    if args.steps is not None:
        overrides["steps"] = args.steps
    base = RunConfig(language=args.lang, pe=args.pe, **overrides).with_(nnch_samples=0)
    configs = [base.with_(seed=seed) for seed in range(args.runs)]
    runs = resolve_runs(configs, command=None)
    dfa = runs[0].dfa
    started = time.process_time()
    _, model = run_pack(runs, progress=False)
    run_s = time.process_time() - started
    counts = [int(part) for part in args.samples.split(",")]
    times: dict[int, list[float]] = {0: [], **{count: [] for count in counts}}
    for _ in range(args.repeats):
        for count in times:
            times[count].append(timed_eval(model, [c.with_(nnch_samples=count) for c in configs], dfa))
    eval_s = {count: statistics.median(values) for count, values in times.items()}
    training_s = max(run_s - eval_s[0], 0.0)
    report = {
        "language": args.lang, "pe": args.pe, "runs": args.runs, "steps": base.steps,
        "training_cpu_s": round(training_s, 2), "eval_cpu_s_without": round(eval_s[0], 2),
        "overhead": {
            count: {"eval_cpu_s": round(eval_s[count], 2),
                    "run_slower_by": round((eval_s[count] - eval_s[0]) / (training_s + eval_s[0]), 4)}
            for count in counts
        },
    }
    if args.json:
        print(json.dumps(report))
        return
    print(f"{args.runs} run(s) of {args.pe} on {args.lang}: training {training_s:.1f} s, evaluation without NNCH's "
          f"strings {eval_s[0]:.1f} s (CPU, median of {args.repeats})")
    for count in counts:
        row = report["overhead"][count]
        slower = 100 * row["run_slower_by"]
        print(f"  nnch_samples {count:>3}: evaluation {row['eval_cpu_s']:.1f} s, the run {slower:+.1f}%")


if __name__ == "__main__":
    main()
