"""The theory's verdict for one (language, positional scheme): what the papers prove a model can express.

The verdict is about the *family* of models a run belongs to (fixed-precision soft-attention
transformers of any width and depth, with the run's positional scheme), never about what training
found. It reads only the class decider's verdicts (`formal_rope.classes.Classification`):

  expressible      some model of the family recognises the language at every length
  bounded          the theory gives a model only up to a length set by precision (core paper §4:
                   Cor. 4.1's certified range N_max); it says nothing beyond that length
  not_expressible  no model of the family recognises it (an upper bound on the whole family)
  no_prediction    the papers prove neither

The rules (docs/theory.md lists them with their citations):

* NoPE = LTL[P] (Li & Cotterell 2025, restated in the core paper §2.2).
* RoPE_P / SiPE_P with periods m_1..m_r: every realised table depends on i mod M, M = lcm(m_1..m_r),
  so the family lies in PFO²[<,MOD_M] (core paper Lemma 3.1 / Thm 3.2's forward direction); and
  L ∈ PFO²[<,MOD_M] iff the M-automaton A_M is a PODFA iff the decider's least k (`mod_k`)
  divides M (docs/theory.md proves both directions from Prop. B.1; docs/classes.md gives the
  closed form). With such periods Lemma 3.2's construction expresses L: Thm 3.1 / Thm 3.2.
* Conventional RoPE (θ_d = β^(−2(d−1)/D)) always contains g = 1, irrational over 2π, so it is
  non-periodic (Prop. 4.1) and Thm 3.1 does not apply; Cor. 4.1 simulates LTL[P,Y] only up to
  N_max, with unrotated subspaces (partial RoPE has them; fully rotated RoPE does not).
* Hybrids: any layer can be made the identity (zero attention and feed-forward outputs; the
  residual stream carries on), so a construction that needs only some of the layers' kinds applies.
  Global NoPE and periodic layers keep the upper bound (Lemma 3.1's argument is per rotation; a NoPE
  layer is a period-1 table); windows and conventional rotations break it.

LTL[P,Y] membership is not decided by the decider. It is known when the language is in LTL[P]
(LTL[P] ⊂ LTL[P,Y]) or not star-free (LTL[P,Y] ⊆ LTL[S] = star-free); otherwise the caller may
supply it (`ltl_p_y`: e.g. a language generated from an LTL[P,Y] formula, or `mlregtest_ltl_p_y`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from formal_rope.auto_periods import auto_periods
from formal_rope.errors import FormalRopeError

EXPRESSIBLE = "expressible"
BOUNDED = "bounded"
NOT_EXPRESSIBLE = "not_expressible"
NO_PREDICTION = "no_prediction"
VERDICTS = (EXPRESSIBLE, BOUNDED, NOT_EXPRESSIBLE, NO_PREDICTION)

# The Parquet / report columns a prediction fills (`Prediction.columns`).
PREDICTION_COLUMNS = ("predicted", "predicted_by", "predicted_reason")

# Short citations. "core paper" is "Disentangling the Expressivity of RoPE"; "paper 000" is JoFormer's
# "Journey Operators for Structured Multi-Axis Composition".
LI_COTTERELL = "Li & Cotterell 2025 (arXiv 2505.23623), as restated in core paper §2.2: SMAT (NoPE) = LTL[P]"
THM_3_1 = "core paper Thm 3.1: SMAT[RoPE_P] = LTL[P,MOD]"
THM_3_2 = "core paper Thm 3.2: SMAT[SiPE_P] = LTL[P,MOD]"
LEMMA_3_1 = "core paper Lemma 3.1 (RoPE_P with common period M ⊆ PFO²[<,MOD_M]) + Prop. B.1"
THM_3_2_FORWARD = "core paper Thm 3.2, forward direction (SiPE_P with common period M ⊆ PFO²[<,MOD_M]) + Prop. B.1"
PROP_4_1 = "core paper Prop. 4.1: conventional RoPE (g = 1) is non-periodic"
COR_4_1 = "core paper Cor. 4.1 (ii): RoPE_NP with unrotated subspaces L-simulates LTL[P,Y] for L ≤ N_max(g, C, F)"
SECTION_2_3 = "core paper §2.3: unrotated subspaces retain NoPE's LTL[P] construction (Li & Cotterell 2025)"
HYBRID_PERIODIC = ("core paper Lemma 3.1 (its argument is per rotation: a NoPE layer is a period-1 table) and "
                   "Lemma 3.2's construction; docs/findings.md, Hybrid models")
HYBRID_WINDOW = ("core paper Cor. 4.1 with a sliding window (only offsets inside the window compete, so eq. 10's "
                 "gap holds at every length) and P from a global layer; docs/findings.md, Hybrid models")
HYBRID_BOUNDED = "core paper Cor. 4.1 (ii), a global P-capable layer standing in for its unrotated subspaces"
NOTHING_PROVED = "none: the papers prove no expressivity result for this scheme"

# Encoding name -> what the theory treats it as. Every registry encoding needs an entry
# (tests/test_theory_predictions.py checks it), so a new encoding gets a rule, never a silent default.
NOPE = "nope"
PERIODIC_ROTARY = "periodic_rotary"  # rope_p: tables T_d(i mod m_d) on q, k
PERIODIC_ADDITIVE = "periodic_additive"  # sipe_p: periodic sin/cos tables added to the embeddings
CONVENTIONAL_ROTARY = "conventional_rotary"  # rope: θ_d = β^(−2(d−1)/D), every pair rotated
PARTIAL_ROTARY = "partial_rotary"  # partial_rope: conventional on some pairs, the rest unrotated
CONVENTIONAL_ADDITIVE = "conventional_additive"  # sipe (SiPE_NP)
VALUE_ROTATING = "value_rotating"  # JoFormer: values transported by the rotation, angles maybe content-dependent
ENCODING_KINDS: dict[str, str] = {
    "nope": NOPE,
    "rope_p": PERIODIC_ROTARY,
    "sipe_p": PERIODIC_ADDITIVE,
    "rope": CONVENTIONAL_ROTARY,
    "partial_rope": PARTIAL_ROTARY,
    "sipe": CONVENTIONAL_ADDITIVE,
    "jof_fixed": VALUE_ROTATING,
    "jof_learned": VALUE_ROTATING,
    "jof_projected": VALUE_ROTATING,
}
PERIODIC_KINDS = (PERIODIC_ROTARY, PERIODIC_ADDITIVE)

# MLRegTest classes (data/mlregtest/README.md) inside LTL[P,Y]: SL, LT and LTT are Boolean
# combinations of prefix, suffix and factor tests ("u occurs at least t times"), each an LTL[P,Y]
# formula (a factor u ending at i is a Y-chain π_{u_n} ∧ Y(π_{u_n−1} ∧ Y(…)), as the core paper
# writes Σ*abΣ* = P(π_b ∧ Y π_a); t occurrences nest t strict P's); SP and PT are piecewise
# testable, inside LTL[P]. Other classes (tier-based, PLT, SF, Reg, Zp) are not claimed.
_MLREGTEST_IN_LTL_P_Y = frozenset({"SL", "LT", "LTT", "SP", "PT"})


def mlregtest_ltl_p_y(language_class: str) -> bool | None:
    """True when an MLRegTest class (the third field of a file name, e.g. "SL") lies inside LTL[P,Y]
    by its definition; None when the class does not settle it."""
    return True if language_class in _MLREGTEST_IN_LTL_P_Y else None


@dataclass(frozen=True)
class LanguageFacts:
    """What the theory reads about a language: the decider's verdicts, and LTL[P,Y] membership when
    known (None: unknown; `in_ltl_p_y` fills in what the other verdicts settle)."""

    ltl_p: bool
    ltl_p_mod: bool
    mod_k: int | None
    star_free: bool
    ltl_p_y: bool | None = None

    def __post_init__(self) -> None:
        if self.ltl_p_mod != (self.mod_k is not None) or (self.ltl_p and self.mod_k != 1):
            raise FormalRopeError(
                f"inconsistent class verdicts: ltl_p={self.ltl_p}, ltl_p_mod={self.ltl_p_mod}, mod_k={self.mod_k} "
                "(mod_k is the least k with A_k a PODFA: 1 in LTL[P], None outside LTL[P,MOD])"
            )
        if self.ltl_p_y is False and self.ltl_p:
            raise FormalRopeError("ltl_p_y=False contradicts ltl_p=True (LTL[P] ⊂ LTL[P,Y])")
        if self.ltl_p_y is True and not self.star_free:
            raise FormalRopeError("ltl_p_y=True contradicts star_free=False (LTL[P,Y] ⊆ LTL[S] = star-free)")

    @classmethod
    def of(cls, language, ltl_p_y: bool | None = None) -> "LanguageFacts":
        """From a `Classification` (or any object with its ltl_p, ltl_p_mod, mod_k, star_free), or a
        LanguageFacts (its own ltl_p_y kept unless `ltl_p_y` is given)."""
        if isinstance(language, LanguageFacts):
            return language if ltl_p_y is None else LanguageFacts(
                language.ltl_p, language.ltl_p_mod, language.mod_k, language.star_free, ltl_p_y)
        return cls(ltl_p=bool(language.ltl_p), ltl_p_mod=bool(language.ltl_p_mod),
                   mod_k=None if language.mod_k is None else int(language.mod_k),
                   star_free=bool(language.star_free), ltl_p_y=ltl_p_y)

    @property
    def in_ltl_p_y(self) -> bool | None:
        """LTL[P,Y] membership: True in LTL[P], False when not star-free, else what the caller said."""
        if self.ltl_p:
            return True
        if not self.star_free:
            return False
        return self.ltl_p_y

    def in_mod(self, modulus: int) -> bool:
        """Whether L ∈ PFO²[<,MOD_modulus] = LTL[P, MOD_modulus]: A_modulus is a PODFA, i.e. mod_k | modulus."""
        return self.mod_k is not None and modulus % self.mod_k == 0

    def describe(self) -> str:
        if self.ltl_p:
            return "L ∈ LTL[P]"
        if self.ltl_p_mod:
            return f"L ∈ LTL[P,MOD] \\ LTL[P], least k = {self.mod_k}"
        return "L ∉ LTL[P,MOD]"


@dataclass(frozen=True)
class PositionalScheme:
    """A run's positional machinery, per layer: its encoding and its window (None: global attention).

    periods: the periodic encodings' periods (None: "auto", resolved as training does, to the
    language's least k). rotated_pairs / pairs: partial_rope's rotated and total pairs per head
    (None: unknown, read as "some but not all rotated")."""

    layer_encodings: tuple[str, ...]
    layer_windows: tuple[int | None, ...]
    periods: tuple[int, ...] | None = None
    rotated_pairs: int | None = None
    pairs: int | None = None

    def __post_init__(self) -> None:
        if not self.layer_encodings or len(self.layer_encodings) != len(self.layer_windows):
            raise FormalRopeError(
                f"a positional scheme needs one window per layer: {len(self.layer_encodings)} encodings, "
                f"{len(self.layer_windows)} windows"
            )

    @classmethod
    def single(cls, pe: str, layers: int = 1, periods=None, window: int | None = None,
               rotated_pairs: int | None = None, pairs: int | None = None) -> "PositionalScheme":
        """Every layer `pe` with the same window (None: global)."""
        return cls((pe,) * layers, (window,) * layers, None if periods is None else tuple(int(p) for p in periods),
                   rotated_pairs, pairs)

    @classmethod
    def of_config(cls, config, resolved_periods=None) -> "PositionalScheme":
        """From a `RunConfig` (its layer_encodings, layer_windows, periods, rope_fraction, d_model,
        heads); `resolved_periods` (a RunResult's) overrides config.periods."""
        periods = resolved_periods if resolved_periods is not None else config.periods
        pairs = (config.d_model // config.heads) // 2
        rotated = None
        if "partial_rope" in config.layer_encodings():
            # partial_rotated_pairs' rule (training/encodings/phases.py): fraction · pairs rounded half up.
            rotated = int(math.floor(config.rope_fraction * pairs + 0.5))
        return cls(tuple(config.layer_encodings()), tuple(config.layer_windows()),
                   None if periods is None else tuple(int(p) for p in periods), rotated, pairs)

    @property
    def hybrid(self) -> bool:
        return len(set(self.layer_encodings)) > 1 or any(window is not None for window in self.layer_windows)

    def describe(self) -> str:
        parts = []
        for index, (pe, window) in enumerate(zip(self.layer_encodings, self.layer_windows), start=1):
            parts.append(f"L{index} {pe}" + ("" if window is None else f" w{window}"))
        return ", ".join(parts)


@dataclass(frozen=True)
class Prediction:
    """The theory's verdict (one of VERDICTS), the theorem giving it, one line of reason, and whether
    it is the project's derivation from the papers (`derived`) rather than a statement they make."""

    verdict: str
    citation: str
    reason: str
    derived: bool = False

    def __post_init__(self) -> None:
        if self.verdict not in VERDICTS:
            raise ValueError(f"unknown verdict {self.verdict!r}; expected one of {', '.join(VERDICTS)}")

    def columns(self) -> dict[str, str]:
        """The PREDICTION_COLUMNS of a results table."""
        by = self.citation + (" [derived]" if self.derived else "")
        return dict(zip(PREDICTION_COLUMNS, (self.verdict, by, self.reason)))

    def to_json(self) -> dict[str, Any]:
        return {"verdict": self.verdict, "citation": self.citation, "reason": self.reason, "derived": self.derived}


def predict_run(classification, config, resolved_periods=None, ltl_p_y: bool | None = None) -> Prediction:
    """The prediction for a `RunConfig` on a language whose `classify` verdicts are `classification`."""
    return predict(classification, PositionalScheme.of_config(config, resolved_periods), ltl_p_y=ltl_p_y)


def predict(language, scheme, ltl_p_y: bool | None = None) -> Prediction:
    """The theory's verdict for `language` (a Classification or LanguageFacts) under `scheme` (a
    PositionalScheme, or a RunConfig: anything with `layer_encodings()`)."""
    facts = LanguageFacts.of(language, ltl_p_y)
    if not isinstance(scheme, PositionalScheme):
        scheme = PositionalScheme.of_config(scheme)
    unknown = sorted(set(scheme.layer_encodings) - set(ENCODING_KINDS))
    if unknown:
        return Prediction(NO_PREDICTION, NOTHING_PROVED,
                          f"{', '.join(unknown)}: no rule for this encoding (formal_rope/theory/predictions.py)")
    layers = [_Layer(_kind(pe, scheme), pe, window) for pe, window in zip(scheme.layer_encodings, scheme.layer_windows)]
    periods = _periods(scheme, facts)
    if not scheme.hybrid:
        return _single(facts, layers[0], periods)
    return _hybrid(facts, layers, periods)


# ------------------------------------------------------------------------------------------- rules
@dataclass(frozen=True)
class _Layer:
    kind: str
    pe: str
    window: int | None


def _kind(pe: str, scheme: PositionalScheme) -> str:
    kind = ENCODING_KINDS[pe]
    if kind == PARTIAL_ROTARY and scheme.rotated_pairs is not None:
        if scheme.rotated_pairs <= 0:
            return NOPE  # no pair rotated: the run is NoPE
        if scheme.pairs is not None and scheme.rotated_pairs >= scheme.pairs:
            return CONVENTIONAL_ROTARY  # every pair rotated: the run is RoPE_NP
    return kind


def _periods(scheme: PositionalScheme, facts: LanguageFacts) -> tuple[int, ...] | None:
    """The periods the run uses: given, or "auto" as training resolves it (`auto_periods` of the
    least k; None when the language has none, where training refuses "auto")."""
    if scheme.periods is not None:
        return scheme.periods
    return None if facts.mod_k is None else auto_periods(facts.mod_k)


def _lcm(periods) -> int:
    value = 1
    for period in periods:
        value = value * period // math.gcd(value, period)
    return value


def _single(facts: LanguageFacts, layer: _Layer, periods) -> Prediction:
    """One encoding in every layer, global attention."""
    kind = layer.kind
    if kind == NOPE:
        if facts.ltl_p:
            return Prediction(EXPRESSIBLE, LI_COTTERELL, f"{facts.describe()}: NoPE expresses exactly LTL[P]")
        return Prediction(NOT_EXPRESSIBLE, LI_COTTERELL, f"{facts.describe()}: outside LTL[P], the class of NoPE")
    if kind in PERIODIC_KINDS:
        return _periodic(facts, layer.pe, kind, periods)
    if kind == PARTIAL_ROTARY:
        if facts.ltl_p:
            return Prediction(EXPRESSIBLE, SECTION_2_3,
                              "L ∈ LTL[P]: NoPE's construction runs in the unrotated pairs (the rotated ones zeroed)")
        if facts.in_ltl_p_y:
            return Prediction(BOUNDED, COR_4_1,
                              "L ∈ LTL[P,Y] \\ LTL[P]: Y through the g = 1 pair up to N_max, P in the unrotated pairs; "
                              "nothing is proved beyond N_max")
        return _conventional_silence(facts, "partial RoPE")
    if kind == CONVENTIONAL_ROTARY:
        if facts.in_ltl_p_y:
            return Prediction(BOUNDED, COR_4_1,
                              f"{'L ∈ LTL[P]' if facts.ltl_p else 'L ∈ LTL[P,Y]'}: Cor. 4.1 assumes unrotated "
                              "subspaces, "
                              "which fully rotated RoPE lacks; its slowest pairs stand in for them only up to a length "
                              "(and Y holds up to N_max)", derived=True)
        return _conventional_silence(facts, "RoPE_NP")
    if kind == CONVENTIONAL_ADDITIVE:
        return Prediction(NO_PREDICTION, NOTHING_PROVED,
                          "SiPE_NP: the core paper defines it (§3.3) but proves nothing about it; its additive table "
                          "cannot be zeroed, so not even NoPE's class carries over")
    return Prediction(NO_PREDICTION, NOTHING_PROVED,
                      f"{layer.pe}: paper 000 proves path independence and translation equivariance (Thms 2.2, 2.8), "
                      "no language class; the core paper's theorems do not cover value rotation")


def _periodic(facts: LanguageFacts, pe: str, kind: str, periods) -> Prediction:
    equality = THM_3_1 if kind == PERIODIC_ROTARY else THM_3_2
    upper = LEMMA_3_1 if kind == PERIODIC_ROTARY else THM_3_2_FORWARD
    if not facts.ltl_p_mod:
        return Prediction(NOT_EXPRESSIBLE, equality,
                          f"{facts.describe()} (no k-automaton is a PODFA, Thm 3.3): no periods suffice")
    modulus = _lcm(periods)
    shown = ",".join(map(str, periods))
    if modulus == 1:
        # Period-1 tables rotate (add) nothing: the model is NoPE (training says so too).
        if facts.ltl_p:
            return Prediction(EXPRESSIBLE, LI_COTTERELL,
                              f"periods {shown}: period 1 rotates nothing (NoPE); L ∈ LTL[P]")
        return Prediction(NOT_EXPRESSIBLE, LI_COTTERELL,
                          f"periods {shown}: period 1 rotates nothing (NoPE), and {facts.describe()}")
    if facts.in_mod(modulus):
        note = ""
        if kind == PERIODIC_ROTARY and 1 not in periods:
            note = ("; Lemma 3.2 puts P in unrotated pairs, and these periods rotate every pair, as the paper's "
                    "own runs do")
        return Prediction(EXPRESSIBLE, equality,
                          f"{facts.describe()}: k = {facts.mod_k} divides lcm(periods {shown}) = {modulus}{note}",
                          derived=modulus != facts.mod_k)
    return Prediction(NOT_EXPRESSIBLE, upper,
                      f"{facts.describe()}: k = {facts.mod_k} does not divide lcm(periods {shown}) = {modulus}, so "
                      f"A_{modulus} is not a PODFA and L ∉ PFO²[<,MOD_{modulus}]", derived=True)


def _conventional_silence(facts: LanguageFacts, name: str) -> Prediction:
    if not facts.star_free:
        return Prediction(NO_PREDICTION, PROP_4_1,
                          f"{name} is non-periodic, so Thm 3.1 does not apply, and L is not star-free (outside "
                          "LTL[P,Y], Cor. 4.1's reach); no upper bound is proved for RoPE_NP")
    if facts.in_ltl_p_y is None:
        return Prediction(NO_PREDICTION, COR_4_1,
                          "L is star-free but not in LTL[P]; whether it is in LTL[P,Y] (Cor. 4.1's reach) is not "
                          "decided here (pass ltl_p_y)")
    return Prediction(NO_PREDICTION, COR_4_1,
                      f"L ∉ LTL[P,Y], beyond Cor. 4.1's reach; no upper bound is proved for {name}")


def _hybrid(facts: LanguageFacts, layers: list[_Layer], periods) -> Prediction:
    """Per-layer encodings and/or sliding windows (always the project's derivation: `derived`)."""
    if any(layer.kind in (CONVENTIONAL_ADDITIVE,) for layer in layers):
        return Prediction(NO_PREDICTION, NOTHING_PROVED,
                          "a SiPE_NP layer adds its non-periodic table to the embeddings every layer reads; nothing "
                          "is proved about it", derived=True)
    global_layers = [layer for layer in layers if layer.window is None]
    # Layers that can run NoPE's P construction at every length (rotations zeroed or absent).
    p_capable = [layer for layer in global_layers if layer.kind in (NOPE, *PERIODIC_KINDS, PARTIAL_ROTARY)]
    periodic_global = [layer for layer in global_layers if layer.kind in PERIODIC_KINDS]
    modulus = _lcm(periods) if periodic_global and periods else 1
    closed = len(global_layers) == len(layers) and all(layer.kind in (NOPE, *PERIODIC_KINDS) for layer in layers)
    in_class = facts.ltl_p if modulus == 1 else facts.in_mod(modulus)
    period_text = f"MOD_{modulus}" if modulus > 1 else "no period"
    if closed:
        if periodic_global and not facts.ltl_p_mod:
            return Prediction(NOT_EXPRESSIBLE, HYBRID_PERIODIC,
                              f"{facts.describe()}: every layer is global NoPE or periodic, and no periods suffice "
                              "outside LTL[P,MOD]", derived=True)
        if in_class:
            return Prediction(EXPRESSIBLE, HYBRID_PERIODIC,
                              f"{facts.describe()}: in LTL[P, {period_text}], which the periodic and NoPE layers build "
                              "(with enough layers)", derived=True)
        return Prediction(NOT_EXPRESSIBLE, HYBRID_PERIODIC,
                          f"{facts.describe()}: every layer is global NoPE or periodic, so the model is inside "
                          f"LTL[P, {period_text}], which does not hold L", derived=True)
    if in_class and p_capable:
        return Prediction(EXPRESSIBLE, HYBRID_PERIODIC if modulus > 1 else SECTION_2_3,
                          f"{facts.describe()}: the global {'periodic' if modulus > 1 else 'P-capable'} layers build "
                          "it; the other layers can be the identity", derived=True)
    conventional_windowed = [layer for layer in layers if layer.window is not None and layer.window >= 2
                             and layer.kind in (CONVENTIONAL_ROTARY, PARTIAL_ROTARY)]
    if facts.in_ltl_p_y and conventional_windowed and p_capable:
        return Prediction(EXPRESSIBLE, HYBRID_WINDOW,
                          f"L ∈ LTL[P,Y]: the windowed rotary layer (w {conventional_windowed[0].window}) gives Y at "
                          "every length, a global layer gives P", derived=True)
    conventional_global = [layer for layer in global_layers if layer.kind in (CONVENTIONAL_ROTARY, PARTIAL_ROTARY)]
    if facts.in_ltl_p_y and conventional_global:
        return Prediction(BOUNDED, HYBRID_BOUNDED if p_capable else COR_4_1,
                          "L ∈ LTL[P,Y]: a global RoPE_NP layer gives Y only up to N_max"
                          + ("" if p_capable else ", and no layer gives P at every length"), derived=True)
    if not facts.star_free and not periodic_global:
        return Prediction(NO_PREDICTION, PROP_4_1,
                          "L is not star-free and no global layer is periodic; windows and non-periodic rotations "
                          "have no proved upper bound", derived=True)
    return Prediction(NO_PREDICTION, NOTHING_PROVED,
                      f"{facts.describe()}"
                      + ("" if facts.in_ltl_p_y is not None else ", LTL[P,Y] membership unknown")
                      + ": no construction of the papers fits these layers, and windows or non-periodic layers "
                      "have no proved upper bound", derived=True)
