"""The pack's optimizer (one flat buffer per dtype, per-run hyper-parameters) against torch's own
AdamW and clip_grad_norm_ applied to each run separately, plus freezing and its saved state."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from formal_rope.run_config.config import RunConfig
from formal_rope.training.model import encode_fixed_length
from formal_rope.training.optim import PackedAdamW, decays
from formal_rope.training.setup import build_pack, make_optimizer

LRS = (3e-3, 1e-3, 5e-2)
DECAYS = (0.0, 0.1, 0.01)
CLIPS = (1.0, 0.0, 0.05)  # 0: no clipping


def _pack(pe: str = "jof_learned"):  # jof_learned: float64 frequencies, a second dtype group
    configs = [RunConfig("(ab)*", pe=pe, layers=2, d_model=16, heads=2, seed=s, lr=lr, weight_decay=wd, grad_clip=c)
               for s, lr, wd, c in zip((0, 1, 2), LRS, DECAYS, CLIPS)]
    return configs, build_pack(configs, 2, [None] * 3)


def _loss(model, seed: int, runs=(0, 1, 2)) -> torch.Tensor:
    """Summed cross-entropy of each run on the same strings, with labels drawn per run (`runs`:
    which of the pack's runs `model` holds, so a single-run copy gets its run's labels)."""
    rng = np.random.default_rng(seed)
    tokens, readout = encode_fixed_length(rng.integers(0, 2, size=(6, 9)), 2)
    labels = torch.from_numpy(rng.integers(0, 2, size=(3, 6)))[list(runs)]
    logits = model(tokens[None].expand(model.runs, -1, -1), readout[None].expand(model.runs, -1))
    return torch.nn.functional.cross_entropy(logits.reshape(-1, 2), labels.reshape(-1), reduction="sum")


@pytest.mark.filterwarnings("ignore:grad and param do not obey")
def test_three_steps_equal_torch_adamw_and_clipping_run_by_run():
    configs, pack = _pack()
    alone = [pack.select_runs([run]) for run in range(3)]  # copies, before the optimizer moves weights
    optimizer = make_optimizer(pack, configs)
    references = []
    for run, model in enumerate(alone):
        named = [(n, p) for n, p in model.named_parameters() if p.requires_grad]
        groups = [
            {"params": [p for n, p in named if decays(n, p)], "weight_decay": DECAYS[run]},
            {"params": [p for n, p in named if not decays(n, p)], "weight_decay": 0.0},
        ]
        references.append(torch.optim.AdamW(groups, lr=LRS[run], betas=(0.9, 0.999), eps=1e-8))
    for step in range(3):
        optimizer.zero_grad()
        _loss(pack, step).backward()
        unclipped = [p.grad.clone() for p in pack.parameters()]
        norms = optimizer.clip(torch.tensor(CLIPS, dtype=torch.float64))
        optimizer.step(torch.tensor(LRS, dtype=torch.float64), torch.ones(3, dtype=torch.bool))
        for run, (model, reference) in enumerate(zip(alone, references)):
            # The same gradients (before clipping) as the pack's run: only the optimizers differ.
            for grad, single in zip(unclipped, model.parameters()):
                single.grad = grad[run : run + 1].clone()
            params = [p for p in model.parameters() if p.requires_grad]
            norm = torch.nn.utils.clip_grad_norm_(params, CLIPS[run]) if CLIPS[run] > 0 else None
            if norm is not None:
                assert float(norm) == pytest.approx(float(norms[run]), rel=1e-6)
            reference.step()
    for run, model in enumerate(alone):
        for (name, packed), (_, single) in zip(pack.named_parameters(), model.named_parameters()):
            torch.testing.assert_close(
                packed[run], single[0], rtol=1e-6, atol=1e-7, msg=lambda m: f"run {run} {name}: {m}"
            )


@pytest.mark.filterwarnings("ignore:grad and param do not obey")
def test_a_frozen_run_keeps_its_weights_and_moments_and_the_state_round_trips():
    configs, pack = _pack("rope")
    optimizer = make_optimizer(pack, configs)
    lrs = torch.tensor(LRS, dtype=torch.float64)
    optimizer.zero_grad()
    _loss(pack, 0).backward()
    optimizer.step(lrs, torch.ones(3, dtype=torch.bool))
    before = {name: p.detach().clone() for name, p in pack.named_parameters()}
    moments = optimizer.state_dict()
    optimizer.zero_grad()
    _loss(pack, 1).backward()
    optimizer.step(lrs, torch.tensor([True, False, True]))
    after = optimizer.state_dict()
    for name, parameter in pack.named_parameters():
        assert torch.equal(parameter[1], before[name][1]), name  # frozen
        assert not torch.equal(parameter[0], before[name][0]) or parameter.grad[0].abs().sum() == 0, name
    assert after["steps"].tolist() == [2, 1, 2]
    for saved, now in zip(moments["exp_avg"], after["exp_avg"]):
        assert torch.equal(saved[1], now[1])
    # The saved state lists one tensor per parameter in the model's order, and loads back exactly.
    shapes = [tuple(p.shape) for p in pack.parameters() if p.requires_grad]
    assert [tuple(t.shape) for t in after["exp_avg"]] == shapes
    _, other = _pack("rope")
    restored = PackedAdamW(other.named_parameters(), DECAYS)
    restored.load_state_dict(after)
    assert all(torch.equal(a, b) for a, b in zip(restored.state_dict()["exp_avg_sq"], after["exp_avg_sq"]))


def test_parameters_live_in_the_flat_buffer_and_a_replaced_gradient_is_caught():
    configs, pack = _pack("rope")
    optimizer = make_optimizer(pack, configs)
    (group,) = optimizer.groups
    weight = pack.blocks[0].qkv.weight
    assert weight.data_ptr() == group.values[:, group.widths[0] :].data_ptr() or any(
        weight.data_ptr() == view.data_ptr() for view in group.views(group.values)
    )
    with torch.no_grad():
        weight[1, 0, 0] = 123.0
    assert 123.0 in group.values[1]
    weight.grad = torch.zeros_like(weight)  # a new tensor: the optimizer would no longer see it
    with pytest.raises(RuntimeError, match="replaced"):
        optimizer.zero_grad()
