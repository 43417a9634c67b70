"""Record a tiny pack's numbers (per-step losses, weights, N*, accuracies, curve) as exact hex floats.

`final_before_objectives.json` is this script's output with the code before training objectives
existed (commit ecb49ad), `final_before_objectives.amd-epyc-avx512.json` the same on an AVX-512 CPU,
whose kernels round differently; tests/test_training_objectives.py runs it again and requires the bits
of one of them."""

import hashlib
import json
import sys

import torch

from formal_rope.run_config.config import RunConfig
from formal_rope.runs.pack import run_pack


def exact(value) -> str:
    return float(value).hex()


def main(path: str) -> None:
    torch.set_num_threads(1)
    base = dict(language="Σ*abΣ*", alphabet=("a", "b", "c"), layers=2, d_model=16, heads=2, steps=30,
                batch_size=16, test_min_length=41, test_max_length=44, n_per_length=16)
    configs = [RunConfig(**base, seed=1, lr=1e-3, pe="nope"), RunConfig(**base, seed=2, lr=3e-4, pe="rope")]
    losses = []
    results, model = run_pack(configs, on_step=lambda step, values: losses.append([exact(x) for x in values]))
    weights = hashlib.sha256()
    for name, tensor in sorted(model.state_dict().items()):
        weights.update(name.encode())
        weights.update(tensor.detach().contiguous().numpy().tobytes())
    out = {
        "configs": [c.to_dict() for c in configs], "run_ids": [c.run_id() for c in configs],
        "step_losses": losses, "final_loss": [exact(r.final_loss) for r in results],
        "n_star": [r.n_star for r in results], "accuracy": [exact(r.accuracy) for r in results],
        "per_length": [[exact(length.accuracy) for length in r.per_length] for r in results],
        "curve_loss": [[exact(x) for x in r.curve.to_dict().get("loss", [])] if r.curve else None for r in results],
        "weights_sha256": weights.hexdigest(),
    }
    with open(path, "w") as file:
        json.dump(out, file, indent=1)


if __name__ == "__main__":
    main(sys.argv[1])
