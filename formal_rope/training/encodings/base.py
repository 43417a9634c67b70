"""What every encoding module is: `PositionalEncoding`, the tables cache, and the torch side of the
phase arithmetic (`phases`, `periods`: numpy arrays in, torch tables out).

Every encoding module serves a pack of R runs (the classifier's leading run axis; a single run is
a pack of one). Runs of a pack share the encoding's kind and shape but each keeps its own base,
periods, learned frequencies or projections. Every encoding answers for the model:
  embedding(length)            an additive (R, length, d_model) table or None (sipe, sipe_p)
  rotation(layer, length, x)   cos/sin tables for the rotary pairs of one layer's attention, shaped
                               (R, length, head_dim/2) when shared by every head and batch element of
                               a run, or (R, batch, heads, length, head_dim/2) when angles depend on
                               content (jof_projected; x is (R, batch, length, d_model)); None means
                               no rotation (identity).
  token_rotation(layer, layout, x)  the same rotations per token of a forward pass's TokenLayout, as
                               unit complex numbers (N, head_dim/2) or (N, heads, head_dim/2): what
                               the classifier multiplies q and k by.
and `rotate_values` says whether attention transports values (JoFormer).
"""

from __future__ import annotations

import numpy as np
import torch
from torch import nn

from formal_rope.precision.native import round_once
from formal_rope.training.encodings.periods import periodic_values
from formal_rope.training.packed_layers import select_runs_of


def phase_tables(phases: np.ndarray, dtype=np.float32) -> tuple[torch.Tensor, torch.Tensor]:
    """(cos, sin) tables in `dtype` (float32 by default; float64 for float64 models); cos/sin are
    evaluated in the phases' own dtype, then cast."""
    return (
        torch.from_numpy(np.cos(phases).astype(dtype)),
        torch.from_numpy(np.sin(phases).astype(dtype)),
    )


def periodic_tables(
    periods, n_pairs: int, positions: np.ndarray, dtype=np.float32
) -> tuple[torch.Tensor, torch.Tensor]:
    """cos/sin (T, P) in `dtype` by lookup T_d(i mod m_d) (`periods.periodic_values`), as torch tensors."""
    cos, sin = periodic_values(periods, n_pairs, positions, dtype)
    return torch.from_numpy(cos), torch.from_numpy(sin)


def run_bases(specs) -> list[float]:
    """Each run's base, for a pack's `PositionalSpec`s."""
    return [spec.base for spec in specs]


def interleave(cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    """Additive sinusoidal table from pair tables: coordinates (2p, 2p+1) = (sin, cos)."""
    return torch.stack((sin, cos), dim=-1).flatten(-2)


class PositionalEncoding(nn.Module):
    """Base class: no additive table, identity rotation, plain values (this is NoPE)."""

    rotate_values: bool = False

    def __init__(self, runs: int = 1) -> None:
        super().__init__()
        self.runs = runs

    def embedding(self, length: int, device: torch.device, dtype: torch.dtype | None = None) -> torch.Tensor | None:
        """The additive table (R, length, d_model) for a model computing in `dtype`, or None."""
        return None

    def layer_rotates_values(self, layer: int) -> bool:
        """Whether attention in layer `layer` transports values (JoFormer): `rotate_values` for
        every layer, except in a hybrid (`LayeredPositional`)."""
        return self.rotate_values

    def rotation(self, layer: int, length: int, hidden: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor] | None:
        return None

    def token_rotation(self, layer: int, layout, hidden: torch.Tensor) -> torch.Tensor | None:
        """Each pooled token's rotation in layer `layer` as unit complex numbers cos + i sin: (N, P)
        shared by the heads, (N, H, P) per head, or None (no rotation). `layout` is the forward
        pass's `TokenLayout` (each token's run and position), hidden the block input (R, L, d)."""
        tables = self.rotation(layer, max(layout.widths, default=1), hidden)
        if tables is None:
            return None
        cos, sin = tables  # (R, T, P)
        return torch.complex(cos, sin)[layout.token_run, layout.token_position]

    def describe(self, run: int = 0) -> dict:
        """What run `run` should record about its realised schedule."""
        return {}

    def reset_run(self, run: int, generator: torch.Generator) -> None:
        """Initialise run `run`'s trainable parameters (none for fixed schedules)."""

    def select(self, indices) -> "PositionalEncoding":
        """A copy holding only the runs `indices` (parameters and per-run schedules, in that order)."""
        chosen = [int(i) for i in indices]
        copy = self.__class__.__new__(self.__class__)
        nn.Module.__init__(copy)
        fresh = set(copy.__dict__)  # nn.Module's own registries: never shared with the original
        for name, value in self.__dict__.items():
            if name not in fresh or name == "training":
                copy.__dict__[name] = value
        copy._cache = {}
        copy.runs = len(chosen)
        index = torch.tensor(chosen, dtype=torch.long)
        for name, parameter in self._parameters.items():
            data = parameter.detach()[index.to(parameter.device)].clone()
            copy._parameters[name] = nn.Parameter(data, requires_grad=parameter.requires_grad)
        for name, module in self._modules.items():
            copy._modules[name] = select_runs_of(module, index)
        for name in self._per_run_fields():
            value = getattr(self, name)
            setattr(copy, name, value[chosen] if isinstance(value, np.ndarray) else tuple(value[i] for i in chosen))
        return copy

    def _per_run_fields(self) -> tuple[str, ...]:
        """Attributes holding one entry per run (numpy arrays or tuples), indexed by `select`."""
        return ()


def table_dtype(dtype: torch.dtype | None) -> torch.dtype:
    """The dtype of the tables a model computing in `dtype` gets: float64 for float64 models, else
    float32 (for fp16/bf16 models float32 carriers of values already in their format: `cast_tables`)."""
    return torch.float64 if dtype == torch.float64 else torch.float32


LOW_PRECISION = (torch.float16, torch.bfloat16)


def cast_tables(table: torch.Tensor, dtype: torch.dtype | None) -> torch.Tensor:
    """A float64 cos/sin table for a model computing in `dtype`: float64 or float32 (one rounding),
    and for fp16/bf16 the float64 values rounded once to that format (`precision.round_once`; torch's
    own cast would round twice, through float32), held in float32 as the attention kernels take them."""
    if dtype in LOW_PRECISION:
        return round_once(table.to(torch.float64), dtype).float()
    return table.to(table_dtype(dtype))


class CachedTables(PositionalEncoding):
    """Encodings whose tables depend only on positions: built once for the longest length seen, in
    the table dtype of each model dtype asked for (`table_dtype`)."""

    # Whether the tables are cos/sin values (rounded once to an fp16/bf16 model's format) or phases.
    _values_in_format = True

    def __init__(self, runs: int) -> None:
        super().__init__(runs)
        self._cache: dict[tuple[str, torch.dtype], tuple[int, tuple[torch.Tensor, ...]]] = {}

    def _tables(self, length: int, device: torch.device, dtype: torch.dtype | None = None) -> tuple[torch.Tensor, ...]:
        in_format = self._values_in_format and dtype in LOW_PRECISION
        key = (str(device), dtype if in_format else table_dtype(dtype))
        cached = self._cache.get(key)
        if cached is None or cached[0] < length:
            # Grow geometrically so evaluation over increasing lengths rebuilds only a few times.
            size = max(length, 2 * cached[0] if cached else 64)
            positions = np.arange(size, dtype=np.int64)
            built = np.float64 if key[1] == torch.float64 or in_format else np.float32
            per_run = [self._build(run, positions, built) for run in range(self.runs)]
            tables = tuple(torch.stack(parts) for parts in zip(*per_run))
            if in_format:
                tables = tuple(cast_tables(table, dtype) for table in tables)
            tables = tuple(table.to(device) for table in tables)
            self._cache[key] = cached = (size, tables)
        return tuple(t[:, :length] for t in cached[1])

    def _build(self, run: int, positions: np.ndarray, dtype) -> tuple[torch.Tensor, ...]:
        """Run `run`'s tables for `positions` (each (T, ...)) in numpy `dtype` (values computed in
        float64, rounded once); stacked over runs by `_tables`."""
        raise NotImplementedError

