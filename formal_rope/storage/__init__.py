"""Storage stage: what a run keeps on disk, read back without the trainer.

- `training_state`: the state a pack resumes from (weights, optimizer moments, generators), in a
  folder on any filesystem pyarrow opens (`--state-dir`, `--resume`);
- `checkpoints`: a trained run's archive (metadata.json and its state dict; the classifier is
  rebuilt from it by `training.load_checkpoint`);
- `curves`: each run's training curve, recorded as it trains; `tensorboard_log`: where a pack's
  curves go (the recorder, and TensorBoard event files with `--tensorboard`);
- `provenance`: the software versions and source commit recorded with every run.

It sits below `training` (the loop saves and resumes its state here, a result holds its curve) and
imports nothing of it: models, configs and results reach it as values. Names load on first access
(`checkpoints` imports torch; the rest do not).
"""

from __future__ import annotations

from formal_rope._lazy import lazy_exports

_MODULES = {
    "formal_rope.storage.checkpoints": ["check_checkpoint_path", "read_metadata", "save_checkpoint"],
    "formal_rope.storage.curves": ["CurveOptions", "CurvePoint", "PackCurves", "TrainingCurve"],
    "formal_rope.storage.provenance": ["software_versions", "source_commit"],
    "formal_rope.storage.tensorboard_log": ["check_tensorboard", "open_pack_log"],
    "formal_rope.storage.training_state": [
        "StateOptions", "StateStore", "TrainingStateError", "load_pack_state", "open_state_store", "save_pack_state",
    ],
}
_LAZY = {name: module for module, names in _MODULES.items() for name in names}

__all__ = sorted(_LAZY)
__getattr__, __dir__ = lazy_exports(__name__, _LAZY, globals())
