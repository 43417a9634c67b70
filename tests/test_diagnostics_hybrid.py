"""Phase capture (`formalrope phases`) of hybrid models: each layer is read with its own encoding
(issue 21), and a windowed layer's keys outside its window are not among the keys it attends to."""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch
import typer
from typer.testing import CliRunner

from formal_rope.commands.phases import phases_command
from formal_rope.diagnostics.capture import capture_trained
from formal_rope.diagnostics.phases import decompose_head
from formal_rope.run_config.config import RunConfig
from formal_rope.storage.checkpoints import save_checkpoint
from formal_rope.training.run_result import RunResult
from formal_rope.training.setup import build_model

ALPHABET = ("a", "b")


def _hybrid(layer_pe, window=None, **settings):
    torch.manual_seed(0)
    config = RunConfig(language="(ab)*", pe="rope", layers=len(layer_pe), d_model=16, heads=2, base=10.0,
                       layer_pe=tuple(layer_pe), window=window, periods=(2,), attention="torch", **settings)
    return config, build_model(config, len(ALPHABET), config.periods)


def _tokens(length: int) -> tuple[torch.Tensor, str]:
    """bos w1 … wN eos for a random string, with the trainer's own special tokens."""
    from formal_rope.training.layout import special_tokens

    string = "".join(np.random.default_rng(3).choice(list(ALPHABET), length))
    bos, eos, _ = special_tokens(len(ALPHABET))
    return torch.tensor([bos, *(ALPHABET.index(s) for s in string), eos]), string


@pytest.mark.parametrize("layer_pe, window", [
    (("rope", "nope", "rope_p"), (4, -1, -1)),
    (("jof_learned", "nope", "jof_learned"), None),  # per-layer frequencies at each module's own layer index
])
def test_every_layer_of_a_hybrid_is_captured_with_its_own_encoding(layer_pe, window):
    config, model = _hybrid(layer_pe, window)
    tokens, string = _tokens(12)
    captured = capture_trained(model, tokens, heads=[(layer, head) for layer in range(3) for head in range(2)],
                               string=string)
    windows = config.layer_windows()
    for inputs in captured.heads:
        encoding = config.layer_encodings()[inputs.layer]
        # The guard against drift: the layer's output recomputed from the captured q, k, v and tables
        # (with this layer's value transport and window) is the model's own.
        assert inputs.recompute_error is not None and inputs.recompute_error < 1e-5, (inputs.label, encoding)
        assert inputs.window == windows[inputs.layer]
        if encoding == "nope":
            assert not inputs.rotated.any() and set(inputs.pair_kinds) == {"unrotated"}
        elif encoding == "rope_p":
            assert all(kind.startswith("periodic T_2") for kind in inputs.pair_kinds)
        elif encoding == "rope":
            assert inputs.rotated.all() and all(kind.startswith("rope θ=") for kind in inputs.pair_kinds)
        else:
            assert all(kind.startswith("learned θ=") for kind in inputs.pair_kinds)
    if layer_pe[0] == "jof_learned":  # layers 1 and 3 are the module's layers 0 and 1: their own frequencies
        first, third = captured.heads[0], captured.heads[4]
        frequencies = model.positional.layer_module(0).frequencies[0].detach().double().numpy()
        assert np.allclose(first.frequencies, frequencies[0, 0]) and np.allclose(third.frequencies, frequencies[1, 0])


def test_a_windowed_layers_visible_keys_are_its_window():
    config, model = _hybrid(("rope", "nope"), (4, -1))
    tokens, string = _tokens(12)
    captured = capture_trained(model, tokens, heads=[(0, 0), (1, 0)], string=string)
    windowed, global_ = (decompose_head(inputs) for inputs in captured.heads)
    queries, keys = np.arange(14)[:, None], np.arange(14)[None, :]
    assert np.array_equal(windowed.visible, (keys < queries) & (keys >= queries - 4))
    assert np.array_equal(global_.visible, keys < queries)
    assert list(captured.heads[0].visible_keys(10)) == [6, 7, 8, 9]


def test_phases_reads_a_hybrid_checkpoint_and_lists_only_the_windows_keys(tmp_path):
    config, model = _hybrid(("rope", "nope"), (4, -1))
    result = RunResult(run_id=config.run_id(), config=config, status="ok", n_star=0, accuracy=0.0, alphabet=ALPHABET)
    path = save_checkpoint(tmp_path / "hybrid.zip", model, config, result)
    application = typer.Typer()
    application.command("phases")(phases_command)
    application.command("noop", hidden=True)(lambda: None)
    out = CliRunner().invoke(application, ["phases", str(path), "abababab", "--layer", "1", "--head", "1", "--json"])
    assert out.exit_code == 0, out.output
    (head,) = json.loads(out.output)["heads"]
    assert head["query"]["position"] == 9  # the readout
    assert [key["key"] for key in sorted(head["query"]["keys"], key=lambda key: key["key"])] == [5, 6, 7, 8]


def test_phases_counts_a_windowed_layers_keys_and_pairs_as_it_attends(tmp_path):
    # Regression (issue 35.10): the table of a windowed layer said "top 5 of 31 keys" and "all 496
    # (i, j)" where 16 keys are visible; --json's keys_total said 31 too.
    config, model = _hybrid(("rope", "nope"), (4, -1))
    result = RunResult(run_id=config.run_id(), config=config, status="ok", n_star=0, accuracy=0.0, alphabet=ALPHABET)
    path = save_checkpoint(tmp_path / "hybrid.zip", model, config, result)
    application = typer.Typer()
    application.command("phases")(phases_command)
    application.command("noop", hidden=True)(lambda: None)
    tokens, string = _tokens(8)
    captured = capture_trained(model, tokens, heads=[(0, 0), (1, 0)], string=string)
    visible = [int(decompose_head(inputs).visible.sum()) for inputs in captured.heads]
    assert visible == [0 + 1 + 2 + 3 + 4 * 6, 10 * 9 // 2]  # 10 positions; window 4, then global
    out = CliRunner().invoke(application, ["phases", str(path), string, "--head", "1", "--json"])
    assert out.exit_code == 0, out.output
    heads = json.loads(out.output)["heads"]
    assert [(h["window"], h["visible_entries"], h["query"]["keys_total"]) for h in heads] == [
        (4, visible[0], 4), (None, visible[1], 9)]
    out = CliRunner().invoke(application, ["phases", str(path), string, "--head", "1", "--top", "2"])
    text = " ".join(out.output.split())
    assert out.exit_code == 0 and "top 2 of 4 keys inside its window of 4" in text and "top 2 of 9 keys" in text
    assert f"all {visible[0]} (i, j) with i − 4 ≤ j < i (window 4)" in text
    assert f"all {visible[1]} (i, j) with j < i" in text and "of 45 (i, j)" in text and "496" not in text
