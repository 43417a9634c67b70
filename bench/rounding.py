"""Benchmark + full check: round_to_format vs MPFR (gmpy2) on 10^6 values for every format, and the
correctly rounded exp/cos/sin of Emulated vs MPFR on 10^6 fp32 inputs each.

Prints mismatches (must be 0), the time ratio MPFR-per-element / vectorized round_to_format, and for
exp/cos/sin how many inputs needed the mpmath fallback ("hard") and how many of those would have been
wrong with plain double rounding through float64 ("changed").

    python bench/rounding.py [--n 1000000] [--transcendental-n 1000000]
"""

from __future__ import annotations

import argparse
import time

import gmpy2
import numpy as np
import torch

from formal_rope.precision import correctly_rounded, parse_format, round_to_format

FORMATS = ["fp32", "bf16", "fp16", "fp8e4m3", "fp8e5m2", "e6m9", "e3m2", "e10m40"]


def mpfr_context(fmt) -> gmpy2.context:
    return gmpy2.context(
        precision=fmt.precision, emin=fmt.emin - fmt.mantissa_bits + 1, emax=fmt.emax + 1, subnormalize=True
    )


def inputs(fmt, count: int, seed: int) -> np.ndarray:
    """Whole range (below subnormals to beyond overflow); a quarter exact ties, a quarter next to ties."""
    rng = np.random.default_rng(seed)
    exponents = rng.integers(fmt.emin - fmt.mantissa_bits - 3, fmt.emax + 3, count).astype(np.float64)
    with np.errstate(over="ignore"):
        values = rng.uniform(1.0, 2.0, count) * np.exp2(exponents) * rng.choice([-1.0, 1.0], count)
    quarter = count // 4
    grid = round_to_format(values[:quarter], fmt)
    _, exponent = np.frexp(grid)
    quantum = np.exp2(np.maximum(exponent - 1, fmt.emin) - fmt.mantissa_bits)
    ties = np.where(np.isfinite(grid) & (grid != 0), grid + np.copysign(quantum / 2, grid), values[:quarter])
    values[:quarter] = ties
    values[quarter : 2 * quarter] = np.nextafter(ties, np.where(rng.random(quarter) < 0.5, -np.inf, np.inf))
    return values


def same(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    return ((a == b) & (np.signbit(a) == np.signbit(b))) | (np.isnan(a) & np.isnan(b))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=10**6)
    parser.add_argument("--transcendental-n", type=int, default=10**6)
    args = parser.parse_args()
    torch.set_num_threads(1)
    print(f"{'format':>8} {'values':>9} {'mismatch':>9} {'ours ms':>9} {'MPFR ms':>9} {'ratio':>7}")
    for index, name in enumerate(FORMATS):
        fmt = parse_format(name)
        values = inputs(fmt, args.n, seed=100 + index)
        started = time.perf_counter()
        ours = round_to_format(torch.from_numpy(values), fmt).numpy()
        ours_time = time.perf_counter() - started
        started = time.perf_counter()
        with gmpy2.context(mpfr_context(fmt)):
            mpfr = gmpy2.mpfr
            reference = np.array([float(mpfr(v)) for v in values.tolist()])
        mpfr_time = time.perf_counter() - started
        mismatches = int(np.count_nonzero(~same(ours, reference)))
        print(
            f"{name:>8} {args.n:>9,} {mismatches:>9} {ours_time * 1e3:>9.1f} {mpfr_time * 1e3:>9.0f} "
            f"{mpfr_time / ours_time:>6.0f}x"
        )

    fmt = parse_format("fp32")
    rng = np.random.default_rng(7)
    print(f"\nexp/cos/sin in fp32 on {args.transcendental_n:,} inputs each, vs MPFR:")
    for function, values in (
        ("exp", rng.uniform(-103.0, 88.0, args.transcendental_n)),
        ("cos", rng.uniform(-3e4, 3e4, args.transcendental_n)),
        ("sin", rng.uniform(-3e4, 3e4, args.transcendental_n)),
    ):
        x = round_to_format(torch.from_numpy(values), fmt)
        stats: dict = {}
        started = time.perf_counter()
        ours = correctly_rounded(function, x, fmt, stats).numpy()
        ours_time = time.perf_counter() - started
        with gmpy2.context(mpfr_context(fmt)):
            mpfr_function = getattr(gmpy2, function)
            reference = np.array([float(mpfr_function(gmpy2.mpfr(v))) for v in x.tolist()])
        mismatches = int(np.count_nonzero(~same(ours, reference)))
        plain = round_to_format(getattr(torch, function)(x), fmt).numpy()
        plain_mismatches = int(np.count_nonzero(~same(plain, reference)))
        print(
            f"  {function}: mismatches {mismatches}, hard cases (mpmath fallback) {stats['hard']}, "
            f"changed by the fallback {stats['changed']}, plain double-rounding mismatches {plain_mismatches}, "
            f"{ours_time * 1e3:.0f} ms"
        )


if __name__ == "__main__":
    main()
