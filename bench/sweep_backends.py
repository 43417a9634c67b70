"""Sweep backends and checkpoint cost, in one run.

1. The same 8-run quick-scale grid ((ab)*, (aa)* × rope, nope × 2 seeds) through the local backend
   (2 worker processes) and the Ray backend (a local Ray instance with 2 CPUs, started and shut
   down by the sweep, as `--backend ray` does): wall time of each and the ratio, best of
   `--sweep-repeats` alternating rounds (local first, then Ray first, ...) against load drift.
   Target: Ray's overhead at most 10% of the local wall time. Because the wall times of a loaded
   machine drift by more than that, the fixed cost of the Ray backend (starting and shutting down
   its instance, with no work) is measured on its own too, as a share of the local wall time.
2. The cost of `--checkpoint-every 100` on training speed: one quick-scale run trained with and
   without saving its whole state every 100 steps (to a local folder), alternating, best of
   `--repeats`; steps/s by wall and by process CPU time. Target: at most 5%.

    python bench/sweep_backends.py [--steps 1000] [--sweep-repeats 2] [--checkpoint-steps 500] [--repeats 3] [--json]
"""

from __future__ import annotations

import argparse
import json
import shutil
import tempfile
import time
from pathlib import Path

from formal_rope.storage.training_state import StateOptions
from formal_rope.sweeps.backends import RayBackend, RayOptions
from formal_rope.sweeps.grid import build_spec, expand_grid
from formal_rope.sweeps.runner import run_sweep


def sweep_grid(steps: int | None):
    overrides = {} if steps is None else {"steps": steps}
    spec = build_spec(name="bench", languages=["(ab)*", "(aa)*"], pes=["rope", "nope"], bases=[1e4], seeds=2,
                      lrs=None, scale="quick", overrides=overrides)
    return expand_grid(spec)


def time_sweep(configs, folder: Path, **options) -> dict:
    started = time.perf_counter()
    summary = run_sweep(configs, folder, **options)
    wall = time.perf_counter() - started
    assert summary.completed == len(configs), summary
    return {"wall_s": wall, "units": summary.units, "statuses": summary.statuses}


def time_training(config, state_dir: Path | None, every: int) -> tuple[float, float]:
    """(wall s, process CPU s) of training `config` alone, saving its state every `every` steps or not."""
    import torch

    from formal_rope.scheduling.packs import pack_key
    from formal_rope.training.data import run_data
    from formal_rope.training.resolve import resolve_dfa, resolve_periods
    from formal_rope.training.setup import build_pack
    from formal_rope.training.train import train_pack

    torch.set_num_threads(1)
    dfa = resolve_dfa(config)
    torch.manual_seed(config.seed)
    model = build_pack([config], len(dfa.alphabet), [resolve_periods(config, dfa)])
    data = [run_data(config, dfa)]
    state = None if state_dir is None else StateOptions(str(state_dir), every=every)
    wall, cpu = time.perf_counter(), time.process_time()
    train_pack(model, [config], data, state=state, state_key=pack_key([config]))
    return time.perf_counter() - wall, time.process_time() - cpu


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--steps", type=int, default=None, help="Training steps per sweep run (default: quick scale, 1000)."
    )
    parser.add_argument(
        "--sweep-repeats", type=int, default=2, help="Alternating rounds of the two sweeps (best kept)."
    )
    parser.add_argument("--checkpoint-steps", type=int, default=500, help="Steps of the checkpoint-cost run.")
    parser.add_argument("--every", type=int, default=100, help="Checkpoint interval measured.")
    parser.add_argument(
        "--repeats", type=int, default=3, help="Alternating repeats of the checkpoint measurement (best kept)."
    )
    parser.add_argument("--skip-sweeps", action="store_true", help="Only measure the checkpoint cost.")
    parser.add_argument("--json", action="store_true", help="Print the numbers as JSON.")
    args = parser.parse_args()

    report: dict = {}
    scratch = Path(tempfile.mkdtemp(prefix="formal-rope-bench-"))
    try:
        if not args.skip_sweeps:
            configs = sweep_grid(args.steps)
            rounds: dict[str, list] = {"local": [], "ray": []}
            for index in range(args.sweep_repeats):
                order = ("local", "ray") if index % 2 == 0 else ("ray", "local")
                for backend in order:
                    rounds[backend].append(
                        time_sweep(configs, scratch / f"{backend}-{index}", workers=2, backend=backend)
                    )
            local = min(rounds["local"], key=lambda r: r["wall_s"])
            on_ray = min(rounds["ray"], key=lambda r: r["wall_s"])
            fixed = RayBackend(RayOptions(workers=2))
            started = time.perf_counter()
            fixed.open(lambda _note: None)
            opened = time.perf_counter()
            fixed.close()
            closed = time.perf_counter()
            report["ray_fixed"] = {"open_s": opened - started, "close_s": closed - opened,
                                   "share_of_local": (closed - started) / local["wall_s"]}
            report["sweep"] = {
                "runs": len(configs), "local": local, "ray": on_ray,
                "local_rounds_s": [r["wall_s"] for r in rounds["local"]],
                "ray_rounds_s": [r["wall_s"] for r in rounds["ray"]],
                "ray_over_local": on_ray["wall_s"] / local["wall_s"],
            }
        config = sweep_grid(args.checkpoint_steps)[0]
        plain, saving = [], []
        for repeat in range(args.repeats):
            plain.append(time_training(config, None, args.every))
            state_dir = scratch / f"state-{repeat}"
            saving.append(time_training(config, state_dir, args.every))
        best_plain = min(plain)
        best_saving = min(saving)
        state_bytes = sum(path.stat().st_size for path in scratch.glob("state-*/*.state"))
        report["checkpoint"] = {
            "steps": config.steps, "every": args.every, "repeats": args.repeats,
            "plain_steps_per_s": config.steps / best_plain[0], "saving_steps_per_s": config.steps / best_saving[0],
            "wall_cost": best_saving[0] / best_plain[0] - 1,
            "cpu_cost": min(s[1] for s in saving) / min(p[1] for p in plain) - 1,
            "state_bytes_per_run": state_bytes // max(1, args.repeats),
        }
    finally:
        shutil.rmtree(scratch, ignore_errors=True)

    if args.json:
        print(json.dumps(report, indent=2))
        return
    if "sweep" in report:
        sweep = report["sweep"]
        print(f"sweep of {sweep['runs']} quick runs, 2 workers / 2 CPUs:")
        print(f"  local backend  {sweep['local']['wall_s']:8.1f} s  ({sweep['local']['units']} units; rounds "
              + ", ".join(f"{t:.1f}" for t in sweep["local_rounds_s"]) + ")")
        print(f"  ray backend    {sweep['ray']['wall_s']:8.1f} s  ({sweep['ray']['units']} units; rounds "
              + ", ".join(f"{t:.1f}" for t in sweep["ray_rounds_s"]) + ")")
        print(f"  ray / local    {sweep['ray_over_local']:8.3f}   (target <= 1.10)")
        fixed = report["ray_fixed"]
        print(f"  Ray's fixed cost: start {fixed['open_s']:.1f} s + shut down {fixed['close_s']:.1f} s = "
              f"{100 * fixed['share_of_local']:.1f}% of the local wall time")
    point = report["checkpoint"]
    print(f"checkpoint every {point['every']} steps, {point['steps']}-step quick run, best of {point['repeats']}:")
    print(f"  without  {point['plain_steps_per_s']:7.1f} steps/s")
    print(
        f"  with     {point['saving_steps_per_s']:7.1f} steps/s  (state {point['state_bytes_per_run'] / 1024:.0f} KiB)"
    )
    print(
        f"  cost     {100 * point['wall_cost']:+6.1f}% wall, {100 * point['cpu_cost']:+6.1f}% CPU time   (target <= 5%)"
    )


if __name__ == "__main__":
    main()
