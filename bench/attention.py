"""Fused Triton rotary attention vs the unfused torch path, measured in the same run.

Unfused baseline = rotate q, k (and v) with torch ops, then
torch.nn.functional.scaled_dot_product_attention with an explicit strict-causal boolean mask
(row 0 is given key 0 and zeroed afterwards, since SDPA cannot express an empty row), then the
inverse output rotation for JoFormer. Fused = formal_rope.kernels.triton_attention.

Shapes (SPEC section 8): training = batch 128, T = 42, 8 heads, head dim 8, forward + backward;
evaluation = batch 512, T = 502, 8 heads, head dim 8, forward only under no_grad.

On a GPU: median milliseconds (triton.testing.do_bench), the speed ratio unfused/fused, and the peak
extra memory (torch.cuda.max_memory_allocated minus what the inputs hold). Without a GPU the kernel
runs in the Triton interpreter on tiny shapes: the script checks agreement and says plainly that
no speed claim is made.

    python bench/attention.py                # all cases
    python bench/attention.py --json out.json --dtypes float32
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from dataclasses import asdict, dataclass

import torch

HAS_GPU = torch.cuda.is_available()
if not HAS_GPU:
    os.environ.setdefault("TRITON_INTERPRET", "1")  # must precede the kernel module import

from torch.nn import functional as F  # noqa: E402

from formal_rope.kernels.reference import apply_rotary  # noqa: E402
from formal_rope.kernels.triton_attention import interpreter_active, rotary_attention_triton  # noqa: E402

DTYPES = {"float32": torch.float32, "bfloat16": torch.bfloat16, "float16": torch.float16}


@dataclass(frozen=True)
class Case:
    name: str
    batch: int
    heads: int
    length: int
    dim: int
    backward: bool


GPU_CASES = (
    Case("train", 128, 8, 42, 8, backward=True),
    Case("eval", 512, 8, 502, 8, backward=False),
)
# Interpreter stand-ins: same structure, shapes small enough to run in seconds on one core.
CPU_CASES = (
    Case("train(tiny)", 2, 2, 42, 8, backward=True),
    Case("eval(tiny)", 1, 2, 96, 8, backward=False),
)


@dataclass(frozen=True)
class Row:
    case: str
    dtype: str
    rotate_values: bool
    shape: str
    fused_ms: float
    unfused_ms: float
    speedup: float | None
    fused_peak_mib: float | None
    unfused_peak_mib: float | None
    max_abs_diff: float
    device: str
    tuned: str  # the autotuner's picks (GPU): fwd / dkdv / dq tiles, warps, and tl.dot vs small-head path


def unfused_attention(q, k, v, cos, sin, *, rotate_values: bool, mask: torch.Tensor, keep_rows: torch.Tensor):
    """Rotation in torch + SDPA with an explicit strict mask (row 0 re-zeroed)."""
    cos, sin = cos.to(q.dtype), sin.to(q.dtype)
    q_rot, k_rot = apply_rotary(q, cos, sin), apply_rotary(k, cos, sin)
    v_in = apply_rotary(v, cos, sin) if rotate_values else v
    out = F.scaled_dot_product_attention(q_rot, k_rot, v_in, attn_mask=mask) * keep_rows
    return apply_rotary(out, cos, sin, inverse=True) if rotate_values else out


def strict_mask(length: int, device) -> tuple[torch.Tensor, torch.Tensor]:
    mask = torch.ones(length, length, dtype=torch.bool, device=device).tril(-1)
    mask[0, 0] = True  # SDPA needs one visible key per row; row 0 is zeroed by keep_rows instead
    keep_rows = torch.ones(length, 1, device=device)
    keep_rows[0] = 0
    return mask, keep_rows


def time_ms(fn, repeats: int) -> float:
    if HAS_GPU:
        import triton.testing

        return float(triton.testing.do_bench(fn, warmup=25, rep=max(100, repeats * 10)))
    fn()  # first call pays the interpreter's rewrite
    start = time.perf_counter()
    for _ in range(repeats):
        fn()
    return (time.perf_counter() - start) * 1000 / repeats


def peak_extra_mib(fn) -> float | None:
    if not HAS_GPU:
        return None
    torch.cuda.synchronize()
    torch.cuda.reset_peak_memory_stats()
    before = torch.cuda.memory_allocated()
    fn()
    torch.cuda.synchronize()
    return (torch.cuda.max_memory_allocated() - before) / 2**20


def run_case(case: Case, dtype: torch.dtype, rotate_values: bool, repeats: int) -> Row:
    device = "cuda" if HAS_GPU else "cpu"
    generator = torch.Generator(device=device).manual_seed(0)
    shape = (case.batch, case.heads, case.length, case.dim)
    q, k, v = (torch.randn(shape, generator=generator, device=device, dtype=dtype) for _ in range(3))
    angles = torch.arange(case.length, device=device, dtype=torch.float32)[:, None] * torch.logspace(
        0, -3, case.dim // 2, device=device
    )
    cos, sin = angles.cos(), angles.sin()
    mask, keep_rows = strict_mask(case.length, device)
    keep_rows = keep_rows.to(dtype)
    grad_out = torch.randn(shape, generator=generator, device=device, dtype=dtype)
    leaves = [t.clone().requires_grad_(case.backward) for t in (q, k, v)]

    def fused():
        return rotary_attention_triton(*leaves, cos, sin, rotate_values=rotate_values)

    def unfused():
        return unfused_attention(*leaves, cos, sin, rotate_values=rotate_values, mask=mask, keep_rows=keep_rows)

    def step(forward):
        if case.backward:
            return lambda: torch.autograd.grad(forward(), leaves, grad_out)
        return lambda: _no_grad(forward)

    with torch.no_grad():
        diff = (fused().float() - unfused().float()).abs().max().item()
    fused_ms = time_ms(step(fused), repeats)
    unfused_ms = time_ms(step(unfused), repeats)
    return Row(
        case=case.name,
        dtype=str(dtype).removeprefix("torch."),
        rotate_values=rotate_values,
        shape="x".join(map(str, shape)),
        fused_ms=fused_ms,
        unfused_ms=unfused_ms,
        speedup=unfused_ms / fused_ms if HAS_GPU else None,
        fused_peak_mib=peak_extra_mib(step(fused)),
        unfused_peak_mib=peak_extra_mib(step(unfused)),
        max_abs_diff=diff,
        device=torch.cuda.get_device_name() if HAS_GPU else "cpu (Triton interpreter)",
        tuned=_tuned_configs(case.backward) if HAS_GPU else "n/a (fixed interpreter tiles)",
    )


def _tuned_configs(backward: bool) -> str:
    from formal_rope.kernels import triton_attention as kernels

    tuners = [("fwd", kernels._fwd_tuned)] + (
        [("dkdv", kernels._dkdv_tuned), ("dq", kernels._dq_tuned)] if backward else []
    )
    return "; ".join(f"{name}: {getattr(tuner, 'best_config', None)}" for name, tuner in tuners)


def warm_up(case: Case, dtype: torch.dtype, rotate_values: bool) -> None:
    """One fused call (forward, and backward for training): compiles and autotunes every kernel."""
    device = "cuda" if HAS_GPU else "cpu"
    shape = (case.batch, case.heads, case.length, case.dim)
    q, k, v = (torch.randn(shape, device=device, dtype=dtype, requires_grad=case.backward) for _ in range(3))
    angles = torch.randn(case.length, case.dim // 2, device=device)
    out = rotary_attention_triton(q, k, v, angles.cos(), angles.sin(), rotate_values=rotate_values)
    if case.backward:
        out.sum().backward()
    if HAS_GPU:
        torch.cuda.synchronize()


def _no_grad(fn):
    with torch.no_grad():
        return fn()


def _fmt(value: float | None, spec: str) -> str:
    return "n/a" if value is None else format(value, spec)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--dtypes", default="float32,bfloat16", help="comma list of float32,bfloat16,float16")
    parser.add_argument("--repeats", type=int, default=3, help="timed calls per measurement on CPU (GPU: do_bench)")
    parser.add_argument("--json", dest="json_path", help="also write the rows as JSON to this file")
    parser.add_argument("--cases", default="train,eval", help="comma list of the cases to run: train,eval")
    parser.add_argument(
        "--warmup-only",
        action="store_true",
        help="only compile and autotune the fused kernels for the chosen cases (fills Triton's on-disk "
        "cache so a later timed run, e.g. from gpu_check.sh, does not pay compilation), then exit",
    )
    args = parser.parse_args(argv)
    torch.manual_seed(0)
    if not HAS_GPU:
        torch.set_num_threads(1)
        print("NO GPU PRESENT: running the Triton kernel in the CPU interpreter (TRITON_INTERPRET=1) on tiny")
        print("shapes to check that it runs and agrees with the unfused path. These timings are NOT a speed")
        print("claim; speed ratios and peak memory are reported only on a CUDA GPU.\n")
    assert HAS_GPU or interpreter_active()
    wanted = {name.strip() for name in args.cases.split(",")}
    cases = [case for case in (GPU_CASES if HAS_GPU else CPU_CASES) if case.name.split("(")[0] in wanted]
    if args.warmup_only:
        for case in cases:
            for dtype_name in args.dtypes.split(","):
                for rotate_values in (False, True):
                    warm_up(case, DTYPES[dtype_name.strip()], rotate_values)
        print(f"warmed up {len(cases)} case(s) x {args.dtypes}")
        return 0
    rows = []
    for case in cases:
        for dtype_name in args.dtypes.split(","):
            for rotate_values in (False, True):
                row = run_case(case, DTYPES[dtype_name.strip()], rotate_values, args.repeats)
                rows.append(row)
                print(
                    f"{row.case:12s} {row.dtype:9s} rotate_v={str(row.rotate_values):5s} {row.shape:>16s}  "
                    f"fused {row.fused_ms:9.3f} ms  unfused {row.unfused_ms:9.3f} ms  "
                    f"speedup {_fmt(row.speedup, '5.2f') + ('x' if row.speedup else '')}  "
                    f"peak MiB fused {_fmt(row.fused_peak_mib, '8.1f')} unfused {_fmt(row.unfused_peak_mib, '8.1f')}  "
                    f"max|diff| {row.max_abs_diff:.2e}",
                    flush=True,
                )
                if HAS_GPU:
                    print(f"{'':12s} tuned: {row.tuned}", flush=True)
    if HAS_GPU:
        eval_rows = [r for r in rows if r.case == "eval"]
        worst = min(r.speedup for r in eval_rows)
        verdict = "MET" if worst >= 1.5 else "NOT MET"
        print(f"\nevaluation shapes: worst speedup {worst:.2f}x (target >= 1.5x): {verdict}")
    else:
        print("\nno GPU: speed target (>= 1.5x at evaluation shapes) not measured")
    if args.json_path:
        with open(args.json_path, "w") as handle:
            json.dump([asdict(r) for r in rows], handle, indent=2)
    return 0


if __name__ == "__main__":
    sys.exit(main())
