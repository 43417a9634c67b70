"""Where a forward pass's tokens sit: one layout for training steps, evaluation and single strings.

A pack computes R runs at once, and the two kinds of work in a transformer want different orders:

- **Per-token work** (embeddings, layer norms, projections, FFNs) has per-run weights, so it runs on
  a *run-major* block `(R, L, d)`: row r holds run r's strings one after another, each `width`
  tokens wide (bos, symbols, eos, then pad up to its bucket's width), and `L` is the longest run's
  total. A run whose strings need fewer tokens is padded at the end (a few tokens, never whole
  strings).
- **Attention** has no weights, only sequences. Sequences of one width (a length *bucket*) from all
  runs are attended together: the *pooled* order lists tokens bucket by bucket, and inside a bucket
  run by run, string by string, so each bucket is one rectangular `(sequences, width)` block.

`pooled_index` maps pooled tokens to run-major rows and `flat_index` back (`select_rows` and
`permute_rows`: gathers whose backward is a scatter into zeros, resp. the opposite gather). Nothing is ever padded to
the pack's largest bucket count, so a run in a pack does exactly its own work: the same tokens it
has alone. Evaluation batches (every string of one length, every run reading the same strings)
need no permutation: pooled and run-major orders coincide (`pooled_index` None).

Pad tokens (the end of a short run's row, and a string's columns past its eos inside its bucket)
are computed like any token but never read: strict causal attention never looks forward, readouts
sit at eos, and the gathers into pooled order skip the run-major padding. Their values stay finite
(they copy a real token), so their exactly-zero gradients add exact zeros to every weight gradient.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch


def special_tokens(n_symbols: int) -> tuple[int, int, int]:
    """(bos, eos, pad) ids for an alphabet of n_symbols: the alphabet's symbols are 0..n_symbols-1."""
    return n_symbols, n_symbols + 1, n_symbols + 2


@dataclass(frozen=True, eq=False)
class TokenLayout:
    """The tokens of one forward pass of a pack, and how to move between run-major and pooled order.

    Shapes: R runs, L run-major columns, N pooled tokens (the real strings' tokens), S sequences
    (strings of all runs), B strings per run (S = R * B).
    """

    tokens: torch.Tensor  # (R, L) token ids, run-major
    positions: torch.Tensor  # (R, L) each token's position in its string (bos = 0; padding 0)
    widths: tuple[int, ...]  # per bucket: the token width of its sequences (buckets in pooled order)
    counts: tuple[int, ...]  # per bucket: how many sequences (of all runs) it holds
    token_run: torch.Tensor  # (N,) run of each pooled token
    token_position: torch.Tensor  # (N,) position of each pooled token in its string
    readout: torch.Tensor  # (S,) readout position (eos) of each pooled sequence
    readout_rows: torch.Tensor  # (R, B) run-major flat row (r * L + column) of each string's readout
    readout_token: torch.Tensor  # (S,) pooled row of each pooled sequence's readout token
    pooled_index: torch.Tensor | None  # (N,) run-major flat row of each pooled token; None: same order
    flat_index: torch.Tensor | None  # (R * L,) pooled row of each run-major token (padding: any row)
    sequence_string: torch.Tensor | None  # (S,) run-major string (r * B + i) of each pooled sequence
    string_sequence: torch.Tensor | None  # (R * B,) pooled sequence of each run-major string

    @property
    def runs(self) -> int:
        return int(self.tokens.shape[0])

    @property
    def strings(self) -> int:
        """Strings per run (B)."""
        return int(self.readout_rows.shape[1])

    def to_pooled(self, run_major: torch.Tensor) -> torch.Tensor:
        """(R, L, ...) -> (N, ...): every real token, bucket by bucket."""
        flat = run_major.reshape(-1, *run_major.shape[2:])
        if self.pooled_index is None:
            return flat
        return select_rows(flat, self.pooled_index)

    def to_run_major(self, pooled: torch.Tensor) -> torch.Tensor:
        """(N, ...) -> (R, L, ...) (padding rows hold copies of real tokens)."""
        if self.pooled_index is not None:
            pooled = permute_rows(pooled, self.flat_index, self.pooled_index)
        return pooled.view(self.runs, -1, *pooled.shape[1:])

    def sequences_to_strings(self, per_sequence: torch.Tensor) -> torch.Tensor:
        """(S, ...) in pooled sequence order -> (R, B, ...) in each run's own string order."""
        if self.string_sequence is not None:
            per_sequence = permute_rows(per_sequence, self.string_sequence, self.sequence_string)
        return per_sequence.view(self.runs, self.strings, *per_sequence.shape[1:])

    def strings_to_sequences(self, per_string: torch.Tensor) -> torch.Tensor:
        """(R, B, ...) -> (S, ...) in pooled sequence order."""
        flat = per_string.reshape(-1, *per_string.shape[2:])
        if self.sequence_string is None:
            return flat
        return permute_rows(flat, self.sequence_string, self.string_sequence)

    def bucket_tokens(self) -> list[int]:
        """Pooled tokens per bucket (split sizes of pooled tensors)."""
        return [count * width for count, width in zip(self.counts, self.widths)]


class _PermuteRows(torch.autograd.Function):
    """Rows of x in the order `index`, where every input row is taken once by a row whose gradient
    counts (`inverse[j]` is that row) and any other output row (run-major padding, which copies
    some real token) has an exactly-zero gradient; the backward is then the gather by `inverse`
    (exact: the padding rows would only add zeros)."""

    @staticmethod
    def forward(ctx, x, index, inverse):
        ctx.save_for_backward(inverse)
        return x.index_select(0, index)

    @staticmethod
    def backward(ctx, grad):
        (inverse,) = ctx.saved_tensors
        return grad.index_select(0, inverse), None, None


def permute_rows(x: torch.Tensor, index: torch.Tensor, inverse: torch.Tensor) -> torch.Tensor:
    """x[index] with the backward grad[inverse] (see `_PermuteRows`)."""
    return _PermuteRows.apply(x, index, inverse)


def select_rows(x: torch.Tensor, index: torch.Tensor) -> torch.Tensor:
    """x[index] for distinct indices: index_select, whose backward adds into zeros, so the rows not
    taken (run-major padding) get zero gradients and the others exactly their own."""
    return x.index_select(0, index)


def rectangular_layout(tokens: torch.Tensor, readout: torch.Tensor) -> TokenLayout:
    """The layout of (R, n, T) tokens with readouts (R, n): one bucket of width T, no permutation
    (what evaluation and `Classifier.forward` use)."""
    runs, count, width = tokens.shape
    device = tokens.device
    positions = torch.arange(width, device=device).repeat(count)
    sequences = runs * count
    rows = (
        torch.arange(runs, device=device)[:, None] * (count * width)
        + torch.arange(count, device=device)[None, :] * width
        + readout
    )
    return TokenLayout(
        tokens=tokens.reshape(runs, count * width),
        positions=positions[None].expand(runs, -1),
        widths=(width,) if sequences else (),
        counts=(sequences,) if sequences else (),
        token_run=torch.arange(runs, device=device).repeat_interleave(count * width),
        token_position=positions.repeat(runs),
        readout=readout.reshape(-1),
        readout_rows=rows,
        readout_token=torch.arange(sequences, device=device) * width + readout.reshape(-1),
        pooled_index=None,
        flat_index=None,
        sequence_string=None,
        string_sequence=None,
    )


def ragged_layout(symbols, lengths, n_symbols, widths, device="cpu") -> TokenLayout:
    """The layout of a training step: run r's strings `symbols[r]` ((B, >= its longest), padded) of
    `lengths[r]` (B,), each in the first bucket of `widths` (token widths, increasing) that holds
    it. Every run has B strings; empty buckets are left out. `n_symbols`: the alphabet size of
    every run, or one per run (each run's bos, eos and pad are its own: `special_tokens`)."""
    lengths = np.asarray(lengths, dtype=np.int64)  # (R, B)
    runs, batch = lengths.shape
    # (R,) per run: bos, eos, pad
    bos, eos, pad = special_tokens(np.broadcast_to(np.asarray(n_symbols, dtype=np.int64), (runs,)))
    widths = np.asarray(widths, dtype=np.int64)
    bucket = np.searchsorted(widths - 2, lengths)  # (R, B): first bucket that holds each string
    if (bucket >= len(widths)).any():
        raise ValueError(
            f"a string of length {int(lengths.max())} exceeds the widest bucket ({int(widths[-1])} tokens)"
        )
    string_width = widths[bucket]  # (R, B)
    # Run-major: each run's strings ordered by bucket (stable), back to back.
    order = np.argsort(bucket, axis=1, kind="stable")  # (R, B): the strings of run r in row order
    ordered_width = np.take_along_axis(string_width, order, axis=1)
    starts_ordered = np.cumsum(ordered_width, axis=1) - ordered_width  # column of each ordered string
    totals = ordered_width.sum(axis=1)
    columns = int(totals.max()) if runs else 0
    start = np.empty_like(starts_ordered)
    np.put_along_axis(start, order, starts_ordered, axis=1)  # (R, B): column of string i of run r
    # Every real token: its run, string, position, run-major flat row.
    token_string = np.repeat(np.arange(runs * batch), string_width.reshape(-1))  # global string r*B+i
    first_token = np.cumsum(string_width.reshape(-1)) - string_width.reshape(-1)
    position = np.arange(token_string.size) - np.repeat(first_token, string_width.reshape(-1))
    run = token_string // batch
    flat_row = run * columns + start.reshape(-1)[token_string] + position
    # Token ids: bos, symbols, eos, pad by position.
    longest = max(1, int(lengths.max()) if lengths.size else 1)
    flat_symbols = np.zeros((runs * batch, longest), dtype=np.int64)
    for index, run_symbols in enumerate(symbols):
        run_symbols = np.asarray(run_symbols)
        usable = min(longest, run_symbols.shape[1]) if run_symbols.ndim == 2 else 0
        flat_symbols[index * batch : (index + 1) * batch, :usable] = run_symbols[:, :usable]
    string_length = lengths.reshape(-1)[token_string]
    ids = pad[run].copy()
    inside = (position >= 1) & (position <= string_length)
    ids[inside] = flat_symbols[token_string[inside], position[inside] - 1]
    ids[position == 0] = bos[run[position == 0]]
    ends = position == string_length + 1
    ids[ends] = eos[run[ends]]
    tokens = np.repeat(pad, columns)
    tokens[flat_row] = ids
    positions = np.zeros(runs * columns, dtype=np.int64)
    positions[flat_row] = position
    # Pooled: sequences by (bucket, run, string); tokens follow their sequence.
    string_bucket = bucket.reshape(-1)
    sequence_string = np.lexsort((np.arange(runs * batch), string_bucket))  # bucket-major, then r*B+i
    sequence_width = string_width.reshape(-1)[sequence_string]
    sequence_first = np.cumsum(sequence_width) - sequence_width
    within = np.arange(int(sequence_width.sum())) - np.repeat(sequence_first, sequence_width)
    pooled_tokens = np.repeat(first_token[sequence_string], sequence_width) + within  # global token ids
    pooled_index = flat_row[pooled_tokens]
    flat_index = np.zeros(runs * columns, dtype=np.int64)
    flat_index[pooled_index] = np.arange(pooled_index.size)
    string_sequence = np.empty_like(sequence_string)
    string_sequence[sequence_string] = np.arange(sequence_string.size)
    readout_rows = np.arange(runs)[:, None] * columns + start + lengths + 1
    per_bucket = np.bincount(string_bucket, minlength=len(widths))
    used = np.flatnonzero(per_bucket)
    as_tensor = lambda a: torch.from_numpy(np.ascontiguousarray(a)).to(device)  # noqa: E731
    return TokenLayout(
        tokens=as_tensor(tokens.reshape(runs, columns)),
        positions=as_tensor(positions.reshape(runs, columns)),
        widths=tuple(int(widths[b]) for b in used),
        counts=tuple(int(per_bucket[b]) for b in used),
        token_run=as_tensor(run[pooled_tokens]),
        token_position=as_tensor(position[pooled_tokens]),
        readout=as_tensor(lengths.reshape(-1)[sequence_string] + 1),
        readout_rows=as_tensor(readout_rows),
        readout_token=as_tensor(sequence_first + lengths.reshape(-1)[sequence_string] + 1),
        pooled_index=as_tensor(pooled_index),
        flat_index=as_tensor(flat_index),
        sequence_string=as_tensor(sequence_string),
        string_sequence=as_tensor(string_sequence),
    )
