"""The checks a RunConfig makes of its own fields when it is built (`check_config`): after them a
config is valid, and nothing that receives one checks it again. Torch-free (numbers and the encoding
registry's rows only), like the config itself; the model's builders use the same period and
rotated-fraction rules (`check_period_count`, `check_partial_pairs`)."""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

from formal_rope.errors import FormalRopeError
from formal_rope.training.encodings import ENCODINGS, encoding

if TYPE_CHECKING:
    from formal_rope.training.config import RunConfig

# A layer of a per-layer `window` tuple that attends globally (no sliding window).
GLOBAL_WINDOW = -1
MAX_LENGTH_LIST = 1_000_000  # lengths an explicit list may hold (a single range is never expanded)


def period_pairs(pe: str, d_model: int, heads: int) -> int:
    """How many rotary pairs a periodic encoding spreads its periods over: rope_p rotates each head's
    (d_model / heads) / 2 pairs (every head gets the same schedule), sipe_p (an additive encoding)
    writes d_model / 2 sin/cos pairs into the embedding. A period tuple longer than this would leave
    periods unused."""
    return d_model // 2 if encoding(pe).additive else (d_model // heads) // 2


def describe_period_pairs(pe: str, d_model: int, heads: int) -> str:
    """'rope_p with d_model 16 and 2 heads has 4 rotary pairs per head (head dimension 8)': what an
    error about too many periods names."""
    pairs = period_pairs(pe, d_model, heads)
    if encoding(pe).additive:
        return f"{pe} with d_model {d_model} has {pairs} sin/cos pairs"
    return (f"{pe} with d_model {d_model} and {heads} head{'s' if heads != 1 else ''} has {pairs} rotary "
            f"pair{'s' if pairs != 1 else ''} per head (head dimension {d_model // heads})")


# The encodings one layer of a hybrid may hold: every encoding that rotates queries and keys (an
# additive one is a table added once to the embeddings, never one layer's).
HYBRID_ENCODINGS = tuple(name for name, row in ENCODINGS.items() if not row.additive)


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
    periodic = config.periodic_encoding()
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


# A period m is a lookup table of m rotations per pair, whose angles 2*pi*(a*r mod m)/m are formed in
# float64 from a*r with a <= m/2 and r < m: exact only while a*r < 2^53, i.e. m <= 2^27. Larger
# periods would also need tables of gigabytes per pair (a MemoryError mid-run, or an int64 overflow
# beyond 2^63), so they are refused with the other settings, before any work.
MAX_PERIOD = 2**27


def check_periods(periods) -> tuple[int, ...]:
    """The periods as a tuple of ints; FormalRopeError unless each is an integer in 1..MAX_PERIOD."""
    if periods is None or len(periods) == 0:
        raise FormalRopeError("periodic encodings need at least one period (e.g. --periods 2 or --periods auto)")
    checked = []
    for period in periods:
        # Non-finite floats would raise OverflowError/ValueError from int() instead of this message.
        finite = not isinstance(period, float) or math.isfinite(period)
        if isinstance(period, bool) or not finite or int(period) != period or int(period) <= 0:
            raise FormalRopeError(f"periods must be positive integers, got {period!r}")
        if int(period) > MAX_PERIOD:
            raise FormalRopeError(
                f"period {int(period):,} is too large: a period m is a lookup table of m rotations for each rotary "
                f"pair, exact and of bounded size only up to m = {MAX_PERIOD:,} (2^27); use a smaller period "
                "(periods above the longest position never wrap around anyway)"
            )
        checked.append(int(period))
    return tuple(checked)


def check_period_count(periods, n_pairs: int, pairs_text: str | None = None) -> tuple[int, ...]:
    """The validated periods; FormalRopeError when there are more periods than pairs to carry them
    (each pair gets one period, so the surplus would never be used and the run would silently train
    the first `n_pairs` periods only). `pairs_text` says what has the pairs (`describe_period_pairs`)."""
    periods = check_periods(periods)
    if len(periods) > n_pairs:
        unused = ",".join(map(str, periods[n_pairs:]))
        raise FormalRopeError(
            f"{len(periods)} periods ({','.join(map(str, periods))}) but "
            f"{pairs_text or f'the encoding has {n_pairs} rotary pairs'}, and each pair carries one period: "
            f"{unused} would never be used. Give at most {n_pairs} period{'s' if n_pairs != 1 else ''} (fewer "
            "are repeated round-robin over the pairs) or a wider model"
        )
    return periods



def partial_rotated_pairs(fraction: float, n_pairs: int) -> int:
    """The pairs partial_rope rotates: fraction * pairs rounded half up (2.5 -> 3, not banker's 2)."""
    return int(math.floor(fraction * n_pairs + 0.5))


def check_partial_pairs(fraction: float, n_pairs: int) -> int:
    """`partial_rotated_pairs`; FormalRopeError when that is no pair at all (the run would be NoPE)."""
    rotated = partial_rotated_pairs(fraction, n_pairs)
    if rotated == 0:
        raise FormalRopeError(
            f"partial_rope with rope_fraction {fraction:g} rotates no pair: {fraction:g} x {n_pairs} rotary pairs "
            f"per head = {fraction * n_pairs:g}, which rounds (half up) to 0, so the run would be NoPE. Use a "
            f"fraction of at least {0.5 / n_pairs:g} (one pair), a wider head, or --pe nope"
        )
    return rotated
