"""JoFormer value transport (paper 000): journey operators, Thm 2.8, projected/learned variants at init."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from formal_rope.kernels import apply_rotary, rotary_attention
from formal_rope.run_config.config import RunConfig
from formal_rope.training.encodings.base import phase_tables
from formal_rope.training.encodings.phases import rope_frequencies, rotary_phases
from formal_rope.training.model import encode_fixed_length
from formal_rope.training.setup import build_model


def _tables(length: int, n_pairs: int = 3, base: float = 10.0):
    cos, sin = phase_tables(rotary_phases(rope_frequencies(base, n_pairs), np.arange(length), "fp64"))
    return cos.double(), sin.double()


def _rotate(vectors: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor, inverse: bool = False) -> torch.Tensor:
    """Rotate rows (T, d) by per-row tables (T, d/2)."""
    return apply_rotary(vectors[None, None], cos, sin, inverse=inverse)[0, 0]


def _transport_aggregate(values: torch.Tensor, weights_by_offset: dict[int, float], cos, sin) -> torch.Tensor:
    """c_n = sum_m alpha(m - n) A_n^{-1} A_m v_m with A_i = R^i from the tables (paper 000, eq. 8)."""
    length = values.shape[0]
    in_global = _rotate(values, cos, sin)  # A_m v_m
    out = torch.zeros_like(values)
    for n in range(length):
        total = torch.zeros(values.shape[1], dtype=values.dtype)
        for offset, alpha in weights_by_offset.items():
            m = n + offset
            if 0 <= m < length:
                total = total + alpha * in_global[m]
        out[n] = total
    return _rotate(out, cos, sin, inverse=True)  # A_n^{-1}


def test_journey_operator_depends_only_on_displacement():
    cos, sin = _tables(64)
    v = torch.randn(6, dtype=torch.float64)
    for i, j in [(10, 3), (40, 33), (63, 56), (7, 0)]:
        # P_{j->i} v = A_i^{-1} A_j v must equal R^{j-i} v = (R^{i-j})^{-1} v for every pair with i - j = 7.
        moved = _rotate(
            _rotate(v.expand(1, -1), cos[j : j + 1], sin[j : j + 1]), cos[i : i + 1], sin[i : i + 1], inverse=True
        )
        direct = _rotate(v.expand(1, -1), cos[7:8], sin[7:8], inverse=True)
        assert torch.allclose(moved, direct, atol=1e-6)


def test_value_transport_is_translation_equivariant_with_displacement_weights():
    """Thm 2.8(a): commuting (block-diagonal) generators + alpha(m - n) => F(T_u v)_{n+u} = F(v)_n."""
    generator = torch.Generator().manual_seed(0)
    length, shift = 48, 5
    cos, sin = _tables(length + shift)
    values = torch.randn(length, 6, generator=generator, dtype=torch.float64)
    weights = {-1: 0.5, -2: 0.3, -4: 0.2}  # causal, displacement-only
    shifted = torch.zeros(length + shift, 6, dtype=torch.float64)
    shifted[shift:] = values  # (T_u v)_m = v_{m-u}
    original = _transport_aggregate(values, weights, cos[:length], sin[:length])
    moved = _transport_aggregate(shifted, weights, cos, sin)
    assert torch.allclose(moved[shift:], original, atol=1e-6)
    # Without the inverse rotation A_n^{-1}, outputs carry absolute position and equivariance fails.
    absolute = _rotate(original, cos[:length], sin[:length])
    absolute_shifted = _rotate(moved, cos, sin)
    assert not torch.allclose(absolute_shifted[shift:], absolute, atol=1e-3)


def _plane_rotation(size: int, a: int, b: int, angle: float) -> np.ndarray:
    rotation = np.eye(size)
    rotation[a, a] = rotation[b, b] = np.cos(angle)
    rotation[a, b], rotation[b, a] = -np.sin(angle), np.sin(angle)
    return rotation


def _absolute(generators: list[np.ndarray], position: tuple[int, ...]) -> np.ndarray:
    """A_n = R_1^{n_1} ... R_D^{n_D} (canonical axis order)."""
    out = np.eye(generators[0].shape[0])
    for generator, power in zip(generators, position):
        out = out @ np.linalg.matrix_power(generator if power >= 0 else generator.T, abs(power))
    return out


def _journey(generators, target, source) -> np.ndarray:
    return _absolute(generators, target).T @ _absolute(generators, source)  # A_n^{-1} A_m (orthogonal)


def test_commuting_generators_give_path_independent_transport():
    """Two axes in a 4-d space, rotating disjoint planes (0,1) and (2,3): the flat regime."""
    generators = [_plane_rotation(4, 0, 1, 0.7), _plane_rotation(4, 2, 3, 1.9)]
    rng = np.random.default_rng(1)
    for _ in range(20):
        n, m, u = (tuple(rng.integers(-4, 5, size=2)) for _ in range(3))
        n_u = tuple(a + b for a, b in zip(n, u))
        m_u = tuple(a + b for a, b in zip(m, u))
        assert np.allclose(_journey(generators, n_u, m_u), _journey(generators, n, m), atol=1e-12)


def test_non_commuting_generators_give_path_dependent_transport():
    """Thm 2.8(b): rotations of planes (0,1) and (1,2) share an axis and do not commute."""
    r_a, r_b = _plane_rotation(4, 0, 1, np.pi / 4), _plane_rotation(4, 1, 2, np.pi / 3)
    assert not np.allclose(r_a @ r_b, r_b @ r_a)
    # The two paths "a then b" and "b then a" compose to different operators...
    assert not np.allclose(r_b @ r_a, r_a @ r_b)
    # ...and the journey for the same displacement depends on absolute position (paper's witness:
    # n = e_b, m = e_a + e_b, u = -e_b).
    generators = [r_a, r_b]
    before = _journey(generators, (0, 1), (1, 1))
    after = _journey(generators, (0, 0), (1, 0))
    assert np.allclose(after, r_a)
    assert np.allclose(before, r_b.T @ r_a @ r_b)
    assert not np.allclose(before, after)


def test_rotary_attention_value_transport_matches_the_journey_formula():
    """rotate_values=True computes c_i = sum_j alpha_ij P_{j->i} v_j with P_{j->i} = R^{j-i}."""
    generator = torch.Generator().manual_seed(3)
    length, dim = 12, 6
    cos, sin = _tables(length)
    q = torch.randn(1, 1, length, dim, generator=generator, dtype=torch.float64)
    k = torch.randn(1, 1, length, dim, generator=generator, dtype=torch.float64)
    v = torch.randn(1, 1, length, dim, generator=generator, dtype=torch.float64)
    out = rotary_attention(q, k, v, cos, sin, rotate_values=True, impl="torch")
    q_rot, k_rot = apply_rotary(q, cos, sin)[0, 0], apply_rotary(k, cos, sin)[0, 0]
    scores = q_rot @ k_rot.T / dim**0.5
    for i in range(1, length):
        alpha = torch.softmax(scores[i, :i], dim=0)
        expected = torch.zeros(dim, dtype=torch.float64)
        for j in range(i):
            # R^{j-i} v_j: rotate by A_j, then by A_i^{-1}.
            moved = _rotate(
                _rotate(v[0, 0, j : j + 1], cos[j : j + 1], sin[j : j + 1]), cos[i : i + 1], sin[i : i + 1],
                inverse=True,
            )
            expected += alpha[j] * moved[0]
        assert torch.allclose(out[0, 0, i], expected, atol=1e-6)
    assert torch.equal(out[0, 0, 0], torch.zeros(dim, dtype=torch.float64))


def _logits(model, symbols: np.ndarray) -> torch.Tensor:
    tokens, readout = encode_fixed_length(symbols, 2)
    with torch.no_grad():
        return model(tokens, readout)


@pytest.mark.parametrize("variant", ["jof_projected", "jof_learned"])
def test_jof_variants_equal_jof_fixed_at_initialisation(variant):
    config = RunConfig(language="(ab)*", pe=variant, layers=2, d_model=16, heads=2, base=100.0)
    torch.manual_seed(0)
    model = build_model(config, 2, None)
    fixed = build_model(config.with_(pe="jof_fixed"), 2, None)
    missing, unexpected = fixed.load_state_dict(model.state_dict(), strict=False)
    assert not missing  # every jof_fixed weight comes from the variant
    symbols = np.random.default_rng(0).integers(0, 2, size=(4, 30))
    assert torch.allclose(_logits(model, symbols), _logits(fixed, symbols), atol=1e-5)
    # The check has teeth: changing the variant's extra parameters changes the output.
    with torch.no_grad():
        if variant == "jof_projected":
            for projector in model.positional.projectors:
                projector[-1].weight.normal_(0, 1.0)
        else:
            model.positional.frequencies.mul_(1.7)
    assert not torch.allclose(_logits(model, symbols), _logits(fixed, symbols), atol=1e-3)


def test_projected_angles_are_per_batch_and_head():
    config = RunConfig(language="(ab)*", pe="jof_projected", layers=1, d_model=16, heads=2)
    model = build_model(config, 2, None)
    with torch.no_grad():
        model.positional.projectors[0][-1].weight.normal_(0, 1.0)
    hidden = torch.randn(1, 3, 10, 16)  # (runs, batch, T, d_model)
    cos, sin = model.positional.rotation(0, 10, hidden)
    assert cos.shape == (1, 3, 2, 10, 4)  # (runs, batch, heads, T, pairs)
    assert torch.allclose(cos**2 + sin**2, torch.ones_like(cos), atol=1e-6)
    assert not torch.allclose(cos[0, 0], cos[0, 1])


def test_jof_learned_learns_per_layer_per_head_frequencies():
    """Paper 000 §3.2: d_model/2 frequencies per layer, each head its own head_dim/2 vector, all RoPE's at init."""
    config = RunConfig(language="(ab)*", pe="jof_learned", layers=2, d_model=64, heads=8, base=100.0)
    model = build_model(config, 2, None)
    frequencies = model.positional.frequencies
    assert frequencies.shape == (1, 2, 8, 4) and frequencies.dtype == torch.float64
    assert frequencies[0].numel() == 2 * 32  # layers x d_model/2 per run
    assert torch.equal(frequencies[0], torch.from_numpy(rope_frequencies(100.0, 4)).expand(2, 8, 4))
    # One gradient step moves the heads apart: each head's q/k see different gradients.
    tokens, readout = encode_fixed_length(np.random.default_rng(0).integers(0, 2, size=(8, 12)), 2)
    loss = torch.nn.functional.cross_entropy(model(tokens, readout), torch.tensor([0, 1] * 4))
    loss.backward()
    with torch.no_grad():
        frequencies -= 1e-2 * frequencies.grad
    per_head = frequencies[0, 0]
    assert not all(torch.equal(per_head[0], per_head[h]) for h in range(1, 8))
    # The model uses each head's own vector: (R, 1, heads, T, pairs) tables.
    cos, sin = model.positional.rotation(0, 10, torch.zeros(1, 1, 10, 64))
    assert cos.shape == (1, 1, 8, 10, 4)
    assert not torch.equal(cos[0, 0, 0], cos[0, 0, 1]) or not torch.equal(sin[0, 0, 0], sin[0, 0, 1])


def test_old_shared_jof_learned_checkpoint_is_a_clear_error(tmp_path, capsys):
    """A checkpoint from when jof_learned shared one vector per layer by every head: exit 2 naming the shape."""
    import io
    import zipfile

    from formal_rope.errors import FormalRopeError
    from formal_rope.runs import run_training
    from formal_rope.storage.checkpoints import STATE_NAME
    from formal_rope.training.trained_classifier import load_checkpoint
    from tests.cli_support import run_main

    torch.set_num_threads(1)
    config = RunConfig(language="(ab)*", pe="jof_learned", steps=1, batch_size=4, layers=2, d_model=16, heads=2,
                       test_min_length=5, test_max_length=6, n_per_length=2)
    path = tmp_path / "new.zip"
    run_training(config, progress=False, checkpoint_path=path)
    old = tmp_path / "old.zip"
    with zipfile.ZipFile(path) as source, zipfile.ZipFile(old, "w") as target:
        for item in source.infolist():
            data = source.read(item)
            if item.filename.endswith(STATE_NAME):
                state = torch.load(io.BytesIO(data), weights_only=True)
                state["positional.frequencies"] = state["positional.frequencies"][:, :, 0]  # (runs, layers, pairs)
                buffer = io.BytesIO()
                torch.save(state, buffer)
                data = buffer.getvalue()
            target.writestr(item, data)
    load_checkpoint(path)  # the new shape loads
    with pytest.raises(FormalRopeError, match=r"\(1, 2, 4\).*shared by every head.*\(1, 2, 2, 4\)"):
        load_checkpoint(old)
    code, _, err = run_main(capsys, ["run", str(old), "ab"])
    assert code == 2 and "(1, 2, 4)" in err and "Traceback" not in err
