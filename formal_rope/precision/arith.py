"""Two interchangeable arithmetics for evaluating transformers in a format F.

`Emulated(fmt)` carries F-values in float64 tensors and rounds to F after every elementary
operation, with a fixed left-to-right summation order. `Native(dtype)` runs plain torch ops in a
torch dtype. Both expose the same methods, so an evaluator is written once and switched by mode.

Exactness of Emulated:
- +, -, *, /: computed in float64 then rounded to F. For M <= 24 (precision p = M+1 <= 25) the double
  rounding float64 -> F equals a single correct rounding, because 53 >= 2p + 2 (Figueroa, "When is
  double rounding innocuous?", 1995). Products of two F-values with M <= 25 are exact in float64 anyway.
  For 24 < M < 52 the result may differ from correct rounding in rare ties; fp64 itself is float64.
- exp, cos, sin: correctly rounded for M <= 44. torch's float64 result (error well below 2^-46
  relative) is rounded to F; where rounding the ends of the interval y·(1 ± 2^-46) could give two
  different F-values ("hard cases", about 2^(M-45) of inputs), the value is recomputed with mpmath
  at 256 bits and rounded exactly. For M > 44 the float64 value is rounded without that check.
- relu, maximum, neg, comparisons: exact.
"""

from __future__ import annotations

import math
from typing import Callable

import mpmath
import torch

from formal_rope.errors import FormalRopeError
from formal_rope.precision.formats import FloatFormat, f_large, parse_format, round_mpf_to_format, round_to_format
from formal_rope.precision.native import format_of_torch_dtype, native_row

# Relative half-width of the interval that must contain the true value of exp/cos/sin around torch's
# float64 result: 2^-46 is 64 float64 ulps, far above the ~1 ulp error of libm/SLEEF double routines.
_TRANSCENDENTAL_RELATIVE_SLACK = 2.0**-46
_TRANSCENDENTAL_ABSOLUTE_SLACK = 2.0**-1060
_CORRECT_ROUNDING_MAX_MANTISSA = 44
_MPMATH_BITS = 256


def _mpmath_function(name: str) -> Callable:
    return {"exp": mpmath.exp, "cos": mpmath.cos, "sin": mpmath.sin}[name]


def correctly_rounded(name: str, x: torch.Tensor, fmt: FloatFormat, stats: dict | None = None) -> torch.Tensor:
    """exp/cos/sin of float64 `x`, correctly rounded to `fmt` (see module docstring for the method).

    `stats`, if given, receives counts: "hard" (mpmath recomputations) and "changed" (hard cases
    where plain double rounding would have given a different F-value).
    """
    x = x.to(torch.float64)
    approx = getattr(torch, name)(x)
    rounded = round_to_format(approx, fmt)
    if fmt.is_binary64 or fmt.mantissa_bits > _CORRECT_ROUNDING_MAX_MANTISSA:
        return rounded
    slack = approx.abs() * _TRANSCENDENTAL_RELATIVE_SLACK + _TRANSCENDENTAL_ABSOLUTE_SLACK
    low = round_to_format(approx - slack, fmt)
    high = round_to_format(approx + slack, fmt)
    hard = torch.isfinite(x) & ((low != high) | ~torch.isfinite(approx))
    if stats is not None:
        stats["hard"] = stats.get("hard", 0) + int(hard.sum())
        stats.setdefault("changed", 0)
    if bool(hard.any()):
        function = _mpmath_function(name)
        flat_x = x.reshape(-1)
        flat_out = rounded.reshape(-1).clone()
        with mpmath.workprec(_MPMATH_BITS):
            for index in torch.nonzero(hard.reshape(-1)).flatten().tolist():
                exact = round_mpf_to_format(function(mpmath.mpf(float(flat_x[index]))), fmt)
                if stats is not None and exact != float(flat_out[index]):
                    stats["changed"] += 1
                flat_out[index] = exact
        rounded = flat_out.reshape(rounded.shape)
    return rounded


class Emulated:
    """Arithmetic of format F, emulated on float64 tensors that hold F-values.

    Every elementary operation is rounded to F; sums and dot products run left to right with a
    rounding after each addition (the first term starts the accumulator).
    """

    mode = "emulated"

    def __init__(self, fmt: FloatFormat | str, device: torch.device | str | None = None):
        self.format = parse_format(fmt)
        self.dtype = torch.float64
        self.device = torch.device(device) if device is not None else torch.device("cpu")

    def __repr__(self) -> str:
        return f"Emulated({self.format.name})"

    @property
    def name(self) -> str:
        return f"emulated-{self.format.name}"

    @property
    def f_large(self) -> float:
        return f_large(self.format)

    # conversion ---------------------------------------------------------------------------------
    def round(self, x: torch.Tensor) -> torch.Tensor:
        return round_to_format(x.to(device=self.device), self.format)

    def asarray(self, x) -> torch.Tensor:
        """Any numbers (Python, numpy, tensor) -> float64 tensor of F-values (one correct rounding)."""
        if isinstance(x, torch.Tensor):
            tensor = x.to(device=self.device, dtype=torch.float64)
        else:
            tensor = torch.as_tensor(x, dtype=torch.float64, device=self.device)
        return round_to_format(tensor, self.format)

    def to_float64(self, x: torch.Tensor) -> torch.Tensor:
        return x.to(torch.float64)

    def zeros(self, *shape: int) -> torch.Tensor:
        return torch.zeros(*shape, dtype=torch.float64, device=self.device)

    # elementwise --------------------------------------------------------------------------------
    def add(self, a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        return round_to_format(a + b, self.format)

    def sub(self, a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        return round_to_format(a - b, self.format)

    def mul(self, a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        return round_to_format(a * b, self.format)

    def div(self, a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        return round_to_format(a / b, self.format)

    def neg(self, a: torch.Tensor) -> torch.Tensor:
        return -a

    def relu(self, a: torch.Tensor) -> torch.Tensor:
        return torch.clamp_min(a, 0.0)

    def maximum(self, a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        return torch.maximum(a, b)

    def exp(self, a: torch.Tensor) -> torch.Tensor:
        return correctly_rounded("exp", a, self.format)

    def cos(self, a: torch.Tensor) -> torch.Tensor:
        return correctly_rounded("cos", a, self.format)

    def sin(self, a: torch.Tensor) -> torch.Tensor:
        return correctly_rounded("sin", a, self.format)

    # reductions ---------------------------------------------------------------------------------
    def sum(self, x: torch.Tensor, dim: int = -1, keepdim: bool = False) -> torch.Tensor:
        """Left-to-right sum along `dim`, rounded after every addition."""
        moved = x.movedim(dim, 0)
        if moved.shape[0] == 0:
            total = torch.zeros(moved.shape[1:], dtype=torch.float64, device=x.device)
        else:
            total = moved[0].clone()
            for index in range(1, moved.shape[0]):
                total = round_to_format(total + moved[index], self.format)
        return total.unsqueeze(dim) if keepdim else total

    def dot(self, a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        """Inner product over the last dim (broadcast elsewhere): products rounded, summed left to right."""
        return self.sum(self.mul(a, b), dim=-1)

    def matmul(self, a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        """(..., n, k) @ (..., k, m): products rounded, accumulated left to right over k.

        Vectorized over every dimension except the contracted one.
        """
        if a.dim() < 2 or b.dim() < 2:
            raise ValueError("Emulated.matmul needs operands with at least 2 dimensions; use dot for vectors")
        depth = a.shape[-1]
        if b.shape[-2] != depth:
            raise ValueError(f"matmul shape mismatch: {tuple(a.shape)} @ {tuple(b.shape)}")
        if depth == 0:
            shape = torch.broadcast_shapes(a.shape[:-2], b.shape[:-2]) + (a.shape[-2], b.shape[-1])
            return torch.zeros(shape, dtype=torch.float64, device=a.device)
        total = self.mul(a[..., :, 0:1], b[..., 0:1, :])
        for index in range(1, depth):
            product = self.mul(a[..., :, index : index + 1], b[..., index : index + 1, :])
            total = round_to_format(total + product, self.format)
        return total

    def softmax_stable(self, scores: torch.Tensor, mask: torch.Tensor | None = None) -> torch.Tensor:
        """Stable softmax over the last dim: subtract the row max, exp, left-to-right sum, divide.

        mask (broadcastable bool, True = visible): masked entries contribute exactly 0 and get weight
        0; a row with no visible entry gets all-zero weights.
        """
        return _stable_softmax(self, scores, mask)


class Native:
    """Plain torch arithmetic in `dtype` (float64/float32/bfloat16/float16), same interface as Emulated.

    Summation order and accumulator precision are whatever torch uses (CPU bf16/fp16 matmul and sum
    accumulate in float32), so results can differ from Emulated of the same format.
    """

    mode = "native"

    def __init__(self, dtype: torch.dtype | str | FloatFormat, device: torch.device | str | None = None):
        if isinstance(dtype, torch.dtype):
            self.dtype = dtype
            self.format = format_of_torch_dtype(dtype)
        else:
            self.format = parse_format(dtype)
            native = native_row(self.format)
            if native is None:
                raise FormalRopeError(
                    f"format {self.format.describe()} has no native torch dtype; use the emulated mode"
                )
            self.dtype = native.torch_dtype()
        self.device = torch.device(device) if device is not None else torch.device("cpu")

    def __repr__(self) -> str:
        return f"Native({self.dtype})"

    @property
    def name(self) -> str:
        return f"native-{self.format.name}"

    @property
    def f_large(self) -> float:
        return f_large(self.format)

    def round(self, x: torch.Tensor) -> torch.Tensor:
        return self.asarray(x)

    def asarray(self, x) -> torch.Tensor:
        # Round through float64 with round_to_format: torch's float64 -> bf16/fp16 cast goes through
        # float32 and can double-round.
        if isinstance(x, torch.Tensor):
            tensor = x.to(device=self.device, dtype=torch.float64)
        else:
            tensor = torch.as_tensor(x, dtype=torch.float64, device=self.device)
        return round_to_format(tensor, self.format).to(self.dtype)

    def to_float64(self, x: torch.Tensor) -> torch.Tensor:
        return x.to(torch.float64)

    def zeros(self, *shape: int) -> torch.Tensor:
        return torch.zeros(*shape, dtype=self.dtype, device=self.device)

    def add(self, a, b):
        return a + b

    def sub(self, a, b):
        return a - b

    def mul(self, a, b):
        return a * b

    def div(self, a, b):
        return a / b

    def neg(self, a):
        return -a

    def relu(self, a):
        return torch.clamp_min(a, 0.0)

    def maximum(self, a, b):
        return torch.maximum(a, b)

    def exp(self, a):
        return torch.exp(a)

    def cos(self, a):
        return torch.cos(a)

    def sin(self, a):
        return torch.sin(a)

    def sum(self, x, dim: int = -1, keepdim: bool = False):
        return torch.sum(x, dim=dim, keepdim=keepdim)

    def dot(self, a, b):
        return torch.sum(a * b, dim=-1)

    def matmul(self, a, b):
        return torch.matmul(a, b)

    def softmax_stable(self, scores, mask=None):
        return _stable_softmax(self, scores, mask)


Arithmetic = Emulated | Native


def _stable_softmax(arith: Emulated | Native, scores: torch.Tensor, mask: torch.Tensor | None) -> torch.Tensor:
    if mask is None:
        mask = torch.ones_like(scores, dtype=torch.bool)
    mask = torch.broadcast_to(mask, scores.shape)
    negative_inf = torch.full_like(scores, -math.inf)
    row_max = torch.where(mask, scores, negative_inf).amax(dim=-1, keepdim=True)
    visible_row = torch.isfinite(row_max)
    # Fully masked rows: subtract 0 so nothing becomes NaN; their weights are zeroed below.
    safe_max = torch.where(visible_row, row_max, torch.zeros_like(row_max))
    shifted = arith.sub(scores, safe_max)
    shifted = torch.where(mask, shifted, torch.zeros_like(shifted))
    exps = torch.where(mask, arith.exp(shifted), torch.zeros_like(shifted))
    total = arith.sum(exps, dim=-1, keepdim=True)
    safe_total = torch.where(total > 0, total, torch.ones_like(total))
    weights = arith.div(exps, safe_total)
    return torch.where(mask & visible_row, weights, torch.zeros_like(weights))


def make_arithmetic(fmt: FloatFormat | str, mode: str = "emulated", device=None) -> Emulated | Native:
    """`mode` "emulated" (any format) or "native" (fp64/fp32/bf16/fp16)."""
    if mode == "emulated":
        return Emulated(fmt, device=device)
    if mode == "native":
        return Native(fmt, device=device)
    raise FormalRopeError(f"unknown arithmetic mode {mode!r}; use 'emulated' or 'native'")
