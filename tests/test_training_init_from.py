"""Continuing from another run's checkpoint with changed settings (RunConfig.init_from, issue 21):
a continued run starts from the source's weights (its evaluation equals the source's final one
when it cannot move), a shape mismatch exits 2 naming the parameter, jof_fixed -> jof_projected
(plain and hybrid, paper 000 E.6's staged recipe) continues with a zero projector, and the field is
id-neutral at None and recorded in Parquet."""

from __future__ import annotations

import pytest
import torch

from formal_rope.run_config.config import RunConfig
from formal_rope.runs import run_training
from formal_rope.training.init_from import InitFromError, init_checkpoint_path, is_run_id, load_init_weights
from formal_rope.training.setup import build_pack
from tests.cli_support import run_main


def _tiny(**changes) -> RunConfig:
    settings = dict(language="(ab)*", layers=2, d_model=16, heads=2, steps=40, batch_size=16, lr=3e-3,
                    test_min_length=41, test_max_length=44, n_per_length=8)
    settings.update(changes)
    return RunConfig(**settings)


@pytest.fixture(scope="module")
def source(tmp_path_factory):
    config = _tiny()
    folder = tmp_path_factory.mktemp("source")
    path = folder / f"{config.run_id()}.zip"
    result, _ = run_training(config, progress=False, checkpoint_path=path)
    assert result.status == "ok"
    return config, result, path


def test_the_field_is_id_neutral_and_recorded_in_parquet(source, tmp_path):
    from formal_rope.sweeps.results import read_results, write_run

    assert RunConfig("(ab)*", init_from=None).run_id() == "45d988f98a189371"  # pinned in test_hybrids too
    config, result, path = source
    continued = config.with_(init_from=str(path))
    assert continued.run_id() != config.run_id()
    assert RunConfig.from_dict(continued.to_dict()) == continued
    write_run(tmp_path, continued, result)
    assert read_results(tmp_path).runs["init_from"].tolist() == [str(path)]


def test_a_continued_run_starts_from_the_source_weights(source):
    config, result, path = source
    # The weights right after initialisation are the checkpoint's, whatever the run's seed.
    continued = config.with_(init_from=str(path), seed=7)
    model = build_pack([continued], 2, [None])
    notes = load_init_weights(model, [continued], ("a", "b"))
    from formal_rope.training.trained_classifier import load_checkpoint

    for name, tensor in load_checkpoint(path).model.state_dict().items():
        assert torch.equal(model.state_dict()[name], tensor), name
    assert notes == [[]]
    # A continued run that cannot move (lr 1e-30) evaluates exactly as the source's final evaluation,
    # and its first training loss is the trained model's, far below a fresh run's.
    losses, fresh = [], []
    frozen, _ = run_training(continued.with_(lr=1e-30, steps=2), progress=False)
    assert frozen.status == "ok"
    assert frozen.per_length == result.per_length and frozen.n_star == result.n_star

    from formal_rope.runs import run_pack

    run_pack([continued.with_(steps=1)], on_step=lambda step, values: losses.append(values[0]))
    run_pack([continued.with_(steps=1, init_from=None)], on_step=lambda step, values: fresh.append(values[0]))
    assert losses[0] < fresh[0]


def test_a_run_id_is_found_in_the_checkpoint_folder(source):
    config, _, path = source
    assert is_run_id(config.run_id()) and not is_run_id(str(path))
    assert init_checkpoint_path(config.run_id(), path.parent) == path
    with pytest.raises(InitFromError, match="does not exist"):
        init_checkpoint_path("0123456789abcdef", path.parent)
    with pytest.raises(InitFromError, match="run id"):
        init_checkpoint_path(config.run_id(), None)


def test_a_shape_mismatch_exits_2_naming_the_parameter(source, capsys):
    _, _, path = source
    code, _, err = run_main(capsys, [
        "train", "--lang", "(ab)*", "--layers", "2", "--d-model", "32", "--heads", "2", "--steps", "2",
        "--batch-size", "8", "--test-lengths", "41..42", "--n-per-length", "4", "--no-save",
        "--init-from", str(path)])
    assert code == 2 and "embedding.weight" in err and "(5, 16)" in err and "(5, 32)" in err
    code, _, err = run_main(capsys, ["train", "--lang", "(ab)*", "--steps", "2", "--no-save",
                                     "--init-from", str(path.parent / "missing.zip")])
    assert code == 2 and "missing.zip" in err and "does not exist" in err
    # Another alphabet of the same size would load the embedding under other symbols: refused.
    with pytest.raises(InitFromError, match="alphabet"):
        load_init_weights(build_pack([_tiny(language="(cd)*")], 2, [None]), [_tiny(init_from=str(path))], ("c", "d"))


@pytest.mark.parametrize("hybrid", [{}, dict(layer_pe=("pe", "nope"), window=(3, -1))], ids=["plain", "hybrid"])
def test_jof_fixed_continues_as_jof_projected_with_a_zero_projector(tmp_path, hybrid):
    """E.6's staged recipe: the projected model starts as the fixed one computes (W2 = 0, every other
    tensor the source's), then trains its projector."""
    from formal_rope.training.trained_classifier import load_checkpoint

    fixed = _tiny(pe="jof_fixed", steps=20, **hybrid)
    path = tmp_path / "fixed.zip"
    run_training(fixed, progress=False, checkpoint_path=path)
    projected = fixed.with_(pe="jof_projected", init_from=str(path),
                            **({"layer_pe": ("jof_projected", "nope")} if hybrid else {}))
    model = build_pack([projected], 2, [None])
    (notes,) = load_init_weights(model, [projected], ("a", "b"))
    assert len(notes) == 1 and "kept their own initialisation" in notes[0] and "projectors" in notes[0]
    positional = model.positional.encodings[0] if hybrid else model.positional
    assert len(positional.projectors) == (1 if hybrid else 2)
    for projector in positional.projectors:
        assert torch.all(projector[3].weight == 0) and torch.all(projector[3].bias == 0)
    source = load_checkpoint(path).model
    for name, tensor in source.state_dict().items():
        assert torch.equal(model.state_dict()[name], tensor), name
    tokens = torch.tensor([[2, 0, 1, 0, 1, 3], [2, 0, 0, 1, 1, 3]])
    with torch.no_grad():
        assert torch.allclose(model.eval()(tokens, torch.tensor([5, 5])), source.eval()(tokens, torch.tensor([5, 5])),
                              rtol=0, atol=1e-6)
    result, trained = run_training(projected.with_(steps=10), progress=False)
    assert result.status == "ok" and any("init_from" in warning for warning in result.warnings)
    trained_positional = trained.positional.encodings[0] if hybrid else trained.positional
    assert any(p[3].weight.abs().max() > 0 for p in trained_positional.projectors)  # the projector trains
