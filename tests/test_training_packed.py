"""`packed_layers.affine`: the per-run product plus bias as two ops on CPU is baddbmm's value bit for bit
(forward and gradients) at every inner dimension it is used for (those this CPU's GEMM sums in one
block: `packed_layers.separate_bias_is_exact`, probed on other shapes than these), and a pack trains to the
same weights either way."""

from __future__ import annotations

import pytest
import torch

import formal_rope.training.packed_layers as packed
from formal_rope.run_config.config import RunConfig
from formal_rope.training.resolve import pack_ingredients
from formal_rope.training.setup import build_pack
from formal_rope.training.train import train_pack


def _baddbmm(x, weight, bias):
    return torch.baddbmm(bias.unsqueeze(1), x, weight.transpose(1, 2))


@pytest.mark.parametrize("inner", [8, 16, 32, 64, 128, 192, 256, 320])
def test_affine_is_baddbmm_bit_for_bit(inner):
    generator = torch.Generator().manual_seed(inner)
    for runs, rows, out in ((1, 1, 2), (3, 37, 32), (2, 1000, 96), (4, 300, 256), (1, 2000, 192)):
        x = torch.randn(runs, rows, inner, generator=generator, requires_grad=True)
        weight = torch.randn(runs, out, inner, generator=generator, requires_grad=True)
        bias = torch.randn(runs, out, generator=generator, requires_grad=True)
        grad = torch.randn(runs, rows, out, generator=generator)
        fast = packed.affine(x, weight, bias)
        reference = _baddbmm(x, weight, bias)
        assert torch.equal(fast, reference), (runs, rows, inner, out, packed.separate_bias_is_exact(inner))
        for a, b in zip(torch.autograd.grad(fast, (x, weight, bias), grad),
                        torch.autograd.grad(reference, (x, weight, bias), grad)):
            assert torch.equal(a, b), (runs, rows, inner, out)


def test_a_pack_trains_to_the_same_weights_with_baddbmm(monkeypatch):
    configs = [
        RunConfig(language="(ab)*", pe=pe, seed=seed, layers=2, d_model=32, heads=4, steps=12, batch_size=24,
                  lr=3e-3, periods=(2,) if pe == "rope_p" else None)
        for seed, pe in enumerate(("nope", "rope_p", "rope"))
    ]

    def trained():
        ingredients = pack_ingredients(configs)
        model = build_pack(configs, len(ingredients.alphabet), ingredients.periods)
        outcomes = train_pack(model, configs, ingredients.data)
        return outcomes, model.state_dict()

    fast_outcomes, fast_weights = trained()
    monkeypatch.setattr(packed, "SEPARATE_BIAS_MAX_INNER", 0)  # every product through baddbmm
    reference_outcomes, reference_weights = trained()
    assert fast_outcomes == reference_outcomes
    assert all(torch.equal(fast_weights[name], reference_weights[name]) for name in reference_weights)


def test_the_separate_bias_is_refused_where_this_gemm_blocks_its_inner_sum(monkeypatch):
    # A GEMM whose bias lands before the last K block: the probe sees it and affine keeps baddbmm.
    real_bmm = torch.bmm

    def blocked_bmm(a, b):
        return real_bmm(a, b) * (1 + 2**-20)  # what a differently ordered inner sum looks like: other bits

    packed._separate_bias_is_exact.cache_clear()
    monkeypatch.setattr(torch, "bmm", blocked_bmm)
    try:
        assert not packed.separate_bias_is_exact(64)
        x, weight, bias = torch.randn(2, 5, 64), torch.randn(2, 3, 64), torch.randn(2, 3)
        assert torch.equal(packed.affine(x, weight, bias), _baddbmm(x, weight, bias))
    finally:
        packed._separate_bias_is_exact.cache_clear()
    assert not packed.separate_bias_is_exact(packed.SEPARATE_BIAS_MAX_INNER + 1)
