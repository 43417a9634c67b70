"""Yᵏψ (appendix D): one RoPE_NP pair with frequency g, query bias C(cos kg, −sin kg) (rounded once,
``offset_query_bias``), key bias (1, 0), value ψ; snapped and gated by Pᵏ⊤ (k ≥ 2) or by ``true``
(k = 1: at i = 1 only bos, value 0, is visible): ``gate − ReLU(gate − 2·raw)``."""

from __future__ import annotations

from formal_rope import precision
from formal_rope.compiler.constructs.common import TRUE, BuildContext, Built, ConstructReport, Hidden, Placement, head
from formal_rope.compiler.dag import DagNode
from formal_rope.model.ir import RotaryPair


def build_yesterday(node: DagNode, at: Placement, context: BuildContext) -> Built:
    child = context.node_coord[node.children[0]]
    gate = TRUE if node.gate is None else context.node_coord[node.gate]
    k = int(node.offset)
    freq, y_scale = context.freq, context.y_scale
    if y_scale is None:
        raise AssertionError("a Y head needs a scale")
    bias0, bias1 = precision.offset_query_bias(k, freq, y_scale, context.fmt)
    attention = head(at.name, context, query_bias=(bias0, bias1), key_weights={}, key_bias=(1.0, 0.0),
                     value_coord=child, out_coord=at.raw, rotary=(RotaryPair("angle", angle=float(freq)),),
                     description=f"Y^{k}: RoPE_NP g={freq:g}, C={y_scale:g}, target i-{k}")
    hidden = (Hidden({gate: 1.0}, 0.0, {at.out: 1.0}), Hidden({gate: 1.0, at.raw: -2.0}, 0.0, {at.out: -1.0}))
    report = ConstructReport("Y", node.text, at.layer, at.name, y_scale, None, context.large,
                             f"offset k={k}, gate {gate}")
    return Built(attention, hidden, report)
