"""Mixed packs (issue 20): runs of different fixed-table encodings (NoPE, SiPE, SiPE_P, RoPE, RoPE_P,
partial RoPE) share one pack. Each run computes exactly what it computes in a pack of its own
encoding fed the same strings (zeros added, 1 + 0i rotations: both exact), a mixed pack is
reproducible, its runs' checkpoints hold their own encoding's module, and `/by-pe` keeps the packs
cut as before mixing."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from formal_rope.errors import FormalRopeError
from formal_rope.run_config.config import RunConfig
from formal_rope.run_config.encodings import MIXABLE_ENCODINGS, is_periodic
from formal_rope.runs import run_pack
from formal_rope.scheduling.packs import check_packable, group_packs, parse_pack, split_pack
from formal_rope.training.encodings.composites import MixedPositional
from formal_rope.training.encodings.rotary import PeriodicRotary
from formal_rope.training.encodings.sinusoidal import SinusoidalEmbedding
from formal_rope.training.resolve import pack_ingredients
from formal_rope.training.setup import build_pack
from formal_rope.training.train import pack_inputs, pack_step, training_batches


def _tiny(pe: str, seed: int = 0, **changes) -> RunConfig:
    settings = dict(
        language="(ab)*", pe=pe, layers=2, d_model=16, heads=2, steps=30, batch_size=16, lr=3e-3, seed=seed,
        test_min_length=41, test_max_length=44, n_per_length=8, periods=(2,) if is_periodic(pe) else None,
        base=10.0 if pe in ("rope", "sipe", "partial_rope") else 1e4,
    )
    settings.update(changes)
    return RunConfig(**settings)


def _logits_and_gradients(configs, batch):
    """Every run's logits and parameter gradients on the same batch (so the layouts coincide)."""
    ingredients = pack_ingredients(configs)
    model = build_pack(configs, len(ingredients.alphabet), ingredients.periods)
    widths = (12, 22, 32, 42)
    losses = pack_step(model, pack_inputs([batch] * len(configs), model.n_symbols, widths)).loss
    losses.sum().backward()
    logits = model.forward_layout(pack_inputs([batch] * len(configs), model.n_symbols, widths).layout)
    grads = {name: parameter.grad.clone() for name, parameter in model.named_parameters()}
    return model, logits.detach(), grads


def test_each_run_of_a_mixed_pack_computes_what_its_own_encoding_computes():
    configs = [_tiny(pe, seed=index) for index, pe in enumerate(MIXABLE_ENCODINGS)]
    ingredients = pack_ingredients(configs[:1])
    batch = training_batches([ingredients.data[0]], [np.random.default_rng(3)], 16)[0]
    mixed, mixed_logits, mixed_grads = _logits_and_gradients(configs, batch)
    assert isinstance(mixed.positional, MixedPositional)
    for run, config in enumerate(configs):
        _, logits, grads = _logits_and_gradients([config], batch)
        assert torch.equal(mixed_logits[run], logits[0]), config.pe
        for name, grad in grads.items():
            assert torch.equal(mixed_grads[name][run], grad[0]), (config.pe, name)


def test_a_mixed_pack_is_reproducible_and_its_runs_keep_their_own_encoding(tmp_path):
    configs = [_tiny("nope"), _tiny("rope_p", seed=1), _tiny("sipe", seed=2)]
    paths = [tmp_path / f"{index}.zip" for index in range(3)]
    first, model = run_pack(configs, checkpoint_paths=paths)
    again, _ = run_pack(configs)
    for one, two in zip(first, again):
        assert (one.status, one.final_loss, one.per_length) == (two.status, two.final_loss, two.per_length)
    assert [r.pack_size for r in first] == [3, 3, 3] and len({r.pack_id for r in first}) == 1
    assert type(model.select_runs([1]).positional) is PeriodicRotary
    assert type(model.select_runs([2]).positional) is SinusoidalEmbedding
    assert isinstance(model.select_runs([0, 2]).positional, MixedPositional)
    assert model.positional.describe(1)["periods"] == [2]
    from formal_rope.training.trained_classifier import load_checkpoint

    for path, result in zip(paths, first):
        loaded = load_checkpoint(path)
        assert loaded.result.n_star == result.n_star and loaded.config.pe == result.config.pe


def test_only_mixable_encodings_mix_and_by_pe_keeps_them_apart():
    grid = [_tiny(pe, seed=s) for pe in ("nope", "rope", "rope_p", "sipe_p", "jof_fixed") for s in (0, 1)]
    mixed = group_packs(grid, "auto", workers=1)
    assert sorted(len(p) for p in mixed) == [2, 8]
    assert {c.pe for c in min(mixed, key=len)} == {"jof_fixed"}
    apart = group_packs(grid, "auto/by-pe", workers=1)
    assert sorted(len(p) for p in apart) == [2] * 5 and all(len({c.pe for c in p}) == 1 for p in apart)
    assert [len(p) for p in group_packs(grid, "4/by-pe", workers=1)] == [2] * 5
    with pytest.raises(FormalRopeError, match="share pe"):
        check_packable([grid[0], grid[-1]])
    check_packable(grid[:8])
    assert parse_pack("auto/by-pe") == "auto/by-pe" and parse_pack(" 3/by-pe") == "3/by-pe"
    assert split_pack("3/by-pe") == (3, False) and split_pack("auto") == ("auto", True)
    for bad in ("0/by-pe", "x/by-pe", "/by-pe", "auto/by-pe/by-pe"):
        with pytest.raises(FormalRopeError, match="--pack"):
            parse_pack(bad)
