"""Periods -> pairs, for the periodic encodings (rope_p, sipe_p): numpy only, no torch.

A tuple of periods (m_1, ..., m_r) is spread round-robin over the pairs: pair p gets period
m_{p mod r}. The c-th pair that receives period m gets the angle 2*pi*a/m with numerator
a = 1 + (c mod max(1, m // 2)), so the pairs of one period cover its distinct harmonics (a and m-a
give the same cos and mirrored sin). Period 1 means an unrotated pair (angle 0). Periodic schedules
never form theta*i: they look up T_d(i mod m_d), a table of m_d entries computed once (core paper,
eq. 7), so they repeat bit-exactly at every position.
"""

from __future__ import annotations

import numpy as np

from formal_rope.run_config.rules import check_period_count
from formal_rope.training.encodings.phases import TWO_PI


def assign_periods(periods, n_pairs: int) -> tuple[np.ndarray, np.ndarray]:
    """(period, numerator) per pair: round-robin over periods, harmonics 1..m//2 within a period.
    More periods than pairs is a FormalRopeError (`check_period_count`), never a silent drop."""
    periods = check_period_count(periods, n_pairs)
    pair_periods = np.array([periods[p % len(periods)] for p in range(n_pairs)], dtype=np.int64)
    numerators = np.zeros(n_pairs, dtype=np.int64)
    seen: dict[int, int] = {}
    for pair, period in enumerate(pair_periods.tolist()):
        count = seen.get(period, 0)
        seen[period] = count + 1
        numerators[pair] = 0 if period == 1 else 1 + count % max(1, period // 2)
    return pair_periods, numerators


def periodic_values(periods, n_pairs: int, positions: np.ndarray, dtype=np.float32) -> tuple[np.ndarray, np.ndarray]:
    """cos/sin (T, P) in `dtype` by lookup T_d(i mod m_d); the product theta*i is never formed
    (`base.periodic_tables` hands them to torch)."""
    pair_periods, numerators = assign_periods(periods, n_pairs)
    positions = np.asarray(positions, dtype=np.int64)
    residues = np.mod(positions[:, None], pair_periods[None, :])  # exact integer arithmetic
    # One finite table per pair, indexed by residue: entry r holds Rot(2*pi*a*r/m).
    longest = int(pair_periods.max())
    r = np.arange(longest, dtype=np.float64)
    table_angles = TWO_PI * (numerators[:, None] * r[None, :] % pair_periods[:, None]) / pair_periods[:, None]
    cos_table = np.cos(table_angles).astype(dtype)  # (P, longest)
    sin_table = np.sin(table_angles).astype(dtype)
    pair_index = np.arange(n_pairs)[None, :]
    return cos_table[pair_index, residues], sin_table[pair_index, residues]
