"""The classifier transformer (SPEC §8), in one readable nanoGPT-style file — with a run axis.

Input `bos w1 .. wN eos` (SPEC §1), token ids: alphabet symbols 0..|Σ|-1, then bos, eos, pad (per
run: runs of a pack may read alphabets of different sizes, `symbol_counts`).
Pre-LN blocks (strict-causal rotary attention + 4x GELU FFN), readout at each example's eos, two
logits (reject, accept). Batches of different lengths are right-padded after eos: the strict causal
mask means no position <= eos ever sees a pad, so padding cannot change the prediction.

One Classifier holds a pack of R independent runs that share the architecture (packed training,
`formal_rope.training.packed_layers`): every weight has a leading run axis, tokens go in as (R, batch, T)
and logits come out as (R, batch, 2). A single run is a pack of one, which also accepts plain
(batch, T) tokens and returns (batch, 2). A training step's strings of mixed lengths go in as a
`TokenLayout` (`forward_layout`): per-run work on each run's strings back to back, attention per
length bucket over the sequences of every run (`formal_rope.training.layout`). `select_runs` cuts
runs out of a pack (a finished run's own model, or a smaller pack when some runs stop early).
"""

from __future__ import annotations

import numpy as np
import torch
from torch import nn
from torch.nn import functional as F

from formal_rope.kernels import causal_attention, readout_attention, rotate_by
from formal_rope.run_config.objective import head_width
from formal_rope.training.encodings.base import PositionalEncoding
from formal_rope.training.layout import TokenLayout, rectangular_layout, special_tokens
from formal_rope.training.packed_layers import PackedEmbedding, PackedLayerNorm, PackedLinear, affine, select_runs_of


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


LOW_PRECISION = (torch.float16, torch.bfloat16)


def _turns(rotation: torch.Tensor | None, dtype: torch.dtype) -> torch.Tensor | None:
    """A layer's per-token rotations (N, P) or (N, H, P) as (N, 1 or H, P), for a model computing in
    `dtype`: in fp16/bf16 the table entries are rounded to that format first and the products run
    in float32 (what the attention kernels do with tables: `kernels.rotary_attention`)."""
    if rotation is None:
        return None
    turn = rotation[:, None, :] if rotation.dim() == 2 else rotation
    if dtype in LOW_PRECISION:
        turn = torch.complex(turn.real.to(dtype).float(), turn.imag.to(dtype).float())
    return turn


class Block(nn.Module):
    def __init__(self, runs: int, d_model: int, heads: int, ffn_mult: int, window: int | None = None) -> None:
        super().__init__()
        self.heads = heads
        # Sliding window (hybrids): query i attends to keys i - window <= j < i; None: every j < i.
        self.window = window
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
        """q, k, v of shape (R, B, H, T, head_dim) from a normed stream (R, B, T, d_model) of
        equal-length strings (what `formal_rope.diagnostics` reads)."""
        runs, batch, length, d_model = normed.shape
        head_dim = d_model // self.heads
        q, k, v = self.qkv(normed).view(runs, batch, length, 3, self.heads, head_dim).permute(3, 0, 1, 4, 2, 5)
        return q, k, v

    def attend(
        self, normed: torch.Tensor, layout: TokenLayout, rotation, rotate_values: bool, impl: str
    ) -> torch.Tensor:
        """Attention output (R, L, d_model) at every run-major token.

        q, k, v are projected per run and moved to pooled order; q and k (and v with JoFormer's
        transport) are rotated there in one complex product (each token by its run's rotation at
        its position), and each length bucket is one strict-causal attention call over the
        sequences of every run.
        """
        pooled = layout.to_pooled(self.qkv(normed))  # (N, 3 d_model)
        if normed.dtype in LOW_PRECISION:
            pooled = pooled.float()  # fp16/bf16 models attend in float32, as the kernels do
        count = pooled.shape[0]
        heads = self.heads
        head_dim = pooled.shape[1] // (3 * heads)
        qkv = pooled.view(count, 3, heads, head_dim)
        turn = _turns(rotation, normed.dtype)
        if turn is not None and rotate_values:
            qkv = rotate_by(qkv, turn[:, None])
        # split, not sliced: the backward joins the pieces' gradients instead of zero-filling each.
        qk, v = qkv.split([2, 1], dim=1)
        if turn is not None and not rotate_values:
            qk = rotate_by(qk, turn[:, None])
        outputs = []
        sizes = layout.bucket_tokens()
        for sequences, width, qk_part, v_part in zip(layout.counts, layout.widths, qk.split(sizes), v.split(sizes)):
            q, k = qk_part.view(sequences, width, 2, heads, head_dim).permute(2, 0, 3, 1, 4).unbind(0)  # (S, H, T, hd)
            out = causal_attention(
                q, k, v_part.view(sequences, width, heads, head_dim).transpose(1, 2), impl=impl, window=self.window
            )
            outputs.append(out.transpose(1, 2).reshape(sequences * width, heads * head_dim))
        out = torch.cat(outputs) if len(outputs) != 1 else outputs[0]
        if turn is not None and rotate_values:
            # JoFormer's transport: the output at position i is rotated back by R_i^T.
            out = rotate_by(out.view(count, heads, head_dim), turn.conj()).view(count, heads * head_dim)
        return layout.to_run_major(out.to(normed.dtype))

    def attend_readout(self, normed: torch.Tensor, layout: TokenLayout, rotation, rotate_values: bool) -> torch.Tensor:
        """Attention output (R, B, d_model) of each string's readout query only (its eos).

        Keys and values are projected at every token, the query at readout tokens only; each bucket
        attends from one query per sequence (O(T), `kernels.readout_attention`).
        """
        runs, columns, d_model = normed.shape
        heads = self.heads
        head_dim = d_model // heads
        weight, bias = self.qkv.weight, self.qkv.bias
        keys_values = affine(normed, weight[:, d_model:], bias[:, d_model:])
        at_readout = normed.reshape(runs * columns, d_model).index_select(0, layout.readout_rows.reshape(-1))
        queries = affine(at_readout.view(runs, -1, d_model), weight[:, :d_model], bias[:, :d_model])
        q = layout.strings_to_sequences(queries).view(-1, heads, head_dim)  # (S, H, hd)
        k, v = layout.to_pooled(keys_values).view(-1, 2, heads, head_dim).split(1, dim=1)  # (N, 1, H, hd)
        k, v = k.squeeze(1), v.squeeze(1)
        if normed.dtype in LOW_PRECISION:
            q, k, v = q.float(), k.float(), v.float()
        turn = _turns(rotation, normed.dtype)
        query_turn = None
        if turn is not None:
            query_turn = turn.index_select(0, layout.readout_token)  # each sequence's rotation at its eos
            q = rotate_by(q, query_turn)
            k = rotate_by(k, turn)
            if rotate_values:
                v = rotate_by(v, turn)
        outputs = []
        sizes, counts = layout.bucket_tokens(), list(layout.counts)
        for sequences, width, query, key, value, position in zip(
            layout.counts, layout.widths, q.split(counts), k.split(sizes), v.split(sizes), layout.readout.split(counts)
        ):
            shape = (sequences, width, heads, head_dim)
            outputs.append(readout_attention(query, key.view(shape), value.view(shape), position, window=self.window))
        out = torch.cat(outputs) if len(outputs) != 1 else outputs[0]  # (S, H, hd)
        if query_turn is not None and rotate_values:
            out = rotate_by(out, query_turn.conj())
        return layout.sequences_to_strings(out.reshape(-1, d_model).to(normed.dtype))

    def forward(
        self, x: torch.Tensor, layout: TokenLayout, positional: PositionalEncoding, layer: int, impl: str,
        readout_only: bool = False,
    ) -> torch.Tensor:
        """The block's output (R, L, d_model) at every run-major token of `layout`, or with
        `readout_only` (R, B, d_model) at each string's readout alone.

        The last block is only read at eos, and everything after attention is per token, so with
        `readout_only` only the readout queries attend (O(T) instead of O(T^2)) and the output
        projection and FFN run on the readout rows alone (same values up to rounding, less work).
        """
        normed = self.attention_norm(x)
        rotation = positional.token_rotation(layer, layout, x)
        rotate_values = positional.layer_rotates_values(layer)
        if readout_only:
            attended = self.attend_readout(normed, layout, rotation, rotate_values)
            x = x.reshape(-1, x.shape[-1]).index_select(0, layout.readout_rows.reshape(-1)).view(attended.shape)
        else:
            attended = self.attend(normed, layout, rotation, rotate_values, impl)
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
        windows=None,
        auxiliary: tuple[str, ...] = (),
    ) -> None:
        super().__init__()
        windows = tuple(windows) if windows is not None else (None,) * layers
        if len(windows) != layers:
            raise ValueError(f"need one window per layer ({layers}), got {len(windows)}")
        runs = positional.runs
        counts = (int(n_symbols),) * runs if isinstance(n_symbols, (int, np.integer)) else tuple(map(int, n_symbols))
        if len(counts) != runs:
            raise ValueError(f"need one alphabet size per run ({runs}), got {len(counts)}")
        # Runs over alphabets of different sizes (a mixed-language pack) share one table of the
        # largest vocabulary; each run reads its own token ids (`symbol_counts`), its rows first.
        self.symbol_counts = counts
        self.n_symbols = max(counts)
        self.runs = runs
        self.attention_impl = attention
        self.embedding = PackedEmbedding(runs, self.n_symbols + 3, d_model)
        self.positional = positional
        self.blocks = nn.ModuleList(Block(runs, d_model, heads, ffn_mult, window) for window in windows)
        self.final_norm = PackedLayerNorm(runs, d_model)
        self.readout = PackedLinear(runs, d_model, 2)
        # The objective's heads beside the readout (`run_config.objective.HEADS`: next-set's symbol
        # columns, the language model's), read at every position in training only; none for `final`.
        self.auxiliary = nn.ModuleDict(
            {head: PackedLinear(runs, d_model, head_width(head, self.n_symbols)) for head in auxiliary}
        )
        # Seeds from torch's global generator, so torch.manual_seed(s) before construction still
        # decides the weights; the trainer re-initialises each run from its config's seed.
        self.initialize(torch.randint(0, 2**62, (runs,)).tolist())

    @property
    def windows(self) -> tuple[int | None, ...]:
        """Each layer's sliding window (None: global attention)."""
        return tuple(block.window for block in self.blocks)

    def reset_run(self, run: int, generator: torch.Generator) -> None:
        """Initialise run `run` from `generator` with the draws (and order) of the equivalent unpacked
        torch modules: the positional encoding's, the embedding, each block, the readout."""
        self.positional.reset_run(run, generator)
        self.embedding.reset_run(run, generator, self.symbol_counts[run] + 3)
        for block in self.blocks:
            block.reset_run(run, generator)
        self.final_norm.reset_run(run, generator)
        self.readout.reset_run(run, generator)
        for head, layer in self.auxiliary.items():  # drawn last: the other weights are those without heads
            layer.reset_run(run, generator, head_width(head, self.symbol_counts[run]))

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
        """Logits (R, batch, 2) read at readout_index (R, batch) (each example's eos position), for
        tokens (R, batch, T).

        A pack of one also takes (batch, T) tokens with (batch,) readouts and returns (batch, 2).
        """
        single = tokens.dim() == 2
        if single:
            if self.runs != 1:
                raise ValueError(f"a pack of {self.runs} runs needs tokens shaped (runs, batch, T)")
            tokens, readout_index = tokens[None], readout_index[None]
        logits = self.forward_layout(rectangular_layout(tokens, readout_index.expand(tokens.shape[:2])))
        return logits[0] if single else logits

    def forward_layout(self, layout: TokenLayout, readout_only: bool = True) -> torch.Tensor:
        """Logits (R, B, 2) of every string of `layout` (`formal_rope.training.layout`), read at its eos.

        readout_only=False runs the last block at every position and then reads eos: the
        definition the readout-only path (the default) is tested against.
        """
        x = self._stream(layout, readout_only)
        if len(self.blocks) == 0 or not readout_only:
            x = (
                x.reshape(-1, x.shape[-1])
                .index_select(0, layout.readout_rows.reshape(-1))
                .view(layout.runs, -1, x.shape[-1])
            )
        return self.readout(self.final_norm(x))

    def hidden_states(self, layout: TokenLayout) -> torch.Tensor:
        """The final layer's normed stream (R, L, d_model) at every run-major token of `layout` (what
        the readout and the objective's heads read at positions other than eos)."""
        return self.final_norm(self._stream(layout, False))

    def _stream(self, layout: TokenLayout, readout_only: bool) -> torch.Tensor:
        """The residual stream after the last block: (R, L, d) at every token, or with
        `readout_only` (R, B, d) at each string's eos (the last block's readout-only path)."""
        x = self.embedding(layout.tokens)  # (R, L, d)
        additive = self.positional.embedding(max(layout.widths, default=1), layout.tokens.device, x.dtype)
        if additive is not None:
            runs = torch.arange(layout.runs, device=x.device)[:, None]
            x = x + additive[runs, layout.positions].to(x.dtype)
        last = len(self.blocks) - 1
        for layer, block in enumerate(self.blocks):
            x = block(x, layout, self.positional, layer, self.attention_impl, readout_only and layer == last)
        return x

    def select_runs(self, indices) -> "Classifier":
        """A new Classifier holding copies of runs `indices` of this pack (in that order), its embedding
        table cut back to the largest vocabulary among them: a run selected alone from a
        mixed-language pack is the model it would be trained alone (its own vocabulary)."""
        index = torch.tensor([int(i) for i in indices], dtype=torch.long)
        positional = self.positional.select(index.tolist())
        selected = Classifier.__new__(Classifier)
        nn.Module.__init__(selected)
        selected.symbol_counts = tuple(self.symbol_counts[i] for i in index.tolist())
        selected.n_symbols = max(selected.symbol_counts)
        selected.runs = len(index)
        selected.attention_impl = self.attention_impl
        embedding = select_runs_of(self.embedding, index)
        if selected.n_symbols != self.n_symbols:
            embedding = embedding.keep_rows(selected.n_symbols + 3)
        selected.embedding = embedding
        selected.positional = positional
        selected.blocks = select_runs_of(self.blocks, index)
        selected.final_norm = select_runs_of(self.final_norm, index)
        selected.readout = select_runs_of(self.readout, index)
        auxiliary = select_runs_of(self.auxiliary, index)
        for head in list(auxiliary.keys()):
            width = head_width(head, selected.n_symbols)
            if width != auxiliary[head].out_features:
                auxiliary[head] = auxiliary[head].keep_outputs(width)
        selected.auxiliary = auxiliary
        selected.train(self.training)
        return selected
