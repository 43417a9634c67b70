"""Training speed of formal_rope's classifier vs a plain PyTorch model of the same architecture.

Baseline ("the obvious way"): per layer, separate q/k/v Linear layers; RoPE recomputed from
theta * i in float32 on every forward of every layer and applied with the rotate-half trick on
(even, odd) pairs; scores plus a float -inf mask built each forward; softmax, with bos's empty row
turned from NaN into zeros by nan_to_num; FFN as nn.Sequential. Same widths, heads, layers, PE
(rope, base 1e4), readout at eos, AdamW, grad-norm clip and the SAME pre-sampled batches.

Ours: formal_rope.training's model as a pack of one run (fused qkv projection, cached fp64-reduced
tables, q and k rotated once per token, strict-causal attention through
formal_rope.kernels.causal_attention (SDPA on CPU), the last layer attending from the readout
only, the optimizer's flat buffers), fed the same padded batches (so without the trainer's length
buckets: bench/packed_training.py measures the trainer as a whole).

Reports steps/s of both (process CPU time, robust to other load), the ratio, and the peak resident
memory of each, measured in a fresh subprocess per model. Single-threaded torch.

    python bench/train_speed.py [--steps 200] [--layers 2 --d-model 32 --heads 4 --batch 64] [--json]
"""

from __future__ import annotations

import argparse
import json
import math
import multiprocessing
import resource
import time

import numpy as np
import torch
from torch import nn
from torch.nn import functional as F

from formal_rope.run_config.config import RunConfig
from formal_rope.training.model import encode_padded
from formal_rope.training.setup import build_model, make_optimizer


class BaselineBlock(nn.Module):
    def __init__(self, d_model: int, heads: int, base: float) -> None:
        super().__init__()
        self.heads, self.base = heads, base
        self.norm1, self.norm2 = nn.LayerNorm(d_model), nn.LayerNorm(d_model)
        self.q, self.k, self.v = (nn.Linear(d_model, d_model) for _ in range(3))
        self.out = nn.Linear(d_model, d_model)
        self.ffn = nn.Sequential(nn.Linear(d_model, 4 * d_model), nn.GELU(), nn.Linear(4 * d_model, d_model))

    def rope(self, x: torch.Tensor) -> torch.Tensor:
        length, dim = x.shape[-2], x.shape[-1]
        theta = self.base ** (-torch.arange(0, dim, 2, dtype=torch.float32) / dim)
        angles = torch.outer(torch.arange(length, dtype=torch.float32), theta)
        cos, sin = torch.cos(angles), torch.sin(angles)
        even, odd = x[..., 0::2], x[..., 1::2]
        return torch.stack((even * cos - odd * sin, even * sin + odd * cos), dim=-1).flatten(-2)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        batch, length, d_model = x.shape
        head_dim = d_model // self.heads
        h = self.norm1(x)
        split = lambda t: t.view(batch, length, self.heads, head_dim).transpose(1, 2)  # noqa: E731
        q, k, v = split(self.q(h)), split(self.k(h)), split(self.v(h))
        q, k = self.rope(q), self.rope(k)
        mask = torch.full((length, length), float("-inf")).triu(0)  # j >= i masked: strict causal
        scores = q @ k.transpose(-1, -2) / math.sqrt(head_dim) + mask
        weights = torch.nan_to_num(torch.softmax(scores, dim=-1), nan=0.0)  # bos row: all -inf -> 0
        attended = (weights @ v).transpose(1, 2).reshape(batch, length, d_model)
        x = x + self.out(attended)
        return x + self.ffn(self.norm2(x))


class Baseline(nn.Module):
    def __init__(self, n_symbols: int, d_model: int, heads: int, layers: int, base: float) -> None:
        super().__init__()
        self.embedding = nn.Embedding(n_symbols + 3, d_model)
        self.blocks = nn.ModuleList(BaselineBlock(d_model, heads, base) for _ in range(layers))
        self.norm = nn.LayerNorm(d_model)
        self.readout = nn.Linear(d_model, 2)

    def forward(self, tokens: torch.Tensor, readout: torch.Tensor) -> torch.Tensor:
        x = self.embedding(tokens)
        for block in self.blocks:
            x = block(x)
        return self.readout(self.norm(x[torch.arange(len(tokens)), readout]))


def batches(n: int, batch_size: int, seed: int = 0):
    """Pre-sampled (ab)*-style batches: random symbols, lengths uniform in [0, 40], random labels."""
    rng = np.random.default_rng(seed)
    out = []
    for _ in range(n):
        lengths = rng.integers(0, 41, size=batch_size)
        symbols = rng.integers(0, 2, size=(batch_size, 40))
        tokens, readout = encode_padded(symbols, lengths, 2)
        out.append((tokens, readout, torch.from_numpy(rng.integers(0, 2, size=batch_size))))
    return out


def time_training(model: nn.Module, optimizer, data, warmup: int = 10) -> tuple[float, int]:
    """(steps/s by process CPU time, steps) for one pass over data after `warmup` steps.

    Ours is a pack of one run: the packed optimizer takes per-run learning rates and clips per run."""
    from formal_rope.training.optim import PackedAdamW

    packed = isinstance(optimizer, PackedAdamW)
    lrs, active, max_norms = (
        torch.tensor([1e-3], dtype=torch.float64), torch.tensor([True]), torch.tensor([1.0], dtype=torch.float64)
    )

    def step(tokens, readout, labels):
        loss = F.cross_entropy(model(tokens, readout), labels)
        optimizer.zero_grad() if packed else optimizer.zero_grad(set_to_none=True)
        optimizer.backward(loss) if packed else loss.backward()
        if packed:
            optimizer.clip(max_norms)
            optimizer.step(lrs, active)
        else:
            torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            optimizer.step()

    for item in data[:warmup]:
        step(*item)
    started = time.process_time()
    for item in data[warmup:]:
        step(*item)
    elapsed = time.process_time() - started
    steps = len(data) - warmup
    return steps / elapsed, steps


def _measure(kind: str, args: argparse.Namespace, queue) -> None:
    """Child process: build one model, time it, report (steps/s, steps, peak RSS in MiB)."""
    torch.set_num_threads(1)
    data = batches(args.steps + 10, args.batch)
    torch.manual_seed(0)
    if kind == "baseline":
        model = Baseline(2, args.d_model, args.heads, args.layers, 1e4)
        optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
    else:
        config = RunConfig(
            language="(ab)*", pe="rope", layers=args.layers, d_model=args.d_model, heads=args.heads, lr=1e-3
        )
        model = build_model(config, 2, None)
        optimizer = make_optimizer(model, config)
    rate, steps = time_training(model, optimizer, data)
    queue.put((rate, steps, resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024))


def measure(kind: str, args: argparse.Namespace) -> tuple[float, int, float]:
    context = multiprocessing.get_context("spawn")
    queue = context.Queue()
    process = context.Process(target=_measure, args=(kind, args, queue))
    process.start()
    result = queue.get()
    process.join()
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=200)
    parser.add_argument("--layers", type=int, default=2)
    parser.add_argument("--d-model", type=int, default=32)
    parser.add_argument("--heads", type=int, default=4)
    parser.add_argument("--batch", type=int, default=64)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    ours_rate, steps, ours_rss = measure("ours", args)
    base_rate, _, base_rss = measure("baseline", args)
    report = {
        "shape": {
            "layers": args.layers, "d_model": args.d_model, "heads": args.heads, "batch": args.batch, "steps": steps
        },
        "ours_steps_per_s": round(ours_rate, 2), "baseline_steps_per_s": round(base_rate, 2),
        "speedup": round(ours_rate / base_rate, 3), "ours_peak_rss_mib": round(ours_rss, 1),
        "baseline_peak_rss_mib": round(base_rss, 1),
        "timer": "process CPU time (robust to other load on a shared machine)",
    }
    if args.json:
        print(json.dumps(report))
        return
    for key, value in report.items():
        print(f"{key:>34}: {value}")


if __name__ == "__main__":
    main()
