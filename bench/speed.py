"""Training and evaluation speed, ours against a plain per-run PyTorch baseline, in one run (issue 20).

Every number below is measured by this one invocation on this machine:

  plain x2     the baseline: 2 worker processes, each training ONE run with a plain nanoGPT-style
               PyTorch model of the same dims (fused qkv nn.Linear, cached RoPE tables applied with
               the rotate-half trick, F.scaled_dot_product_attention with the strict causal mask,
               GELU FFN, readout at eos), torch.optim.AdamW, grad-norm clipping, each step's batch
               right-padded to the longest training length (lengths uniform in 0..40). 1 thread each.
  ours R x2    2 worker processes, each training a pack of R runs with formal_rope's trainer (length
               buckets, packed AdamW), 1 thread each: what `formalrope sweep --workers 2` does.

Throughput is run-steps per second of wall time; every worker first takes `--warmup` steps, then
all workers of a measurement meet at a barrier and are timed together for `--seconds`. The ratio
ours / plain is printed for quick dims (2 layers, d_model 32, 4 heads, batch 64) and paper dims
(5 layers, d_model 64, 8 heads, batch 128).

  fixed cost   ms per step of one process at batch 4 and batch 64 (quick dims), and the line through
               them: its intercept is the per-step cost that does not scale with the batch
               (dispatcher, autograd, allocator, Python), for ours (a pack of 1 and a pack of R) and
               the plain baseline.
  eval bands   ms per test length of a pack of 6 runs (Table 2's: NoPE, RoPE_P, SiPE_P x 2 seeds) on
               18 strings per length (16 test strings and 2 of NNCH's), per length band of 41..500,
               and the whole 41..500 range estimated from the bands; at 1 thread (a worker's own) and
               at 2 (a worker that has the core of a finished one, `sweeps.backends.cores`; the
               logits are checked to be the same bits).

    python bench/speed.py [--seconds 6] [--repeats 1] [--packs quick=6,paper=4] [--json]
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "bench"))
sys.path.insert(0, str(ROOT))

from packed_training import DIMS, _config, _Window, _WindowClosed, timed_workers  # noqa: E402  (same dims, timer)

BANDS = ((41, 100), (101, 200), (201, 300), (301, 400), (401, 500))


# ----------------------------------------------------------------------------------------------
# The plain baseline


def _plain_model(d_model: int, heads: int, layers: int, n_symbols: int = 2, base: float = 1e4, longest: int = 42):
    import torch
    from torch import nn
    from torch.nn import functional as F

    head_dim = d_model // heads
    theta = base ** (-torch.arange(0, head_dim, 2, dtype=torch.float64) / head_dim)
    angles = torch.outer(torch.arange(longest, dtype=torch.float64), theta)
    cos, sin = angles.cos().float(), angles.sin().float()

    def rope(x):  # rotate-half on (even, odd) pairs
        even, odd = x[..., 0::2], x[..., 1::2]
        length = x.shape[-2]
        c, s = cos[:length], sin[:length]
        return torch.stack((even * c - odd * s, even * s + odd * c), dim=-1).flatten(-2)

    class Block(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.norm1, self.norm2 = nn.LayerNorm(d_model), nn.LayerNorm(d_model)
            self.qkv = nn.Linear(d_model, 3 * d_model)
            self.out = nn.Linear(d_model, d_model)
            self.ffn_in, self.ffn_out = nn.Linear(d_model, 4 * d_model), nn.Linear(4 * d_model, d_model)

        def forward(self, x, mask):
            batch, length, _ = x.shape
            q, k, v = self.qkv(self.norm1(x)).view(batch, length, 3, heads, head_dim).permute(2, 0, 3, 1, 4)
            attended = F.scaled_dot_product_attention(rope(q), rope(k), v, attn_mask=mask)
            x = x + self.out(attended.transpose(1, 2).reshape(batch, length, d_model))
            return x + self.ffn_out(F.gelu(self.ffn_in(self.norm2(x))))

    class Plain(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.embedding = nn.Embedding(n_symbols + 3, d_model)
            self.blocks = nn.ModuleList(Block() for _ in range(layers))
            self.norm = nn.LayerNorm(d_model)
            self.readout = nn.Linear(d_model, 2)

        def forward(self, tokens, readout):
            length = tokens.shape[1]
            mask = torch.ones(length, length, dtype=torch.bool).tril(-1)  # key j < query i
            x = self.embedding(tokens)
            for block in self.blocks:
                x = block(x, mask)
            return self.readout(self.norm(x[torch.arange(len(tokens)), readout]))

    return Plain()


def _plain_worker(dims: str, batch: int, seed: int, window: tuple, queue) -> None:
    """Child process: train one plain run (torch.optim.AdamW) through its timed window."""
    import numpy as np
    import torch
    from torch.nn import functional as F

    torch.set_num_threads(1)
    from formal_rope.training.model import encode_padded

    settings = DIMS[dims]
    torch.manual_seed(seed)
    model = _plain_model(settings["d_model"], settings["heads"], settings["layers"])
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3, weight_decay=0.01)
    rng = np.random.default_rng(seed)
    timer = _Window(*window)
    try:
        while True:
            lengths = rng.integers(0, 41, size=batch)
            tokens, readout = encode_padded(rng.integers(0, 2, size=(batch, 40)), lengths, 2, width=42)
            labels = torch.from_numpy(rng.integers(0, 2, size=batch))
            loss = F.cross_entropy(model(tokens, readout), labels)
            optimizer.zero_grad(set_to_none=True)
            loss.backward()
            torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            optimizer.step()
            timer(0, [loss.item()])
    except _WindowClosed:
        pass
    queue.put(timer.report(1))


def _ours_worker(dims: str, runs: int, batch: int, seed: int, window: tuple, queue) -> None:
    """Child process: train a pack of `runs` runs with the trainer through its timed window."""
    import torch

    torch.set_num_threads(1)
    from formal_rope.training import setup
    from formal_rope.training import train as trainer
    from formal_rope.training.resolve import pack_ingredients

    configs = [_config(dims, seed + r, 10**6).with_(batch_size=batch, attention="torch") for r in range(runs)]
    ingredients = pack_ingredients(configs)
    model = setup.build_pack(configs, len(ingredients.alphabet), ingredients.periods)
    timer = _Window(*window)
    try:
        trainer.train_pack(model, configs, ingredients.data, on_step=timer)
    except _WindowClosed:
        pass
    queue.put(timer.report(runs))


def measure(kind: str, dims: str, *, runs: int = 1, workers: int = 2, batch: int | None = None,
            seconds: float = 6.0, warmup: int = 10) -> dict:
    """`workers` processes at once, timed together after `warmup` steps each: run-steps/s and ms/step."""
    batch = DIMS[dims]["batch_size"] if batch is None else batch

    def process_for(w, window, queue):
        if kind == "plain":
            return _plain_worker, (dims, batch, 1000 * w, window, queue)
        return _ours_worker, (dims, runs, batch, 1000 * w, window, queue)

    reports = timed_workers(workers, warmup, seconds, process_for)
    per_s = [r["steps"] / max(r["end"] - r["go"], 1e-9) for r in reports]
    return {"run_steps_per_s": sum(rate * r["runs"] for rate, r in zip(per_s, reports)),
            "ms_per_step": 1000 / statistics.mean(per_s)}


def fixed_cost(kind: str, runs: int, seconds: float) -> dict:
    """ms/step of one process at batch 4 and 64 (quick dims) and the intercept of the line through them."""
    small = measure(kind, "quick", runs=runs, workers=1, batch=4, seconds=seconds)["ms_per_step"]
    large = measure(kind, "quick", runs=runs, workers=1, batch=64, seconds=seconds)["ms_per_step"]
    return {"batch_4_ms": small, "batch_64_ms": large, "fixed_ms": small - 4 * (large - small) / 60}


# ----------------------------------------------------------------------------------------------
# Evaluation per length band


def eval_bands(repeats: int = 3) -> dict:
    import numpy as np
    import torch

    torch.set_num_threads(1)
    from formal_rope.evaluation.length_generalization import predict_pack
    from formal_rope.run_config.config import RunConfig
    from formal_rope.training.resolve import pack_ingredients
    from formal_rope.training.scales import scale_overrides
    from formal_rope.training.setup import build_pack

    configs = [RunConfig(language="(ab)*", pe=pe, seed=s, **scale_overrides("quick"))
               for pe in ("nope", "rope_p", "sipe_p") for s in (0, 1)]
    ingredients = pack_ingredients(configs)
    model = build_pack(configs, len(ingredients.alphabet), ingredients.periods)
    report = {"runs": len(configs), "strings_per_length": 18}
    decisions = {}
    for threads in (1, 2):
        rng = np.random.default_rng(0)
        bands = {}
        for low, high in BANDS:
            times = []
            for length in (low, (low + high) // 2, high):
                symbols = rng.integers(0, 2, size=(18, length))
                predict_pack(model, symbols, threads=lambda: threads)  # the tables for this length, once
                started = time.perf_counter()
                for _ in range(repeats):
                    decided = predict_pack(model, symbols, threads=lambda: threads)
                times.append((time.perf_counter() - started) / repeats * 1000)
                decisions.setdefault(length, []).append(decided)
            bands[f"{low}-{high}"] = statistics.mean(times)
        total = sum(bands[f"{low}-{high}"] * (high - low + 1) for low, high in BANDS) / 1000
        suffix = "" if threads == 1 else f"_{threads}_threads"
        report[f"ms_per_length{suffix}"] = bands
        report[f"estimated_41_500_s{suffix}"] = total
    if any(not np.array_equal(first, second) for first, second in decisions.values()):
        raise SystemExit("evaluation decided differently at 1 and 2 threads")
    report["two_threads_speedup"] = report["estimated_41_500_s"] / report["estimated_41_500_s_2_threads"]
    return report


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=6.0, help="timed window of each measurement")
    parser.add_argument("--repeats", type=int, default=1, help="measure each throughput this many times (median)")
    parser.add_argument("--packs", default="quick=6,paper=4", help="pack size of ours per dims")
    parser.add_argument("--skip", default="", help="comma-separated parts to skip: throughput, fixed, eval")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    packs = {key: int(value) for key, value in (item.split("=") for item in args.packs.split(","))}
    skip = set(filter(None, args.skip.split(",")))
    report: dict = {"seconds": args.seconds, "repeats": args.repeats}
    if "throughput" not in skip:
        for dims, runs in packs.items():
            plain, ours = [], []
            for _ in range(args.repeats):
                plain.append(measure("plain", dims, seconds=args.seconds)["run_steps_per_s"])
                ours.append(measure("ours", dims, runs=runs, seconds=args.seconds)["run_steps_per_s"])
            report[dims] = {"pack": runs, "plain_run_steps_per_s": statistics.median(plain),
                            "ours_run_steps_per_s": statistics.median(ours),
                            "ours_over_plain": statistics.median(ours) / statistics.median(plain)}
    if "fixed" not in skip:
        report["fixed_cost"] = {"ours_pack_1": fixed_cost("ours", 1, args.seconds),
                                f"ours_pack_{packs.get('quick', 6)}": fixed_cost("ours", packs.get("quick", 6),
                                                                                  args.seconds),
                                "plain": fixed_cost("plain", 1, args.seconds)}
    if "eval" not in skip:
        report["eval"] = eval_bands()
    if args.json:
        print(json.dumps(report))
        return
    for dims in packs:
        if dims in report:
            row = report[dims]
            print(f"{dims:>5} dims: ours (2 workers x pack of {row['pack']}) {row['ours_run_steps_per_s']:8.1f} "
                  f"run-steps/s, plain (2 workers x 1 run) {row['plain_run_steps_per_s']:8.1f}: "
                  f"ours / plain = {row['ours_over_plain']:.2f}x")
    for name, row in report.get("fixed_cost", {}).items():
        print(f"fixed per-step cost, {name:>12}: batch 4 {row['batch_4_ms']:6.2f} ms, batch 64 "
              f"{row['batch_64_ms']:6.2f} ms -> fixed {row['fixed_ms']:5.2f} ms/step")
    if "eval" in report:
        bands = report["eval"]["ms_per_length"]
        evaluation = report["eval"]
        for suffix, label in (("", "1 thread"), ("_2_threads", "2 threads")):
            bands = evaluation[f"ms_per_length{suffix}"]
            print(f"evaluation, pack of 6, 18 strings per length, {label:>9}, ms per length: "
                  + ", ".join(f"{band} {value:.0f}" for band, value in bands.items())
                  + f"; 41..500 about {evaluation[f'estimated_41_500_s{suffix}']:.0f} s")
        print(f"evaluation with an idle worker's core (2 threads, same decisions): "
              f"{evaluation['two_threads_speedup']:.2f}x faster")


if __name__ == "__main__":
    main()
