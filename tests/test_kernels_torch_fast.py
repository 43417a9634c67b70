"""The fused-SDPA torch path (impl="torch") against the readable reference oracle."""

from __future__ import annotations

import pytest
import torch

from formal_rope.kernels import rotary_attention
from formal_rope.kernels.reference import rotary_attention_reference
from formal_rope.kernels.torch_fast import rotary_attention_fast


@pytest.mark.parametrize("length", [1, 2, 17, 64, 300])
@pytest.mark.parametrize("rotate_values", [False, True])
@pytest.mark.parametrize("per_batch", [False, True])
def test_forward_and_gradients_match_reference(length, rotate_values, per_batch):
    generator = torch.Generator().manual_seed(length * 4 + rotate_values * 2 + per_batch)
    batch, heads, dim = 2, 3, 8 if length > 64 else 16
    q, k, v = (torch.randn(batch, heads, length, dim, generator=generator, requires_grad=True) for _ in range(3))
    angles = torch.randn(
        (batch, length, dim // 2) if per_batch else (length, dim // 2), generator=generator, requires_grad=True
    )
    grad_out = torch.randn(batch, heads, length, dim, generator=generator)
    results = []
    for implementation in (rotary_attention_reference, rotary_attention_fast):
        out = implementation(q, k, v, angles.cos(), angles.sin(), rotate_values=rotate_values)
        grads = torch.autograd.grad((out * grad_out).sum(), (q, k, v, angles))
        results.append((out, grads))
    (out_ref, grads_ref), (out_fast, grads_fast) = results
    torch.testing.assert_close(out_fast, out_ref, rtol=1e-5, atol=1e-5)
    for fast, ref in zip(grads_fast, grads_ref):
        torch.testing.assert_close(fast, ref, rtol=1e-4, atol=1e-5)
    assert torch.all(out_fast[..., 0, :] == 0)  # bos sees no key


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
def test_half_precision_inputs(dtype):
    generator = torch.Generator().manual_seed(7)
    q, k, v = (torch.randn(2, 2, 40, 16, generator=generator).to(dtype) for _ in range(3))
    angles = torch.randn(40, 8, generator=generator)
    ref = rotary_attention_reference(q, k, v, angles.cos(), angles.sin(), rotate_values=True)
    fast = rotary_attention_fast(q, k, v, angles.cos(), angles.sin(), rotate_values=True)
    assert fast.dtype == dtype
    assert ((fast.float() - ref.float()).abs().max() / ref.float().abs().max()) < 2e-2


def test_strict_mask_ignores_the_query_position_and_the_future():
    generator = torch.Generator().manual_seed(3)
    q, k, v = (torch.randn(1, 1, 6, 8, generator=generator) for _ in range(3))
    angles = torch.zeros(6, 4)
    base = rotary_attention(q, k, v, angles.cos(), angles.sin(), impl="torch")
    changed_v = v.clone()
    changed_v[..., 3:, :] += 100.0  # keys 3..5 must not affect queries 0..3
    out = rotary_attention(q, k, changed_v, angles.cos(), angles.sin(), impl="torch")
    torch.testing.assert_close(out[..., :4, :], base[..., :4, :])
    assert not torch.allclose(out[..., 4:, :], base[..., 4:, :])
