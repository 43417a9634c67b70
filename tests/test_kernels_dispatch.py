"""`rotary_attention` dispatch (auto / triton / torch), its errors, and the reference's own contract."""

from __future__ import annotations

import math
import os
import subprocess
import sys

import pytest
import torch

from formal_rope.errors import FormalRopeError
from formal_rope.kernels import (
    AttentionImplError,
    apply_rotary,
    resolve_impl,
    rotary_attention,
    rotary_attention_reference,
)

DEVICE = "cuda" if torch.cuda.is_available() else "cpu"


def _inputs(batch=1, heads=2, length=9, dim=8, seed=0):
    generator = torch.Generator().manual_seed(seed)
    q, k, v = (torch.randn(batch, heads, length, dim, generator=generator).to(DEVICE) for _ in range(3))
    angles = torch.randn(length, dim // 2, generator=generator).to(DEVICE)
    return q, k, v, angles.cos(), angles.sin()


def test_resolve_impl_table():
    assert resolve_impl("torch", on_cuda=False) == "torch"
    assert resolve_impl("torch", on_cuda=True) == "torch"
    assert resolve_impl("auto", on_cuda=False) == "torch"
    assert resolve_impl("auto", on_cuda=True) == "triton"
    assert resolve_impl("triton", on_cuda=True) == "triton"
    # conftest.py sets TRITON_INTERPRET=1 on CPU-only machines, so 'triton' on CPU is allowed here.
    assert resolve_impl("triton", on_cuda=False) == "triton"


def test_unknown_impl_is_a_user_error():
    q, k, v, cos, sin = _inputs()
    with pytest.raises(AttentionImplError, match="unknown attention impl 'flash'"):
        rotary_attention(q, k, v, cos, sin, impl="flash")
    # The CLI renders FormalRopeError as a one-paragraph message; callers may also catch ValueError.
    assert issubclass(AttentionImplError, FormalRopeError) and issubclass(AttentionImplError, ValueError)


@pytest.mark.skipif(DEVICE == "cuda", reason="the CPU default path is what is under test")
def test_auto_on_cpu_is_the_torch_path():
    from formal_rope.kernels import rotary_attention_fast

    q, k, v, cos, sin = _inputs()
    auto = rotary_attention(q, k, v, cos, sin, rotate_values=True)
    assert torch.equal(auto, rotary_attention_fast(q, k, v, cos, sin, rotate_values=True))
    torch.testing.assert_close(
        auto, rotary_attention_reference(q, k, v, cos, sin, rotate_values=True), rtol=1e-5, atol=1e-5
    )


def test_triton_and_torch_agree_through_the_public_entry_point():
    q, k, v, cos, sin = _inputs(length=20)
    fused = rotary_attention(q, k, v, cos, sin, impl="triton", scale=0.7)
    plain = rotary_attention(q, k, v, cos, sin, impl="torch", scale=0.7)
    assert (fused - plain).abs().max().item() < 1e-5 * plain.abs().max().item()


@pytest.mark.skipif(DEVICE == "cuda", reason="a CUDA machine runs real Triton, not the interpreter")
def test_triton_on_cpu_without_interpreter_is_a_clear_error():
    """Without TRITON_INTERPRET the kernels compile for a GPU; CPU tensors must get a clear message."""
    program = (
        "import torch\n"
        "from formal_rope.kernels import AttentionImplError, rotary_attention\n"
        "x = torch.zeros(1, 1, 3, 8); c = torch.ones(3, 4); s = torch.zeros(3, 4)\n"
        "try:\n"
        "    rotary_attention(x, x, x, c, s, impl='triton')\n"
        "except AttentionImplError as error:\n"
        "    print('ERROR', error)\n"
    )
    env = {key: value for key, value in os.environ.items() if key != "TRITON_INTERPRET"}
    result = subprocess.run([sys.executable, "-c", program], env=env, capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    assert "ERROR" in result.stdout and "TRITON_INTERPRET=1" in result.stdout and "impl='torch'" in result.stdout


@pytest.mark.parametrize("impl", ["torch", "triton"])
def test_bos_row_is_zero_and_rows_are_convex_combinations(impl):
    """Query 0 outputs zeros; without value rotation every other row is a convex mix of v_0..v_{i-1}."""
    q, k, _, cos, sin = _inputs(length=12, dim=16)
    v = torch.zeros_like(q)
    v[..., 0] = torch.arange(12, dtype=v.dtype, device=v.device)  # coordinate 0 of v_j is j
    out = rotary_attention(q, k, v, cos, sin, impl=impl)
    assert torch.all(out[:, :, 0] == 0)
    positions = torch.arange(12, device=v.device, dtype=v.dtype)
    # Row i averages positions 0..i-1: its value lies in [0, i-1], and row 1 is exactly v_0.
    assert torch.all(out[:, :, 1:, 0] <= positions[1:] - 1 + 1e-5)
    assert torch.all(out[:, :, 1:, 0] >= -1e-5)
    assert torch.allclose(out[:, :, 1], v[:, :, 0])


def test_reference_matches_a_naive_per_query_loop():
    """Cross-check the oracle itself against the definition, one query at a time, with value rotation."""
    q, k, v, cos, sin = _inputs(batch=2, heads=1, length=7, dim=6, seed=4)
    per_batch_cos, per_batch_sin = torch.stack((cos, cos.flip(0))), torch.stack((sin, sin.flip(0)))
    out = rotary_attention_reference(q, k, v, per_batch_cos, per_batch_sin, rotate_values=True)

    def rotate(x, c, s, inverse=False):
        s = -s if inverse else s
        pairs = x.view(-1, 2)
        return torch.stack((pairs[:, 0] * c - pairs[:, 1] * s, pairs[:, 0] * s + pairs[:, 1] * c), -1).flatten()

    scale = 1 / math.sqrt(6)
    for b in range(2):
        c, s = per_batch_cos[b], per_batch_sin[b]
        assert torch.all(out[b, 0, 0] == 0)
        for i in range(1, 7):
            qi = rotate(q[b, 0, i], c[i], s[i])
            scores = torch.stack([qi @ rotate(k[b, 0, j], c[j], s[j]) * scale for j in range(i)])
            weights = torch.softmax(scores, 0)
            mixed = sum(weights[j] * rotate(v[b, 0, j], c[j], s[j]) for j in range(i))
            expected = rotate(mixed, c[i], s[i], inverse=True)
            assert torch.allclose(out[b, 0, i], expected, atol=1e-6)


def test_apply_rotary_inverse_round_trip_and_norm():
    x = torch.randn(2, 3, 5, 8)
    angles = torch.randn(2, 5, 4)
    rotated = apply_rotary(x, angles.cos(), angles.sin())
    assert torch.allclose(rotated.norm(dim=-1), x.norm(dim=-1), atol=1e-6)
    assert torch.allclose(apply_rotary(rotated, angles.cos(), angles.sin(), inverse=True), x, atol=1e-6)
