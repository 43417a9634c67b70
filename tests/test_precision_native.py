"""The native-dtype table (formal_rope.precision.native): every row complete and true to its dtypes,
lookups by the parsed format, and every consumer reading the same table."""

from __future__ import annotations

import numpy as np
import pytest
import torch
import typer

from formal_rope.cli import app
from formal_rope.errors import FormalRopeError
from formal_rope.precision import (
    NATIVE_DTYPES,
    FloatFormat,
    Native,
    format_of_torch_dtype,
    make_arithmetic,
    native_dtype,
    native_format_names,
    native_row,
    numpy_dtype,
    parse_format,
)


@pytest.mark.parametrize("row", NATIVE_DTYPES, ids=lambda row: row.format)
def test_every_row_is_complete_and_matches_its_dtypes(row):
    fmt = parse_format(row.format)
    assert fmt.name == row.format == row.float_format.name  # canonical: what parse_format names it
    dtype = row.torch_dtype()
    assert isinstance(dtype, torch.dtype) and dtype.is_floating_point
    info = torch.finfo(dtype)
    assert (info.eps, info.max, info.tiny) == (fmt.epsilon, fmt.max_finite, fmt.min_normal)
    if row.numpy is None:
        assert row.numpy_dtype() is None and not hasattr(np, row.format)
    else:
        numpy_info = np.finfo(row.numpy_dtype())
        assert (numpy_info.nmant, numpy_info.nexp) == (fmt.mantissa_bits, fmt.exponent_bits)
        assert float(numpy_info.max) == fmt.max_finite
    assert format_of_torch_dtype(dtype) == fmt and native_row(fmt) is row


def test_rows_are_unique_and_named_in_order():
    assert native_format_names() == tuple(row.format for row in NATIVE_DTYPES) == ("fp64", "fp32", "bf16", "fp16")
    bits = [(row.float_format.exponent_bits, row.float_format.mantissa_bits) for row in NATIVE_DTYPES]
    assert len(set(bits)) == len(bits) and len({row.torch for row in NATIVE_DTYPES}) == len(NATIVE_DTYPES)


def test_lookups_go_by_the_parsed_format_so_aliases_agree():
    assert native_dtype("e8m23") is torch.float32 and native_dtype("E11M52") is torch.float64
    assert native_dtype(FloatFormat("my-bf16", 8, 7)) is torch.bfloat16
    assert native_dtype("fp8e4m3") is None and native_dtype("e6m9") is None
    assert numpy_dtype(parse_format("e5m10")) is np.float16 and numpy_dtype(parse_format("bf16")) is None
    assert Native("e8m23").dtype is torch.float32 and Native(torch.bfloat16).format.name == "bf16"
    assert make_arithmetic("e5m10", "native").dtype is torch.float16
    with pytest.raises(FormalRopeError, match="no native arithmetic for dtype torch.int64"):
        format_of_torch_dtype(torch.int64)


def _help(command: str, option: str) -> str:
    click_command = typer.main.get_command(app).commands[command]
    return next(param.help for param in click_command.params if option in param.opts)


@pytest.mark.parametrize("command, option", [("compile", "--mode"), ("run", "--mode"), ("phases", "--format"),
                                             ("export", "--dtype")])
def test_help_lists_every_native_format(command, option):
    # The help strings are written out (the table loads numpy, which the CLI's start-up path must not):
    # a row added to NATIVE_DTYPES fails here until every list names it.
    text = _help(command, option)
    assert all(name in text for name in native_format_names()), text


def test_phases_reads_an_alias_as_its_format():
    from formal_rope.compiler import compile_formula
    from formal_rope.diagnostics import capture_compiled

    model = compile_formula("Y(a)", "ab", certify_max_length=16).ir
    alias, named = capture_compiled(model, "abab", fmt="e8m23"), capture_compiled(model, "abab", fmt="fp32")
    assert alias.dtype == named.dtype == "fp32"
    assert np.array_equal(alias.heads[0].actual, named.heads[0].actual)
    with pytest.raises(FormalRopeError, match="not one of fp64, fp32, bf16, fp16"):
        capture_compiled(model, "abab", fmt="fp8e4m3")


def _tie_adjacent(fmt_name: str, count: int = 400) -> torch.Tensor:
    """float64 values at, just above and just below the midpoints between neighbours of `fmt_name`
    (normal, subnormal and near-overflow), where rounding through float32 first can go wrong."""
    from formal_rope.precision import round_to_format

    rng = np.random.default_rng(7)
    dtype = native_dtype(fmt_name)
    info = torch.finfo(dtype)
    exponents = rng.uniform(np.log2(info.smallest_normal) - 6, np.log2(info.max) - 0.01, count)
    values = round_to_format(np.exp2(exponents) * rng.choice([-1.0, 1.0], count), parse_format(fmt_name))
    values = torch.from_numpy(values)
    up = torch.nextafter(values.to(dtype), torch.tensor(np.inf, dtype=dtype)).double()
    middles = (values + up) / 2
    spread = [middles, middles * (1 + 2.0**-30), middles * (1 - 2.0**-30),
              torch.nextafter(middles, middles * 2), torch.nextafter(middles, middles * 0)]
    finite = torch.cat(spread)
    return finite[torch.isfinite(finite)]


@pytest.mark.parametrize("fmt_name", ["bf16", "fp16"])
def test_native_casts_from_float64_round_once(fmt_name):
    """float64 -> bf16/fp16 in native mode rounds once (round to odd in float32 first): equal to the
    emulated rounding and to gmpy2 on tie-adjacent values; torch's own cast rounds twice."""
    from formal_rope.model.forward import NativeForward
    from formal_rope.precision import round_once, round_to_format

    dtype = native_dtype(fmt_name)
    fmt = parse_format(fmt_name)
    if fmt_name == "bf16":
        x = torch.tensor([1 + 2.0**-8 + 2.0**-30], dtype=torch.float64)
        assert x.to(torch.bfloat16).item() == 1.0  # the double rounding this fixes
        assert round_once(x, torch.bfloat16).item() == 1.0078125
    values = _tie_adjacent(fmt_name)
    ours = round_once(values, dtype)
    assert ours.dtype == dtype
    emulated = torch.from_numpy(round_to_format(values.numpy(), fmt))
    assert torch.equal(ours.double(), emulated)
    assert not torch.equal(values.to(dtype).double(), emulated)  # torch's cast differs on some of them
    special = torch.tensor([0.0, -0.0, np.inf, -np.inf, 1e300, -1e300, 1e-300, 2.0**-200], dtype=torch.float64)
    assert torch.equal(round_once(special, dtype).double(), torch.from_numpy(round_to_format(special.numpy(), fmt)))
    assert torch.isnan(round_once(torch.tensor([np.nan], dtype=torch.float64), dtype)).all()
    # The native evaluator's parameters go through it.
    forward = NativeForward.__new__(NativeForward)
    forward.torch, forward.dtype = torch, dtype
    assert torch.equal(forward.tensor(values.numpy()).double(), emulated)
    try:
        import gmpy2
    except ImportError:
        return
    precision, emin, emax = (8, -132, 128) if fmt_name == "bf16" else (11, -23, 16)
    with gmpy2.context(precision=precision, emin=emin, emax=emax, subnormalize=True):
        reference = [float(gmpy2.mpfr(value)) for value in values.tolist()]
    assert ours.double().tolist() == reference


def test_trained_low_precision_tables_are_rounded_once_from_float64():
    """A bf16 trained model's rotation tables are the float64 cos/sin rounded once to bf16."""
    from formal_rope.precision import round_once
    from formal_rope.training.encodings.builders import PositionalSpec, build_positional

    rope = build_positional(PositionalSpec(pe="rope", d_model=16, heads=2, layers=1, base=1e4))
    cos16, sin16 = rope.rotation(0, 300, torch.zeros(1, 1, 300, 16, dtype=torch.bfloat16))
    cos64, sin64 = rope.rotation(0, 300, torch.zeros(1, 1, 300, 16, dtype=torch.float64))
    assert cos16.dtype == torch.float32  # the kernels' carrier, holding bf16 values
    assert torch.equal(cos16, round_once(cos64, torch.bfloat16).float())
    assert torch.equal(sin16, round_once(sin64, torch.bfloat16).float())
