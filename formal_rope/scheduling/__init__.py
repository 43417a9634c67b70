"""Scheduling stage: which runs train together, in packs of what size, and what a run costs.

- `packs`: runs share a pack when they share the architecture and the training shape
  (`check_packable`, `pack_signature`); `group_packs` cuts a grid into packs sized for the workers
  and the memory (`--pack`), `pack_key` names a pack, `default_threads` gives its torch threads;
- `workload`: up-front estimates of a run's FLOPs and memory, so a run that cannot finish or fit is
  refused before it starts (`check_workload`).

It reads configs and the encoding registry (`run_config.config`, `run_config.encodings`) and imports
no torch: the sweeps' driver plans its packs without loading the trainer. `runs` trains the packs.
"""

from __future__ import annotations

from formal_rope._lazy import lazy_exports

_MODULES = {
    "formal_rope.scheduling.packs": [
        "check_packable", "default_threads", "group_packs", "pack_key", "pack_signature", "parse_pack",
    ],
    "formal_rope.scheduling.workload": ["Workload", "check_workload", "estimate"],
}
_LAZY = {name: module for module, names in _MODULES.items() for name in names}

__all__ = sorted(_LAZY)
__getattr__, __dir__ = lazy_exports(__name__, _LAZY, globals())
