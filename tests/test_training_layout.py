"""The token layout of a packed step: each run's strings back to back (run-major, for per-run
weights) and the same tokens bucket by bucket (pooled, for attention). Checked against the strings
themselves, gathers' gradients against plain indexing, and the packed forward against every string
run alone."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from formal_rope.run_config.config import RunConfig
from formal_rope.run_config.encodings import POSITIONAL_ENCODINGS
from formal_rope.training.layout import permute_rows, ragged_layout, rectangular_layout, select_rows, special_tokens
from formal_rope.training.model import encode_fixed_length
from formal_rope.training.setup import build_pack
from formal_rope.training.train import MAX_BUCKETS, MIN_BUCKETS, bucket_widths, step_buckets

N_SYMBOLS = 3
BOS, EOS, PAD = special_tokens(N_SYMBOLS)


def _strings(draw_lengths, rng):
    """Per run: symbols (B, longest) padded with -1, and lengths (B,)."""
    symbols = []
    for lengths in draw_lengths:
        longest = max(1, max(lengths))
        block = np.full((len(lengths), longest), -1, dtype=np.int64)
        for row, length in enumerate(lengths):
            block[row, :length] = rng.integers(0, N_SYMBOLS, size=length)
        symbols.append(block)
    return symbols


@settings(max_examples=60, deadline=None)
@given(
    st.integers(1, 4).flatmap(
        lambda runs: st.integers(1, 7).flatmap(
            lambda batch: st.lists(
                st.lists(st.integers(0, 40), min_size=batch, max_size=batch), min_size=runs, max_size=runs
            )
        )
    ),
    st.sampled_from([(12, 22, 32, 42), (42,), (7, 12, 17, 22, 27, 32, 37, 42), tuple(range(2, 43))]),
    st.integers(0, 2**32 - 1),
)
def test_every_string_sits_whole_in_both_orders(lengths, widths, seed):
    rng = np.random.default_rng(seed)
    symbols = _strings(lengths, rng)
    lengths = np.array(lengths)
    layout = ragged_layout(symbols, lengths, N_SYMBOLS, widths)
    runs, batch = lengths.shape
    tokens = layout.tokens.numpy()
    flat_tokens = tokens.reshape(-1)
    width_of = {length: min(w for w in widths if w >= length + 2) for length in range(41)}
    # Run-major: no run holds more columns than its own strings need, except the longest run.
    needs = [sum(width_of[int(length)] for length in lengths[r]) for r in range(runs)]
    assert tokens.shape == (runs, max(needs))
    assert sorted(layout.widths) == sorted({width_of[int(length)] for length in lengths.reshape(-1)})
    assert sum(layout.counts) == runs * batch
    pooled_index = layout.pooled_index.numpy()
    assert len(set(pooled_index.tolist())) == len(pooled_index) == sum(needs)  # each real token once
    np.testing.assert_array_equal(layout.flat_index.numpy()[pooled_index], np.arange(len(pooled_index)))
    sequence_string = layout.sequence_string.numpy()
    np.testing.assert_array_equal(np.sort(sequence_string), np.arange(runs * batch))
    np.testing.assert_array_equal(layout.string_sequence.numpy()[sequence_string], np.arange(runs * batch))
    # Pooled order: bucket by bucket, each sequence `width` tokens: bos, the string, eos, pad.
    start = 0
    sequence = 0
    for count, width in zip(layout.counts, layout.widths):
        for _ in range(count):
            string = int(sequence_string[sequence])
            run, row = divmod(string, batch)
            length = int(lengths[run, row])
            assert width_of[length] == width
            expected = [BOS, *symbols[run][row, :length].tolist(), EOS] + [PAD] * (width - length - 2)
            rows = pooled_index[start : start + width]
            assert flat_tokens[rows].tolist() == expected
            assert (rows // tokens.shape[1] == run).all()  # a run's strings stay in its own row
            assert np.array_equal(rows, rows[0] + np.arange(width))  # contiguous in run-major order too
            assert layout.token_run[start : start + width].tolist() == [run] * width
            assert layout.token_position[start : start + width].tolist() == list(range(width))
            assert layout.positions.numpy().reshape(-1)[rows].tolist() == list(range(width))
            assert int(layout.readout[sequence]) == length + 1
            assert int(layout.readout_token[sequence]) == start + length + 1
            assert int(layout.readout_rows[run, row]) == rows[length + 1]
            assert flat_tokens[int(layout.readout_rows[run, row])] == EOS
            start += width
            sequence += 1
    assert start == len(pooled_index)


def test_rectangular_layout_is_pooled_order_already():
    tokens, readout = encode_fixed_length(np.array([[0, 1, 2], [2, 2, 0]]), N_SYMBOLS)
    layout = rectangular_layout(tokens[None].expand(3, -1, -1), readout[None].expand(3, -1))
    assert layout.pooled_index is None and layout.widths == (5,) and layout.counts == (6,)
    assert layout.readout_rows.tolist() == [[4, 9], [14, 19], [24, 29]]
    assert layout.readout_token.tolist() == [4, 9, 14, 19, 24, 29]
    x = torch.arange(3 * 10 * 2, dtype=torch.float32).view(3, 10, 2)
    assert torch.equal(layout.to_run_major(layout.to_pooled(x)), x)


def test_gathers_have_the_gradients_of_plain_indexing():
    """select_rows: untaken rows get zero gradient; permute_rows: duplicated rows whose gradient is
    zero (run-major padding) contribute nothing, as index_select's scatter-add would say."""
    x = torch.randn(7, 3, requires_grad=True)
    index = torch.tensor([4, 0, 6, 2])
    upstream = torch.randn(4, 3)
    (select_rows(x, index) * upstream).sum().backward()
    expected = torch.zeros(7, 3)
    expected[index] = upstream
    assert torch.equal(x.grad, expected)

    pooled = torch.randn(4, 3, requires_grad=True)
    flat_index = torch.tensor([1, 0, 0, 3, 2, 0])  # rows 2 and 5 are padding (copies of pooled row 0)
    pooled_index = torch.tensor([1, 0, 4, 3])  # inverse on the real rows
    upstream = torch.randn(6, 3)
    upstream[[2, 5]] = 0.0  # padding rows never reach a loss
    (permute_rows(pooled, flat_index, pooled_index) * upstream).sum().backward()
    plain = pooled.detach().clone().requires_grad_()
    (plain.index_select(0, flat_index) * upstream).sum().backward()
    assert torch.equal(pooled.grad, plain.grad)


@pytest.mark.parametrize("pe", POSITIONAL_ENCODINGS)
def test_a_packed_step_classifies_each_string_as_its_run_does_alone(pe):
    """The ragged forward of three runs (mixed lengths, four buckets) equals each run's model on
    each of its strings alone, and the readout-only last layer equals the full one."""
    configs = [
        RunConfig("(ab)*", pe=pe, layers=2, d_model=16, heads=2, periods=(2, 3), base=b, seed=s)
        for s, b in ((0, 10.0), (1, 1e4), (2, 3.0))
    ]
    pack = build_pack(configs, N_SYMBOLS, [(2, 3)] * 3).eval()
    if pe == "jof_projected":  # content angles that actually vary
        with torch.no_grad():
            for projector in pack.positional.projectors:
                projector[-1].weight.normal_()
    rng = np.random.default_rng(0)
    lengths = np.array([[0, 7, 40, 13, 13], [25, 1, 2, 39, 8], [11, 11, 30, 0, 21]])
    symbols = _strings(lengths.tolist(), rng)
    layout = ragged_layout(symbols, lengths, N_SYMBOLS, bucket_widths(0, 40))
    with torch.no_grad():
        packed = pack.forward_layout(layout)
        full = pack.forward_layout(layout, readout_only=False)
        assert torch.allclose(packed, full, atol=1e-5)
        for run in range(3):
            alone = pack.select_runs([run])
            for row, length in enumerate(lengths[run].tolist()):
                logits = alone(*encode_fixed_length(symbols[run][row : row + 1, :length], N_SYMBOLS))
                assert torch.allclose(packed[run, row], logits[0], atol=1e-5), (pe, run, row)


def test_bucket_widths_and_counts():
    assert bucket_widths(0, 40) == (12, 22, 32, 42)
    assert bucket_widths(5, 6) == (7, 8)
    assert bucket_widths(0, 40, 41) == tuple(range(2, 43))
    assert bucket_widths(0, 40, 100) == tuple(range(2, 43))  # never more buckets than lengths
    assert step_buckets(64) == MIN_BUCKETS and step_buckets(16 * 64) == MAX_BUCKETS
    assert step_buckets(128) == 8
