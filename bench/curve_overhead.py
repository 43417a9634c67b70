"""What logging a training curve costs: the same quick-scale run trained with and without it.

Training only (evaluation does not log), one thread, the same run (same seed, same batches, same
weights) each time, trained alternately without and with curves so drifts of a shared machine hit
both alike; the fastest of --repeats is kept. Variants: the default interval (steps // 50, at most
1,000), a point at every step (the worst case) and, when the tensorboard package is installed,
the default interval with TensorBoard event files. Prints each variant's time ratio to no logging
(end to end: noisy on a shared machine) and the time spent inside the logging hook itself (exact:
what logging adds, as a share of the training time).

    python bench/curve_overhead.py                  # 300 steps of the quick scale, 3 repeats
    python bench/curve_overhead.py --steps 1000 --repeats 5
"""

from __future__ import annotations

import argparse
import importlib.util
import tempfile
import time

import torch

from formal_rope.run_config.config import RunConfig
from formal_rope.storage.curves import CurveOptions
from formal_rope.storage.tensorboard_log import open_pack_log
from formal_rope.training.resolve import pack_ingredients
from formal_rope.training.scales import scale_overrides
from formal_rope.training.setup import build_pack
from formal_rope.training.train import learning_rate, train_pack


def timed(function, clock: list):
    """`function`, adding the seconds each call takes to clock[0]."""
    def call(*args):
        start = time.perf_counter()
        function(*args)
        clock[0] += time.perf_counter() - start
    return call


def train_seconds(config: RunConfig, options: CurveOptions | None) -> tuple[float, float, int]:
    """(Seconds to train the run, seconds of it spent logging, points logged); the model is built
    fresh, outside the clock."""
    ingredients = pack_ingredients([config], None)
    model = build_pack([config], len(ingredients.alphabet), ingredients.periods)
    log = open_pack_log([config], options, learning_rate) if options is not None else None
    logging = [0.0]
    if log is not None:  # the recorder's add calls the TensorBoard writer too: its clock covers both
        log.recorder.add = timed(log.recorder.add, logging)
    start = time.perf_counter()
    train_pack(model, [config], ingredients.data, curves=None if log is None else log.recorder)
    elapsed = time.perf_counter() - start
    points = 0
    if log is not None:
        points = len(log.recorder.curves()[0])
        log.flush(close=True)
    return elapsed, logging[0], points


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--steps", type=int, default=300)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    torch.set_num_threads(1)
    config = RunConfig(language="(ab)*", pe="rope", **{**scale_overrides("quick"), "steps": args.steps})
    variants = {"default interval": CurveOptions(), "every step": CurveOptions(log_every=1)}
    board = tempfile.mkdtemp(prefix="curve-bench-")
    if importlib.util.find_spec("tensorboard") is not None:
        variants["default + tensorboard"] = CurveOptions(tensorboard=board)
    train_seconds(config.with_(steps=20), None)  # warm-up: first calls allocate and compile
    best = {name: float("inf") for name in ["none", *variants]}
    hook = {name: float("inf") for name in variants}
    points = {}
    for _ in range(args.repeats):
        for name, options in [("none", None), *variants.items()]:
            seconds, logging, count = train_seconds(config, options)
            best[name] = min(best[name], seconds)
            if name in hook:
                hook[name] = min(hook[name], logging)
            points[name] = count
    print(f"{args.steps} steps of the quick scale ({config.layers} layers, d_model {config.d_model}, batch "
          f"{config.batch_size}), fastest of {args.repeats}, one thread")
    print(f"  no curve: {best['none']:.3f} s")
    for name in variants:
        print(f"  {name:24s} {points[name]:5d} points  {best[name]:.3f} s  ratio {best[name] / best['none']:.4f}  "
              f"in the hook {hook[name] * 1e3:.2f} ms = {hook[name] / best['none']:.3%} of training")


if __name__ == "__main__":
    main()
