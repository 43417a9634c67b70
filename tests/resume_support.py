"""The check that a pack killed mid-training resumes bit-identically (shared by the tests of
features that add state to a run: hybrids, auxiliary objective heads)."""

from __future__ import annotations

import pytest
import torch

from formal_rope.runs import run_pack
from formal_rope.storage.training_state import StateOptions


class _Stop(KeyboardInterrupt):
    pass


def resumed_equals_whole(configs, state_folder, *, every: int, stop_step: int):
    """Train `configs` as one pack straight through; train them again, killed at `stop_step` with a
    state saved every `every` steps, and resume from it. Asserts both give the same results and the
    same weights bit for bit; returns the whole run's model (for feature-specific checks)."""
    whole, whole_model = run_pack(configs, progress=False)
    state = StateOptions(str(state_folder), every=every)

    def stop(step, _losses):
        if step == stop_step:
            raise _Stop()

    with pytest.raises(_Stop):
        run_pack(configs, progress=False, state=state, on_step=stop)
    resumed, resumed_model = run_pack(configs, progress=False, state=state)
    for a, b in zip(whole, resumed):
        assert (a.final_loss, a.per_length, a.n_star) == (b.final_loss, b.per_length, b.n_star)
    for (name, x), (_, y) in zip(whole_model.state_dict().items(), resumed_model.state_dict().items()):
        assert torch.equal(x, y), name
    return whole_model
