"""The JoFormer family (paper 000): attention that transports values by the key's rotation and
rotates the output back. jof_fixed rotates by RoPE's angles, jof_learned learns its frequencies per
layer and head, jof_projected adds angles projected from the hidden state."""

from __future__ import annotations

import numpy as np
import torch
from torch import nn

from formal_rope.training.encodings.base import PositionalEncoding, cast_tables, run_bases
from formal_rope.training.encodings.phases import float_turns, rope_frequencies, rotary_phases, turn_phases
from formal_rope.training.encodings.rotary import FixedRotary, rope_ladder_turns, rope_ladders
from formal_rope.training.packed_layers import PackedLayerNorm, PackedLinear


class LearnedRotary(PositionalEncoding):
    """jof_learned: per-run, per-layer, per-head learned frequency vectors (float64, (R, layers,
    heads, P)), as JoFormer's (paper 000, §3.2) d_model/2 frequencies per layer: each head its own
    head_dim/2 vector, all initialised to RoPE's at each run's base.

    Phases are formed and reduced in float64 inside the autograd graph (remainder has gradient 1),
    so the fp64 contract holds while the frequencies train. `rotation` gives per-head tables
    (R, 1, heads, T, P) (one for every batch element), `token_rotation` (N, heads, P).
    """

    rotate_values = True

    def __init__(self, layers: int, heads: int, n_pairs: int, bases, precision: str) -> None:
        super().__init__(len(bases))
        self.initial = np.stack([rope_frequencies(base, n_pairs) for base in bases])  # (R, P)
        initial = torch.from_numpy(self.initial)
        self.heads = heads
        self.frequencies = nn.Parameter(initial[:, None, None].repeat(1, layers, heads, 1))
        self.precision = precision

    def _per_run_fields(self):
        return ("initial",)

    @torch.no_grad()
    def reset_run(self, run, generator):
        self.frequencies[run] = torch.from_numpy(self.initial[run])[None, None]

    def _phases(self, layer: int, length: int, device) -> torch.Tensor:
        """Phases (R, heads, T, P) of layer `layer`. fp64: theta*i mod 2pi of the frequencies' exact
        float64 values (`turn_phases`), with the gradient i of theta*i attached (the exact value is
        a constant of the graph, plus (theta - theta.detach()) * i, which is zero but carries
        d phase / d theta = i). fp32: the naive float32 product."""
        frequencies = self.frequencies[:, layer]  # (R, H, P)
        if self.precision == "fp64":
            values = frequencies.detach().to("cpu", torch.float64).numpy()
            exact = turn_phases(float_turns(values), np.arange(length, dtype=np.int64))  # (T, R, H, P)
            exact = torch.from_numpy(np.ascontiguousarray(np.moveaxis(exact, 0, -2))).to(device)  # (R, H, T, P)
            positions = torch.arange(length, dtype=torch.float64, device=device)
            return exact + positions[None, None, :, None] * (frequencies - frequencies.detach())[:, :, None, :]
        positions = torch.arange(length, dtype=torch.float32, device=device)
        return positions[None, None, :, None] * frequencies.float()[:, :, None, :]

    def rotation(self, layer, length, hidden):
        phases = self._phases(layer, length, hidden.device)[:, None]  # (R, 1, H, T, P)
        return cast_tables(torch.cos(phases), hidden.dtype), cast_tables(torch.sin(phases), hidden.dtype)

    def token_rotation(self, layer, layout, hidden):
        phases = self._phases(layer, max(layout.widths, default=1), hidden.device)  # (R, H, T, P)
        cos, sin = cast_tables(torch.cos(phases), hidden.dtype), cast_tables(torch.sin(phases), hidden.dtype)
        return torch.complex(cos, sin)[layout.token_run, :, layout.token_position]  # (N, H, P)

    def describe(self, run=0):
        return {"phase_precision": self.precision}


class ProjectedRotary(FixedRotary):
    """jof_projected: fixed RoPE angles plus content angles W2 GELU(W1 LN(x)), per run, layer and head.

    W2 (and its bias) start at zero, so at initialisation the model equals jof_fixed exactly. The
    fixed phase is reduced in float64 before the float32 content angle is added, so large i never
    enters float32 arithmetic.
    """

    rotate_values = True
    _values_in_format = False  # its tables are the fixed phases; cos/sin come after the content angle

    def __init__(
        self, layers: int, d_model: int, heads: int, frequencies: np.ndarray, precision: str, turns=None
    ) -> None:
        super().__init__(frequencies, precision, rotate_values=True, turns=turns)
        self.heads = heads
        self.n_pairs = self.frequencies.shape[1]
        runs = self.runs
        self.projectors = nn.ModuleList(
            nn.Sequential(
                PackedLayerNorm(runs, d_model),
                PackedLinear(runs, d_model, d_model),
                nn.GELU(),
                PackedLinear(runs, d_model, heads * self.n_pairs),
            )
            for _ in range(layers)
        )

    def reset_run(self, run, generator):
        # The draws nn.Linear makes when the projectors are constructed, then W2 zeroed.
        for projector in self.projectors:
            projector[0].reset_run(run, generator)
            projector[1].reset_run(run, generator)
            projector[3].reset_run(run, generator)
        for projector in self.projectors:
            projector[3].zero_run(run)

    def _build(self, run, positions, dtype):
        phases = rotary_phases(self.frequencies[run], positions, self.precision, self.turns[run])
        return (torch.from_numpy(np.asarray(phases, dtype=dtype)),)

    def token_rotation(self, layer, layout, hidden):
        (fixed,) = self._tables(max(layout.widths, default=1), hidden.device, hidden.dtype)  # (R, T, P)
        content = layout.to_pooled(self.projectors[layer](hidden)).to(fixed.dtype).view(-1, self.heads, self.n_pairs)
        angles = fixed[layout.token_run, layout.token_position][:, None, :] + content  # (N, H, P)
        return torch.complex(torch.cos(angles), torch.sin(angles))

    def rotation(self, layer, length, hidden):
        (fixed,) = self._tables(length, hidden.device, hidden.dtype)  # (R, T, P), already reduced when fp64
        runs, batch = hidden.shape[0], hidden.shape[1]
        content = self.projectors[layer](hidden).to(fixed.dtype).view(runs, batch, length, self.heads, self.n_pairs)
        angles = fixed[:, None, :, None, :] + content  # (R, B, T, H, P)
        angles = angles.permute(0, 1, 3, 2, 4)  # (R, B, H, T, P)
        return torch.cos(angles), torch.sin(angles)



def build_jof_fixed(specs, n_pairs: int) -> PositionalEncoding:
    return FixedRotary(
        rope_ladders(specs, n_pairs), specs[0].phase_precision, rotate_values=True,
        turns=rope_ladder_turns(specs, n_pairs),
    )


def build_jof_learned(specs, n_pairs: int) -> PositionalEncoding:
    first = specs[0]
    return LearnedRotary(first.layers, first.heads, n_pairs, run_bases(specs), first.phase_precision)


def build_jof_projected(specs, n_pairs: int) -> PositionalEncoding:
    first = specs[0]
    return ProjectedRotary(
        first.layers, first.d_model, first.heads, rope_ladders(specs, n_pairs), first.phase_precision,
        turns=rope_ladder_turns(specs, n_pairs),
    )
