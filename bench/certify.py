"""Benchmark: ideal certified range (continued fractions) vs a brute-force scan at N = 10^6.

The brute force is the cheapest correct-by-construction baseline: evaluate cos(g·n) for every
competitor offset n = 1..N (numpy float64, chunked) and take the first n with cos(g·n) > 1 − f/C.
Eq. 10 itself is O(N²) over (i, j) pairs, so the O(N) scan already flatters the baseline. Both
answers are compared; the ratio is brute-force time / continued-fraction time. Realized mode (the
O(L²) scan with emulated fp32 scores) is timed at L = 4096 for reference.

    python bench/certify.py [--n 1000000]
"""

from __future__ import annotations

import argparse
import math
import time

import numpy as np

from formal_rope.certify import certified_range
from formal_rope.precision import f_large


def brute_force_first_violation(
    freq: float, scale: float, margin: float, limit: int, chunk: int = 1 << 18
) -> int | None:
    threshold = 1 - margin / scale
    for start in range(1, limit + 1, chunk):
        offsets = np.arange(start, min(start + chunk, limit + 1), dtype=np.float64)
        hits = np.nonzero(np.cos(freq * offsets) > threshold)[0]
        if hits.size:
            return int(offsets[hits[0]])
    return None


def best_of(function, repeats: int) -> tuple[float, object]:
    best, value = math.inf, None
    for _ in range(repeats):
        started = time.perf_counter()
        value = function()
        best = min(best, time.perf_counter() - started)
    return best, value


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=10**6, help="brute-force scan length")
    args = parser.parse_args()
    margin = f_large("fp32")
    golden = math.pi * (math.sqrt(5) - 1)
    # (freq, scale): first violations below, near and beyond N.
    cases = [(1.0, 1e12), (golden, 5e12), (0.001, 3e11), (1.0, 1e18), (golden, 1e20)]
    print(f"N = {args.n:,}, format fp32, f_large = {margin}")
    print(f"{'freq':>10} {'scale':>8} {'n* (CF)':>22} {'brute force':>12} {'CF ms':>8} {'scan ms':>9} {'ratio':>8}")
    ratios = []
    for freq, scale in cases:
        cf_time, result = best_of(lambda: certified_range(1, freq, scale, "fp32"), 5)
        scan_time, scanned = best_of(lambda: brute_force_first_violation(freq, scale, margin, args.n), 1)
        n_star = result.first_ideal_violation
        if n_star <= args.n:
            assert scanned == n_star, (freq, scale, scanned, n_star)
        else:
            assert scanned is None, (freq, scale, scanned, n_star)
        ratios.append(scan_time / cf_time)
        print(
            f"{freq:>10.6g} {scale:>8.0e} {n_star:>22,} {str(scanned):>12} {cf_time * 1e3:>8.3f} "
            f"{scan_time * 1e3:>9.1f} {scan_time / cf_time:>8.0f}x"
        )
    print(
        f"geometric-mean speed-up of continued fractions over the O(N) scan: {math.exp(np.mean(np.log(ratios))):.0f}x"
    )
    per_offset = best_of(lambda: brute_force_first_violation(1.0, 1e18, margin, args.n), 1)[0] / args.n
    huge_time, huge = best_of(lambda: certified_range(1, 1.0, 1e30, "fp32"), 5)
    print(
        f"at the 10^15 scale (g=1, C=1e30): n* = {huge.first_ideal_violation:,} in {huge_time * 1e3:.2f} ms; "
        f"the scan would need ~{per_offset * huge.first_ideal_violation / 86400 / 365:.1f} years "
        f"({per_offset * 1e9:.1f} ns per offset)"
    )

    import torch

    torch.set_num_threads(1)
    realized_time, realized = best_of(
        lambda: certified_range(1, golden, 1e8, "fp32", mode="realized", max_length=4096), 1
    )
    print(
        f"realized fp32 scan, golden angle, C=1e8, L<=4096: N_max = {realized.n_max}"
        f"{' (lower bound)' if realized.n_max_is_lower_bound else ''} in {realized_time:.2f} s "
        f"(ideal N_max = {certified_range(1, golden, 1e8, 'fp32').n_max})"
    )


if __name__ == "__main__":
    main()
