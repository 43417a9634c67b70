"""Mixed-language packs: an atlas-like grid trained as packs per language vs packs of many languages.

The grid is `--languages` small languages (alphabets of 2 and 3 symbols) × NoPE and RoPE_P
(periods auto) × `--seeds` seeds at tiny dims. "per language" cuts it as `--pack auto` does (runs
of one language per pack), "mixed" as `--pack auto/languages` (runs of every language in one pack,
each with its own vocabulary, DFA, data and evaluation). Both train, evaluate and search nothing
else, one pack after another in this process with one thread (one worker), on this machine in
this invocation; `--repeats N` alternates the two N times and reports medians. The ratio is the
per-language wall time over the mixed one. Each run's N* is printed for both (equal up to
rounding: a run in a mixed pack computes what it computes in its own language's pack).

    python bench/mixed_language_packs.py [--steps 60] [--repeats 3] [--languages 6]
"""

from __future__ import annotations

import argparse
import statistics
import time

import torch

from formal_rope.run_config.config import RunConfig
from formal_rope.runs import run_pack
from formal_rope.scheduling.packs import group_packs

LANGUAGES = ("(aa)*", "(ab)*", "(abc)*", "a(a|b)*", "(a|b)*a(a|b)*b(a|b)*", "((a|b|c)(a|b|c))*", "(aab)*",
             "b(a|b|c)*")


def grid(languages: int, seeds: int, steps: int) -> list[RunConfig]:
    """The atlas-like grid: languages × (nope, rope_p with periods auto) × seeds, tiny dims."""
    return [
        RunConfig(language=language, pe=pe, seed=seed, steps=steps, layers=2, d_model=16, heads=2, batch_size=32,
                  lr=3e-3, test_min_length=1, test_max_length=40, n_per_length=16, nnch_samples=0)
        for language in LANGUAGES[:languages] for pe in ("nope", "rope_p") for seed in range(seeds)
    ]


def train_all(configs, pack: str) -> tuple[float, dict, int]:
    """(wall seconds, N* per run id, number of packs) of training the grid cut as `pack`."""
    packs = group_packs(configs, pack, workers=1)
    started = time.perf_counter()
    n_star = {}
    for members in packs:
        results, _ = run_pack(members, threads=1)
        n_star.update({result.run_id: result.n_star for result in results})
    return time.perf_counter() - started, n_star, len(packs)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--languages", type=int, default=6)
    parser.add_argument("--seeds", type=int, default=1)
    parser.add_argument("--steps", type=int, default=60)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    torch.set_num_threads(1)
    configs = grid(min(args.languages, len(LANGUAGES)), args.seeds, args.steps)
    walls: dict[str, list[float]] = {"auto": [], "auto/languages": []}
    found: dict = {}
    counts: dict = {}
    for repeat in range(args.repeats):
        order = ("auto", "auto/languages") if repeat % 2 == 0 else ("auto/languages", "auto")
        for pack in order:
            wall, n_star, packs = train_all(configs, pack)
            walls[pack].append(wall)
            found[pack], counts[pack] = n_star, packs
    apart, mixed = statistics.median(walls["auto"]), statistics.median(walls["auto/languages"])
    print(f"{len(configs)} runs ({args.languages} languages x nope, rope_p x {args.seeds} seed(s)), "
          f"{args.steps} steps, 1 thread, median of {args.repeats}")
    print(f"  per language  (--pack auto):           {counts['auto']:3d} packs  {apart:7.2f} s  "
          f"(runs {min(walls['auto']):.2f}-{max(walls['auto']):.2f})")
    print(f"  mixed         (--pack auto/languages): {counts['auto/languages']:3d} packs  {mixed:7.2f} s  "
          f"(runs {min(walls['auto/languages']):.2f}-{max(walls['auto/languages']):.2f})")
    print(f"  ratio (per language / mixed): {apart / mixed:.2f}x")
    same = sum(found["auto"][key] == found["auto/languages"][key] for key in found["auto"])
    print(f"  N* equal in both: {same} of {len(found['auto'])} runs")


if __name__ == "__main__":
    main()
