"""The builder table and the factory: `build_positional(specs)` checks a pack's specs and calls the
builder of their encoding (`BUILDERS`, one entry per registry row), or builds a pack composite."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace

from formal_rope.errors import FormalRopeError
from formal_rope.run_config.encodings import HYBRID_ENCODINGS, MIXABLE_ENCODINGS, Encoding, encoding
from formal_rope.run_config.rules import (
    check_partial_pairs,
    check_period_count,
    check_periods,
    describe_period_pairs,
    period_pairs,
)
from formal_rope.training.encodings import joformer, nope, rotary, sinusoidal
from formal_rope.training.encodings.base import PositionalEncoding
from formal_rope.training.encodings.composites import LayeredPositional, MixedPositional
from formal_rope.training.encodings.phases import PHASE_PRECISIONS


@dataclass(frozen=True)
class PositionalSpec:
    """Everything needed to build one run's encoding (resolved from a RunConfig; periods already resolved)."""

    pe: str
    d_model: int
    heads: int
    layers: int
    base: float = 1e4
    periods: tuple[int, ...] | None = None
    rope_fraction: float = 0.5
    phase_precision: str = "fp64"
    layer_pe: tuple[str, ...] | None = None  # a hybrid's encoding per layer (None: `pe` in every layer)
    # The registry rows of the run's encodings (`RunConfig.row_of`, looked up once when its config was
    # built); a spec made without them looks its row up.
    rows: tuple[Encoding, ...] = ()

    @property
    def row(self) -> Encoding:
        """The registry row of `pe`."""
        return next((row for row in self.rows if row.name == self.pe), None) or encoding(self.pe)


# The builder of each registry row: (the pack's specs, rotary pairs per head) -> its module. The specs
# are already checked to share the encoding's shape, a periodic encoding's periods against its pairs.
# The rows cannot hold these themselves: the registry is read at start-up without torch.
BUILDERS: dict[str, Callable[..., PositionalEncoding]] = {
    "nope": nope.build_nope,
    "sipe": sinusoidal.build_sipe,
    "sipe_p": sinusoidal.build_sipe_p,
    "rope": rotary.build_rope,
    "rope_p": rotary.build_rope_p,
    "partial_rope": rotary.build_partial_rope,
    "jof_fixed": joformer.build_jof_fixed,
    "jof_learned": joformer.build_jof_learned,
    "jof_projected": joformer.build_jof_projected,
    # New encodings: add a builder above this line (and the row in registry.py).
}


def _rotary_pairs(spec: PositionalSpec, row: Encoding) -> int:
    """The rotary pairs per head of a spec of encoding `row`; FormalRopeError for settings it cannot
    take. These repeat RunConfig's own checks on purpose: `build_positional` is also called from
    Python with specs that no RunConfig has checked."""
    if spec.phase_precision not in PHASE_PRECISIONS:
        raise FormalRopeError(
            f"unknown phase precision {spec.phase_precision!r}; expected one of {', '.join(PHASE_PRECISIONS)}"
        )
    if spec.d_model % spec.heads:
        raise FormalRopeError(f"d_model {spec.d_model} is not divisible by {spec.heads} heads")
    head_dim = spec.d_model // spec.heads
    if head_dim % 2 or spec.d_model % 2:
        raise FormalRopeError(f"the head dimension must be even for rotary pairs, got {head_dim}")
    if row.takes_rope_fraction and not 0.0 <= spec.rope_fraction <= 1.0:
        raise FormalRopeError(f"rope_fraction must lie in [0, 1], got {spec.rope_fraction}")
    if row.takes_rope_fraction:
        check_partial_pairs(spec.rope_fraction, head_dim // 2)
    return head_dim // 2


def _shared(spec: PositionalSpec) -> tuple:
    """What the runs of a pack of one encoding must share (each keeps its own base and periods)."""
    return spec.pe, spec.d_model, spec.heads, spec.layers, spec.rope_fraction, spec.phase_precision


def build_positional(specs) -> PositionalEncoding:
    """The positional-encoding module for one run's spec, or for a pack of runs (a sequence of specs).

    The runs of a pack must agree on everything but `base` and `periods` (each run keeps its own).
    The module comes from the encoding's builder (`BUILDERS`), after the periods of a periodic
    encoding are checked against the pairs that carry them. The encoding's row is looked up once.
    Raises FormalRopeError for an unknown encoding, a head dimension that cannot hold rotary pairs,
    or specs that cannot share a pack.
    """
    specs = (specs,) if isinstance(specs, PositionalSpec) else tuple(specs)
    if not specs:
        raise FormalRopeError("a pack needs at least one run")
    if specs[0].layer_pe is not None:
        return _build_layered(specs)
    if len({spec.pe for spec in specs}) > 1:
        return _build_mixed(specs)
    first = specs[0]
    row = first.row
    n_pairs = _rotary_pairs(first, row)
    if any(_shared(spec) != _shared(first) for spec in specs[1:]):
        raise FormalRopeError("runs of one pack must share the encoding, its shape, rope_fraction and phase precision")
    if row.periodic:
        pairs = period_pairs(row, first.d_model, first.heads)
        specs = tuple(replace(spec, periods=_checked_periods(spec, row, pairs)) for spec in specs)
    return BUILDERS[row.name](specs, n_pairs)


def _checked_periods(spec: PositionalSpec, row: Encoding, pairs: int) -> tuple[int, ...]:
    """The spec's periods, validated; FormalRopeError when there are more than the `pairs` that carry
    them (the message says what has the pairs, worked out only then)."""
    periods = check_periods(spec.periods)
    if len(periods) > pairs:
        check_period_count(periods, pairs, describe_period_pairs(row, spec.d_model, spec.heads))
    return periods


def _build_mixed(specs) -> MixedPositional:
    """A pack of runs with different mixable encodings (`encodings.Encoding.mixable`): each
    encoding's module is built from its own runs' specs, in the order the runs first name it."""
    refused = [spec.pe for spec in specs if not spec.row.mixable]
    if refused:
        raise FormalRopeError(
            f"runs of one pack must share the encoding unless each is one of {', '.join(MIXABLE_ENCODINGS)} "
            f"({', '.join(dict.fromkeys(refused))} transports values or trains its angles)"
        )
    first = specs[0]
    if any((spec.d_model, spec.heads, spec.layers) != (first.d_model, first.heads, first.layers) for spec in specs):
        raise FormalRopeError("runs of one pack must share d_model, heads and layers")
    names = [spec.pe for spec in specs]
    modules = {name: build_positional([spec for spec in specs if spec.pe == name]) for name in dict.fromkeys(names)}
    return MixedPositional(names, modules)


def _build_layered(specs) -> LayeredPositional:
    """A hybrid pack's `LayeredPositional`: every run of the pack shares layer_pe."""
    names = specs[0].layer_pe
    if any(spec.layer_pe != names for spec in specs):
        raise FormalRopeError("runs of one pack must share layer_pe")
    if len(names) != specs[0].layers:
        raise FormalRopeError(f"layer_pe names {len(names)} encodings for {specs[0].layers} layers")
    refused = [name for name in dict.fromkeys(names) if name not in HYBRID_ENCODINGS]
    if refused:
        raise FormalRopeError(
            f"layer_pe: {', '.join(refused)} cannot be one layer's encoding in a hybrid; layers take "
            f"{', '.join(HYBRID_ENCODINGS)}"
        )
    modules = {
        name: build_positional([replace(spec, pe=name, layer_pe=None, layers=names.count(name)) for spec in specs])
        for name in dict.fromkeys(names)
    }
    return LayeredPositional(names, modules)


