"""The pack composites: one module per encoding behind the pack-wide interface, for a hybrid's layers
(`LayeredPositional`) or for runs of different mixable encodings sharing a pack (`MixedPositional`)."""

from __future__ import annotations

import torch
from torch import nn

from formal_rope.training.encodings.base import PositionalEncoding


class LayeredPositional(PositionalEncoding):
    """A hybrid's per-layer encodings (RunConfig.layer_pe): one module per distinct encoding, each
    built for the layers that use it, and layer L asks the module of its encoding for its own layer
    index among them (`local_layer`: jof_learned's frequencies and jof_projected's projectors are
    per layer of the module). Only encodings without an additive table take part
    (`HYBRID_ENCODINGS`), so a layer's rotation is its encoding's rotation at that layer."""

    def __init__(self, names: tuple[str, ...], modules: dict[str, PositionalEncoding]) -> None:
        runs = next(iter(modules.values())).runs
        super().__init__(runs)
        self.names = tuple(names)
        self.order = tuple(dict.fromkeys(names))
        self.encodings = nn.ModuleList(modules[name] for name in self.order)

    def layer_module(self, layer: int) -> PositionalEncoding:
        """The encoding module layer `layer` uses (shared by every layer with that encoding)."""
        return self.encodings[self.order.index(self.names[layer])]

    def local_layer(self, layer: int) -> int:
        """Layer `layer`'s index among the layers of its encoding (its module's layer)."""
        return self.names[:layer].count(self.names[layer])

    def layer_rotates_values(self, layer):
        return self.layer_module(layer).rotate_values

    def rotation(self, layer, length, hidden):
        return self.layer_module(layer).rotation(self.local_layer(layer), length, hidden)

    def token_rotation(self, layer, layout, hidden):
        return self.layer_module(layer).token_rotation(self.local_layer(layer), layout, hidden)

    def reset_run(self, run, generator):
        for module in self.encodings:
            module.reset_run(run, generator)

    def select(self, indices):
        copy = LayeredPositional.__new__(LayeredPositional)
        PositionalEncoding.__init__(copy, len(list(indices)))
        copy.names, copy.order = self.names, self.order
        copy.encodings = nn.ModuleList(module.select(indices) for module in self.encodings)
        return copy

    def describe(self, run=0):
        described = {"layer_pe": list(self.names)}
        for module in self.encodings:
            described.update(module.describe(run))
        return described


class MixedPositional(PositionalEncoding):
    """A pack whose runs use different encodings with fixed tables and no value transport
    (`encodings.Encoding.mixable`: nope, sipe, sipe_p, rope, rope_p, partial_rope): one module per
    encoding, built for the runs that use it, behind one pack-wide interface.

    Runs without an additive table add zeros and runs without a rotation are rotated by 1 + 0i; both
    are exact in float arithmetic (x + 0 = x; a complex product with 1 + 0i returns its pairs, and
    so does its backward), so each run computes what it computes in a pack of its own encoding
    (tests/test_packing_mixed.py checks this bit for bit). When no run rotates (or none adds), no
    rotation (or table) is applied at all.
    """

    def __init__(self, names, modules: dict[str, PositionalEncoding]) -> None:
        super().__init__(len(names))
        self.names = tuple(names)  # each run's encoding
        self.order = tuple(dict.fromkeys(self.names))
        self.encodings = nn.ModuleList(modules[name] for name in self.order)
        # run -> (its encoding's module index, its index among that module's runs)
        self.owner = tuple(
            (self.order.index(name), self.names[:run].count(name)) for run, name in enumerate(self.names)
        )
        self._cache: dict = {}

    def _members(self, group: int) -> list[int]:
        return [run for run, (owner, _) in enumerate(self.owner) if owner == group]

    def _combined(self, kind: str, length: int, device, dtype, build):
        """A pack-wide table for positions 0..length-1, grown geometrically like `base.CachedTables`."""
        key = (kind, str(device), dtype)
        cached = self._cache.get(key)
        if cached is None or cached[0] < length:
            size = max(length, 2 * cached[0] if cached else 64)
            self._cache[key] = cached = (size, build(size))
        return None if cached[1] is None else cached[1][:, :length]

    def embedding(self, length, device, dtype=None):
        def build(size):
            parts = [(group, module.embedding(size, device, dtype)) for group, module in enumerate(self.encodings)]
            parts = [(group, table) for group, table in parts if table is not None]
            if not parts:
                return None
            table = parts[0][1].new_zeros((self.runs, size, parts[0][1].shape[-1]))
            for group, part in parts:
                table[self._members(group)] = part
            return table

        return self._combined("embedding", length, device, dtype, build)

    def _turns(self, length, hidden):
        """Every run's rotations (R, T, P) as unit complex numbers, or None when no run rotates."""

        def build(size):
            parts = [(group, module.rotation(0, size, hidden)) for group, module in enumerate(self.encodings)]
            parts = [(group, tables) for group, tables in parts if tables is not None]
            if not parts:
                return None
            cos = parts[0][1][0].new_ones((self.runs, size, parts[0][1][0].shape[-1]))
            sin = torch.zeros_like(cos)
            for group, (part_cos, part_sin) in parts:
                members = self._members(group)
                cos[members], sin[members] = part_cos, part_sin
            return torch.complex(cos, sin)

        return self._combined("rotation", length, hidden.device, hidden.dtype, build)

    def rotation(self, layer, length, hidden):
        turns = self._turns(length, hidden)
        return None if turns is None else (turns.real, turns.imag)

    def token_rotation(self, layer, layout, hidden):
        turns = self._turns(max(layout.widths, default=1), hidden)
        return None if turns is None else turns[layout.token_run, layout.token_position]

    def reset_run(self, run, generator):
        group, local = self.owner[run]
        self.encodings[group].reset_run(local, generator)

    def select(self, indices):
        chosen = [int(i) for i in indices]
        groups = {self.owner[run][0] for run in chosen}
        if len(groups) == 1:  # one encoding: that encoding's own module (what a checkpoint holds)
            group = groups.pop()
            return self.encodings[group].select([self.owner[run][1] for run in chosen])
        names = [self.names[run] for run in chosen]
        modules = {
            self.names[run]: self.encodings[self.owner[run][0]].select(
                [self.owner[other][1] for other in chosen if self.names[other] == self.names[run]]
            )
            for run in chosen
        }
        return MixedPositional(names, modules)

    def describe(self, run=0):
        group, local = self.owner[run]
        return self.encodings[group].describe(local)


