"""Rotary softmax attention with a strict causal mask: one entry point, several implementations."""

from formal_rope.kernels.reference import rotary_attention_reference, apply_rotary


def rotary_attention(q, k, v, cos, sin, *, rotate_values: bool = False, impl: str = "auto", scale: float | None = None):
    """Strict-causal softmax attention with interleaved rotary pairs fused in.

    q, k, v: (batch, heads, T, d); cos, sin: (T, d/2) or (batch, T, d/2), pair i = coords (2i, 2i+1).
    Query i attends to keys j < i; query 0 (bos) returns zeros. With rotate_values, values are
    rotated by R_j and the output by R_i^T (JoFormer transport). impl: auto | triton | torch.
    """
    if impl not in ("auto", "triton", "torch"):
        raise ValueError(f"unknown attention impl {impl!r}; expected auto, triton or torch")
    if impl == "torch" or (impl == "auto" and not q.is_cuda):
        return rotary_attention_reference(q, k, v, cos, sin, rotate_values=rotate_values, scale=scale)
    from formal_rope.kernels.triton_attention import rotary_attention_triton

    return rotary_attention_triton(q, k, v, cos, sin, rotate_values=rotate_values, scale=scale)


__all__ = ["rotary_attention", "rotary_attention_reference", "apply_rotary"]
