"""The first-position flag, for MOD: a uniform head over j < i with value = bos flag outputs 1/i, so
``raw:first`` is 1 only at i = 1 (thresholded at 1/2 by the MOD constructs that read it)."""

from __future__ import annotations

from formal_rope.compiler.constructs.common import BOS_FLAG, FIRST_RAW, BuildContext, Built, ConstructReport, head
from formal_rope.model.ir import RotaryPair


def build_first(context: BuildContext) -> Built:
    attention = head("first", context, query_bias=(0.0, 0.0), key_weights={}, key_bias=(0.0, 0.0),
                     value_coord=BOS_FLAG, out_coord=FIRST_RAW, rotary=(RotaryPair("none"),),
                     description="uniform over j < i, value = bos flag: output 1/i (1 only at i = 1)")
    report = ConstructReport("first", "i = 1", 1, "first", None, None, context.large,
                             "uniform attention; output 1/i, thresholded at 1/2")
    return Built(attention, (), report)
