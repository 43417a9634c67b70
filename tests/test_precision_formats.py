"""Formats, exact rounding (vs gmpy2/MPFR, numpy and torch casts) and f_large."""

from __future__ import annotations

import math

import gmpy2
import mpmath
import numpy as np
import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st

from formal_rope.errors import FormalRopeError
from formal_rope.precision import (
    FloatFormat,
    f_large,
    is_representable,
    native_dtype,
    parse_format,
    round_mpf_to_format,
    round_to_format,
)

FORMATS = ["fp32", "bf16", "fp16", "fp8e4m3", "fp8e5m2", "e6m9", "e3m2", "e10m40", "e11m30"]


def mpfr_context(fmt: FloatFormat) -> gmpy2.context:
    """An MPFR context whose results are exactly the format's values (IEEE emulation recipe)."""
    return gmpy2.context(
        precision=fmt.precision,
        emin=fmt.emin - fmt.mantissa_bits + 1,
        emax=fmt.emax + 1,
        subnormalize=True,
    )


def mpfr_round(values: np.ndarray, fmt: FloatFormat) -> np.ndarray:
    with gmpy2.context(mpfr_context(fmt)):
        mpfr = gmpy2.mpfr
        return np.array([float(mpfr(value)) for value in values.tolist()], dtype=np.float64)


def random_inputs(fmt: FloatFormat, count: int, seed: int) -> np.ndarray:
    """Random float64 over the whole range of the format: below the subnormals up to beyond overflow,
    plus exact ties (midpoints between neighbours) and values one float64 ulp from ties."""
    rng = np.random.default_rng(seed)
    exponents = rng.integers(fmt.emin - fmt.mantissa_bits - 3, fmt.emax + 3, count)
    with np.errstate(over="ignore"):
        values = rng.uniform(1.0, 2.0, count) * np.exp2(exponents.astype(np.float64))
    values *= rng.choice([-1.0, 1.0], count)
    quarter = count // 4
    # Midpoints: an F-value plus half its quantum (exact in float64 since M <= 51).
    grid = round_to_format(values[:quarter], fmt)
    finite = np.isfinite(grid) & (grid != 0)
    _, exponent = np.frexp(grid)
    quantum = np.exp2(np.maximum(exponent - 1, fmt.emin) - fmt.mantissa_bits)
    ties = np.where(finite, grid + np.copysign(quantum / 2, grid), values[:quarter])
    values[:quarter] = ties
    values[quarter : 2 * quarter] = np.nextafter(ties, np.where(rng.random(quarter) < 0.5, -np.inf, np.inf))
    return values


def same_values(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Bitwise-style equality: equal values with equal signs (so -0 != +0), NaN equal to NaN."""
    return ((a == b) & (np.signbit(a) == np.signbit(b))) | (np.isnan(a) & np.isnan(b))


def test_named_formats_and_properties():
    fp16 = parse_format("fp16")
    assert (fp16.exponent_bits, fp16.mantissa_bits, fp16.bias) == (5, 10, 15)
    assert fp16.max_finite == 65504.0
    assert fp16.min_normal == 2.0**-14
    assert fp16.min_subnormal == 2.0**-24
    assert fp16.epsilon == 2.0**-10
    assert parse_format("fp32").max_finite == float(np.finfo(np.float32).max)
    assert parse_format("fp32").min_subnormal == float(np.finfo(np.float32).smallest_subnormal)
    assert parse_format("bf16").max_finite == float(torch.finfo(torch.bfloat16).max)
    # IEEE-style e4m3 (with inf): max 240, not torch's e4m3fn 448.
    assert parse_format("fp8e4m3").max_finite == 240.0
    assert parse_format("fp8e5m2").max_finite == float(torch.finfo(torch.float8_e5m2).max)
    assert parse_format("e5m10") == parse_format("fp16")
    assert parse_format("E6M9").name == "e6m9"
    assert parse_format("fp64").is_binary64


@pytest.mark.parametrize("bad", ["fp99", "float", "e1m3", "e12m3", "e5m0", ""])
def test_unknown_or_invalid_formats_are_user_errors(bad):
    with pytest.raises(FormalRopeError) as error:
        parse_format(bad)
    if bad in ("fp99", "float", ""):
        assert "fp32" in str(error.value) and "eXmY" in str(error.value)


def test_native_dtypes():
    assert native_dtype("fp32") is torch.float32
    assert native_dtype("bf16") is torch.bfloat16
    assert native_dtype("fp16") is torch.float16
    assert native_dtype("fp64") is torch.float64
    assert native_dtype("fp8e4m3") is None


def test_round_to_format_matches_mpfr_on_a_million_fp32_values():
    fmt = parse_format("fp32")
    values = random_inputs(fmt, 1_000_000, seed=11)
    assert np.count_nonzero(~same_values(round_to_format(values, fmt), mpfr_round(values, fmt))) == 0


@pytest.mark.parametrize("name", [name for name in FORMATS if name != "fp32"])
def test_round_to_format_matches_mpfr(name):
    fmt = parse_format(name)
    values = random_inputs(fmt, 200_000, seed=sum(map(ord, name)))
    expected = mpfr_round(values, fmt)
    assert np.count_nonzero(~same_values(round_to_format(values, fmt), expected)) == 0
    torch_result = round_to_format(torch.from_numpy(values), fmt).numpy()
    assert np.count_nonzero(~same_values(torch_result, expected)) == 0


def test_special_values_ties_subnormals_and_overflow():
    fp16 = parse_format("fp16")
    values = np.array(
        [
            0.0, -0.0, np.inf, -np.inf, np.nan,
            2.0**-25,  # exactly half the smallest subnormal: tie to even -> 0
            -(2.0**-25),  # -> -0
            3 * 2.0**-25,  # tie between 1 and 2 subnormal quanta -> 2 (even)
            2.0**-25 * (1 + 2.0**-30),  # just above the tie -> smallest subnormal
            65504.0, 65519.99, 65520.0,  # 65520 is the midpoint to 65536 = inf in fp16
            1 + 2.0**-11,  # tie between 1 and 1+2^-10 -> 1 (even)
            1 + 3 * 2.0**-11,  # tie -> 1 + 2^-9 (even)
            5e-324, 1e308,
        ]
    )
    expected = np.array(
        [0.0, -0.0, np.inf, -np.inf, np.nan, 0.0, -0.0, 2.0**-23, 2.0**-24, 65504.0, 65504.0, np.inf,
         1.0, 1 + 2.0**-9, 0.0, np.inf]
    )
    assert same_values(round_to_format(values, fp16), expected).all()
    assert same_values(round_to_format(torch.from_numpy(values), fp16).numpy(), expected).all()
    e4m3 = parse_format("fp8e4m3")
    assert round_to_format(247.99, e4m3) == 240.0
    assert round_to_format(248.0, e4m3) == math.inf  # midpoint 240..256 rounds to even = overflow
    assert round_to_format(-1000.0, e4m3) == -math.inf
    assert round_to_format(2.0**-10, e4m3) == 0.0  # half of min subnormal 2^-9
    assert round_to_format(2.0**-10 * 1.0001, e4m3) == 2.0**-9


def test_round_to_format_matches_numpy_casts():
    rng = np.random.default_rng(3)
    values = rng.standard_normal(300_000) * np.exp2(rng.integers(-160, 140, 300_000))
    with np.errstate(over="ignore"):
        assert same_values(round_to_format(values, "fp32"), values.astype(np.float32).astype(np.float64)).all()
        small = values * 2.0**-100
        assert same_values(round_to_format(small, "fp16"), small.astype(np.float16).astype(np.float64)).all()


def test_round_to_format_matches_torch_casts():
    """torch casts round to nearest even. float64->fp32 is a single rounding; torch's float64->bf16/fp16
    casts go through float32 (double rounding), so those are compared on float32 inputs."""
    generator = torch.Generator().manual_seed(5)
    values = torch.randn(300_000, generator=generator, dtype=torch.float64)
    values = values * torch.exp2(torch.randint(-140, 130, (300_000,), generator=generator).to(torch.float64))
    assert torch.equal(round_to_format(values, "fp32"), values.to(torch.float32).to(torch.float64))
    as_float32 = values.to(torch.float32)
    for name, dtype in (("bf16", torch.bfloat16), ("fp16", torch.float16)):
        ours = round_to_format(as_float32, name)
        theirs = as_float32.to(dtype).to(torch.float64)
        assert torch.equal(ours, theirs), name
    # The double rounding of torch's float64 -> bf16 cast, which round_to_format avoids:
    tricky = torch.tensor([1 + 2.0**-8 + 2.0**-40], dtype=torch.float64)
    assert round_to_format(tricky, "bf16").item() == 1 + 2.0**-7
    assert tricky.to(torch.bfloat16).item() == 1.0


def test_python_float_and_tensor_dtypes():
    assert round_to_format(0.1, "bf16") == float(torch.tensor(0.1, dtype=torch.float32).to(torch.bfloat16))
    out = round_to_format(torch.tensor([0.1], dtype=torch.float32), "fp16")
    assert out.dtype is torch.float64
    assert is_representable(np.array([0.5, 0.1]), "fp32").tolist() == [True, False]


@given(st.floats(allow_nan=False, allow_infinity=False), st.floats(allow_nan=False, allow_infinity=False))
def test_rounding_is_monotone_and_idempotent(a, b):
    for name in ("fp16", "bf16", "fp8e4m3"):
        low, high = sorted((a, b))
        rounded_low, rounded_high = round_to_format(low, name), round_to_format(high, name)
        assert rounded_low <= rounded_high
        assert round_to_format(rounded_low, name) == rounded_low


@given(st.floats(min_value=-1e6, max_value=1e6, allow_nan=False))
def test_mpf_rounding_agrees_with_array_rounding(value):
    for name in ("fp16", "fp32", "e4m3"):
        assert round_mpf_to_format(mpmath.mpf(value), name) == round_to_format(value, name)


def test_f_large_values():
    assert f_large("fp16") == 17.34375
    assert f_large("bf16") == 93.0
    fp32 = f_large("fp32")
    with mpmath.workprec(200):
        threshold = 150 * mpmath.log(2)
        assert mpmath.mpf(fp32) >= threshold
        previous = float(np.nextafter(np.float32(fp32), np.float32(0)))
        assert mpmath.mpf(previous) < threshold
    assert fp32 == float(np.float32(fp32))
    assert fp32 == pytest.approx(103.972084, abs=1e-6)
    assert f_large("fp8e4m3") == 7.0
    assert f_large("fp8e5m2") == 12.0


@pytest.mark.parametrize("name", ["fp16", "bf16", "fp32", "fp8e4m3", "fp8e5m2", "e6m9", "e3m2"])
def test_f_large_definition_with_mpfr(name):
    """exp(-f_large) rounds to 0 in F, exp(-previous value) does not (MPFR correctly rounded exp)."""
    fmt = parse_format(name)
    value = f_large(fmt)
    assert is_representable(np.array([value]), fmt).all()
    previous = float(np.nextafter(value, 0.0))
    previous = round_mpf_to_format(mpmath.mpf(previous), fmt, direction="down")
    with gmpy2.context(mpfr_context(fmt)):
        assert gmpy2.exp(gmpy2.mpfr(-value)) == 0
        assert gmpy2.exp(gmpy2.mpfr(-previous)) > 0


def test_f_large_missing_for_formats_that_never_underflow():
    with pytest.raises(FormalRopeError, match="no finite f_large"):
        f_large("e2m6")
