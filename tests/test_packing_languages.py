"""Mixed-language packs (issue 37, item 3): runs on different languages and alphabets share one pack.

Each run reads its own token ids from the first rows of the pack's embedding table (the largest
vocabulary); its weights start as they do alone, its logits and gradients equal the run alone up to
rounding (the pack pools attention buckets across runs), rows it never reads stay zero with zero
gradient, the same composition twice is bit-identical, a checkpoint holds the run's own vocabulary,
and `group_packs` mixes languages only with `/languages`.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch

from formal_rope.evaluation.engine import SearchSettings
from formal_rope.run_config.config import RunConfig
from formal_rope.runs import run_pack
from formal_rope.scheduling.packs import check_packable, group_packs, pack_mixing, parse_pack
from formal_rope.training.init_from import load_init_weights
from formal_rope.training.model import encode_fixed_length
from formal_rope.training.resolve import pack_ingredients
from formal_rope.training.setup import build_pack
from formal_rope.training.train import pack_inputs, pack_step, training_batches
from formal_rope.training.trained_classifier import load_checkpoint

WIDTHS = (12, 22, 32, 42)


def _tiny(language: str, pe: str = "nope", seed: int = 0, **changes) -> RunConfig:
    settings = dict(
        language=language, pe=pe, layers=2, d_model=16, heads=2, steps=30, batch_size=16, lr=3e-3, seed=seed,
        test_min_length=1, test_max_length=12, n_per_length=8, nnch_samples=0,
        periods=(2,) if pe == "rope_p" else None,
    )
    settings.update(changes)
    return RunConfig(**settings)


# Two alphabets: {a, b} and {a, b, c} (vocabularies 5 and 6).
TWO_ALPHABETS = (_tiny("(ab)*", seed=3), _tiny("(abc)*", pe="rope_p", seed=4))


def _forward_backward(configs, batches):
    """The pack's model (fresh, seeded), every run's logits and parameter gradients on `batches`."""
    ingredients = pack_ingredients(configs)
    model = build_pack(configs, ingredients.symbol_counts, ingredients.periods)
    initial = {name: parameter.detach().clone() for name, parameter in model.named_parameters()}
    inputs = pack_inputs(batches, model.symbol_counts, WIDTHS)
    losses = pack_step(model, inputs).loss
    losses.sum().backward()
    logits = model.forward_layout(inputs.layout).detach()
    grads = {name: parameter.grad.clone() for name, parameter in model.named_parameters()}
    return model, initial, logits, grads


def _batches(configs):
    ingredients = pack_ingredients(configs)
    return training_batches(ingredients.data, [np.random.default_rng(7 + r) for r in range(len(configs))], 16)


def test_each_run_of_a_two_alphabet_pack_computes_what_it_computes_alone():
    configs = list(TWO_ALPHABETS)
    batches = _batches(configs)
    model, initial, logits, grads = _forward_backward(configs, batches)
    assert model.symbol_counts == (2, 3) and model.embedding.weight.shape[1] == 6
    for run, config in enumerate(configs):
        alone, alone_initial, alone_logits, alone_grads = _forward_backward([config], [batches[run]])
        rows = alone.embedding.weight.shape[1]
        assert rows == alone.n_symbols + 3
        for name, weight in alone_initial.items():  # the same draws as alone: equal bit for bit
            assert torch.equal(initial[name][run][tuple(slice(0, n) for n in weight.shape[1:])], weight[0]), name
        torch.testing.assert_close(logits[run], alone_logits[0], rtol=1e-5, atol=1e-6)
        for name, grad in alone_grads.items():
            mine = grads[name][run][tuple(slice(0, n) for n in grad.shape[1:])]
            torch.testing.assert_close(mine, grad[0], rtol=1e-4, atol=1e-6, msg=name)
        # Rows of the pack's table this run never reads: zero, with zero gradient.
        assert not initial["embedding.weight"][run, rows:].any()
        assert not grads["embedding.weight"][run, rows:].any()


def test_a_two_alphabet_pack_is_reproducible_and_keeps_unread_rows_zero():
    settings = SearchSettings(budget=8)
    first, model = run_pack(TWO_ALPHABETS, worst_case=settings)
    again, model_again = run_pack(TWO_ALPHABETS, worst_case=settings)
    for one, two in zip(first, again):
        assert one.status == "ok"
        assert (one.final_loss, one.per_length, one.n_star, one.n_star_worst, one.worst_strings_tried) == (
            two.final_loss, two.per_length, two.n_star, two.n_star_worst, two.worst_strings_tried)
    for (name, weight), other in zip(model.state_dict().items(), model_again.state_dict().values()):
        assert torch.equal(weight, other), name
    assert [r.alphabet for r in first] == [("a", "b"), ("a", "b", "c")]
    assert not model.embedding.weight[0, 5:].any()  # trained: the {a, b} run's unread row is still zero
    assert [r.pack_size for r in first] == [2, 2]


def test_a_checkpoint_from_a_mixed_pack_holds_the_run_alone(tmp_path):
    paths = [tmp_path / "ab.zip", tmp_path / "abc.zip"]
    results, model = run_pack(TWO_ALPHABETS, checkpoint_paths=paths)
    strings = ["", "ab", "abab", "ba", "aab", "ababab", "abba"]
    for run, (path, config) in enumerate(zip(paths, TWO_ALPHABETS)):
        loaded = load_checkpoint(path)
        own = len(loaded.alphabet)
        assert loaded.alphabet == results[run].alphabet and loaded.model.embedding.weight.shape[1] == own + 3
        assert loaded.model.symbol_counts == (own,)
        selected = model.select_runs([run]).eval()
        with torch.no_grad():
            tokens, readout = encode_fixed_length(np.array([[0, 1, 0, 1]]), own)
            assert torch.equal(loaded.model.eval()(tokens, readout), selected(tokens, readout))
        # ... and it classifies like the same run trained alone (equal up to rounding: same verdicts).
        (alone,), _ = run_pack([config], checkpoint_paths=[tmp_path / f"alone{run}.zip"])
        assert loaded.classify(strings) == load_checkpoint(tmp_path / f"alone{run}.zip").classify(strings)
        assert alone.n_star == results[run].n_star
        assert abs(alone.final_loss - results[run].final_loss) < 1e-4
    # A run of a mixed pack continues from a run's checkpoint: its own rows take the saved table.
    continued = [TWO_ALPHABETS[0].with_(init_from=str(paths[0])), TWO_ALPHABETS[1]]
    ingredients = pack_ingredients(continued)
    fresh = build_pack(continued, ingredients.symbol_counts, ingredients.periods)
    notes = load_init_weights(fresh, continued, ingredients.alphabets)
    assert notes == [[], []]
    saved = load_checkpoint(paths[0]).model.state_dict()
    assert torch.equal(fresh.embedding.weight[0, :5], saved["embedding.weight"][0])
    assert not fresh.embedding.weight[0, 5:].any()
    assert torch.equal(fresh.readout.weight[0], saved["readout.weight"][0])


def test_group_packs_mixes_languages_only_when_asked():
    grid = [_tiny(language, pe, seed=0) for language in ("(ab)*", "(abc)*", "(aa)*") for pe in ("nope", "rope_p")]
    apart = group_packs(grid, "auto", workers=1)
    assert sorted(len(p) for p in apart) == [2, 2, 2]
    assert all(len({c.language for c in p}) == 1 for p in apart)
    mixed = group_packs(grid, "auto/languages", workers=1)
    assert [len(p) for p in mixed] == [6] and mixed[0] == tuple(grid)
    by_pe = group_packs(grid, "auto/by-pe/languages", workers=1)
    assert sorted(len(p) for p in by_pe) == [3, 3] and all(len({c.pe for c in p}) == 1 for p in by_pe)
    assert [len(p) for p in group_packs(grid, "4/languages", workers=1)] == [3, 3]
    check_packable(grid)  # a pack may hold several languages
    assert parse_pack("auto/languages/by-pe") == "auto/by-pe/languages"
    assert pack_mixing("2/languages") == (2, True, True) and pack_mixing("auto") == ("auto", True, False)
    with pytest.raises(Exception, match="--pack"):
        parse_pack("auto/languages/languages")
