"""Layers with a leading run axis: R independent models computed as one (vectorized ensembles).

Every parameter is stacked over runs (weight (R, out, in) for a linear layer, the orientation of
nn.Linear per run), and every activation carries the run axis first: (R, ..., features). One
batched matrix product serves all runs, so a pack of R tiny models costs about one op sequence
instead of R. Runs never mix: each output slice depends on its own run's parameters and inputs
only, so gradients of a sum of per-run losses are each run's own gradients.

Each layer can (re)initialise one run from a torch.Generator with exactly the draws nn.Linear /
nn.Embedding make, in the same order, so a run's initial weights depend on its seed alone — not on
the pack it trains in.
"""

from __future__ import annotations

import copy
import functools
import math

import torch
from torch import nn
from torch.nn import functional as F


def _kaiming_bound(fan_in: int) -> float:
    # nn.Linear's kaiming_uniform_(a=sqrt(5)), written with the same float operations so the drawn
    # weights are bit-identical to a freshly constructed nn.Linear under the same seed.
    gain = math.sqrt(2.0 / (1 + math.sqrt(5) ** 2))
    std = gain / math.sqrt(fan_in)
    return math.sqrt(3.0) * std


# The GEMM adds a bias given as its C operand after the whole product while the inner sum fits one
# of its K blocks, so there the product plus the bias afterwards is the same float32 result. The
# block size is the CPU kernel's: every inner dimension up to 320 on the AVX-512 Xeon this was
# measured on, up to 192 on an AMD EPYC (tests/test_training_packed.py). So the separate addition is
# used only for inner dimensions this machine's GEMM is checked to sum in one block
# (`separate_bias_is_exact`), never beyond SEPARATE_BIAS_MAX_INNER.
SEPARATE_BIAS_MAX_INNER = 320
_PROBE_SHAPES = ((3, 37, 32), (2, 1000, 96), (4, 300, 256), (1, 2000, 192))  # (runs, rows, out)


@functools.lru_cache(maxsize=None)
def _separate_bias_is_exact(inner: int, threads: int) -> bool:
    generator = torch.Generator().manual_seed(inner)
    with torch.no_grad():
        for runs, rows, out in _PROBE_SHAPES:
            x = torch.randn(runs, rows, inner, generator=generator)
            weight = torch.randn(runs, out, inner, generator=generator).transpose(1, 2)
            bias = torch.randn(runs, 1, out, generator=generator)
            if not torch.equal(torch.bmm(x, weight).add_(bias), torch.baddbmm(bias, x, weight)):
                return False
    return True


def separate_bias_is_exact(inner: int) -> bool:
    """Whether this CPU's bmm followed by the bias gives baddbmm's float32 values at inner dimension
    `inner` (checked once per inner dimension and thread count on a few shapes; False beyond
    SEPARATE_BIAS_MAX_INNER)."""
    return 0 < inner <= SEPARATE_BIAS_MAX_INNER and _separate_bias_is_exact(int(inner), torch.get_num_threads())


def affine(x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor) -> torch.Tensor:
    """x (R, N, in) @ weight (R, out, in)^T + bias (R, out), per run: baddbmm's value. On CPU the
    product and the bias run as two ops where that is bit-identical (`separate_bias_is_exact`):
    baddbmm with a broadcast bias costs up to 3x a bare bmm at these shapes, the separate addition
    a fraction of it (bench/speed.py). The bias is added in place: bmm's backward reads its inputs,
    not its output, and a fresh (R, N, out) buffer per projection costs up to 13% of the product's
    forward and backward at paper dims."""
    if x.device.type == "cpu" and separate_bias_is_exact(x.shape[-1]):
        return torch.bmm(x, weight.transpose(1, 2)).add_(bias.unsqueeze(1))
    return torch.baddbmm(bias.unsqueeze(1), x, weight.transpose(1, 2))


class PackedLinear(nn.Module):
    """x (R, ..., in) -> (R, ..., out) with per-run weight (R, out, in) and bias (R, out)."""

    def __init__(self, runs: int, in_features: int, out_features: int) -> None:
        super().__init__()
        self.in_features, self.out_features = in_features, out_features
        self.weight = nn.Parameter(torch.empty(runs, out_features, in_features))
        self.bias = nn.Parameter(torch.empty(runs, out_features))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        runs = x.shape[0]
        flat = x.reshape(runs, -1, self.in_features)
        return affine(flat, self.weight, self.bias).view(*x.shape[:-1], self.out_features)

    @torch.no_grad()
    def reset_run(self, run: int, generator: torch.Generator, rows: int | None = None) -> None:
        """nn.Linear's default initialisation of run `run`, drawn from `generator`; with `rows`, the
        draws of an nn.Linear with that many outputs (the run's first `rows` outputs; the others,
        which a run over a smaller alphabet never reads, are zeros)."""
        rows = self.out_features if rows is None else rows
        self.weight[run, :rows].uniform_(
            -_kaiming_bound(self.in_features), _kaiming_bound(self.in_features), generator=generator
        )
        bound = 1 / math.sqrt(self.in_features) if self.in_features > 0 else 0.0
        self.bias[run, :rows].uniform_(-bound, bound, generator=generator)
        self.weight[run, rows:].zero_()
        self.bias[run, rows:].zero_()

    def keep_outputs(self, rows: int) -> "PackedLinear":
        """A copy holding each run's first `rows` outputs (a head cut back to a smaller alphabet)."""
        kept = PackedLinear(self.weight.shape[0], self.in_features, rows)
        with torch.no_grad():
            kept.weight = nn.Parameter(self.weight[:, :rows].clone(), self.weight.requires_grad)
            kept.bias = nn.Parameter(self.bias[:, :rows].clone(), self.bias.requires_grad)
        return kept

    @torch.no_grad()
    def zero_run(self, run: int) -> None:
        self.weight[run].zero_()
        self.bias[run].zero_()


class PackedLayerNorm(nn.Module):
    """LayerNorm over the last axis with per-run affine weight and bias (R, d)."""

    def __init__(self, runs: int, features: int, eps: float = 1e-5) -> None:
        super().__init__()
        self.features, self.eps = features, eps
        self.weight = nn.Parameter(torch.ones(runs, features))
        self.bias = nn.Parameter(torch.zeros(runs, features))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        normed = F.layer_norm(x, (self.features,), eps=self.eps)
        shape = (x.shape[0],) + (1,) * (x.dim() - 2) + (self.features,)
        return torch.addcmul(self.bias.view(shape), normed, self.weight.view(shape))

    @torch.no_grad()
    def reset_run(self, run: int, generator: torch.Generator) -> None:
        self.weight[run].fill_(1.0)
        self.bias[run].zero_()


class PackedEmbedding(nn.Module):
    """tokens (R, ...) -> (R, ..., d): run r looks its tokens up in its own table (R, vocab, d)."""

    def __init__(self, runs: int, vocabulary: int, features: int) -> None:
        super().__init__()
        self.vocabulary, self.features = vocabulary, features
        self.weight = nn.Parameter(torch.empty(runs, vocabulary, features))

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        runs = tokens.shape[0]
        offsets = torch.arange(runs, device=tokens.device).view((runs,) + (1,) * (tokens.dim() - 1)) * self.vocabulary
        # reshape, not view: the optimizer may keep the table as a strided view of its flat buffer.
        return F.embedding(tokens + offsets, self.weight.reshape(-1, self.features))

    @torch.no_grad()
    def reset_run(self, run: int, generator: torch.Generator, rows: int | None = None) -> None:
        """nn.Embedding's default initialisation (standard normal) of run `run`'s first `rows` rows
        (None: all), the draws a table of `rows` rows alone makes (its rows are contiguous); the
        rows past them, which a run with a smaller vocabulary never reads, are zeros."""
        rows = self.vocabulary if rows is None else rows
        self.weight[run, :rows].normal_(generator=generator)
        self.weight[run, rows:].zero_()

    def keep_rows(self, rows: int) -> "PackedEmbedding":
        """A copy holding each run's first `rows` rows (a table cut back to a smaller vocabulary)."""
        kept = PackedEmbedding(self.weight.shape[0], rows, self.features)
        with torch.no_grad():
            kept.weight = nn.Parameter(self.weight[:, :rows].clone(), self.weight.requires_grad)
        return kept


def select_runs_of(module: nn.Module, index: torch.Tensor) -> nn.Module:
    """A deep copy of a packed module (packed layers, lists, sequences of them) keeping runs `index`."""
    selected = copy.deepcopy(module)
    with torch.no_grad():
        for name, parameter in list(selected.named_parameters()):
            owner = selected.get_submodule(name.rsplit(".", 1)[0]) if "." in name else selected
            leaf = name.rsplit(".", 1)[-1]
            owner._parameters[leaf] = nn.Parameter(
                parameter[index.to(parameter.device)].clone(), parameter.requires_grad
            )
    return selected
