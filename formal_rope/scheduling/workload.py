"""Up-front estimates of a run's cost, so a run that cannot finish or fit is refused before it starts.

The estimates are deliberately simple (dense matmul FLOPs of a pre-LN transformer, the sampler's
largest buffers); they only need to tell a run of hours from one of centuries. `check_workload`
raises FormalRopeError with the estimate and the limit when a run is out of reach.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

from formal_rope.errors import FormalRopeError
from formal_rope.run_config.config import RunConfig
from formal_rope.run_config.rules import period_pairs

FLOP_LIMIT = 1e20  # ~300 years on one CPU core, ~10 days on a GPU sustaining 1e14 FLOP/s
CPU_FLOPS = 1e10  # what one core of this project's CPU sustains on these models (measured, rounded)
_SAMPLER_BYTES_PER_SYMBOL = 24  # float64 uniform draw + int64 symbol + working copy, per sampled symbol
_TRAINING_BYTES_PER_PARAMETER = 16  # fp32 weight, gradient and two AdamW moments
# rope_p / sipe_p build, per pair, a table of one entry per residue of the largest period: float64
# angles and cos/sin temporaries, then the float32 cos and sin tables (encodings.periods.periodic_values).
_PERIODIC_TABLE_BYTES_PER_ENTRY = 32


@dataclass(frozen=True)
class Workload:
    """Estimated floating-point operations (training, evaluation) and peak memory of one run."""

    training_flops: float
    evaluation_flops: float
    peak_bytes: float
    table_bytes: float = 0.0  # of peak_bytes: rope_p / sipe_p lookup tables (grow with the largest period)

    @property
    def flops(self) -> float:
        return self.training_flops + self.evaluation_flops

    def cpu_seconds(self) -> float:
        """Rough single-core time at CPU_FLOPS."""
        return self.flops / CPU_FLOPS


def _per_token_flops(config: RunConfig, tokens: float) -> float:
    """Forward FLOPs per token at sequence length `tokens` (projections, FFN and attention, all layers)."""
    d = float(config.d_model)
    dense = 2.0 * (4 + 2 * config.ffn_mult) * d * d
    attention = 4.0 * tokens * d
    return config.layers * (dense + attention)


def _length_sums(config: RunConfig) -> tuple[float, float, int]:
    """(Σ (L+2), Σ (L+2)², max L) over the tested lengths L (closed form for a range)."""
    if config.test_lengths is not None:
        sizes = [length + 2.0 for length in config.test_lengths]
        return sum(sizes), sum(size * size for size in sizes), config.test_lengths[-1]
    low, high = float(config.test_min_length + 2), float(config.test_max_length + 2)

    def cumulative(n: float, power: int) -> float:  # Σ_{k=1..n} k^power
        return n * (n + 1) / 2 if power == 1 else n * (n + 1) * (2 * n + 1) / 6

    return (
        cumulative(high, 1) - cumulative(low - 1, 1),
        cumulative(high, 2) - cumulative(low - 1, 2),
        config.test_max_length,
    )


def estimate(config: RunConfig) -> Workload:
    """The run's estimated FLOPs and peak memory (upper bounds: padding and duplicates included)."""
    train_tokens = float(config.train_max_length + 2)
    training = 3.0 * config.steps * config.batch_size * train_tokens * _per_token_flops(config, train_tokens)
    total, squares, longest = _length_sums(config)
    d = float(config.d_model)
    dense = 2.0 * (4 + 2 * config.ffn_mult) * d * d
    # NNCH's uniform strings join each length's batch (an upper bound: the first test length has none).
    evaluation = (config.n_per_length + config.nnch_samples) * config.layers * (dense * total + 4.0 * d * squares)
    parameters = config.layers * (4 + 2 * config.ffn_mult) * d * d
    activations = 4.0 * config.batch_size * train_tokens * d * config.layers * (8 + 2 * config.ffn_mult)
    sampler = _SAMPLER_BYTES_PER_SYMBOL * float(config.n_per_length) * max(1, longest)
    tables = periodic_table_bytes(config)
    peak = max(_TRAINING_BYTES_PER_PARAMETER * parameters + activations, sampler + 4.0 * parameters) + tables
    return Workload(training, evaluation, peak, tables)


def periodic_table_bytes(config: RunConfig) -> float:
    """Memory of the rope_p / sipe_p lookup tables while they are built: one entry per residue of the
    largest period for each pair (0 for other encodings and for periods auto, resolved later and small)."""
    periodic = config.periodic_row()
    if not (periodic and config.periods):
        return 0.0
    pairs = period_pairs(periodic, config.d_model, config.heads)
    # Capped before float(): an int beyond float range (check_periods refuses it first) must not raise here.
    largest = min(max(config.periods), 2**64)
    return float(_PERIODIC_TABLE_BYTES_PER_ENTRY) * max(1, pairs) * float(largest)


def physical_memory() -> int | None:
    """This machine's RAM in bytes (None when the OS does not say)."""
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (AttributeError, ValueError, OSError):
        return None


def _duration(seconds: float) -> str:
    for unit, size in (("years", 365.25 * 86400), ("days", 86400), ("hours", 3600), ("minutes", 60)):
        if seconds >= size:
            return f"{seconds / size:.3g} {unit}"
    return f"{seconds:.3g} s"


def _bytes(count: float) -> str:
    for unit, size in (("TiB", 2.0**40), ("GiB", 2.0**30), ("MiB", 2.0**20)):
        if count >= size:
            return f"{count / size:.3g} {unit}"
    return f"{count:.3g} bytes"


def check_workload(config: RunConfig, memory: int | None = None) -> Workload:
    """The run's Workload; FormalRopeError when it needs more than FLOP_LIMIT operations or more
    memory than this machine has (`memory` overrides the machine's RAM)."""
    work = estimate(config)
    if work.flops > FLOP_LIMIT:
        biggest = "training (--steps, --batch-size, model size)" if work.training_flops >= work.evaluation_flops else (
            "evaluation (--test-lengths, --n-per-length, model size)"
        )
        raise FormalRopeError(
            f"this run cannot finish: it needs about {work.flops:.2g} floating-point operations "
            f"(training {work.training_flops:.2g}, evaluation {work.evaluation_flops:.2g}), roughly "
            f"{_duration(work.cpu_seconds())} on one CPU core; the limit is {FLOP_LIMIT:.0g} "
            f"(about {_duration(FLOP_LIMIT / CPU_FLOPS)} on one core). Shrink the {biggest}"
        )
    available = physical_memory() if memory is None else memory
    if available is not None and work.peak_bytes > available and work.table_bytes >= work.peak_bytes / 2:
        raise FormalRopeError(
            f"this run cannot fit in memory: its {config.pe} lookup tables hold one rotation per residue of period "
            f"{max(config.periods):,} for each rotary pair, about {_bytes(work.table_bytes)}, and this machine has "
            f"{_bytes(available)}; use smaller periods (a period above the longest position never wraps around)"
        )
    if available is not None and work.peak_bytes > available:
        raise FormalRopeError(
            f"this run cannot fit in memory: it needs about {_bytes(work.peak_bytes)} at its peak (model, "
            f"training batch, or the test strings of its longest length {longest_length(config):,}), "
            f"and this machine has {_bytes(available)}"
        )
    return work


def longest_length(config: RunConfig) -> int:
    return config.test_lengths[-1] if config.test_lengths is not None else config.test_max_length
