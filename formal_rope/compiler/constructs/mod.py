"""MODₘʳ (appendix C.3): pair 0 periodic T_m(i mod m) against the bos key ``(C, 0)``, query bias
``(cos 2πr/m, −sin 2πr/m)``; pair 1 unrotated, query ``(1, 0)``, key ``C·b_m`` at non-bos positions;
value = bos flag. C ≥ 2·f_large/δ_m, raised until the *realized* margin in the format is ≥ f_large.
The first position (only bos visible, so the head always reads 1 there) is flagged by the `first`
construct and MODₘʳ(1) is a compile-time constant:
``true − ReLU(true − 2·raw) − [1 ≢ r]·ReLU(2·first − 1)``."""

from __future__ import annotations

import math

import numpy as np

from formal_rope import precision
from formal_rope.compiler.constructs.common import (
    BOS_FLAG,
    FIRST_RAW,
    TRUE,
    BuildContext,
    Built,
    ConstructReport,
    Hidden,
    Placement,
    head,
    round_in,
    round_up_in,
)
from formal_rope.compiler.dag import DagNode
from formal_rope.errors import FormalRopeError
from formal_rope.model.ir import RotaryPair
from formal_rope.precision import FloatFormat, f_large, make_rounder


def mod_parameters(m: int, r: int, fmt: FloatFormat) -> dict[str, float]:
    """Stored parameters of the MODₘʳ head in ``fmt`` and its realized margin (winner − loser ≥ …).

    C starts at 2·f_large/δ_m (rounded up into F) and grows by 1/8 until the realized scores of all
    m residues separate bos from the baseline by at least f_large; overflow is an error.
    """
    R = make_rounder(fmt)
    margin_needed = f_large(fmt)
    delta = 1.0 - math.cos(2.0 * math.pi / m)
    cos_table, sin_table = precision.periodic_rotation_entries(m, fmt)  # (precision's rotary names load torch)
    q0, q1 = float(cos_table[r]), -float(sin_table[r])
    scale = round_up_in(2.0 * margin_needed / delta, fmt)
    residues = np.arange(m)
    for _ in range(64):
        if not math.isfinite(scale):
            break
        baseline = round_in(scale * (1.0 - delta / 2.0), fmt)
        # The evaluator's op order: rotate the query bias, then q·k with k = (C, 0) at bos.
        c, s = cos_table[residues], sin_table[residues]
        rotated0 = R(R(c * q0) - R(s * q1))
        bos_scores = R(rotated0 * scale)
        winners = (residues - r) % m == 0  # residue of i; bos must win exactly when i ≡ r
        gaps = np.where(winners, bos_scores - baseline, baseline - bos_scores)
        margin = float(gaps.min())
        if margin >= margin_needed and math.isfinite(baseline):
            return {"scale": scale, "baseline": baseline, "q0": q0, "q1": q1, "margin": margin, "delta": delta}
        scale = round_up_in(scale * 1.125, fmt)
    raise FormalRopeError(
        f"MOD_{m}^{r}: no scale C in {fmt.name} gives a realized margin >= f_large = {margin_needed:g} "
        f"(needs C >= {2 * margin_needed / delta:.6g} before rounding; the format overflows or its "
        "rotation table is too coarse for this modulus)"
    )


def build_mod(node: DagNode, at: Placement, context: BuildContext) -> Built:
    m, r = node.modulus, node.residue
    params = mod_parameters(m, r, context.fmt)
    attention = head(
        at.name, context, query_bias=(params["q0"], params["q1"], 1.0, 0.0),
        key_weights={(0, BOS_FLAG): params["scale"], (2, TRUE): params["baseline"]},
        key_bias=(0.0, 0.0, 0.0, 0.0), value_coord=BOS_FLAG, out_coord=at.raw,
        rotary=(RotaryPair("periodic", period=m), RotaryPair("none")),
        description=f"MOD: T_{m}(i mod {m}) vs bos key C={params['scale']:g}, "
        f"baseline C·b_m={params['baseline']:g}",
    )
    first_value = 1.0 if (1 - r) % m == 0 else 0.0
    hidden = [Hidden({TRUE: 1.0}, 0.0, {at.out: 1.0}), Hidden({TRUE: 1.0, at.raw: -2.0}, 0.0, {at.out: -1.0})]
    if first_value == 0.0:
        hidden.append(Hidden({FIRST_RAW: 2.0}, -1.0, {at.out: -1.0}))
    large = context.large
    report = ConstructReport(
        "MOD", node.text, at.layer, at.name, params["scale"], params["margin"], large,
        f"delta_m={params['delta']:.6g}, C >= 2 f_large/delta_m = {2 * large / params['delta']:.6g}; "
        f"MOD_{m}^{r}(1) = {bool(first_value)} by construction",
    )
    return Built(attention, tuple(hidden), report)
