"""The classifier: token layout, strict causality, padding invariance, every PE runs forward/backward."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from formal_rope.run_config.config import RunConfig
from formal_rope.run_config.encodings import POSITIONAL_ENCODINGS, is_periodic
from formal_rope.training.layout import special_tokens
from formal_rope.training.model import encode_fixed_length, encode_padded
from formal_rope.training.setup import build_model


def _model(pe: str = "rope", **changes):
    config = RunConfig(language="(ab)*", pe=pe, layers=2, d_model=16, heads=2, periods=(2, 3), **changes)
    torch.manual_seed(0)
    return build_model(config, 2, config.periods if is_periodic(pe) else None).eval()


def test_token_layout_bos_symbols_eos_pad():
    bos, eos, pad = special_tokens(2)
    tokens, readout = encode_fixed_length(np.array([[0, 1, 1]]), 2)
    assert tokens.tolist() == [[bos, 0, 1, 1, eos]] and readout.tolist() == [4]
    symbols = np.array([[0, 1, 0], [1, -1, -1], [-1, -1, -1]])
    tokens, readout = encode_padded(symbols, np.array([3, 1, 0]), 2)
    assert tokens.tolist() == [[bos, 0, 1, 0, eos], [bos, 1, eos, pad, pad], [bos, eos, pad, pad, pad]]
    assert readout.tolist() == [4, 2, 1]


@pytest.mark.parametrize("pe", POSITIONAL_ENCODINGS)
def test_padding_never_changes_a_prediction(pe):
    """Each example alone == the same example inside a right-padded mixed-length batch."""
    model = _model(pe)
    rng = np.random.default_rng(0)
    lengths = np.array([0, 3, 17, 9, 17])
    symbols = rng.integers(0, 2, size=(len(lengths), int(lengths.max())))
    tokens, readout = encode_padded(symbols, lengths, 2)
    with torch.no_grad():
        batched = model(tokens, readout)
        for row, length in enumerate(lengths.tolist()):
            alone_tokens, alone_readout = encode_fixed_length(symbols[row : row + 1, :length], 2)
            alone = model(alone_tokens, alone_readout)
            assert torch.allclose(batched[row], alone[0], atol=1e-5), (pe, length)


@pytest.mark.parametrize("pe", ["rope", "jof_projected", "sipe"])
def test_strict_causality_later_tokens_do_not_change_earlier_readouts(pe):
    model = _model(pe)
    tokens, _ = encode_fixed_length(np.array([[0, 1, 1, 0, 1, 0]]), 2)
    changed = tokens.clone()
    changed[0, 5:] = torch.tensor([1, 1, 3])  # alter positions 5.. (after the readout at 4)
    readout = torch.tensor([4])
    with torch.no_grad():
        assert torch.equal(model(tokens, readout), model(changed, readout))
        # Changing a token at or before the readout does change it (strict mask, not a no-op model).
        earlier = tokens.clone()
        earlier[0, 2] = 0
        assert not torch.equal(model(tokens, readout), model(earlier, readout))


@pytest.mark.parametrize("pe", POSITIONAL_ENCODINGS)
def test_every_encoding_trains_a_step(pe):
    model = _model(pe).train()
    tokens, readout = encode_padded(np.array([[0, 1, 0, 1], [1, 1, -1, -1]]), np.array([4, 2]), 2)
    loss = torch.nn.functional.cross_entropy(model(tokens, readout), torch.tensor([1, 0]))
    loss.backward()
    assert torch.isfinite(loss)
    grads = [p.grad for p in model.parameters() if p.requires_grad]
    assert all(g is not None and torch.isfinite(g).all() for g in grads)
    if pe == "jof_learned":
        assert model.positional.frequencies.grad.abs().sum() > 0  # frequencies do learn
    if pe == "jof_projected":
        assert model.positional.projectors[0][-1].weight.grad.abs().sum() > 0


def test_rope_p_model_rotations_repeat_with_the_lcm_of_its_periods():
    """The realised tables inside a rope_p model (periods 2, 3) repeat bit-exactly every 6 positions."""
    model = _model("rope_p")
    cos, sin = model.positional.rotation(0, 1000, torch.zeros(1, 1, 1000, 16))
    cos, sin = cos[0], sin[0]  # the single run's (T, pairs) tables
    assert cos.shape == (1000, 4)
    assert torch.equal(cos[6:], cos[:-6]) and torch.equal(sin[6:], sin[:-6])
