"""The compiler's constructs, one module per construct (like tracr's craft/chamber): each builds the
attention head of one temporal node kind, the feed-forward units that snap its raw output to 0/1,
and its `ConstructReport`. `schedule_to_model.schedule_to_ir` places them, dispatching on the node
kind through `HEAD_CONSTRUCTS`.

  common      coordinates, the build context, `head`, `Hidden`, `ConstructReport`
  past        P(ψ)                     mod         MODₘʳ (and `mod_parameters`)
  yesterday   Yᵏψ                      first       the first-position flag MOD reads
  boolean     Boolean nodes (feed-forward units only)
"""

from __future__ import annotations

from collections.abc import Callable

from formal_rope.compiler.constructs.common import BuildContext, Built, Placement
from formal_rope.compiler.constructs.mod import build_mod
from formal_rope.compiler.constructs.past import build_past
from formal_rope.compiler.constructs.yesterday import build_yesterday
from formal_rope.compiler.dag import DagNode

# node kind (dag.TEMPORAL_KINDS) -> its construct: (node, placement, context) -> head, units, report
HEAD_CONSTRUCTS: dict[str, Callable[[DagNode, Placement, BuildContext], Built]] = {
    "past": build_past,
    "mod": build_mod,
    "yesterday": build_yesterday,
}
