"""The classifier transformer (SPEC §8), in one readable nanoGPT-style file — with a run axis.

Input `bos w1 .. wN eos` (SPEC §1), token ids: alphabet symbols 0..|Σ|-1, then bos, eos, pad.
Pre-LN blocks (strict-causal rotary attention + 4x GELU FFN), readout at each example's eos, two
logits (reject, accept). Batches of different lengths are right-padded after eos: the strict causal
mask means no position <= eos ever sees a pad, so padding cannot change the prediction.

One Classifier holds a pack of R independent runs that share the architecture (packed training,
`formal_rope.training.packed`): every weight has a leading run axis, tokens go in as (R, batch, T)
and logits come out as (R, batch, 2). A single run is a pack of one, which also accepts plain
(batch, T) tokens and returns (batch, 2). `select_runs` cuts runs out of a pack (a finished run's
own model, or a smaller pack when some runs stop early).
"""

from __future__ import annotations

import numpy as np
import torch
from torch import nn
from torch.nn import functional as F

from formal_rope.kernels import rotary_attention
from formal_rope.training.packed import PackedEmbedding, PackedLayerNorm, PackedLinear
from formal_rope.training.positional import PositionalEncoding, _select_module


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


def encode_padded(
    symbols: np.ndarray, lengths: np.ndarray, n_symbols: int, width: int | None = None
) -> tuple[torch.Tensor, torch.Tensor]:
    """(tokens (n, width), readout (n,)) for right-padded symbols (n, >=max_len) with lengths (n,).

    width defaults to max_len + 2 (bos and eos); a larger fixed width pads further (training uses
    the longest training length, so every step has the same shapes whatever lengths it drew).
    """
    bos, eos, pad = special_tokens(n_symbols)
    lengths = np.asarray(lengths, dtype=np.int64)
    n = len(lengths)
    needed = int(lengths.max()) + 2 if n else 2
    if width is None:
        width = needed
    elif width < needed:
        raise ValueError(f"width {width} cannot hold strings of length {needed - 2} with bos and eos")
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
    def __init__(self, runs: int, d_model: int, heads: int, ffn_mult: int) -> None:
        super().__init__()
        self.heads = heads
        self.attention_norm = PackedLayerNorm(runs, d_model)
        self.qkv = PackedLinear(runs, d_model, 3 * d_model)
        self.attention_out = PackedLinear(runs, d_model, d_model)
        self.ffn_norm = PackedLayerNorm(runs, d_model)
        self.ffn_in = PackedLinear(runs, d_model, ffn_mult * d_model)
        self.ffn_out = PackedLinear(runs, ffn_mult * d_model, d_model)

    def reset_run(self, run: int, generator: torch.Generator) -> None:
        for layer in (self.attention_norm, self.qkv, self.attention_out, self.ffn_norm, self.ffn_in, self.ffn_out):
            layer.reset_run(run, generator)

    def project_qkv(self, normed: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """q, k, v of shape (R, B, H, T, head_dim) from the normed stream (R, B, T, d_model)."""
        runs, batch, length, d_model = normed.shape
        head_dim = d_model // self.heads
        q, k, v = self.qkv(normed).view(runs, batch, length, 3, self.heads, head_dim).permute(3, 0, 1, 4, 2, 5)
        return q, k, v

    def attend(self, x: torch.Tensor, rotation, rotate_values: bool, impl: str) -> torch.Tensor:
        runs, batch, length, d_model = x.shape
        head_dim = d_model // self.heads
        q, k, v = self.project_qkv(x)
        if rotation is None:
            cos = torch.ones(runs, length, head_dim // 2, dtype=x.dtype, device=x.device)
            sin = torch.zeros_like(cos)
        else:
            cos, sin = rotation
        if cos.dim() == 5:
            # Per-head content angles (R, B, H, T, P): fold runs, batch and heads into the kernel's batch.
            fold = (runs * batch * self.heads, 1, length, head_dim)
            tables = (runs * batch * self.heads, length, head_dim // 2)
            out = rotary_attention(
                q.reshape(fold), k.reshape(fold), v.reshape(fold), cos.reshape(tables), sin.reshape(tables),
                rotate_values=rotate_values, impl=impl,
            )
        else:
            # Per-run tables (R, T, P): the kernel's batch axis is the run, its heads are batch x heads.
            fold = (runs, batch * self.heads, length, head_dim)
            out = rotary_attention(
                q.reshape(fold), k.reshape(fold), v.reshape(fold), cos, sin, rotate_values=rotate_values, impl=impl
            )
        out = out.view(runs, batch, self.heads, length, head_dim).transpose(2, 3)
        return out.reshape(runs, batch, length, d_model)

    def forward(
        self, x: torch.Tensor, positional: PositionalEncoding, layer: int, impl: str, rows: tuple | None = None
    ) -> torch.Tensor:
        """The block's output at every position, or only at the (run, batch, position) `rows` when given.

        The last block is only read at eos, and everything after attention is per-position, so the
        output projection and FFN run on the readout rows alone (same values, less work).
        """
        normed = self.attention_norm(x)
        rotation = positional.rotation(layer, x.shape[2], x)
        attended = self.attend(normed, rotation, positional.rotate_values, impl)
        if rows is not None:
            x, attended = x[rows], attended[rows]
        x = x + self.attention_out(attended)
        return x + self.ffn_out(F.gelu(self.ffn_in(self.ffn_norm(x))))


class Classifier(nn.Module):
    """Transformer string classifier with a pluggable positional encoding, for a pack of runs.

    The number of runs is the positional encoding's (`positional.runs`); every run starts from the
    initialisation `reset_run(run, generator)` draws for it (`initialize(seeds)` seeds them; at
    construction the seeds come from torch's global generator).
    """

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
        runs = positional.runs
        self.n_symbols = n_symbols
        self.runs = runs
        self.attention_impl = attention
        self.embedding = PackedEmbedding(runs, n_symbols + 3, d_model)
        self.positional = positional
        self.blocks = nn.ModuleList(Block(runs, d_model, heads, ffn_mult) for _ in range(layers))
        self.final_norm = PackedLayerNorm(runs, d_model)
        self.readout = PackedLinear(runs, d_model, 2)
        # Seeds from torch's global generator, so torch.manual_seed(s) before construction still
        # decides the weights; the trainer re-initialises each run from its config's seed.
        self.initialize(torch.randint(0, 2**62, (runs,)).tolist())

    def reset_run(self, run: int, generator: torch.Generator) -> None:
        """Initialise run `run` from `generator` with the draws (and order) of the equivalent unpacked
        torch modules: the positional encoding's, the embedding, each block, the readout."""
        self.positional.reset_run(run, generator)
        self.embedding.reset_run(run, generator)
        for block in self.blocks:
            block.reset_run(run, generator)
        self.final_norm.reset_run(run, generator)
        self.readout.reset_run(run, generator)

    def initialize(self, seeds) -> "Classifier":
        """Initialise run r from a generator seeded with seeds[r]: a run's weights depend on its seed only."""
        seeds = list(seeds)
        if len(seeds) != self.runs:
            raise ValueError(f"need one seed per run ({self.runs}), got {len(seeds)}")
        for run, seed in enumerate(seeds):
            generator = torch.Generator().manual_seed(int(seed))
            self.reset_run(run, generator)
        return self

    def forward(self, tokens: torch.Tensor, readout_index: torch.Tensor) -> torch.Tensor:
        """Logits (R, batch, 2) read at readout_index (R, batch) (each example's eos position).

        A pack of one also takes (batch, T) tokens with (batch,) readouts and returns (batch, 2).
        """
        single = tokens.dim() == 2
        if single:
            if self.runs != 1:
                raise ValueError(f"a pack of {self.runs} runs needs tokens shaped (runs, batch, T)")
            tokens, readout_index = tokens[None], readout_index[None]
        runs, batch, length = tokens.shape
        x = self.embedding(tokens)
        additive = self.positional.embedding(length, tokens.device)
        if additive is not None:
            x = x + additive[:, None].to(x.dtype)
        rows = (
            torch.arange(runs, device=tokens.device)[:, None],
            torch.arange(batch, device=tokens.device)[None, :],
            readout_index,
        )
        last = len(self.blocks) - 1
        for layer, block in enumerate(self.blocks):
            x = block(x, self.positional, layer, self.attention_impl, rows if layer == last else None)
        final = x if last >= 0 else x[rows]
        logits = self.readout(self.final_norm(final))
        return logits[0] if single else logits

    def select_runs(self, indices) -> "Classifier":
        """A new Classifier holding copies of runs `indices` of this pack (in that order)."""
        index = torch.tensor([int(i) for i in indices], dtype=torch.long)
        positional = self.positional.select(index.tolist())
        selected = Classifier.__new__(Classifier)
        nn.Module.__init__(selected)
        selected.n_symbols = self.n_symbols
        selected.runs = len(index)
        selected.attention_impl = self.attention_impl
        selected.embedding = _select_module(self.embedding, index)
        selected.positional = positional
        selected.blocks = _select_module(self.blocks, index)
        selected.final_norm = _select_module(self.final_norm, index)
        selected.readout = _select_module(self.readout, index)
        selected.train(self.training)
        return selected
