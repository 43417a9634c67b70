"""Per-pair phase decomposition of rotary attention scores (paper 003, §3–§5) and its Lemma 1.

For one head, a query position i and a key position j, the model's pre-softmax score is

    S_ij = scale · Σ_p ⟨R_p(i) q_p, R_p(j) k_p⟩ = scale · Σ_p ρ_p cos δ_p,
    ρ_p = |q_p|·|k_p|,   δ_p = (α_p(i) − β_p(j)) + (φ_p(i) − φ_p(j)),

where q_p, k_p are the *pre-rotation* 2-d pair vectors (coordinates 2p, 2p+1 of the head's query
and key), α_p = angle(q_p), β_p = angle(k_p) (atan2 of the odd over the even coordinate), and
φ_p(t) is the angle of the rotation the model really applies to pair p at position t: the angle of
its realized (cos, sin) table entry. For RoPE that is θ_p·t (reduced mod 2π); for periodic tables
T_m(t mod m), learned frequencies and JoFormer-projected (content-dependent) angles it is read off
the table, so the relative-position phase is always the realized difference φ_p(i) − φ_p(j).

Sign convention (the kernels' `apply_rotary`): a pair (x_even, x_odd) is the complex number
x_even + i·x_odd and rotation by φ multiplies it by e^{iφ}. Then ⟨R(φ_i)q, R(φ_j)k⟩ =
Re(q·conj(k)·e^{i(φ_i − φ_j)}) = |q||k| cos(α − β + φ_i − φ_j): the content phase is query angle
minus key angle and the position phase is query position minus key position, exactly the paper's
δ_mnj = α_mj − β_nj + (m − n)θ_j with m = i the query. All phases are reported wrapped to (−π, π].

Pairs whose rotation is the identity at every position (partial RoPE's unrotated pairs, compiled
"none" pairs, NoPE) keep δ_p = content phase; their summed contribution is reported separately as
the unrotated part of the score. A pair with ρ_p = 0 contributes nothing and its phase is
immaterial (atan2(0, 0) = 0 here).

Lemma 1: with S = Σ_p ρ_p cos δ_p and S_max = Σ_p ρ_p, if |δ_p| ≤ ε for every contributing pair
(ρ_p > 0) then S ≥ (1 − ε²/2)·S_max (because cos x ≥ 1 − x²/2). `check_lemma1` finds the (i, j)
where the hypothesis holds and checks the inequality there. The bound is tight to fourth order:
when every contributing δ_p = ±ε, S − (1 − ε²/2)S_max = (cos ε − 1 + ε²/2)·S_max ≤ ε⁴/24·S_max.

Everything here is float64 numpy, vectorized over (query, key, pair); the capture of q, k, the
angles and the model's own scores lives in `formal_rope.diagnostics.capture`.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Sequence

import numpy as np

from formal_rope import limits
from formal_rope.errors import FormalRopeError

TWO_PI = 2.0 * math.pi


def wrap_phase(angles: np.ndarray) -> np.ndarray:
    """Angles reduced to (−π, π] (π stays π, −π becomes π)."""
    angles = np.asarray(angles, dtype=np.float64)
    # ceil instead of np.remainder: ~2x faster on (T, T, P) arrays and exact for small angles.
    wrapped = angles - TWO_PI * np.ceil((angles - math.pi) / TWO_PI)
    return np.where(wrapped <= -math.pi, wrapped + TWO_PI, wrapped)


@dataclass(frozen=True, eq=False)
class HeadInputs:
    """What the decomposition needs from one attention head on one input, captured from a model.

    ``query``/``key``: pre-rotation pair vectors (T, P, 2); ``angles``: realized rotation angle
    φ_p(t) (T, P), 0 for identity pairs; ``actual``: the model's scores (T, T) as it computes them
    (rotate q and k with its own tables, dot, scale), in its own dtype, stored as float64 (entries
    with key j ≥ query i are computed too but are masked out by the model). ``window``: the
    layer's sliding window w (query i sees keys i − w ≤ j < i; None: every j < i).
    """

    layer: int  # 0-based
    head: int  # 0-based within the layer
    name: str
    scale: float
    query: np.ndarray
    key: np.ndarray
    angles: np.ndarray
    actual: np.ndarray
    pair_kinds: tuple[str, ...]  # human description of each pair's rotation
    frequencies: np.ndarray  # (P,) nominal angle per position θ_p; NaN where the angle is not θ_p·t
    rotated: np.ndarray  # (P,) bool: the pair's rotation is not the identity at some position
    dtype: str  # the dtype the model's scores were computed in
    recompute_error: float | None = None  # max |recomputed attention output − model's|, when captured
    window: int | None = None  # the layer's sliding window (hybrid models); None: global attention

    def visible_keys(self, query: int) -> np.ndarray:
        """The keys query position `query` attends to: j < query, and j ≥ query − window."""
        start = 0 if self.window is None else max(0, query - self.window)
        return np.arange(start, query)

    @property
    def length(self) -> int:
        return int(self.query.shape[0])

    @property
    def n_pairs(self) -> int:
        return int(self.query.shape[1])

    @property
    def is_rotary(self) -> bool:
        return bool(self.rotated.any())

    @property
    def label(self) -> str:
        """1-based layer/head label as the CLI shows it, e.g. ``L1.H3``."""
        return f"L{self.layer + 1}.H{self.head + 1}"


@dataclass(frozen=True, eq=False)
class HeadPhases:
    """The decomposition of one head's scores for query rows ``queries`` against every key.

    Arrays are (Q, T, P) per pair or (Q, T) per (query, key); ``visible`` marks the keys the model
    attends to (j < i, and j ≥ i − w in a layer with a sliding window w). Errors are reported over
    visible entries only.
    """

    inputs: HeadInputs
    queries: np.ndarray  # (Q,) query positions
    visible: np.ndarray  # (Q, T) bool, key < query (and inside the layer's window)
    magnitude: np.ndarray  # ρ = |q_p||k_p|
    content_phase: np.ndarray  # α_p(i) − β_p(j), wrapped
    position_phase: np.ndarray  # φ_p(i) − φ_p(j), wrapped
    phase: np.ndarray  # δ_p, wrapped
    terms: np.ndarray  # ρ cos δ (unscaled, the paper's summands)
    score: np.ndarray  # scale · Σ_p terms: the reconstructed score
    unrotated: np.ndarray  # scale · Σ over identity pairs: the unrotated-dimension contribution
    actual: np.ndarray  # the model's score

    @property
    def abs_error(self) -> np.ndarray:
        return np.where(self.visible, np.abs(self.score - self.actual), 0.0)

    @property
    def rel_error(self) -> np.ndarray:
        """|reconstruction − actual| / (|scale|·Σρ): rounding of a dot product scales with Σ|q_d k_d|."""
        reference = abs(self.inputs.scale) * self.magnitude.sum(axis=-1)
        with np.errstate(invalid="ignore", divide="ignore"):
            relative = np.where(reference > 0, self.abs_error / reference, self.abs_error)
        return np.where(self.visible, relative, 0.0)

    @property
    def max_abs_error(self) -> float:
        return float(self.abs_error.max(initial=0.0))

    @property
    def max_rel_error(self) -> float:
        return float(self.rel_error.max(initial=0.0))

    def row(self, query: int) -> int:
        """Index of query position ``query`` in this decomposition's rows."""
        matches = np.flatnonzero(self.queries == query)
        if len(matches) == 0:
            raise FormalRopeError(f"query position {query} was not decomposed (have {self.queries.tolist()})")
        return int(matches[0])


def _pair_polar(pairs: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    pairs = np.asarray(pairs, dtype=np.float64)
    return np.hypot(pairs[..., 0], pairs[..., 1]), np.arctan2(pairs[..., 1], pairs[..., 0])


# float64 arrays of (T, T, pairs) entries a head's decomposition and its Lemma 1 check hold at once
# (magnitude, phases, terms, their temporaries; measured 11 on a compiled MOD head, rounded up).
PHASE_ARRAYS_PER_PAIR = 12


def phases_bytes(length: int, pairs_per_head: Sequence[int]) -> float:
    """Estimated peak memory of decomposing heads with these pair counts on `length` positions: each
    head's (T, T) scores are captured, then one head at a time is decomposed for every (i, j)."""
    if not pairs_per_head:
        return 0.0
    return 8.0 * float(length) ** 2 * (len(pairs_per_head) + PHASE_ARRAYS_PER_PAIR * max(pairs_per_head))


def check_phases_memory(length: int, pairs_per_head: Sequence[int]) -> None:
    """FormalRopeError with the estimate when the decomposition needs more than MAX_SCORE_BYTES
    (checked before any score is computed: the work and memory grow with the square of the length)."""
    need = phases_bytes(length, pairs_per_head)
    if need <= limits.MAX_SCORE_BYTES:
        return
    per_entry = need / float(length) ** 2
    longest = max(0, int(math.sqrt(limits.MAX_SCORE_BYTES / per_entry)) - 2)
    raise FormalRopeError(
        f"phases on {length - 2:,} symbols needs about {limits.describe_bytes(need)}: it decomposes the scores of "
        f"every pair (i, j) of the {length:,} positions for {len(pairs_per_head)} head(s) of up to "
        f"{max(pairs_per_head)} rotary pair(s), more than {limits.describe('MAX_SCORE_BYTES')}; give a string of at "
        f"most about {longest:,} symbols, or fewer heads (--layer, --head)"
    )


def check_queries(length: int, queries: Sequence[int] | np.ndarray | None) -> np.ndarray:
    """Query positions as an int array (default: every position), validated against the length."""
    if queries is None:
        return np.arange(length, dtype=np.int64)
    array = np.asarray(queries, dtype=np.int64).reshape(-1)
    bad = array[(array < 0) | (array >= length)]
    if len(bad):
        raise FormalRopeError(
            f"query position {int(bad[0])} is outside the input: positions run from 0 (bos) to {length - 1} (eos)"
        )
    return array


def decompose_head(inputs: HeadInputs, queries: Sequence[int] | np.ndarray | None = None) -> HeadPhases:
    """Decompose the head's scores for the given query positions (default: all) against every key."""
    queries = check_queries(inputs.length, queries)
    query_norm, query_angle = _pair_polar(inputs.query[queries])  # (Q, P)
    key_norm, key_angle = _pair_polar(inputs.key)  # (T, P)
    angles = np.asarray(inputs.angles, dtype=np.float64)
    magnitude = query_norm[:, None, :] * key_norm[None, :, :]
    content = wrap_phase(query_angle[:, None, :] - key_angle[None, :, :])
    position = wrap_phase(angles[queries][:, None, :] - angles[None, :, :])
    phase = wrap_phase(content + position)
    terms = magnitude * np.cos(phase)
    keys = np.arange(inputs.length)
    visible = keys[None, :] < queries[:, None]
    if inputs.window is not None:
        visible &= keys[None, :] >= queries[:, None] - inputs.window
    identity = ~np.asarray(inputs.rotated, dtype=bool)
    return HeadPhases(
        inputs=inputs,
        queries=queries,
        visible=visible,
        magnitude=magnitude,
        content_phase=content,
        position_phase=position,
        phase=phase,
        terms=terms,
        score=inputs.scale * terms.sum(axis=-1),
        unrotated=inputs.scale * terms[..., identity].sum(axis=-1),
        actual=np.asarray(inputs.actual, dtype=np.float64)[queries],
    )


# ------------------------------------------------------------------------------------ Lemma 1
@dataclass(frozen=True, eq=False)
class Lemma1Check:
    """Lemma 1 of paper 003 on a set of (query, key) entries, in unscaled units (S = Σρ cos δ).

    ``hypothesis``: the entry is visible, has a contributing pair (ρ > 0; without one S = S_max = 0
    and the lemma says nothing) and every contributing pair has |δ| ≤ ε.
    ``holds``: S ≥ (1 − ε²/2)·S_max up to float64 rounding of the sums (evaluated everywhere;
    the lemma speaks only where ``hypothesis`` is true). ``slack`` = (S − bound)/S_max.
    For the scaled score both sides are multiplied by the head's scale (> 0).
    """

    epsilon: float
    hypothesis: np.ndarray  # (Q, T) bool
    score: np.ndarray  # (Q, T) S = Σ ρ cos δ
    s_max: np.ndarray  # (Q, T) Σ ρ
    bound: np.ndarray  # (Q, T) (1 − ε²/2)·S_max
    holds: np.ndarray  # (Q, T) bool

    @property
    def violations(self) -> np.ndarray:
        return self.hypothesis & ~self.holds

    @property
    def n_hypothesis(self) -> int:
        return int(self.hypothesis.sum())

    @property
    def n_violations(self) -> int:
        return int(self.violations.sum())

    @property
    def all_hold(self) -> bool:
        return self.n_violations == 0

    @property
    def slack(self) -> np.ndarray:
        with np.errstate(invalid="ignore", divide="ignore"):
            return np.where(self.s_max > 0, (self.score - self.bound) / np.where(self.s_max > 0, self.s_max, 1), 0.0)

    @property
    def min_slack(self) -> float | None:
        """Smallest (S − bound)/S_max where the hypothesis holds (None when it holds nowhere)."""
        if not self.hypothesis.any():
            return None
        return float(self.slack[self.hypothesis].min())


def lemma1_arrays(
    magnitude: np.ndarray, phase: np.ndarray, epsilon: float, visible: np.ndarray | None = None
) -> Lemma1Check:
    """Lemma 1 for per-pair magnitudes ρ (…, P) ≥ 0 and phases δ (…, P) (wrapped or not)."""
    if not (math.isfinite(epsilon) and epsilon >= 0):
        raise FormalRopeError(f"epsilon must be a finite non-negative angle in radians (got {epsilon})")
    magnitude = np.asarray(magnitude, dtype=np.float64)
    phase = wrap_phase(phase)
    if (magnitude < 0).any():
        raise ValueError("pair magnitudes must be non-negative")
    contributing = magnitude > 0
    # With no contributing pair S = S_max = 0 and the lemma is vacuous: such entries are left out.
    aligned = np.all(~contributing | (np.abs(phase) <= epsilon), axis=-1) & contributing.any(axis=-1)
    hypothesis = aligned if visible is None else aligned & np.asarray(visible, dtype=bool)
    score = (magnitude * np.cos(phase)).sum(axis=-1)
    s_max = magnitude.sum(axis=-1)
    bound = (1.0 - epsilon * epsilon / 2.0) * s_max
    # Both sums round independently: allow a few ulps of S_max (pairs count) before calling a miss.
    tolerance = 8 * np.finfo(np.float64).eps * magnitude.shape[-1] * s_max
    return Lemma1Check(
        epsilon=float(epsilon),
        hypothesis=hypothesis,
        score=score,
        s_max=s_max,
        bound=bound,
        holds=score >= bound - tolerance,
    )


def check_lemma1(phases: HeadPhases, epsilon: float) -> Lemma1Check:
    """Lemma 1 on every visible (query, key) entry of a head's decomposition."""
    return lemma1_arrays(phases.magnitude, phases.phase, epsilon, phases.visible)
