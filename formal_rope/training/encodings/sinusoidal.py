"""sipe and sipe_p: additive sin/cos tables added to the embeddings, at RoPE's frequency ladder over
d_model (sipe) or looked up from periodic tables (sipe_p)."""

from __future__ import annotations

import numpy as np

from formal_rope.run_config.rules import check_periods
from formal_rope.training.encodings.base import (
    CachedTables,
    PositionalEncoding,
    interleave,
    periodic_tables,
    phase_tables,
    run_bases,
)
from formal_rope.training.encodings.phases import rope_frequencies, rope_turns, rotary_phases


class SinusoidalEmbedding(CachedTables):
    """sipe: additive sin/cos features at frequencies base^(-2p/d_model), one base per run."""

    def __init__(self, d_model: int, bases, precision: str) -> None:
        super().__init__(len(bases))
        self.frequencies = np.stack([rope_frequencies(base, d_model // 2) for base in bases])  # (R, d/2)
        self.turns = np.stack([rope_turns(base, d_model // 2) for base in bases])  # (R, d/2, 3): exact
        self.precision = precision

    def _per_run_fields(self):
        return ("frequencies", "turns")

    def _build(self, run, positions, dtype):
        phases = rotary_phases(self.frequencies[run], positions, self.precision, self.turns[run])
        return (interleave(*phase_tables(phases, dtype)),)

    def embedding(self, length, device, dtype=None):
        return self._tables(length, device, dtype)[0]

    def describe(self, run=0):
        return {"phase_precision": self.precision}


class PeriodicEmbedding(CachedTables):
    """sipe_p: additive sin/cos features looked up from per-pair periodic tables, periods per run."""

    def __init__(self, d_model: int, periods) -> None:
        super().__init__(len(periods))
        self.periods = tuple(check_periods(p) for p in periods)
        self.n_pairs = d_model // 2

    def _per_run_fields(self):
        return ("periods",)

    def _build(self, run, positions, dtype):
        return (interleave(*periodic_tables(self.periods[run], self.n_pairs, positions, dtype)),)

    def embedding(self, length, device, dtype=None):
        return self._tables(length, device, dtype)[0]

    def describe(self, run=0):
        return {"periods": list(self.periods[run])}



def build_sipe(specs, n_pairs: int) -> PositionalEncoding:
    return SinusoidalEmbedding(specs[0].d_model, run_bases(specs), specs[0].phase_precision)


def build_sipe_p(specs, n_pairs: int) -> PositionalEncoding:
    return PeriodicEmbedding(specs[0].d_model, [spec.periods for spec in specs])


