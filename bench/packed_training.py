"""Packed training throughput: packs of R runs vs the best way to use the machine one run at a time.

All numbers come from this one invocation on this machine, each configuration in fresh processes:

  legacy x2    2 worker processes, each training one run alone with the trainer as it was before
               packed training (`--legacy-commit`, checked out into a temporary git worktree):
               the issue's baseline, "today's best way to use the machine" when packing was asked for.
  solo x2      the same with today's trainer (a pack of one, 1 thread): `sweep --workers 2 --pack 1`.
  pack R x2    2 worker processes, each training a pack of R runs (1 thread): `--pack R --workers 2`.
  pack R t2    1 process training a pack of R runs with 2 threads.

Throughput is run-steps per second of wall time. Each worker takes `--warmup` untimed steps, then
all workers of a measurement meet at a barrier and are timed together for `--seconds` (whole
steps: steps after the barrier / time from the barrier to the last of them), so a worker that
starts late never shortens the window. `--repeats N` measures every configuration N times in
alternating order and reports the median and the spread (this machine's neighbours make single
measurements vary by 10-30%). "GEMM limit" is a large fp32 matrix product on all cores; each
configuration's fraction of it counts the FLOPs the model needs on the real strings
(`flops_per_run_step`). Peak memory per run is the process RSS divided by its runs.
`--compile` also times torch.compile of the model's step forward for the largest pack.
`--eval` compares packed N* evaluation with evaluating the same R runs one after another.

    python bench/packed_training.py [--dims quick,paper] [--packs 1,2,4,8,16] [--seconds 8] [--repeats 3] [--json]
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
LEGACY_COMMIT = "8eb2b7b"  # the last commit before packed training

DIMS = {
    "quick": dict(layers=2, d_model=32, heads=4, batch_size=64),
    "paper": dict(layers=5, d_model=64, heads=8, batch_size=128),
}


def _config(dims: str, seed: int, steps: int):
    from formal_rope.run_config.config import RunConfig
    from formal_rope.training.scales import scale_overrides

    settings = {**scale_overrides("quick"), **DIMS[dims], "steps": steps}
    return RunConfig(language="(ab)*", pe="rope", seed=seed, **settings)


class _WindowClosed(Exception):
    """Raised from a step callback to end a worker's training once its timed window is over."""


class _Window:
    """Step timestamps of one worker: `warmup` steps, then all workers meet at a barrier, then steps
    until `seconds` have passed. Throughput comes from whole steps: (steps after the barrier) /
    (time of the last one - time of the barrier)."""

    def __init__(self, barrier, warmup: int, seconds: float) -> None:
        self.barrier, self.warmup, self.seconds = barrier, warmup, seconds
        self.count, self.go, self.stamps = 0, None, []

    def __call__(self, *_) -> None:
        now = time.perf_counter()
        self.count += 1
        if self.go is None:
            if self.count == self.warmup:
                self.barrier.wait()
                self.go = time.perf_counter()
            return
        self.stamps.append(now)
        if now - self.go >= self.seconds:
            raise _WindowClosed

    def report(self, runs: int) -> dict:
        return {"go": self.go, "steps": len(self.stamps), "end": self.stamps[-1] if self.stamps else self.go,
                "runs": runs, "rss": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024}


def _train_worker(root: str, dims: str, runs: int, first_seed: int, window: tuple, threads: int,
                  compiled: bool, queue, device: str = "cpu") -> None:
    """Child process: train a pack of `runs` runs through its timed window; report steps and RSS."""
    sys.path.insert(0, root)
    import torch

    torch.set_num_threads(threads)
    from formal_rope.training import data as training_data
    from formal_rope.training import resolve, setup
    from formal_rope.training import train as trainer

    # On a GPU the attention is PyTorch's fused SDPA path ("torch"), so the check measures packing
    # rather than the Triton kernel's autotuning (bench/attention.py measures that).
    configs = [_config(dims, first_seed + r, 10**6).with_(attention="torch") for r in range(runs)]
    dfa = resolve.resolve_dfa(configs[0])
    model = setup.build_pack(configs, len(dfa.alphabet), [None] * runs).to(device)
    if compiled:  # what the trainer calls each step (a step's bucket counts vary: dynamic shapes)
        model.forward_layout = torch.compile(model.forward_layout, dynamic=True)
    data = [training_data.run_data(c, dfa) for c in configs]
    timer = _Window(*window)
    try:
        trainer.train_pack(model, configs, data, device=device, on_step=timer)
    except _WindowClosed:
        pass
    queue.put(timer.report(runs))


def _legacy_worker(root: str, dims: str, runs: int, first_seed: int, window: tuple, threads: int,
                   compiled: bool, queue) -> None:
    """Child process: the trainer before packing (one run) through its timed window."""
    sys.path.insert(0, root)
    import torch

    torch.set_num_threads(threads)
    from formal_rope.training import resolve, setup
    from formal_rope.training import train as trainer

    config = _config(dims, first_seed, 10**6)
    dfa = resolve.resolve_dfa(config)
    torch.manual_seed(config.seed)
    model = setup.build_model(config, len(dfa.alphabet), None)
    timer = _Window(*window)
    try:
        trainer.train_model(model, config, dfa, report=timer, log_every=1)
    except _WindowClosed:
        pass
    queue.put(timer.report(1))


def timed_workers(workers: int, warmup: int, seconds: float, process_for) -> list[dict]:
    """Start `workers` spawned processes timed together (`_Window`: `warmup` steps each, then a shared
    barrier, then `seconds`) and return their reports. process_for(w, window, queue) -> (target,
    args) gives worker w's function and arguments; it reports through `queue`."""
    context = multiprocessing.get_context("spawn")
    queue = context.Queue()
    window = (context.Barrier(workers), warmup, seconds)
    processes = [context.Process(target=target, args=args)
                 for target, args in (process_for(w, window, queue) for w in range(workers))]
    for process in processes:
        process.start()
    reports = [queue.get() for _ in processes]
    for process in processes:
        process.join()
    return reports


def measure(root: Path, dims: str, runs: int, workers: int, threads: int, seconds: float, warmup: int,
            legacy: bool = False, compiled: bool = False, device: str = "cpu") -> dict:
    """Run `workers` processes at once, each a pack of `runs`, timed together for `seconds` after
    `warmup` steps each (a barrier starts every worker's window at the same moment)."""

    def process_for(w, window, queue):
        if legacy:
            return _legacy_worker, (str(root), dims, runs, 1000 * w, window, threads, compiled, queue)
        return _train_worker, (str(root), dims, runs, 1000 * w, window, threads, compiled, queue, device)

    reports = timed_workers(workers, warmup, seconds, process_for)
    return {
        "run_steps_per_s": sum(r["steps"] * r["runs"] / max(r["end"] - r["go"], 1e-9) for r in reports),
        "peak_rss_per_run_mib": max(r["rss"] for r in reports) / runs / 2**20,
    }


def gemm_limit(threads: int) -> float:
    """fp32 GFLOP/s of a large matrix product on `threads` threads (the machine's practical ceiling)."""
    import torch

    torch.set_num_threads(threads)
    a, b = torch.randn(2048, 2048), torch.randn(2048, 2048)
    for _ in range(2):
        a @ b
    started = time.perf_counter()
    repeats = 6
    for _ in range(repeats):
        a @ b
    return repeats * 2 * 2048**3 / (time.perf_counter() - started) / 1e9


def flops_per_run_step(dims: str) -> float:
    """The training FLOPs one run-step needs (forward + backward = 3x forward), counted on the real
    strings (lengths uniform in 0..40, bos and eos, no padding): every layer projects q, k, v, the
    output and the FFN at every token and attends over the earlier tokens, except the last, which
    is read at eos only (keys and values at every token, the rest at eos). Implementation-neutral,
    so the fraction of the GEMM limit compares trainers fairly."""
    settings = DIMS[dims]
    d, layers, batch = settings["d_model"], settings["layers"], settings["batch_size"]
    per_token = 2 * (3 * d * d + d * d + 8 * d * d)  # q, k, v, output, FFN (4x) in and out
    forward = 0.0
    for length in range(0, 41):
        tokens = length + 2
        full_layers = (layers - 1) * (tokens * per_token + 2 * 2 * tokens * tokens / 2 * d)  # q.k and p.v, causal half
        last = tokens * 2 * 2 * d * d + (per_token - 2 * 2 * d * d) + 2 * 2 * tokens * d
        forward += full_layers + last
    return 3 * forward * batch / 41


def eval_ratio(root: Path, runs: int) -> dict:
    """Packed N* evaluation of `runs` trained runs vs evaluating them one after another."""
    import torch

    torch.set_num_threads(1)
    from formal_rope.evaluation import pack_evaluation
    from formal_rope.training import data as training_data
    from formal_rope.training import resolve, setup

    configs = [
        _config("quick", seed, 5).with_(n_per_length=16, test_max_length=200, eval_mode="full") for seed in range(runs)
    ]
    dfa = resolve.resolve_dfa(configs[0])
    model = setup.build_pack(configs, len(dfa.alphabet), [None] * runs)
    data = [training_data.run_data(c, dfa) for c in configs]
    started = time.perf_counter()
    packed = pack_evaluation.evaluate_pack(model, configs, data)
    packed_s = time.perf_counter() - started
    started = time.perf_counter()
    single = [pack_evaluation.evaluate_pack(model.select_runs([r]), [configs[r]], [data[r]])[0] for r in range(runs)]
    sequential_s = time.perf_counter() - started
    assert [e.per_length for e in packed] == [e.per_length for e in single]
    return {"runs": runs, "packed_s": packed_s, "sequential_s": sequential_s, "ratio": sequential_s / packed_s}


def gpu_report(args, packs) -> None:
    """On a GPU: run-steps/s of each pack size in one process, and the ratio of each to R = 1."""
    rows = {}
    for dims in args.dims.split(","):
        seconds = args.seconds * (2 if dims == "paper" else 1)
        for runs in packs:
            result = measure(ROOT, dims, runs, 1, 1, seconds, args.warmup, device=args.device)
            rows[f"{dims} pack {runs}"] = result
            print(
                f"{dims:6s} pack {runs:4d} on {args.device}: {result['run_steps_per_s']:10.1f} run-steps/s  "
                f"({result['run_steps_per_s'] / rows[f'{dims} pack {packs[0]}']['run_steps_per_s']:.1f}x pack "
                f"{packs[0]})",
                flush=True,
            )
    if args.json:
        print(json.dumps(rows, indent=2))


def legacy_checkout(commit: str) -> Path | None:
    """A temporary worktree of `commit`, or None when git or the commit is unavailable."""
    if shutil.which("git") is None:
        return None
    folder = Path(tempfile.mkdtemp(prefix="formal-rope-legacy-"))
    done = subprocess.run(["git", "-C", str(ROOT), "worktree", "add", "--detach", str(folder), commit],
                          capture_output=True, text=True)
    if done.returncode != 0:
        shutil.rmtree(folder, ignore_errors=True)
        return None
    return folder


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dims", default="quick,paper", help="quick and/or paper model dimensions")
    parser.add_argument("--packs", default="1,2,4,8,16", help="pack sizes R")
    parser.add_argument("--seconds", type=float, default=8.0,
                        help="timed window of each measurement, after warm-up (paper dims: twice this)")
    parser.add_argument("--warmup", type=int, default=3, help="untimed steps before each worker's window")
    parser.add_argument("--repeats", type=int, default=1,
                        help="measure every configuration this many times, in alternating order; report the median")
    parser.add_argument("--legacy-commit", default=LEGACY_COMMIT, help="trainer before packing ('' to skip)")
    parser.add_argument("--compile", action="store_true", help="also time torch.compile of the largest pack")
    parser.add_argument("--eval", action="store_true", help="also compare packed and sequential N* evaluation")
    parser.add_argument("--device", default="cpu", help="cpu or cuda (cuda implies --single-process)")
    parser.add_argument("--single-process", action="store_true",
                        help="only time each pack size in one process (what bench/gpu_check.sh runs)")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    cores = os.cpu_count() or 1
    packs = [int(p) for p in args.packs.split(",")]
    if args.device != "cpu" or args.single_process:
        gpu_report(args, packs)
        return
    report: dict = {"cores": cores, "gemm_limit_gflops": round(gemm_limit(cores), 1), "dims": {}}
    legacy_root = legacy_checkout(args.legacy_commit) if args.legacy_commit else None
    try:
        for dims in args.dims.split(","):
            seconds = args.seconds * (2 if dims == "paper" else 1)
            flops = flops_per_run_step(dims)
            # name -> (root, runs per worker, workers, threads, legacy, compiled, warm-up steps)
            plan = {"solo x2": (ROOT, 1, 2, 1, False, False, args.warmup)}
            if legacy_root is not None:
                plan["legacy x2"] = (legacy_root, 1, 2, 1, True, False, args.warmup)
            for runs in packs:
                if runs > 1:
                    plan[f"pack {runs} x2"] = (ROOT, runs, 2, 1, False, False, args.warmup)
                plan[f"pack {runs} t2"] = (ROOT, runs, 1, cores, False, False, args.warmup)
            if args.compile:
                plan[f"pack {max(packs)} t2 compiled"] = (ROOT, max(packs), 1, cores, False, True, max(args.warmup, 5))
            samples: dict = {name: [] for name in plan}
            for repeat in range(args.repeats):
                names = list(plan) if repeat % 2 == 0 else list(reversed(plan))
                for name in names:
                    root, runs, workers, threads, legacy, compiled, warmup = plan[name]
                    samples[name].append(measure(root, dims, runs, workers, threads, seconds, warmup,
                                                 legacy=legacy, compiled=compiled))
            rows = {}
            for name in plan:
                speeds = sorted(sample["run_steps_per_s"] for sample in samples[name])
                result = {
                    "run_steps_per_s": float(statistics.median(speeds)),
                    "peak_rss_per_run_mib": max(sample["peak_rss_per_run_mib"] for sample in samples[name]),
                }
                result["fraction_of_gemm_limit"] = result["run_steps_per_s"] * flops / 1e9 / report["gemm_limit_gflops"]
                if args.repeats > 1:
                    result["spread"] = (speeds[-1] - speeds[0]) / result["run_steps_per_s"]
                rows[name] = {k: round(v, 3) for k, v in result.items()}
                if not args.json:
                    spread = f"  (spread {100 * result['spread']:.0f}%)" if args.repeats > 1 else ""
                    print(f"{dims:6s} {name:22s} {result['run_steps_per_s']:8.1f} run-steps/s  "
                          f"{100 * result['fraction_of_gemm_limit']:5.1f}% of GEMM limit  "
                          f"{result['peak_rss_per_run_mib']:7.1f} MiB/run{spread}", flush=True)
            baseline = rows["solo x2"]["run_steps_per_s"]
            best = max((row["run_steps_per_s"], name) for name, row in rows.items() if name.startswith("pack"))
            summary = {"best": best[1], "best_vs_solo_x2": round(best[0] / baseline, 3)}
            if "legacy x2" in rows:
                summary["best_vs_legacy_x2"] = round(best[0] / rows["legacy x2"]["run_steps_per_s"], 3)
                summary["solo_vs_legacy"] = round(baseline / rows["legacy x2"]["run_steps_per_s"], 3)
            report["dims"][dims] = {"flops_per_run_step": flops, "rows": rows, "summary": summary}
            if not args.json:
                print(f"{dims:6s} summary: {summary}", flush=True)
        if args.eval:
            report["eval"] = eval_ratio(ROOT, 8)
            if not args.json:
                print(f"packed N* evaluation of 8 runs vs one after another: {report['eval']['ratio']:.2f}x")
    finally:
        if legacy_root is not None:
            subprocess.run(
                ["git", "-C", str(ROOT), "worktree", "remove", "--force", str(legacy_root)], capture_output=True
            )
    if args.json:
        print(json.dumps(report, indent=2))


if __name__ == "__main__":
    main()
