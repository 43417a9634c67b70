"""The fused Triton kernel against the torch reference: forward, dq/dk/dv and cos/sin gradients.

Without CUDA the kernels run in the Triton interpreter (TRITON_INTERPRET=1, set by conftest.py
before formal_rope.kernels.triton_attention is first imported). Block sizes are fixed to 16 at
small T so that every case streams several key blocks and hits the masked/unmasked split.
"""

from __future__ import annotations

import itertools
import math

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from formal_rope.kernels.reference import rotary_attention_reference

pytest.importorskip("triton", reason="the fused kernel needs the triton package (pip install triton)")
from formal_rope.kernels.triton_attention import rotary_attention_triton  # noqa: E402

DEVICE = "cuda" if torch.cuda.is_available() else "cpu"
TOLERANCE = {torch.float32: 1e-5, torch.bfloat16: 2e-2, torch.float16: 2e-2}


def _inputs(batch, heads, length, dim, per_batch, dtype, seed=0, angle_scale=3.0):
    generator = torch.Generator().manual_seed(seed)

    def tensor(*shape, scale=1.0):
        return (torch.randn(*shape, generator=generator) * scale).to(DEVICE)

    q, k, v = (tensor(batch, heads, length, dim).to(dtype) for _ in range(3))
    table_shape = (batch, length, dim // 2) if per_batch else (length, dim // 2)
    angles = tensor(*table_shape, scale=angle_scale)
    return q, k, v, angles


def _relative_error(actual: torch.Tensor, expected: torch.Tensor) -> float:
    """max |a - e| / max |e|, or the plain max error when e is identically zero."""
    actual, expected = actual.double(), expected.double()
    error = (actual - expected).abs().max().item() if expected.numel() else 0.0
    peak = expected.abs().max().item() if expected.numel() else 0.0
    return error / peak if peak > 0 else error


def _run(fn, q, k, v, angles, grad_out, **kwargs):
    """Output and gradients w.r.t. (q, k, v, angles); cos/sin are functions of learnable angles."""
    leaves = [t.detach().clone().requires_grad_(True) for t in (q, k, v, angles)]
    out = fn(leaves[0], leaves[1], leaves[2], leaves[3].cos(), leaves[3].sin(), **kwargs)
    grads = torch.autograd.grad(out, leaves, grad_out)
    return (out.detach(), *grads)


def _check_against_reference(
    length, dim, rotate_values, per_batch, dtype, blocks, seed=0, scale=None, matmul=None, window=None
):
    # The interpreter's cost is per program: two (batch, head) slices, split so per-batch tables
    # really differ across the batch and shared tables are reused across heads.
    batch, heads = (2, 1) if per_batch else (1, 2)
    q, k, v, angles = _inputs(batch, heads, length, dim, per_batch, dtype, seed)
    grad_out = torch.randn(q.shape, generator=torch.Generator().manual_seed(seed + 1)).to(DEVICE, dtype)
    block_m, block_n = blocks if blocks else (None, None)
    fused = _run(
        rotary_attention_triton, q, k, v, angles, grad_out,
        rotate_values=rotate_values, scale=scale, block_m=block_m, block_n=block_n, matmul=matmul, window=window,
    )
    # Oracle: the reference in fp32 on the very same (already rounded) inputs, so the measured error
    # is the kernel's own (the bf16 reference would add its own rounding of the rotations).
    exact = _run(
        rotary_attention_reference, q.float(), k.float(), v.float(), angles, grad_out.float(),
        rotate_values=rotate_values, scale=scale, window=window,
    )
    assert fused[0].dtype == dtype and fused[0].shape == q.shape
    assert all(g.dtype == t.dtype for g, t in zip(fused[1:], (q, k, v, angles)))
    names = ("out", "dq", "dk", "dv", "dangles")
    errors = {name: _relative_error(a, e) for name, a, e in zip(names, fused, exact)}
    assert max(errors.values()) <= TOLERANCE[dtype], errors
    # Query 0 sees no key: exact zeros, whatever the dtype.
    assert torch.all(fused[0][:, :, 0] == 0)
    return errors


# Full cross-product at small lengths (fp32). Tiles of 16 (T=17) and 32 (T=64) give two query and
# two key blocks, so both the unmasked and the diagonal loop run, and the last tile is ragged at T=17.
SMALL = list(itertools.product((8, 16, 64), (1, 17, 64), (False, True), (False, True)))


@pytest.mark.parametrize(("dim", "length", "rotate_values", "per_batch"), SMALL)
def test_fp32_matches_reference_small(dim, length, rotate_values, per_batch):
    block = 32 if length > 32 else 16
    _check_against_reference(length, dim, rotate_values, per_batch, torch.float32, blocks=(block, block))


@pytest.mark.parametrize(
    ("dim", "rotate_values", "per_batch", "dtype", "blocks"),
    [
        (8, False, False, torch.float32, (64, 64)),
        (64, True, True, torch.float32, (32, 64)),
        (16, True, False, torch.bfloat16, (64, 32)),
        (8, False, True, torch.float16, None),  # default tiles: interpreter choice or GPU autotune
    ],
)
def test_long_sequence_matches_reference(dim, rotate_values, per_batch, dtype, blocks):
    _check_against_reference(300, dim, rotate_values, per_batch, dtype, blocks)


@pytest.mark.parametrize(
    ("dtype", "dim", "length", "rotate_values", "per_batch"),
    [
        (dtype, dim, length, rotate_values, per_batch)
        for dtype in (torch.bfloat16, torch.float16)
        for dim, length, rotate_values, per_batch in (
            (8, 17, False, False),
            (8, 64, True, True),
            (16, 17, True, False),
            (64, 64, False, True),
            (64, 17, True, True),
        )
    ],
)
def test_half_precision_matches_reference(dtype, dim, length, rotate_values, per_batch):
    block = 32 if length > 32 else 16
    _check_against_reference(length, dim, rotate_values, per_batch, dtype, blocks=(block, block))


@pytest.mark.parametrize(
    ("dim", "length", "blocks"),
    [
        (24, 33, (16, 32)),  # half dim 12 padded to 16
        (10, 47, (32, 16)),  # half dim 5 padded to 16, unequal tiles
        (128, 40, (16, 16)),  # largest contract head dim
        (32, 70, (64, 16)),  # a query tile spanning several key tiles
    ],
)
def test_padded_head_dims_and_unequal_tiles(dim, length, blocks):
    _check_against_reference(length, dim, True, True, torch.float32, blocks)


@pytest.mark.parametrize(
    ("dim", "length", "rotate_values", "per_batch", "dtype", "blocks"),
    [
        (8, 17, True, True, torch.float32, (16, 16)),
        (16, 40, False, False, torch.float32, (32, 16)),
        (8, 130, True, False, torch.float32, (64, 32)),
        (2, 20, False, True, torch.float32, (16, 16)),  # one pair: HALF_PAD = 1
        (8, 40, True, True, torch.bfloat16, (16, 32)),
        (4, 33, True, False, torch.float16, (16, 16)),
    ],
)
def test_small_head_fma_path_matches_reference(dim, length, rotate_values, per_batch, dtype, blocks):
    """The broadcast-and-sum path the GPU autotuner may pick for fp32 with d <= 16."""
    _check_against_reference(length, dim, rotate_values, per_batch, dtype, blocks, matmul="fma")


# Sliding windows (hybrid models' windowed layers): windows below, at and above a tile, ragged
# lengths and unequal tiles, so the lower-edge masked loop, the unmasked middle and the diagonal
# all run, and the backward's query-block range (dk/dv) and key-block start (dq) are exercised.
@pytest.mark.parametrize(
    ("dim", "length", "window", "rotate_values", "per_batch", "dtype", "blocks", "matmul"),
    [
        (16, 70, 1, False, False, torch.float32, (16, 16), None),
        (16, 70, 5, True, True, torch.float32, (16, 16), None),
        (8, 90, 16, False, True, torch.float32, (16, 32), None),
        (8, 90, 17, True, False, torch.float32, (32, 16), None),
        (32, 100, 32, True, True, torch.float32, (16, 16), None),
        (8, 65, 40, False, False, torch.float32, (32, 32), None),
        (8, 40, 60, True, False, torch.float32, (16, 16), None),  # window beyond T: global attention
        (16, 70, 20, True, True, torch.bfloat16, (16, 32), None),
        (8, 50, 7, True, True, torch.float32, (16, 16), "fma"),
    ],
)
def test_windowed_matches_reference(dim, length, window, rotate_values, per_batch, dtype, blocks, matmul):
    _check_against_reference(length, dim, rotate_values, per_batch, dtype, blocks, window=window, matmul=matmul)


def test_a_window_hides_exactly_the_keys_before_i_minus_w():
    """Changing key/value j changes outputs at j < i <= j + w only (checked on the kernel alone)."""
    q, k, v, angles = _inputs(1, 2, 60, 16, True, torch.float32, seed=6)
    window, j = 9, 23
    base = rotary_attention_triton(q, k, v, angles.cos(), angles.sin(), block_m=16, block_n=16, window=window)
    k2, v2 = k.clone(), v.clone()
    k2[:, :, j] += 5.0
    v2[:, :, j] -= 3.0
    changed = rotary_attention_triton(q, k2, v2, angles.cos(), angles.sin(), block_m=16, block_n=16, window=window)
    assert torch.equal(changed[:, :, : j + 1], base[:, :, : j + 1])
    assert torch.equal(changed[:, :, j + window + 1 :], base[:, :, j + window + 1 :])
    inside = slice(j + 1, j + window + 1)
    assert (changed[:, :, inside] - base[:, :, inside]).abs().amax(dim=(0, 1, 3)).min() > 0


def test_windowed_causal_attention_through_triton_equals_the_torch_path():
    """kernels.causal_attention(window=w): impl='triton' (the model's windowed layers) equals impl='torch'."""
    from formal_rope.kernels import causal_attention

    q, k, v, _ = _inputs(2, 2, 45, 8, False, torch.float32, seed=7)
    fused = causal_attention(q, k, v, impl="triton", window=6)
    plain = causal_attention(q.cpu(), k.cpu(), v.cpu(), impl="torch", window=6)
    assert _relative_error(fused.cpu(), plain) <= 1e-5


def test_autotune_candidates_follow_length_dtype_and_head_dim():
    """The GPU autotuner's search space (pure Python, so checked here without a GPU)."""
    from formal_rope.kernels.triton_attention import _autotune_candidates

    def tiles(bucket, half, precision):
        configs = _autotune_candidates([], {"T_BUCKET": bucket, "HALF": half}, PRECISION=precision, ROTATE_V=False)
        return {(c.kwargs["BLOCK_M"], c.kwargs["BLOCK_N"], c.kwargs["USE_DOT"], c.kwargs["HALF_PAD"]) for c in configs}

    training = tiles(64, 4, "ieee")  # T = 42, d = 8, fp32
    assert {(m, n) for m, n, *_ in training} == {(32, 32), (64, 32), (64, 64)}
    assert {pad for _, _, use_dot, pad in training if not use_dot} == {4}
    assert {pad for _, _, use_dot, pad in training if use_dot} == {16}
    evaluation_bf16 = tiles(512, 4, "tf32")  # T = 502, d = 8, bf16: tensor cores only, all tiles
    assert all(use_dot for _, _, use_dot, _ in evaluation_bf16) and (128, 128, True, 16) in evaluation_bf16
    evaluation_fp32 = tiles(512, 4, "ieee")  # exact fp32: no spilling 128-row tl.dot tiles
    assert max(m * n for m, n, use_dot, _ in evaluation_fp32 if use_dot) == 64 * 64
    assert tiles(512, 32, "ieee") == {(32, 32, True, 32), (64, 32, True, 32)}  # d = 64: tl.dot, small tiles
    assert tiles(512, 64, "ieee") == {(32, 32, True, 64)}  # d = 128: the smallest tile only
    assert tiles(16, 4, "tf32") == {(32, 32, True, 16)}  # nothing fits a 16-long bucket: smallest tile


def test_custom_scale_and_sharp_softmax():
    # A large scale makes the softmax nearly one-hot, stressing the running-max rescaling.
    _check_against_reference(50, 16, False, False, torch.float32, (16, 16), scale=4.0)


def test_strided_inputs_match_contiguous():
    """The model hands over q/k/v as permuted views of one qkv projection; strides must be honoured."""
    batch, heads, length, dim = 2, 2, 21, 16
    generator = torch.Generator().manual_seed(3)
    qkv = torch.randn(batch, length, 3, heads, dim, generator=generator).to(DEVICE)
    q, k, v = qkv.permute(2, 0, 3, 1, 4)
    assert not q.is_contiguous()
    angles = torch.randn(length, dim // 2, generator=generator).to(DEVICE)
    cos, sin = angles.cos(), angles.sin()
    packed = rotary_attention_triton(
        q.contiguous(), k.contiguous(), v.contiguous(), cos, sin, rotate_values=True, block_m=16, block_n=16
    )
    # Column-major tables, then mixed layouts (cos and sin strides differ).
    cos_t, sin_t = cos.t().contiguous().t(), sin.t().contiguous().t()
    for table_pair in ((cos_t, sin_t), (cos_t, sin), (cos, sin_t)):
        strided = rotary_attention_triton(q, k, v, *table_pair, rotate_values=True, block_m=16, block_n=16)
        # Bit-identical in the interpreter; a GPU compiles other variants for other strides (allow 1 ulp).
        assert (strided - packed).abs().max().item() <= 1e-6


def test_length_one_gives_zero_output_and_zero_gradients():
    q, k, v, angles = _inputs(2, 2, 1, 8, False, torch.float32)
    out, dq, dk, dv, dangles = _run(rotary_attention_triton, q, k, v, angles, torch.ones_like(q), rotate_values=True)
    for tensor in (out, dq, dk, dv, dangles):
        assert torch.all(tensor == 0)


def test_output_ignores_future_keys():
    """Changing key/value j only changes outputs at i > j (strict causality, checked on the kernel alone)."""
    q, k, v, angles = _inputs(1, 2, 40, 16, True, torch.float32, seed=5)
    base = rotary_attention_triton(q, k, v, angles.cos(), angles.sin(), block_m=16, block_n=16)
    k2, v2 = k.clone(), v.clone()
    k2[:, :, 23] += 5.0
    v2[:, :, 23] -= 3.0
    changed = rotary_attention_triton(q, k2, v2, angles.cos(), angles.sin(), block_m=16, block_n=16)
    assert torch.equal(changed[:, :, :24], base[:, :, :24])
    assert (changed[:, :, 24:] - base[:, :, 24:]).abs().amax(dim=(0, 1, 3)).min() > 0


@settings(max_examples=12, deadline=None)
@given(
    length=st.integers(2, 40),
    half=st.integers(1, 12),
    rotate_values=st.booleans(),
    offset=st.floats(-math.pi, math.pi),
    frequency=st.floats(0.01, 3.0),
)
def test_rope_is_invariant_to_a_global_phase(length, half, rotate_values, offset, frequency):
    """RoPE scores depend on angle differences only: adding one phase to every position changes nothing.

    An independent property of the fused kernel (no reference involved); JoFormer's value transport
    R_i^T R_j depends on differences too.
    """
    dim = 2 * half
    q, k, v, _ = _inputs(1, 1, length, dim, False, torch.float32, seed=length)
    positions = torch.arange(length, dtype=torch.float32, device=DEVICE)[:, None]
    angles = positions * frequency * torch.linspace(1.0, 0.1, half, device=DEVICE)[None, :]
    plain = rotary_attention_triton(
        q, k, v, angles.cos(), angles.sin(), rotate_values=rotate_values, block_m=16, block_n=16
    )
    shifted = angles + offset
    moved = rotary_attention_triton(
        q, k, v, shifted.cos(), shifted.sin(), rotate_values=rotate_values, block_m=16, block_n=16
    )
    assert _relative_error(moved, plain) < 1e-5


def test_rejects_bad_shapes_dtypes_and_blocks():
    q, k, v, angles = _inputs(1, 1, 8, 8, False, torch.float32)
    cos, sin = angles.cos(), angles.sin()
    with pytest.raises(ValueError, match="cos/sin"):
        rotary_attention_triton(q, k, v, cos[:4], sin[:4])
    with pytest.raises(ValueError, match="even"):
        rotary_attention_triton(q[..., :7], k[..., :7], v[..., :7], cos, sin)
    with pytest.raises(ValueError, match="dtype"):
        rotary_attention_triton(q.double(), k.double(), v.double(), cos, sin)
    with pytest.raises(ValueError, match="dtype"):
        rotary_attention_triton(q, k.half(), v, cos, sin)
    with pytest.raises(ValueError, match="power of two"):
        rotary_attention_triton(q, k, v, cos, sin, block_m=24)
    with pytest.raises(ValueError, match="power of two"):
        rotary_attention_triton(q, k, v, cos, sin, block_n=8)
    with pytest.raises(ValueError, match="matmul"):
        rotary_attention_triton(q, k, v, cos, sin, matmul="wgmma")
    for window in (0, -3, 2.5, True):
        with pytest.raises(ValueError, match="window"):
            rotary_attention_triton(q, k, v, cos, sin, window=window)
