"""The positional-encoding zoo of SPEC §8: tables, schedules and the modules the classifier calls.

Every encoding module serves a pack of R runs (the classifier's leading run axis; a single run is
a pack of one). Runs of a pack share the encoding's kind and shape but each keeps its own base,
periods, learned frequencies or projections. Every encoding answers two questions for the model:
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

Positions follow SPEC §1: bos is position 0, symbol i is position i, eos is N+1.

Phases. Conventional schedules form theta_d * i. With phase_precision="fp64" that product is formed
and reduced modulo 2*pi in float64 and only then turned into float32 cos/sin tables;
phase_precision="fp32" forms the naive float32 product theta_d * i (what an fp32 implementation
does): at beta=1e-12 the frequencies are ~1e9 and the product is off by ~1e4 rad at position 500.
Periodic schedules (rope_p, sipe_p) never form theta*i: they look up T_d(i mod m_d), a table of m_d
entries computed once (core paper, eq. 7), so they repeat bit-exactly at every position.

Periods -> pairs. A tuple of periods (m_1, ..., m_r) is spread round-robin over the pairs: pair p gets
period m_{p mod r}. The c-th pair that receives period m gets the angle 2*pi*a/m with numerator
a = 1 + (c mod max(1, m // 2)), so the pairs of one period cover its distinct harmonics
(a and m-a give the same cos and mirrored sin). Period 1 means an unrotated pair (angle 0).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from functools import lru_cache

import numpy as np
import torch
from torch import nn

from formal_rope.errors import FormalRopeError
from formal_rope.training.checks import (  # noqa: F401 (MAX_PERIOD, partial_rotated_pairs: read here by callers)
    MAX_PERIOD,
    check_partial_pairs,
    check_period_count,
    check_periods,
    describe_period_pairs,
    partial_rotated_pairs,
    period_pairs,
)
from formal_rope.training.encodings import MIXABLE_ENCODINGS, encoding
from formal_rope.training.packed import PackedLayerNorm, PackedLinear, select_runs_of

TWO_PI = 2.0 * math.pi
PHASE_PRECISIONS = ("fp64", "fp32")


# ----------------------------------------------------------------------------------------------
# Pure schedule functions (numpy, float64)


def rope_frequencies(base: float, n_pairs: int) -> np.ndarray:
    """theta_d = base^(-2(d-1)/D) for d = 1..D/2 with D = 2*n_pairs (float64)."""
    if not base > 0 or not math.isfinite(base):
        raise FormalRopeError(f"the RoPE/SiPE base must be a positive finite number, got {base!r}")
    exponents = -2.0 * np.arange(n_pairs, dtype=np.float64) / (2 * n_pairs)
    return np.power(np.float64(base), exponents)


# Exact phases. A frequency theta is held as its fractional number of turns f = frac(theta / 2pi),
# a 78-bit binary fraction F / 2^78 (three 26-bit integer limbs, computed once per table with mpmath
# from theta's exact definition: beta^(-2k/D) for RoPE/SiPE, the float64 value itself for learned
# frequencies). The phase at integer position i is then 2pi * frac(i * F / 2^78): the product and its
# reduction are exact int64 arithmetic (i < 2^36), and only the final turn fraction (relative error
# 2^-53) and its product by 2pi are rounded, so every phase is within ~1e-15 rad of theta*i mod 2pi
# for any base (tested 1e-12 ... 1e12) and position; the 78-bit truncation adds i * 2pi * 2^-78.
TURN_LIMB_BITS = 26
TURN_BITS = 3 * TURN_LIMB_BITS
_LIMB_MASK = (1 << TURN_LIMB_BITS) - 1
MAX_EXACT_POSITION = 2**36  # i * limb < 2^62: the int64 products stay exact


def _turn_limbs(turns: int) -> tuple[int, int, int]:
    return (turns >> (2 * TURN_LIMB_BITS)) & _LIMB_MASK, (turns >> TURN_LIMB_BITS) & _LIMB_MASK, turns & _LIMB_MASK


def _mp_turns(theta) -> int:
    """floor(frac(theta / 2pi) * 2^78) for an mpmath number theta computed at enough precision."""
    import mpmath

    turns = theta / (2 * mpmath.pi)
    return int(mpmath.floor((turns - mpmath.floor(turns)) * mpmath.mpf(2) ** TURN_BITS))


@lru_cache(maxsize=512)
def _rope_turns(base: float, n_pairs: int) -> np.ndarray:
    import mpmath

    rope_frequencies(base, n_pairs)  # the base's validation
    limbs = np.zeros((n_pairs, 3), dtype=np.int64)
    # theta <= max(base, 1/base): its integer turns need up to |log2 base| bits above the 78 kept.
    with mpmath.workprec(TURN_BITS + 96 + int(abs(math.log2(base)))):
        beta = mpmath.mpf(base)  # the float64 base, exactly
        for k in range(n_pairs):
            limbs[k] = _turn_limbs(_mp_turns(beta ** (mpmath.mpf(-k) / n_pairs)))
    limbs.setflags(write=False)
    return limbs


def rope_turns(base: float, n_pairs: int) -> np.ndarray:
    """Exact turn limbs (P, 3) of RoPE's theta_k = base^(-2k/D) = base^(-k/P), from the real value
    (not its float64 rounding: at base 1e-12, theta ~ 1e12 and one float64 ulp is ~1e-4 rad per position)."""
    return _rope_turns(float(base), int(n_pairs))


# 1/(2pi) as a K-bit fixed-point integer (Payne-Hanek): floor(2^K / 2pi), K covering every float64
# exponent (theta = m * 2^e with e <= 971) plus the 78 kept bits and 64 guard bits.
_INV_TWO_PI_BITS = 1024 + TURN_BITS + 64 + 53


@lru_cache(maxsize=1)
def _inv_two_pi() -> int:
    import mpmath  # function-local: computed once, on the first exact phase of a float64 frequency

    with mpmath.workprec(_INV_TWO_PI_BITS + 64):
        return int(mpmath.floor(mpmath.mpf(2) ** _INV_TWO_PI_BITS / (2 * mpmath.pi)))


def float_turns(frequencies) -> np.ndarray:
    """Exact turn limbs (..., 3) of float64 frequencies taken at their exact binary value (learned
    frequencies, or frequencies without a closed form): theta = m * 2^e exactly, so
    floor(frac(theta / 2pi) * 2^78) is (m * floor(2^K / 2pi)) >> (K - e - 78) mod 2^78 in Python
    integers (off by at most one unit of 2^-78 from the real value). Non-finite values give limbs 0."""
    values = np.asarray(frequencies, dtype=np.float64)
    flat = values.reshape(-1)
    limbs = np.zeros((flat.size, 3), dtype=np.int64)
    inverse = _inv_two_pi()
    modulus = (1 << TURN_BITS) - 1
    for index, value in enumerate(flat.tolist()):
        if value == 0.0 or not math.isfinite(value):
            continue
        mantissa, exponent = math.frexp(value)  # value = mantissa * 2^exponent, 0.5 <= |mantissa| < 1
        m, e = int(mantissa * 2.0**53), exponent - 53  # value = m * 2^e exactly
        shift = _INV_TWO_PI_BITS - e - TURN_BITS
        product = m * inverse  # floor division rounds towards -inf: negative thetas reduce correctly
        turns = (product >> shift if shift >= 0 else product << -shift) & modulus
        limbs[index] = _turn_limbs(turns)
    return limbs.reshape(values.shape + (3,))


def turn_phases(limbs: np.ndarray, positions: np.ndarray) -> np.ndarray:
    """Phases theta * i mod 2pi in [0, 2pi), float64, shape (T, ...) for positions (T,) and turn limbs (..., 3)."""
    limbs = np.asarray(limbs, dtype=np.int64)
    positions = np.asarray(positions, dtype=np.int64)
    if positions.size and (positions.min() < 0 or positions.max() >= MAX_EXACT_POSITION):
        raise FormalRopeError(f"exact rotary phases take positions 0 .. 2^36 - 1, got up to {int(positions.max()):,}")
    i = positions.reshape(positions.shape + (1,) * (limbs.ndim - 1))
    low = i * limbs[..., 2]
    middle = i * limbs[..., 1] + (low >> TURN_LIMB_BITS)
    high = (i * limbs[..., 0] + (middle >> TURN_LIMB_BITS)) & _LIMB_MASK
    # high + middle / 2^26 is exact in float64 (52 bits); the low limb is rounded once.
    fraction = (high + (middle & _LIMB_MASK) * 2.0**-TURN_LIMB_BITS + (low & _LIMB_MASK) * 2.0**-52) * 2.0**-26
    return np.minimum(fraction * TWO_PI, np.nextafter(TWO_PI, 0.0))


def rotary_phases(frequencies: np.ndarray, positions: np.ndarray, precision: str = "fp64", turns=None) -> np.ndarray:
    """Phases theta_d * i for positions (T,) and frequencies (P,) -> (T, P).

    fp64: theta*i mod 2pi from the exact turn limbs `turns` (P, 3) (`rope_turns`; default: the
    float64 frequencies' own exact value, `float_turns`), within ~1e-15 rad, result in [0, 2pi).
    fp32: the naive float32 product, unreduced (what a float32 implementation computes).
    """
    if precision == "fp64":
        return turn_phases(float_turns(frequencies) if turns is None else turns, positions)
    if precision == "fp32":
        return np.asarray(positions, dtype=np.float32)[:, None] * np.asarray(frequencies, dtype=np.float32)[None, :]
    raise FormalRopeError(f"unknown phase precision {precision!r}; expected one of {', '.join(PHASE_PRECISIONS)}")


def phase_tables(phases: np.ndarray, dtype=np.float32) -> tuple[torch.Tensor, torch.Tensor]:
    """(cos, sin) tables in `dtype` (float32 by default; float64 for float64 models); cos/sin are
    evaluated in the phases' own dtype, then cast."""
    return (
        torch.from_numpy(np.cos(phases).astype(dtype)),
        torch.from_numpy(np.sin(phases).astype(dtype)),
    )


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


def periodic_tables(
    periods, n_pairs: int, positions: np.ndarray, dtype=np.float32
) -> tuple[torch.Tensor, torch.Tensor]:
    """cos/sin (T, P) in `dtype` by lookup T_d(i mod m_d); the product theta*i is never formed."""
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
    return torch.from_numpy(cos_table[pair_index, residues]), torch.from_numpy(sin_table[pair_index, residues])


def interleave(cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    """Additive sinusoidal table from pair tables: coordinates (2p, 2p+1) = (sin, cos)."""
    return torch.stack((sin, cos), dim=-1).flatten(-2)


# ----------------------------------------------------------------------------------------------
# Modules (every one with a leading run axis)


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
        from formal_rope.precision.native import round_once  # function-local: fp16/bf16 models only

        return round_once(table.to(torch.float64), dtype).float()
    return table.to(table_dtype(dtype))


class _CachedTables(PositionalEncoding):
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


class SinusoidalEmbedding(_CachedTables):
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


class PeriodicEmbedding(_CachedTables):
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


class FixedRotary(_CachedTables):
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


class PeriodicRotary(_CachedTables):
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
        """A pack-wide table for positions 0..length-1, grown geometrically like `_CachedTables`."""
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


# Encodings a hybrid's layers may use (RunConfig.layer_pe): rotations or none. Additive encodings
# (sipe, sipe_p) act once, at the embedding, not per layer. jof_learned / jof_projected layers keep
# their trainable per-layer state in their module, indexed by `LayeredPositional.local_layer`
# (checkpoints hold it; `formalrope export` writes each layer's own part under its prefix).
HYBRID_ENCODINGS = ("nope", "rope", "rope_p", "partial_rope", "jof_fixed", "jof_learned", "jof_projected")


# ----------------------------------------------------------------------------------------------
# Factory


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


# The base is a float64 (`--base 1e-12` is the double nearest 10^-12) and the phases are exact for
# that double: a run's numbers do not depend on how its base was written. `decimal_base_deviation`
# says how far that is from the phases of the decimal itself; train and sweep note it above this.
DECIMAL_BASE_NOTE_RAD = 1e-6


def decimal_base_deviation(base: float, n_pairs: int, longest_position: int, decimal: str | None = None) -> float:
    """max over k < n_pairs of |theta_k(decimal) - theta_k(base)| * longest_position (rad), theta_k =
    beta^(-k/n_pairs) (RoPE's ladder), where `base` is the float64 the run uses and `decimal` the
    number as written (default: repr(base), the shortest decimal that reads back as it). The phase gap
    grows linearly with the position, so this is its largest over offsets 0..longest_position;
    computed with mpmath at a precision well above the gap."""
    import mpmath

    rope_frequencies(base, max(int(n_pairs), 1))  # the base's validation
    written = repr(float(base)) if decimal is None else decimal
    with mpmath.workprec(128 + int(abs(math.log2(base)))):
        exact, double = mpmath.mpf(written), mpmath.mpf(float(base))
        gap = max((abs(exact ** (mpmath.mpf(-k) / n_pairs) - double ** (mpmath.mpf(-k) / n_pairs))
                   for k in range(int(n_pairs))), default=mpmath.mpf(0))
        return float(gap * max(int(longest_position), 0))


# fp32 phases (phase_precision="fp32", the naive float32 product theta*i) are called far off when
# their error bound over the tested positions exceeds this (`fp32_phase_error_bound`).
FP32_PHASE_WARNING_RAD = 1e-3


def fp32_phase_error_bound(frequencies, longest_position: int) -> float:
    """An upper bound (rad) on |fl32(fl32(theta) * i) - theta * i| over positions 0..longest_position
    and the nonzero `frequencies`: the float32 rounding of theta times i plus half an ulp of the
    float32 product (both grow with i, so the bound is taken at the longest position)."""
    frequencies = np.asarray(frequencies, dtype=np.float64).reshape(-1)
    frequencies = frequencies[frequencies != 0]
    if frequencies.size == 0 or longest_position <= 0:
        return 0.0
    single = frequencies.astype(np.float32)
    position = float(longest_position)
    product = np.float32(position) * single
    rounding = np.abs(single.astype(np.float64) - frequencies) * position
    error = rounding + 0.5 * np.spacing(np.abs(product)).astype(np.float64)
    return float(error.max())


def _check_spec(spec: PositionalSpec) -> int:
    """Validate one spec; returns its number of rotary pairs per head."""
    row = encoding(spec.pe)
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


def build_positional(specs) -> PositionalEncoding:
    """The positional-encoding module for one run's spec, or for a pack of runs (a sequence of specs).

    The runs of a pack must agree on everything but `base` and `periods` (each run keeps its own).
    The module comes from the encoding's builder (its row in `training.encodings`), after the
    periods of a periodic encoding are checked against the pairs that carry them.
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
    n_pairs = _check_spec(specs[0])
    first = specs[0]
    for spec in specs[1:]:
        _check_spec(spec)
        if (spec.pe, spec.d_model, spec.heads, spec.layers, spec.rope_fraction, spec.phase_precision) != (
            first.pe, first.d_model, first.heads, first.layers, first.rope_fraction, first.phase_precision
        ):
            raise FormalRopeError(
                "runs of one pack must share the encoding, its shape, rope_fraction and phase precision"
            )
    row = encoding(first.pe)
    if row.periodic:
        pairs = period_pairs(first.pe, first.d_model, first.heads)
        text = describe_period_pairs(first.pe, first.d_model, first.heads)
        specs = tuple(replace(spec, periods=check_period_count(spec.periods, pairs, text)) for spec in specs)
    return row.load_builder()(specs, n_pairs)


def _build_mixed(specs) -> MixedPositional:
    """A pack of runs with different mixable encodings (`encodings.Encoding.mixable`): each
    encoding's module is built from its own runs' specs, in the order the runs first name it."""
    refused = [spec.pe for spec in specs if not encoding(spec.pe).mixable]
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


# ----------------------------------------------------------------------------------------------
# Builders: (specs of a pack, rotary pairs per head) -> module; each encoding's row names its own.


def _bases(specs) -> list[float]:
    return [spec.base for spec in specs]


def _rope_ladders(specs, n_pairs: int) -> np.ndarray:
    """RoPE's frequencies at each run's base, (R, P)."""
    return np.stack([rope_frequencies(base, n_pairs) for base in _bases(specs)])


def _rope_ladder_turns(specs, n_pairs: int) -> np.ndarray:
    """The exact turn limbs of RoPE's frequencies at each run's base, (R, P, 3)."""
    return np.stack([rope_turns(base, n_pairs) for base in _bases(specs)])


def _partial_frequencies(base: float, n_pairs: int, fraction: float) -> tuple[np.ndarray, np.ndarray]:
    """(frequencies (P,), exact turn limbs (P, 3)); unrotated pairs have frequency 0 (limbs 0)."""
    rotated = partial_rotated_pairs(fraction, n_pairs)
    # The rotated pairs keep RoPE's geometric spacing over the rotated sub-dimension.
    partial = np.zeros(n_pairs, dtype=np.float64)
    turns = np.zeros((n_pairs, 3), dtype=np.int64)
    if rotated:
        partial[:rotated] = rope_frequencies(base, rotated)
        turns[:rotated] = rope_turns(base, rotated)
    return partial, turns


def build_nope(specs, n_pairs: int) -> PositionalEncoding:
    return PositionalEncoding(len(specs))


def build_sipe(specs, n_pairs: int) -> PositionalEncoding:
    return SinusoidalEmbedding(specs[0].d_model, _bases(specs), specs[0].phase_precision)


def build_sipe_p(specs, n_pairs: int) -> PositionalEncoding:
    return PeriodicEmbedding(specs[0].d_model, [spec.periods for spec in specs])


def build_rope(specs, n_pairs: int) -> PositionalEncoding:
    turns = _rope_ladder_turns(specs, n_pairs)
    return FixedRotary(_rope_ladders(specs, n_pairs), specs[0].phase_precision, turns=turns)


def build_rope_p(specs, n_pairs: int) -> PositionalEncoding:
    return PeriodicRotary(n_pairs, [spec.periods for spec in specs])


def build_partial_rope(specs, n_pairs: int) -> PositionalEncoding:
    fraction = specs[0].rope_fraction
    ladders = [_partial_frequencies(base, n_pairs, fraction) for base in _bases(specs)]
    frequencies = np.stack([frequencies for frequencies, _ in ladders])
    return FixedRotary(frequencies, specs[0].phase_precision, turns=np.stack([turns for _, turns in ladders]))


def build_jof_fixed(specs, n_pairs: int) -> PositionalEncoding:
    return FixedRotary(
        _rope_ladders(specs, n_pairs), specs[0].phase_precision, rotate_values=True,
        turns=_rope_ladder_turns(specs, n_pairs),
    )


def build_jof_learned(specs, n_pairs: int) -> PositionalEncoding:
    first = specs[0]
    return LearnedRotary(first.layers, first.heads, n_pairs, _bases(specs), first.phase_precision)


def build_jof_projected(specs, n_pairs: int) -> PositionalEncoding:
    first = specs[0]
    return ProjectedRotary(
        first.layers, first.d_model, first.heads, _rope_ladders(specs, n_pairs), first.phase_precision,
        turns=_rope_ladder_turns(specs, n_pairs),
    )
