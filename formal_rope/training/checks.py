"""The checks a RunConfig makes of its own fields when it is built (`check_config`): after them a
config is valid, and nothing that receives one checks it again. Torch-free (numbers and the encoding
registry's rows only), like the config itself; the period and rotated-fraction rules are the
encodings' own (`encodings.periods.check_period_count`, `encodings.phases.check_partial_pairs`),
which the model's builders also use."""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

from formal_rope.errors import FormalRopeError
from formal_rope.training.encodings import HYBRID_ENCODINGS, Encoding
from formal_rope.training.encodings.periods import MAX_PERIOD, check_period_count, check_periods
from formal_rope.training.encodings.phases import check_partial_pairs, partial_rotated_pairs

if TYPE_CHECKING:
    from formal_rope.training.config import RunConfig

# A layer of a per-layer `window` tuple that attends globally (no sliding window).
GLOBAL_WINDOW = -1
MAX_LENGTH_LIST = 1_000_000  # lengths an explicit list may hold (a single range is never expanded)


def period_pairs(row: Encoding, d_model: int, heads: int) -> int:
    """How many rotary pairs a periodic encoding (its registry `row`) spreads its periods over:
    rope_p rotates each head's (d_model / heads) / 2 pairs (every head gets the same schedule),
    sipe_p (an additive encoding) writes d_model / 2 sin/cos pairs into the embedding. A period
    tuple longer than this would leave periods unused."""
    return d_model // 2 if row.additive else (d_model // heads) // 2


def describe_period_pairs(row: Encoding, d_model: int, heads: int) -> str:
    """'rope_p with d_model 16 and 2 heads has 4 rotary pairs per head (head dimension 8)': what an
    error about too many periods names."""
    pairs = period_pairs(row, d_model, heads)
    if row.additive:
        return f"{row.name} with d_model {d_model} has {pairs} sin/cos pairs"
    return (f"{row.name} with d_model {d_model} and {heads} head{'s' if heads != 1 else ''} has {pairs} rotary "
            f"pair{'s' if pairs != 1 else ''} per head (head dimension {d_model // heads})")


def check_config(config: RunConfig) -> None:
    """FormalRopeError for any value no run can use (RunConfig runs it when built, after making its
    fields canonical): per-layer encodings and windows, base, periods, counts, rates and fractions,
    lengths, d_model against heads, the rotated fraction and the periods against the rotary pairs.
    Whether a run fits this machine (`workload.check_workload`) and runs on a device are checked
    where those are decided (`setup.check_pack`)."""
    check_hybrid(config)
    # pe, phase_precision, attention, eval_mode and lr_schedule were checked by `check_choices`.
    if not (config.base > 0 and math.isfinite(config.base)):
        raise FormalRopeError(f"the base must be a positive finite number, got {config.base!r}")
    if config.periods is not None:
        check_periods(config.periods)
    for name in ("steps", "train_min_length", "test_min_length", "warmup_steps", "seed", "eval_seed", "nnch_samples"):
        if getattr(config, name) < 0:
            raise FormalRopeError(f"{name} must be non-negative, got {getattr(config, name)}")
    for name in ("batch_size", "layers", "d_model", "heads", "ffn_mult", "n_per_length"):
        if getattr(config, name) <= 0:
            raise FormalRopeError(f"{name} must be positive, got {getattr(config, name)}")
    for name in ("lr", "weight_decay", "grad_clip", "rope_fraction", "train_near_miss_fraction",
                 "test_near_miss_fraction"):
        if not math.isfinite(getattr(config, name)):
            raise FormalRopeError(f"{name} must be a finite number, got {getattr(config, name)}")
    if not config.lr > 0:
        raise FormalRopeError(f"the learning rate must be positive, got {config.lr}")
    if config.weight_decay < 0 or config.grad_clip < 0:
        raise FormalRopeError("weight_decay and grad_clip must be non-negative (grad_clip 0: no clipping)")
    if not 0.0 <= config.train_near_miss_fraction <= 1.0:
        raise FormalRopeError(f"train_near_miss_fraction must lie in [0, 1], got {config.train_near_miss_fraction}")
    if not 0.0 <= config.test_near_miss_fraction <= 1.0:
        raise FormalRopeError(f"test_near_miss_fraction must lie in [0, 1], got {config.test_near_miss_fraction}")
    if config.train_min_length > config.train_max_length:
        raise FormalRopeError("train_min_length must not exceed train_max_length")
    if config.test_min_length > config.test_max_length:
        raise FormalRopeError("test_min_length must not exceed test_max_length")
    if config.test_lengths is not None and len(config.test_lengths) > MAX_LENGTH_LIST:
        raise FormalRopeError(
            f"test_lengths lists {len(config.test_lengths):,} lengths, more than {MAX_LENGTH_LIST:,}; "
            "use a range (test_min_length..test_max_length) or fewer lengths"
        )
    if config.applies("rope_fraction") and not 0.0 <= config.rope_fraction <= 1.0:
        raise FormalRopeError(f"{config.pe}: the rotated fraction must lie in [0, 1], got {config.rope_fraction}")
    if config.d_model % config.heads or (config.d_model // config.heads) % 2:
        raise FormalRopeError(
            f"d_model ({config.d_model}) must split into {config.heads} heads of even dimension (rotary pairs)"
        )
    if config.applies("rope_fraction"):
        check_partial_pairs(config.rope_fraction, config.d_model // config.heads // 2)
    periodic = config.periodic_row()
    if periodic is not None and config.periods is not None:
        # Periods are given to pairs one each; a surplus would be dropped without a word.
        check_period_count(config.periods, period_pairs(periodic, config.d_model, config.heads),
                           describe_period_pairs(periodic, config.d_model, config.heads))


def check_hybrid(config: RunConfig) -> None:
    """FormalRopeError naming layer_pe or window when a hybrid's per-layer settings cannot run: a
    list whose length is not `layers`, an encoding a layer cannot hold alone (`HYBRID_ENCODINGS`),
    a window below 1 (per layer: -1 marks a global layer). Unknown names were refused by
    `check_choices`."""
    if config.layer_pe is not None:
        if len(config.layer_pe) != config.layers:
            raise FormalRopeError(
                f"layer_pe names {len(config.layer_pe)} encoding{'s' if len(config.layer_pe) != 1 else ''} "
                f"({','.join(config.layer_pe)}) for {config.layers} layers; give one per layer"
            )
        refused = [name for name in dict.fromkeys(config.layer_pe) if name not in HYBRID_ENCODINGS]
        if refused:
            why = " ".join(
                f"{name} is additive (a table added once to the embeddings, not a per-layer rotation): use it in "
                "every layer (--pe) or not at all." for name in refused
            )
            raise FormalRopeError(f"layer_pe: {', '.join(refused)} cannot be one layer's encoding among others. {why} "
                                  f"Layers of a hybrid take {', '.join(HYBRID_ENCODINGS)}")
    window = config.window
    if isinstance(window, int) and window < 1:
        raise FormalRopeError(f"window must be at least 1 (keys each query sees), got {window}; "
                              "none (the default) attends globally")
    if isinstance(window, tuple):
        if len(window) != config.layers:
            raise FormalRopeError(f"window lists {len(window)} windows for {config.layers} layers; give one per "
                                  f"layer ({GLOBAL_WINDOW} or global: a global layer) or a single window")
        bad = [w for w in window if w < 1 and w != GLOBAL_WINDOW]
        if bad:
            raise FormalRopeError(f"window: {bad[0]} is no window; per layer give a window of at least 1, or "
                                  f"{GLOBAL_WINDOW} (global) for a layer without one")


__all__ = ["GLOBAL_WINDOW", "HYBRID_ENCODINGS", "MAX_LENGTH_LIST", "MAX_PERIOD", "check_config", "check_hybrid",
           "check_partial_pairs", "check_period_count", "check_periods", "describe_period_pairs",
           "partial_rotated_pairs", "period_pairs"]
