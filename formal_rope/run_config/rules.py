"""The rules of the encodings' numbers that a run's config checks when it is built and the model's
builders check again when they are called directly: periods (`check_periods`,
`check_period_count`), the pairs partial RoPE rotates (`check_partial_pairs`), the pairs a
periodic encoding spreads its periods over (`period_pairs`). Pure Python (no numpy, no torch), so
the config stays cheap to import; the encodings' modules (`training.encodings.periods`,
`training.encodings.phases`, `training.encodings.builders`) import them from here."""

from __future__ import annotations

import math

from formal_rope.errors import FormalRopeError
from formal_rope.run_config.encodings import Encoding

# A layer of a per-layer `window` tuple that attends globally (no sliding window).
GLOBAL_WINDOW = -1
MAX_LENGTH_LIST = 1_000_000  # lengths an explicit list may hold (a single range is never expanded)

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
