"""Hybrid models (issue 21): per-layer positional encodings (RunConfig.layer_pe) and sliding-window
attention (RunConfig.window). A hybrid trains, packs (a pack of two equals each run alone),
checkpoints, resumes bit-identically and exports with `formalrope run`'s verdicts; a window of w
makes position i independent of the tokens before i - w; bad values exit 2 naming the field; the
new fields at their defaults change no run id."""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch

from formal_rope.errors import FormalRopeError
from formal_rope.run_config.config import RunConfig, check_config
from formal_rope.run_config.fields import parse_field_text
from formal_rope.runs import run_pack, run_training
from formal_rope.scheduling.packs import group_packs
from formal_rope.training.setup import build_model
from tests.cli_support import run_main
from tests.resume_support import resumed_equals_whole

HYBRID = dict(layer_pe=("rope", "nope"), window=(3, -1))


def _tiny(**changes) -> RunConfig:
    settings = dict(
        language="(ab)*", layers=2, d_model=16, heads=2, steps=30, batch_size=16, lr=3e-3,
        test_min_length=41, test_max_length=44, n_per_length=8, **HYBRID,
    )
    settings.update(changes)
    return RunConfig(**settings)


def test_the_new_fields_at_their_defaults_change_no_run_id():
    """Ids pinned elsewhere in the suite (test_spec_contract, test_training_run) stay what they were."""
    from formal_rope.training.scales import apply_scale

    assert RunConfig("(ab)*").run_id() == "45d988f98a189371"
    assert RunConfig("(ab)*", layer_pe=None, window=None).run_id() == "45d988f98a189371"
    assert apply_scale(RunConfig("(aa)*", pe="rope_p", seed=1), "quick").run_id() == "a7eac3da460c1197"
    # (ab)* rope_p seed 1 quick, computed at the commit before these fields (27f3f95).
    assert apply_scale(RunConfig("(ab)*", pe="rope_p", seed=1), "quick").run_id() == "b72ee6b9db587967"
    assert RunConfig("Σ*a", pe="nope", base=1.0, test_lengths=(41, 45, 50)).run_id() == "bbbab77d4cc87bcd"
    # One encoding in every layer is that --pe; one window in every layer is that int.
    assert RunConfig("(ab)*", layers=3, layer_pe=["nope"] * 3) == RunConfig("(ab)*", layers=3, pe="nope")
    assert RunConfig("(ab)*", layers=2, window=[-1, -1]) == RunConfig("(ab)*", layers=2)
    assert RunConfig("(ab)*", layers=2, window=[8, 8]).window == 8
    hybrid = _tiny()
    assert hybrid.pe == "rope" and hybrid.run_id() != _tiny(layer_pe=None, window=None).run_id()
    assert RunConfig.from_dict(json.loads(json.dumps(hybrid.to_dict()))) == hybrid
    assert hybrid.to_dict()["window"] == [3, -1] and hybrid.layer_windows() == (3, None)


def test_text_forms_of_layer_pe_and_window():
    assert parse_field_text("layer_pe", "rope,rope,nope") == ("rope", "rope", "nope")
    assert parse_field_text("layer_pe", "[rope*2,nope]") == ("rope", "rope", "nope")
    assert parse_field_text("window", "32") == 32
    assert parse_field_text("window", "32*5,global") == (32,) * 5 + (-1,)
    assert parse_field_text("window", "none") is None and parse_field_text("window", "global") is None


@pytest.mark.parametrize("changes, field", [
    (dict(window=0), "window"),
    (dict(window=-3), "window"),
    (dict(window=(3, 0)), "window"),
    (dict(window=(3, 3, 3)), "window"),
    (dict(layer_pe=("rope", "rope", "nope")), "layer_pe"),
    (dict(layer_pe=("rope", "nonsense")), "layer_pe"),
    (dict(layer_pe=("rope", "sipe")), "layer_pe"),
    (dict(layer_pe=("sipe_p", "nope")), "layer_pe"),
])
def test_bad_values_are_refused_naming_the_field(changes, field):
    with pytest.raises(FormalRopeError, match=field):
        check_config(_tiny(**changes))


def test_bad_values_exit_2_on_the_command_line(capsys):
    code, _, err = run_main(capsys, ["train", "--lang", "(ab)*", "--layers", "2", "--layer-pe", "rope,rope,nope",
                                     "--no-save", "--steps", "1"])
    assert code == 2 and "layer_pe" in err
    code, _, err = run_main(capsys, ["train", "--lang", "(ab)*", "--layers", "2", "--window", "0", "--no-save"])
    assert code == 2 and "window" in err


def test_rope_p_layers_take_the_resolved_periods():
    config = _tiny(layer_pe=("rope_p", "nope"), window=None, periods=(2,))
    check_config(config)
    assert config.applies("periods") and not config.applies("base")
    result, _ = run_training(config.with_(steps=3), progress=False)
    assert result.status == "ok" and result.resolved_periods == (2,)


def _hidden_after_blocks(model, tokens):
    """The residual stream after every block (1 run, T, d) for one string `tokens` (1, T)."""
    from formal_rope.training.layout import rectangular_layout

    layout = rectangular_layout(tokens[None], torch.tensor([[tokens.shape[1] - 1]]))
    x = model.embedding(layout.tokens)
    states = []
    for layer, block in enumerate(model.blocks):
        x = block(x, layout, model.positional, layer, "torch")
        states.append(x)
    return states


@pytest.mark.parametrize("layers", [1, 2])
def test_a_window_of_w_hides_the_tokens_before_i_minus_w(layers):
    """Query i attends to keys i - w <= j < i, so after L windowed layers position i depends on the
    tokens at i - L*w .. i only: perturbing the tokens before that leaves it (and the logits read
    there) bit-identical, while perturbing one inside changes it."""
    w = 3
    config = RunConfig("(ab)*", layers=layers, d_model=16, heads=2, pe="rope", window=w)
    torch.manual_seed(0)
    model = build_model(config, 2, None).eval()
    rng = np.random.default_rng(0)
    length = 20
    tokens = torch.tensor([[2, *rng.integers(0, 2, length).tolist(), 3]])
    i = length + 1  # the readout (eos)
    horizon = i - layers * w  # the first position that can reach i
    perturbed = tokens.clone()
    perturbed[0, 1:horizon] = 1 - perturbed[0, 1:horizon]
    with torch.no_grad():
        before, after = _hidden_after_blocks(model, tokens[0:1]), _hidden_after_blocks(model, perturbed[0:1])
        assert torch.equal(before[-1][0, i], after[-1][0, i])
        assert torch.equal(model(tokens, torch.tensor([i])), model(perturbed, torch.tensor([i])))
        inside = tokens.clone()
        inside[0, horizon] = 1 - inside[0, horizon]
        assert not torch.equal(before[-1][0, i], _hidden_after_blocks(model, inside[0:1])[-1][0, i])
    # Without the window the early tokens do reach the readout.
    glob = build_model(config.with_(window=None), 2, None).eval()
    with torch.no_grad():
        assert not torch.equal(glob(tokens, torch.tensor([i])), glob(perturbed, torch.tensor([i])))


def test_windowed_readout_equals_the_full_last_layer():
    """The readout-only last block (O(T)) applies the window as the full block does."""
    from formal_rope.training.layout import rectangular_layout

    model = build_model(_tiny(window=2, layer_pe=("rope", "jof_fixed")), 2, None).eval()
    rng = np.random.default_rng(1)
    tokens = torch.tensor([[2, *rng.integers(0, 2, 12).tolist(), 3] for _ in range(4)])
    layout = rectangular_layout(tokens[None], torch.full((1, 4), 13))
    with torch.no_grad():
        fast, full = model.forward_layout(layout), model.forward_layout(layout, readout_only=False)
    assert torch.allclose(fast, full, rtol=0, atol=1e-6)


def test_a_pack_of_two_hybrid_runs_equals_each_run_alone():
    configs = [_tiny(seed=0), _tiny(seed=1, lr=1e-3)]
    assert len(group_packs(configs, "auto", workers=1)) == 1
    # A hybrid and a plain run never share a pack (layer_pe and window are shared fields).
    assert len(group_packs([_tiny(), _tiny(layer_pe=None)], 2, workers=1)) == 2
    assert len(group_packs([_tiny(), _tiny(window=4)], 2, workers=1)) == 2
    packed, _ = run_pack(configs, progress=False)
    for result, config in zip(packed, configs):
        alone, _ = run_training(config, progress=False)
        assert result.pack_size == 2 and result.status == "ok"
        assert result.final_loss == pytest.approx(alone.final_loss, rel=1e-4)
        assert result.n_star == alone.n_star and result.per_length == alone.per_length


def test_a_killed_hybrid_resumes_bit_identically(tmp_path):
    configs = [_tiny(seed=0, steps=24), _tiny(seed=1, steps=24, lr=5e-3)]
    resumed_equals_whole(configs, tmp_path / "state", every=5, stop_step=13)


@pytest.fixture(scope="module")
def hybrid_checkpoint(tmp_path_factory):
    config = _tiny(layers=3, layer_pe=("rope_p", "jof_fixed", "nope"), window=(2, 4, -1), periods=(2, 3),
                   base=50.0, steps=25)
    path = tmp_path_factory.mktemp("hybrid") / "hybrid.zip"
    result, _ = run_training(config, progress=False, checkpoint_path=path)
    return config, result, path


def test_a_hybrid_checkpoint_loads_as_trained(hybrid_checkpoint):
    from formal_rope.training.trained_classifier import load_checkpoint

    config, result, path = hybrid_checkpoint
    loaded = load_checkpoint(path)
    assert loaded.config == config and loaded.model.windows == (2, 4, None)
    assert loaded.model.positional.names == ("rope_p", "jof_fixed", "nope")
    assert [loaded.model.positional.layer_rotates_values(layer) for layer in range(3)] == [False, True, False]
    assert loaded.result.n_star == result.n_star


def test_a_hybrid_exports_with_formalrope_run_verdicts(hybrid_checkpoint, tmp_path, capsys):
    from formal_rope.export import export_model, load_exported
    from tests.test_export import _checkpoint_logits, _random_words, _verdicts

    _, _, path = hybrid_checkpoint
    export_model(path, tmp_path / "out")
    exported = json.loads((tmp_path / "out" / "config.json").read_text())
    assert exported["positional"]["kind"] == "layered" and exported["windows"] == [2, 4, None]
    assert [layer["kind"] for layer in exported["positional"]["layers"]] == ["rotary_periodic", "rotary_fixed", "none"]
    net = load_exported(tmp_path / "out")
    words = ["".join(w) for w in _random_words(("a", "b"), 60, 30, seed=3)] + ["", "ab", "abab"]
    code, out, _ = run_main(capsys, ["run", str(path), *words, "--json"])
    assert code == 0 and net.classify(words) == _verdicts(out)
    assert torch.allclose(torch.tensor(net.logits(words)), _checkpoint_logits(path, words), rtol=0, atol=1e-5)


def test_train_flags_and_the_report_label(tmp_path, capsys):
    from formal_rope.sweeps.report import aggregate, cell_text
    from formal_rope.sweeps.results import read_results, write_run

    out = tmp_path / "h.zip"
    code, stdout, err = run_main(capsys, [
        "train", "--lang", "(ab)*", "--layers", "2", "--d-model", "16", "--heads", "2", "--steps", "3",
        "--batch-size", "8", "--layer-pe", "rope,nope", "--window", "4", "--test-lengths", "41..42",
        "--n-per-length", "4", "--out", str(out), "--json", "--quiet"])
    assert code == 0, err
    result = json.loads(stdout)
    assert result["config"]["layer_pe"] == ["rope", "nope"] and result["config"]["window"] == 4
    from formal_rope.training.run_result import RunResult

    run = RunResult.from_dict(result)
    write_run(tmp_path / "results", run.config, run)
    rows = aggregate(read_results(tmp_path / "results").runs)
    assert [cell_text("pe", row.pe) for row in rows] == ["RoPE_NP+NoPE(L2) w4"]


def test_pe_in_layer_pe_stands_for_each_runs_own_encoding(tmp_path, capsys):
    assert RunConfig("(ab)*", pe="jof_fixed", layers=3, layer_pe=("pe", "pe", "nope")).layer_pe == (
        "jof_fixed", "jof_fixed", "nope")
    assert RunConfig("(ab)*", pe="nope", layers=2, layer_pe=("pe", "nope")) == RunConfig("(ab)*", pe="nope", layers=2)
    code, out, err = run_main(capsys, ["sweep", "--lang", "(ab)*", "--pe", "rope,jof_fixed", "--layers", "2",
                                       "--layer-pe", "pe,nope", "--window", "8,global", "--dry-run"])
    assert code == 0, err
    assert "[RoPE_NP+NoPE(L2) w8(L1)]" in out and "[JoFormer (fixed)+NoPE(L2) w8(L1)]" in out


def test_trainable_layer_encodings_use_their_own_layer_index(tmp_path, capsys):
    """jof_projected / jof_learned layers in a hybrid: each layer reads the projector (frequencies)
    of its index among its encoding's layers, so changing the module's second projector changes
    layer 2 (the second jof_projected layer) and not layer 0; a checkpoint holds them and exports
    with `formalrope run`'s verdicts."""
    from formal_rope.training.trained_classifier import load_checkpoint

    config = _tiny(layers=3, layer_pe=("jof_projected", "nope", "jof_projected"), window=(3, -1, 3))
    check_config(config)
    torch.manual_seed(0)
    model = build_model(config, 2, None).eval()
    module = model.positional.encodings[0]
    assert len(module.projectors) == 2 and model.positional.local_layer(2) == 1
    tokens = torch.tensor([[2, 0, 1, 0, 1, 1, 0, 3]])
    with torch.no_grad():
        before = _hidden_after_blocks(model, tokens)
        module.projectors[1][3].weight.normal_()
        after = _hidden_after_blocks(model, tokens)
    assert torch.equal(before[0], after[0]) and torch.equal(before[1], after[1])
    assert not torch.equal(before[2], after[2])
    learned = _tiny(layers=2, layer_pe=("nope", "jof_learned"), window=(3, -1))
    assert build_model(learned, 2, None).positional.encodings[1].frequencies.shape[1] == 1  # one layer of its own
    path = tmp_path / "projected.zip"
    result, _ = run_training(config.with_(steps=5), progress=False, checkpoint_path=path)
    assert result.status == "ok"
    loaded = load_checkpoint(path)
    assert loaded.model.positional.names == config.layer_pe
    code, _, err = run_main(capsys, ["export", str(path), "--out", str(tmp_path / "out")])
    assert code == 0, err


@pytest.mark.parametrize("layer_pe", [("jof_projected", "nope", "jof_learned"), ("jof_learned", "rope", "jof_learned"),
                                      ("jof_projected", "jof_fixed", "jof_projected")])
def test_hybrids_with_trainable_layers_export_with_formalrope_run_verdicts(layer_pe, tmp_path, capsys):
    """Each jof_learned / jof_projected layer of a hybrid exports its own layer's frequencies and
    projector: with every projector's W2 and every learned frequency moved off its initial value
    (so a layer read with another layer's tensors would differ), the standalone model's logits
    equal the checkpoint's and its verdicts `formalrope run`'s."""
    from formal_rope.export import export_model, load_exported
    from formal_rope.storage.checkpoints import save_checkpoint
    from formal_rope.training.run_result import RunResult
    from tests.test_export import _checkpoint_logits, _random_words, _verdicts

    config = _tiny(layers=3, layer_pe=layer_pe, window=(3, -1, 5))
    check_config(config)
    torch.manual_seed(0)
    model = build_model(config, 2, None)
    generator = torch.Generator().manual_seed(1)
    with torch.no_grad():
        for module in model.positional.encodings:
            for projector in getattr(module, "projectors", ()):
                projector[3].weight.copy_(torch.randn(projector[3].weight.shape, generator=generator) * 0.3)
            if isinstance(getattr(module, "frequencies", None), torch.nn.Parameter):
                module.frequencies.mul_(1 + torch.rand(module.frequencies.shape, generator=generator,
                                                       dtype=module.frequencies.dtype))
    result = RunResult(run_id=config.run_id(), config=config, status="ok", n_star=0, accuracy=0.0,
                       alphabet=("a", "b"))
    path = save_checkpoint(tmp_path / "trainable.zip", model, config, result)
    export_model(path, tmp_path / "out")
    exported = json.loads((tmp_path / "out" / "config.json").read_text())
    assert [layer["pe"] for layer in exported["positional"]["layers"]] == list(layer_pe)
    net = load_exported(tmp_path / "out")
    words = ["".join(w) for w in _random_words(("a", "b"), 40, 24, seed=5)] + ["", "ab", "abab"]
    code, out, _ = run_main(capsys, ["run", str(path), *words, "--json"])
    assert code == 0 and net.classify(words) == _verdicts(out)
    assert torch.allclose(torch.tensor(net.logits(words)), _checkpoint_logits(path, words), rtol=0, atol=1e-5)


def test_windowed_layers_through_the_triton_kernel_equal_the_torch_path():
    """attention="triton" (the interpreter on CPU) runs windowed layers through the kernel's sliding
    window: the full forward (readout_only=False, every layer's attention) and its parameter
    gradients equal attention="torch"."""
    pytest.importorskip("triton")
    from formal_rope.training.layout import rectangular_layout

    config = _tiny(layer_pe=("jof_fixed", "nope"), window=(3, -1))
    torch.manual_seed(0)
    fused = build_model(config.with_(attention="triton"), 2, None)
    plain = build_model(config.with_(attention="torch"), 2, None)
    assert fused.attention_impl == "triton" and plain.attention_impl == "torch"
    rng = np.random.default_rng(2)
    tokens = torch.tensor([[2, *rng.integers(0, 2, 18).tolist(), 3] for _ in range(2)])
    layout = rectangular_layout(tokens[None], torch.full((1, 2), 19))
    outputs = [model.forward_layout(layout, readout_only=False) for model in (fused, plain)]
    assert torch.allclose(outputs[0], outputs[1], rtol=0, atol=1e-5)
    grads = [torch.autograd.grad(out.square().sum(), list(model.parameters()), allow_unused=True)
             for out, model in zip(outputs, (fused, plain))]
    for (name, _), a, b in zip(fused.named_parameters(), *grads):
        if a is not None:
            assert torch.allclose(a, b, rtol=1e-4, atol=1e-5), name
