"""Named experiment scales: RunConfig overrides shared by `train --scale` and `reproduce`.

"paper" is the core paper's protocol (appendix E.2). "quick" keeps the protocol's shape (training
lengths 0..40, test lengths 41..500, balanced test sets, N*) but shrinks model, steps and test-set
size so a run trains and evaluates in about a minute on one CPU core. "medium" keeps the paper's
model, batch and uniform training negatives and shrinks only steps (and test strings per length,
seeds, learning rates) so `reproduce table2 --scale medium` finishes in about an hour on a 2-core
CPU. SCALE_SHRINKS says what each scale shrinks, for `reproduce` to print next to its tables.
"""

from __future__ import annotations

from formal_rope.errors import FormalRopeError
from formal_rope.run_config.config import RunConfig

PAPER_LEARNING_RATES = (1e-4, 3e-4, 5e-4)
PAPER_SEEDS = (0, 1, 2, 3, 4)

SCALES: dict[str, dict] = {
    "paper": {
        "layers": 5,
        "d_model": 64,
        "heads": 8,
        "steps": 1_000_000,
        "batch_size": 128,
        "n_per_length": 512,
        "test_near_miss_fraction": 0.5,  # SPEC §4: half of each test length's negatives are near-misses
        "lr": 3e-4,
        "lrs": PAPER_LEARNING_RATES,
        "seeds": PAPER_SEEDS,
        "test_min_length": 41,
        "test_max_length": 500,
    },
    "quick": {
        "layers": 2,
        "d_model": 32,
        "heads": 4,
        "steps": 1000,
        "batch_size": 64,
        "n_per_length": 16,
        "test_near_miss_fraction": 0.5,
        "lr": 5e-3,
        "lr_schedule": "cosine",
        "warmup_steps": 50,
        "lrs": (5e-3,),
        "seeds": (0, 1),
        "test_min_length": 41,
        "test_max_length": 500,
    },
    "medium": {
        "layers": 5,
        "d_model": 64,
        "heads": 8,
        "steps": 2000,
        "batch_size": 128,
        "n_per_length": 32,
        "lr": 1e-3,
        "lr_schedule": "cosine",
        "warmup_steps": 100,
        "train_near_miss_fraction": 0.0,
        "test_near_miss_fraction": 0.5,
        "lrs": (1e-3,),
        "seeds": (0, 1, 2),
        "test_min_length": 41,
        "test_max_length": 500,
    },
}

# Grid-level keys (how many runs), not RunConfig fields.
GRID_KEYS = ("lrs", "seeds")

QUICK_SHRINKS: tuple[str, ...] = (
    "model: 2 layers, d_model 32, 4 heads (paper: 5 layers, d_model 64, 8 heads)",
    "training: 1,000 steps of batch 64, lr 5e-3 with 50 warm-up steps and cosine decay (paper: 10^6 "
    "steps of batch 128, constant lr)",
    "training negatives: uniform, as the paper's (until this version half were near-misses, which let SiPE_P "
    "generalise on (ab)*, unlike the paper: docs/findings.md#ablation)",
    "learning rates: 5e-3 only (paper: 1e-4, 3e-4, 5e-4)",
    "seeds: 2 (paper: 5); like the paper's Table 2, report the maximum over the grid",
    "test strings per length: 16 (paper: 512); test lengths unchanged (41..500)",
)


MEDIUM_SHRINKS: tuple[str, ...] = (
    "model, batch and training negatives as the paper's: 5 layers, d_model 64, 8 heads, batch 128, uniform negatives",
    "training: 2,000 steps, lr 1e-3 with 100 warm-up steps and cosine decay (paper: 10^6 steps, constant lr)",
    "learning rates: 1e-3 only (paper: 1e-4, 3e-4, 5e-4)",
    "seeds: 3 (paper: 5); like the paper's Table 2, report the maximum over the grid",
    "test strings per length: 32 (paper: 512); test lengths unchanged (41..500)",
)

# What `reproduce` prints for a scale that is not the paper's own.
SCALE_SHRINKS: dict[str, tuple[str, ...]] = {"quick": QUICK_SHRINKS, "medium": MEDIUM_SHRINKS}


def scale_overrides(scale: str) -> dict:
    """RunConfig field overrides for a scale (without the grid-level keys)."""
    if scale not in SCALES:
        raise FormalRopeError(f"unknown scale {scale!r}; expected one of {', '.join(SCALES)}")
    return {key: value for key, value in SCALES[scale].items() if key not in GRID_KEYS}


def apply_scale(config: RunConfig, scale: str) -> RunConfig:
    """`config` with a named scale's settings (model size, steps, tests) replacing its own."""
    return config.with_(**scale_overrides(scale))
