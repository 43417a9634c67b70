"""rope, rope_p and partial_rope: rotary pairs at fixed frequencies (RoPE's ladder at each run's base,
or its first pairs re-spaced over the rotated ones) or looked up from periodic tables."""

from __future__ import annotations

import numpy as np

from formal_rope.run_config.rules import check_periods
from formal_rope.training.encodings.base import (
    CachedTables,
    PositionalEncoding,
    periodic_tables,
    phase_tables,
    run_bases,
)
from formal_rope.training.encodings.periods import assign_periods
from formal_rope.training.encodings.phases import (
    float_turns,
    partial_frequencies,
    rope_frequencies,
    rope_turns,
    rotary_phases,
)


class FixedRotary(CachedTables):
    """rope, partial_rope, jof_fixed: fixed frequencies per run (R, P) (zero for unrotated pairs)."""

    def __init__(self, frequencies: np.ndarray, precision: str, rotate_values: bool = False, turns=None) -> None:
        frequencies = np.atleast_2d(np.asarray(frequencies, dtype=np.float64))
        super().__init__(frequencies.shape[0])
        self.frequencies = frequencies
        # Exact turn limbs (R, P, 3) of the frequencies' definition (`rope_turns`); default: their float64 value.
        self.turns = float_turns(frequencies) if turns is None else np.asarray(turns, dtype=np.int64)
        self.precision = precision
        self.rotate_values = rotate_values

    def _per_run_fields(self):
        return ("frequencies", "turns")

    def _build(self, run, positions, dtype):
        return phase_tables(rotary_phases(self.frequencies[run], positions, self.precision, self.turns[run]), dtype)

    def rotation(self, layer, length, hidden):
        return self._tables(length, hidden.device, hidden.dtype)

    def describe(self, run=0):
        return {"phase_precision": self.precision, "rotated_pairs": int(np.count_nonzero(self.frequencies[run]))}


class PeriodicRotary(CachedTables):
    """rope_p: component-periodic rotations from lookup tables T_d(i mod m_d), periods per run."""

    def __init__(self, n_pairs: int, periods) -> None:
        super().__init__(len(periods))
        self.periods = tuple(check_periods(p) for p in periods)
        self.n_pairs = n_pairs

    def _per_run_fields(self):
        return ("periods",)

    def _build(self, run, positions, dtype):
        return periodic_tables(self.periods[run], self.n_pairs, positions, dtype)

    def rotation(self, layer, length, hidden):
        return self._tables(length, hidden.device, hidden.dtype)

    def describe(self, run=0):
        pair_periods, numerators = assign_periods(self.periods[run], self.n_pairs)
        return {
            "periods": list(self.periods[run]), "pair_periods": pair_periods.tolist(),
            "numerators": numerators.tolist(),
        }



def rope_ladders(specs, n_pairs: int) -> np.ndarray:
    """RoPE's frequencies at each run's base, (R, P)."""
    return np.stack([rope_frequencies(base, n_pairs) for base in run_bases(specs)])


def rope_ladder_turns(specs, n_pairs: int) -> np.ndarray:
    """The exact turn limbs of RoPE's frequencies at each run's base, (R, P, 3)."""
    return np.stack([rope_turns(base, n_pairs) for base in run_bases(specs)])



def build_rope(specs, n_pairs: int) -> PositionalEncoding:
    turns = rope_ladder_turns(specs, n_pairs)
    return FixedRotary(rope_ladders(specs, n_pairs), specs[0].phase_precision, turns=turns)


def build_rope_p(specs, n_pairs: int) -> PositionalEncoding:
    return PeriodicRotary(n_pairs, [spec.periods for spec in specs])


def build_partial_rope(specs, n_pairs: int) -> PositionalEncoding:
    fraction = specs[0].rope_fraction
    ladders = [partial_frequencies(base, n_pairs, fraction) for base in run_bases(specs)]
    frequencies = np.stack([frequencies for frequencies, _ in ladders])
    return FixedRotary(frequencies, specs[0].phase_precision, turns=np.stack([turns for _, turns in ladders]))


