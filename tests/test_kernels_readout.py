"""The one-query-per-sequence attention the classifier's last layer uses equals the readout row of
the full strict-causal rotary attention (the readable reference), for every table layout."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from formal_rope.kernels import rotary_attention_reference, rotary_readout_attention
from formal_rope.run_config.config import RunConfig
from formal_rope.run_config.encodings import POSITIONAL_ENCODINGS, is_periodic
from formal_rope.training.layout import rectangular_layout
from formal_rope.training.model import encode_padded
from formal_rope.training.setup import build_model


@pytest.mark.parametrize("layout", ["common", "per_sequence", "per_head"])
@pytest.mark.parametrize("rotate_values", [False, True])
def test_readout_row_equals_the_reference_row(layout, rotate_values):
    generator = torch.Generator().manual_seed(0)
    count, heads, length, dim = 5, 3, 13, 8
    q, k, v = (torch.randn(count, heads, length, dim, generator=generator, dtype=torch.float64) for _ in range(3))
    angles = {
        "common": torch.rand(length, dim // 2, generator=generator, dtype=torch.float64) * 6,
        "per_sequence": torch.rand(count, length, dim // 2, generator=generator, dtype=torch.float64) * 6,
        "per_head": torch.rand(count, heads, length, dim // 2, generator=generator, dtype=torch.float64) * 6,
    }[layout]
    cos, sin = torch.cos(angles), torch.sin(angles)
    positions = torch.tensor([1, 12, 5, 7, 3])
    if layout == "per_head":  # the reference takes (batch, T, P) tables: fold heads into the batch
        fold = lambda t: t.reshape(count * heads, 1, length, dim)  # noqa: E731
        full = rotary_attention_reference(
            fold(q), fold(k), fold(v), cos.reshape(count * heads, length, -1), sin.reshape(count * heads, length, -1),
            rotate_values=rotate_values,
        ).reshape(count, heads, length, dim)
    else:
        full = rotary_attention_reference(q, k, v, cos, sin, rotate_values=rotate_values)
    readout = rotary_readout_attention(
        q[torch.arange(count), :, positions], k, v, cos, sin, positions, rotate_values=rotate_values
    )
    expected = full[torch.arange(count), :, positions]
    assert torch.allclose(readout, expected, atol=1e-5)  # the reference forms scores in float32
    # Keys after the query are ignored: changing them changes nothing.
    k2 = k.clone()
    k2[:, :, 2:] = 99.0
    again = rotary_readout_attention(
        q[torch.arange(count), :, positions], k2, v, cos, sin, positions, rotate_values=rotate_values
    )
    assert torch.equal(again[0], readout[0]) and not torch.equal(again[2], readout[2])


@pytest.mark.parametrize("pe", POSITIONAL_ENCODINGS)
def test_the_models_readout_path_equals_full_attention_read_at_eos(pe):
    config = RunConfig("(ab)*", pe=pe, layers=2, d_model=16, heads=2, periods=(2, 3), base=10.0)
    model = build_model(config, 2, (2, 3) if is_periodic(pe) else None).eval()
    if pe == "jof_projected":  # content angles that actually vary
        with torch.no_grad():
            for projector in model.positional.projectors:
                projector[-1].weight.normal_()
    lengths = np.array([0, 3, 17, 9, 40])
    symbols = np.random.default_rng(0).integers(0, 2, size=(5, 40))
    tokens, readout = encode_padded(symbols, lengths, 2)
    with torch.no_grad():
        fast = model(tokens, readout)
        # Every block at every position (full attention in the last one too), then read at eos.
        slow = model.forward_layout(rectangular_layout(tokens[None], readout[None]), readout_only=False)[0]
    assert torch.allclose(fast, slow, atol=1e-5)
