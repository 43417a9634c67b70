"""P(ψ) (Li & Cotterell): query bias 1, key ``f_large·(ψ_j + bos_j − 1)``: score 0 at bos and where ψ
holds, −f_large elsewhere; value ψ (0 at bos). bos always ties at the maximum, so with c ψ-positions
the output is ``c/(c+1)`` — 0 when c = 0 (all weight on bos, whose value is 0) and ≥ 1/2 otherwise,
whatever the length — instead of an average that must be resolved from a vanishing fraction. The
feed-forward snaps it back to 0/1: ``true − ReLU(true − 4·raw)``."""

from __future__ import annotations

from formal_rope.compiler.constructs.common import (
    BOS_FLAG,
    TRUE,
    BuildContext,
    Built,
    ConstructReport,
    Hidden,
    Placement,
    head,
)
from formal_rope.compiler.dag import DagNode
from formal_rope.model.ir import RotaryPair
from formal_rope.precision import ones_sum_overflow


def build_past(node: DagNode, at: Placement, context: BuildContext) -> Built:
    large = context.large
    child = context.node_coord[node.children[0]]
    attention = head(at.name, context, query_bias=(1.0, 0.0),
                     key_weights={(0, child): large, (0, BOS_FLAG): large}, key_bias=(-large, 0.0),
                     value_coord=child, out_coord=at.raw, rotary=(RotaryPair("none"),),
                     description=f"P: score 0 at bos and where {child} holds, -f_large elsewhere; value {child}")
    hidden = (Hidden({TRUE: 1.0}, 0.0, {at.out: 1.0}), Hidden({TRUE: 1.0, at.raw: -4.0}, 0.0, {at.out: -1.0}))
    overflow = ones_sum_overflow(context.fmt)
    if overflow is None:
        report = ConstructReport("P", node.text, at.layer, at.name, large, large, large,
                                 "scores 0 / -f_large; output c/(c+1) snapped at 1/4")
    else:
        # bos and up to N ψ-positions tie at score 0: their count N+1 must stay below `overflow`.
        report = ConstructReport(
            "P", node.text, at.layer, at.name, large, large, large,
            f"scores 0 / -f_large; output c/(c+1) snapped at 1/4; the softmax denominator (up to N+1 "
            f"ones) overflows {context.fmt.name} at {overflow}, so exact up to N = {overflow - 2}",
            certified_length=overflow - 2, certified_mode="exact", certified_ideal=overflow - 2,
        )
    return Built(attention, hidden, report)
