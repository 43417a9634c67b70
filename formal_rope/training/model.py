"""The classifier transformer (SPEC §8), in one readable nanoGPT-style file.

Input `bos w1 .. wN eos` (SPEC §1), token ids: alphabet symbols 0..|Σ|-1, then bos, eos, pad.
Pre-LN blocks (strict-causal rotary attention + 4x GELU FFN), readout at each example's eos, two
logits (reject, accept). Batches of different lengths are right-padded after eos: the strict causal
mask means no position <= eos ever sees a pad, so padding cannot change the prediction.
"""

from __future__ import annotations

import numpy as np
import torch
from torch import nn
from torch.nn import functional as F

from formal_rope.kernels import rotary_attention
from formal_rope.training.positional import PositionalEncoding


def special_tokens(n_symbols: int) -> tuple[int, int, int]:
    """(bos, eos, pad) ids for an alphabet of n_symbols."""
    return n_symbols, n_symbols + 1, n_symbols + 2


def encode_fixed_length(symbols: np.ndarray, n_symbols: int) -> tuple[torch.Tensor, torch.Tensor]:
    """(tokens (n, L+2), readout (n,)) for symbols (n, L) of equal length."""
    bos, eos, _ = special_tokens(n_symbols)
    symbols = np.asarray(symbols, dtype=np.int64)
    n, length = symbols.shape
    tokens = np.empty((n, length + 2), dtype=np.int64)
    tokens[:, 0] = bos
    tokens[:, 1 : length + 1] = symbols
    tokens[:, length + 1] = eos
    return torch.from_numpy(tokens), torch.full((n,), length + 1, dtype=torch.int64)


def encode_padded(symbols: np.ndarray, lengths: np.ndarray, n_symbols: int) -> tuple[torch.Tensor, torch.Tensor]:
    """(tokens (n, max_len+2), readout (n,)) for right-padded symbols (n, >=max_len) with lengths (n,)."""
    bos, eos, pad = special_tokens(n_symbols)
    lengths = np.asarray(lengths, dtype=np.int64)
    n = len(lengths)
    width = int(lengths.max()) + 2 if n else 2
    columns = np.arange(width - 1)[None, :]  # token column c+1 holds symbol c
    symbols = np.asarray(symbols, dtype=np.int64)
    body = np.full((n, width - 1), pad, dtype=np.int64)
    usable = min(symbols.shape[1], width - 1) if symbols.ndim == 2 else 0
    body[:, :usable] = symbols[:, :usable]
    body = np.where(columns < lengths[:, None], body, pad)
    body[np.arange(n), lengths] = eos
    tokens = np.concatenate((np.full((n, 1), bos, dtype=np.int64), body), axis=1)
    return torch.from_numpy(tokens), torch.from_numpy(lengths + 1)


class Block(nn.Module):
    def __init__(self, d_model: int, heads: int, ffn_mult: int) -> None:
        super().__init__()
        self.heads = heads
        self.attention_norm = nn.LayerNorm(d_model)
        self.qkv = nn.Linear(d_model, 3 * d_model)
        self.attention_out = nn.Linear(d_model, d_model)
        self.ffn_norm = nn.LayerNorm(d_model)
        self.ffn_in = nn.Linear(d_model, ffn_mult * d_model)
        self.ffn_out = nn.Linear(ffn_mult * d_model, d_model)

    def attend(self, x: torch.Tensor, rotation, rotate_values: bool, impl: str) -> torch.Tensor:
        batch, length, d_model = x.shape
        head_dim = d_model // self.heads
        q, k, v = self.qkv(x).view(batch, length, 3, self.heads, head_dim).permute(2, 0, 3, 1, 4)
        if rotation is None:
            cos = torch.ones(length, head_dim // 2, dtype=x.dtype, device=x.device)
            sin = torch.zeros_like(cos)
        else:
            cos, sin = rotation
        if cos.dim() == 4:
            # Per-head content angles (B, H, T, P): fold heads into the batch for the kernel.
            fold = (batch * self.heads, 1, length, head_dim)
            out = rotary_attention(
                q.reshape(fold), k.reshape(fold), v.reshape(fold),
                cos.reshape(batch * self.heads, length, -1), sin.reshape(batch * self.heads, length, -1),
                rotate_values=rotate_values, impl=impl,
            ).view(batch, self.heads, length, head_dim)
        else:
            out = rotary_attention(q, k, v, cos, sin, rotate_values=rotate_values, impl=impl)
        return out.transpose(1, 2).reshape(batch, length, d_model)

    def forward(
        self, x: torch.Tensor, positional: PositionalEncoding, layer: int, impl: str, rows: torch.Tensor | None = None
    ) -> torch.Tensor:
        """The block's output at every position, or only at (batch index, position) `rows` when given.

        The last block is only read at eos, and everything after attention is per-position, so the
        output projection and FFN run on the readout rows alone (same values, less work).
        """
        normed = self.attention_norm(x)
        rotation = positional.rotation(layer, x.shape[1], x)
        attended = self.attend(normed, rotation, positional.rotate_values, impl)
        if rows is not None:
            x, attended = x[rows], attended[rows]
        x = x + self.attention_out(attended)
        return x + self.ffn_out(F.gelu(self.ffn_in(self.ffn_norm(x))))


class Classifier(nn.Module):
    """Transformer string classifier with a pluggable positional encoding."""

    def __init__(
        self,
        n_symbols: int,
        positional: PositionalEncoding,
        *,
        d_model: int = 64,
        heads: int = 8,
        layers: int = 5,
        ffn_mult: int = 4,
        attention: str = "auto",
    ) -> None:
        super().__init__()
        self.n_symbols = n_symbols
        self.attention_impl = attention
        self.embedding = nn.Embedding(n_symbols + 3, d_model)
        self.positional = positional
        self.blocks = nn.ModuleList(Block(d_model, heads, ffn_mult) for _ in range(layers))
        self.final_norm = nn.LayerNorm(d_model)
        self.readout = nn.Linear(d_model, 2)

    def forward(self, tokens: torch.Tensor, readout_index: torch.Tensor) -> torch.Tensor:
        """Logits (batch, 2) read at readout_index (each example's eos position)."""
        length = tokens.shape[1]
        x = self.embedding(tokens)
        additive = self.positional.embedding(length, tokens.device)
        if additive is not None:
            x = x + additive.to(x.dtype)
        rows = (torch.arange(tokens.shape[0], device=tokens.device), readout_index)
        last = len(self.blocks) - 1
        for layer, block in enumerate(self.blocks):
            x = block(x, self.positional, layer, self.attention_impl, rows if layer == last else None)
        final = x if last >= 0 else x[rows]
        return self.readout(self.final_norm(final))
