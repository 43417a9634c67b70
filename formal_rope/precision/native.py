"""The formats with native arithmetic: one row per format that torch (and maybe numpy) computes in.

`NATIVE_DTYPES` is the only place that says which `FloatFormat` is which torch or numpy dtype.
Rows are looked up by the *parsed* format (its exponent and mantissa bits), so every spelling of a
format behaves alike: `e8m23` is `fp32` here as everywhere. Rows hold dtype names, resolved on
use, so this module (and `formal_rope.precision`) stays importable without torch.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property
from typing import Any

import numpy as np

from formal_rope.errors import FormalRopeError
from formal_rope.precision.formats import FloatFormat, parse_format


@dataclass(frozen=True)
class NativeDtype:
    """A format with native arithmetic: its canonical name and the dtypes that compute exactly in it.

    `numpy` is None where numpy has no such dtype (bf16): the numpy evaluator then emulates it.
    """

    format: str  # canonical name, as parse_format names it
    torch: str  # attribute of the torch module: torch.float32
    numpy: str | None  # numpy dtype whose IEEE operations are correctly rounded in the format

    @cached_property
    def float_format(self) -> FloatFormat:
        return parse_format(self.format)

    def torch_dtype(self):
        import torch  # only asked for by torch-using code: keeps the table importable without torch

        return getattr(torch, self.torch)

    def numpy_dtype(self) -> type | None:
        return None if self.numpy is None else np.dtype(self.numpy).type


NATIVE_DTYPES: tuple[NativeDtype, ...] = (
    NativeDtype("fp64", torch="float64", numpy="float64"),
    NativeDtype("fp32", torch="float32", numpy="float32"),
    NativeDtype("bf16", torch="bfloat16", numpy=None),
    NativeDtype("fp16", torch="float16", numpy="float16"),
)

_BY_BITS = {(row.float_format.exponent_bits, row.float_format.mantissa_bits): row for row in NATIVE_DTYPES}


def native_format_names() -> tuple[str, ...]:
    """The formats with a native dtype, for choices and error messages: fp64, fp32, bf16, fp16."""
    return tuple(row.format for row in NATIVE_DTYPES)


def native_row(fmt: FloatFormat) -> NativeDtype | None:
    """The native-dtype row of a parsed format, or None (fp8 formats, eXmY without a dtype)."""
    return _BY_BITS.get((fmt.exponent_bits, fmt.mantissa_bits))


def native_dtype(fmt: FloatFormat | str):
    """The torch dtype whose arithmetic is exactly this format (fp64/fp32/bf16/fp16), else None.

    fp8 formats have no native arithmetic in torch (and torch's float8_e4m3fn is not IEEE-style).
    """
    row = native_row(parse_format(fmt))
    return None if row is None else row.torch_dtype()


def numpy_dtype(fmt: FloatFormat) -> type | None:
    """The numpy dtype whose IEEE operations are correctly rounded in `fmt` (fp64/fp32/fp16), else None."""
    row = native_row(fmt)
    return None if row is None else row.numpy_dtype()


def format_of_torch_dtype(dtype: Any) -> FloatFormat:
    """The format a torch floating dtype computes in; FormalRopeError for dtypes without a row."""
    for row in NATIVE_DTYPES:
        if row.torch_dtype() == dtype:
            return row.float_format
    raise FormalRopeError(f"no native arithmetic for dtype {dtype}; use {', '.join(native_format_names()[:-1])} "
                          f"or {native_format_names()[-1]}")


def round_once(x, dtype):
    """`x` (a torch tensor, any float dtype) rounded *once* to the torch `dtype` (nearest, ties to even).

    torch's float64 -> bf16/fp16 cast goes through float32 and can round twice: 1 + 2^-8 + 2^-30
    becomes 1.0 in bf16 (the float32 step drops 2^-30, leaving a tie that goes to even) where the
    correct rounding is 1.0078125. Here a float64 source is first rounded to float32 *to odd*
    (the float32 nearest, moved to its odd neighbour towards x when inexact), which keeps the
    information a later rounding needs: a float32 of 24 bits rounded to odd and then to a format of
    at most 22 bits (bf16: 8, fp16: 11) is exactly the correct rounding of x. float32 and float64
    targets are plain casts (one rounding already); sources of 32 bits or fewer are cast directly.
    """
    import torch

    if x.dtype != torch.float64 or dtype in (torch.float64, torch.float32):
        return x.to(dtype)
    nearest = x.to(torch.float32)
    inexact = nearest.to(torch.float64) != x  # NaN compares unequal: nextafter keeps it NaN
    even = (nearest.view(torch.int32) & 1) == 0
    towards = torch.where(x > nearest.to(torch.float64), torch.inf, -torch.inf).to(torch.float32)
    odd = torch.where(inexact & even, torch.nextafter(nearest, towards), nearest)
    return odd.to(dtype)
