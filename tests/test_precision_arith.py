"""Emulated arithmetic vs a step-by-step MPFR (gmpy2) oracle; Native mode; softmax semantics."""

from __future__ import annotations

import math

import gmpy2
import numpy as np
import pytest
import torch

from formal_rope.errors import FormalRopeError
from formal_rope.precision import (
    Emulated,
    Native,
    correctly_rounded,
    make_arithmetic,
    parse_format,
    round_mpf_to_format,
    round_to_format,
)

torch.set_num_threads(1)


def mpfr_context(fmt) -> gmpy2.context:
    return gmpy2.context(
        precision=fmt.precision, emin=fmt.emin - fmt.mantissa_bits + 1, emax=fmt.emax + 1, subnormalize=True
    )


def random_values(fmt, count: int, seed: int, spread: int = 8) -> torch.Tensor:
    generator = torch.Generator().manual_seed(seed)
    raw = torch.randn(count, generator=generator, dtype=torch.float64)
    raw = raw * torch.exp2(torch.randint(-spread, spread, (count,), generator=generator).to(torch.float64))
    return round_to_format(raw, fmt)


def same(a: torch.Tensor, b: torch.Tensor) -> bool:
    return bool((((a == b) & (torch.signbit(a) == torch.signbit(b))) | (a.isnan() & b.isnan())).all())


@pytest.mark.parametrize("name", ["fp32", "bf16", "fp16", "fp8e4m3", "e6m12"])
def test_binary_operations_are_correctly_rounded(name):
    fmt = parse_format(name)
    arith = Emulated(fmt)
    a = random_values(fmt, 20_000, seed=1)
    b = random_values(fmt, 20_000, seed=2)
    with gmpy2.context(mpfr_context(fmt)):
        pairs = [(gmpy2.mpfr(x), gmpy2.mpfr(y)) for x, y in zip(a.tolist(), b.tolist())]
        oracle = {
            "add": [float(x + y) for x, y in pairs],
            "sub": [float(x - y) for x, y in pairs],
            "mul": [float(x * y) for x, y in pairs],
            "div": [float(x / y) for x, y in pairs],
        }
    for operation, expected in oracle.items():
        result = getattr(arith, operation)(a, b)
        assert same(result, torch.tensor(expected, dtype=torch.float64)), operation


@pytest.mark.parametrize("name", ["fp32", "bf16", "fp16", "fp8e5m2", "e5m30"])
@pytest.mark.parametrize("function", ["exp", "cos", "sin"])
def test_transcendentals_are_correctly_rounded(name, function):
    fmt = parse_format(name)
    arith = Emulated(fmt)
    spread = 4 if function == "exp" else 12
    x = random_values(fmt, 15_000, seed=hash((name, function)) % 1000, spread=spread)
    if function != "exp":  # large phases, as RoPE produces at long positions
        x = torch.cat([x, round_to_format(torch.arange(1, 3001, dtype=torch.float64) * 0.7, fmt)])
    with gmpy2.context(mpfr_context(fmt)):
        mpfr_function = getattr(gmpy2, function)
        expected = torch.tensor([float(mpfr_function(gmpy2.mpfr(v))) for v in x.tolist()], dtype=torch.float64)
    assert same(getattr(arith, function)(x), expected)


def test_hard_cases_fall_back_to_mpmath():
    """Inputs whose float64 exp lies within the slack of an fp16 midpoint are recomputed exactly.

    The second input is one where, with this machine's torch, float64 exp lands on the midpoint and
    plain double rounding picks the wrong neighbour (1.30078125 instead of 1.2998046875).
    """
    fmt = parse_format("fp16")
    midpoint = 2.71875 + 2.0**-10  # halfway between two fp16 neighbours
    x = torch.tensor([math.log(midpoint), float.fromhex("0x1.0ce449bb24d19p-2")], dtype=torch.float64)
    stats: dict = {}
    result = correctly_rounded("exp", x, fmt, stats)
    assert stats["hard"] == 2
    # x is not made of fp16 values: convert exactly outside the fp16 context (inside, gmpy2 rounds it).
    exact_inputs = [gmpy2.mpfr(value, 53) for value in x.tolist()]
    with gmpy2.context(mpfr_context(fmt)):
        expected = [float(gmpy2.exp(value)) for value in exact_inputs]
    assert result.tolist() == expected
    assert expected[1] == 1.2998046875


def _oracle_matmul(a: list[list[float]], b: list[list[float]], fmt) -> list[list[float]]:
    with gmpy2.context(mpfr_context(fmt)):
        rows = []
        for row in a:
            out = []
            for column in zip(*b):
                total = None
                for x, y in zip(row, column):
                    product = gmpy2.mpfr(x) * gmpy2.mpfr(y)
                    total = product if total is None else total + product
                out.append(float(total))
            rows.append(out)
        return rows


@pytest.mark.parametrize("name", ["fp16", "bf16", "fp8e4m3"])
def test_matmul_and_dot_follow_left_to_right_rounding(name):
    fmt = parse_format(name)
    arith = Emulated(fmt)
    for seed in range(5):
        a = random_values(fmt, 6 * 9, seed=seed, spread=3).reshape(6, 9)
        b = random_values(fmt, 9 * 4, seed=seed + 50, spread=3).reshape(9, 4)
        expected = torch.tensor(_oracle_matmul(a.tolist(), b.tolist(), fmt), dtype=torch.float64)
        assert same(arith.matmul(a, b), expected)
        assert same(arith.dot(a[:, None, :], b.T[None, :, :]), expected)
    batched = random_values(fmt, 2 * 3 * 5, seed=9).reshape(2, 3, 5)
    other = random_values(fmt, 5 * 2, seed=10).reshape(5, 2)
    result = arith.matmul(batched, other)
    assert result.shape == (2, 3, 2)
    assert same(result[1], arith.matmul(batched[1], other))


def test_summation_order_is_left_to_right():
    arith = Emulated("fp16")
    values = torch.tensor([2048.0, 1.0, 1.0, 1.0, 1.0])  # each +1 is a tie that rounds back to 2048
    assert arith.sum(values).item() == 2048.0
    assert arith.sum(values.flip(0)).item() == 2052.0
    matrix = torch.stack([values, values.flip(0)])
    assert arith.sum(matrix, dim=1).tolist() == [2048.0, 2052.0]
    assert arith.sum(matrix.T, dim=0, keepdim=True).shape == (1, 2)


def _oracle_softmax(scores: list[float], visible: list[bool], fmt) -> list[float]:
    if not any(visible):
        return [0.0] * len(scores)
    with gmpy2.context(mpfr_context(fmt)):
        row_max = max(s for s, v in zip(scores, visible) if v)
        exps = [gmpy2.exp(gmpy2.mpfr(s) - gmpy2.mpfr(row_max)) if v else gmpy2.mpfr(0) for s, v in zip(scores, visible)]
        total = exps[0]
        for value in exps[1:]:
            total = total + value
        return [float(value / total) if v else 0.0 for value, v in zip(exps, visible)]


@pytest.mark.parametrize("name", ["fp16", "bf16", "fp32", "fp8e4m3"])
def test_stable_softmax_matches_step_by_step_oracle(name):
    fmt = parse_format(name)
    arith = Emulated(fmt)
    scores = random_values(fmt, 12 * 7, seed=4, spread=5).reshape(12, 7)
    mask = torch.rand(12, 7, generator=torch.Generator().manual_seed(3)) < 0.7
    mask[0] = False  # a fully masked row
    expected = torch.tensor(
        [_oracle_softmax(s, m, fmt) for s, m in zip(scores.tolist(), mask.tolist())], dtype=torch.float64
    )
    weights = arith.softmax_stable(scores, mask)
    assert same(weights, expected)
    assert bool((weights[~mask] == 0).all())
    assert bool((weights[0] == 0).all())


def test_softmax_hard_selection_at_f_large():
    """A gap of f_large gives weight exactly 1 on the maximum and exactly 0 elsewhere."""
    for name in ("fp16", "bf16", "fp32"):
        arith = Emulated(name)
        gap = arith.f_large
        scores = arith.asarray([[5.0, 5.0 - gap, 5.0 - 2 * gap]])
        assert arith.softmax_stable(scores).tolist() == [[1.0, 0.0, 0.0]]
        below = round_mpf_to_format(float(np.nextafter(gap, 0)), name, direction="down")  # previous F value
        scores = arith.asarray([[0.0, -below]])
        assert arith.softmax_stable(scores)[0, 1].item() > 0


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.float16])
def test_native_arithmetic_uses_the_dtype(dtype):
    arith = Native(dtype)
    x = arith.asarray([0.1, 1.5, -2.25])
    assert x.dtype is dtype
    assert torch.equal(arith.add(x, x), x + x)
    assert torch.equal(arith.exp(x), torch.exp(x))
    scores = arith.asarray([[1.0, 2.0, 3.0], [0.5, 0.25, 0.0]])
    mask = torch.tensor([[True, True, False], [False, False, False]])
    weights = arith.softmax_stable(scores, mask)
    assert weights.dtype is dtype
    assert weights[1].tolist() == [0.0, 0.0, 0.0]
    assert weights[0, 2].item() == 0.0
    reference = torch.softmax(scores[0, :2].float(), dim=0)
    assert torch.allclose(weights[0, :2].float(), reference, atol=1e-2)


def test_native_fp32_elementwise_equals_emulated_fp32():
    emulated, native = Emulated("fp32"), Native("fp32")
    a = random_values(parse_format("fp32"), 10_000, seed=7)
    b = random_values(parse_format("fp32"), 10_000, seed=8)
    for operation in ("add", "sub", "mul", "div"):
        ours = getattr(emulated, operation)(a, b)
        theirs = getattr(native, operation)(native.asarray(a), native.asarray(b)).to(torch.float64)
        assert torch.equal(ours, theirs), operation


def test_native_asarray_avoids_double_rounding():
    native = Native("bf16")
    assert native.asarray([1 + 2.0**-8 + 2.0**-40]).item() == 1 + 2.0**-7


def test_make_arithmetic_modes():
    assert make_arithmetic("fp16", "emulated").format.name == "fp16"
    assert make_arithmetic("bf16", "native").dtype is torch.bfloat16
    with pytest.raises(FormalRopeError):
        make_arithmetic("fp8e4m3", "native")
    with pytest.raises(FormalRopeError):
        make_arithmetic("fp16", "symbolic")
