"""Compile every autotune candidate of the fused rotary attention for sm_90, without a GPU.

A GPU lease is short (minutes), so what can be checked on a CPU is checked here: each kernel
(forward, backward dk/dv, backward dq) is compiled ahead of time for an H100/H200 (sm_90) with
Triton's bundled ptxas, for every (dtype, precision, head dimension) the trainer and evaluator
can ask for and every tile configuration the autotuner would time for it (the configs come from
the kernel module's own pruning hook, so this script follows the autotuner). For each it reports
registers per thread, stack bytes (a non-zero stack frame means register spills), shared memory
per block against the sm_90 limit, and the compile time. The exit status is 1 if a candidate
fails to compile, spills, or needs more shared memory than an sm_90 block may have.

    python bench/sm90_compile.py                       # everything (166 compiles, ~8 min on 2 cores)
    python bench/sm90_compile.py --quick               # head dims 8 and 64, bf16 and exact fp32
    python bench/sm90_compile.py --jobs 2 --json out.json

Run it under the Triton version the GPU machine has (see the note in docs/kernels.md) to catch
version-specific lowering failures before they cost device time.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ProcessPoolExecutor
from dataclasses import asdict, dataclass
from pathlib import Path

# Compiling needs the real (decorated) kernels: the interpreter replaces them.
os.environ.pop("TRITON_INTERPRET", None)

import triton  # noqa: E402
from triton.backends.compiler import GPUTarget  # noqa: E402
from triton.compiler import ASTSource  # noqa: E402

import formal_rope.kernels.triton_attention as kernels  # noqa: E402

SM90_SHARED_LIMIT = 232_448  # bytes of shared memory one block may use on sm_90 (227 KiB)
KERNELS = {
    "fwd": kernels._attention_fwd_kernel,
    "bwd_dkdv": kernels._attention_bwd_dkdv_kernel,
    "bwd_dq": kernels._attention_bwd_dq_kernel,
}
# The tuned wrappers carry each kernel's own pruning bound (dk/dv allows smaller exact-fp32 tiles).
TUNED = {"fwd": kernels._fwd_tuned, "bwd_dkdv": kernels._dkdv_tuned, "bwd_dq": kernels._dq_tuned}
# (label, pointer dtype for q/k/v/out/do, tl.dot input precision)
DTYPES = {
    "fp32": ("fp32", "ieee"),
    "fp32-tf32": ("fp32", "tf32"),
    "bf16": ("bf16", "tf32"),
    "fp16": ("fp16", "tf32"),
}
POINTERS_IN = {"Q", "K", "V", "OUT", "DO"}
POINTERS_FP32 = {"COS", "SIN", "LSE", "DELTA", "DQ", "DK", "DV"}
NVIDIA_BIN = Path(triton.__file__).parent / "backends" / "nvidia" / "bin"


@dataclass(frozen=True)
class Candidate:
    kernel: str
    dtype: str
    head_dim: int
    block_m: int
    block_n: int
    half_pad: int
    use_dot: bool
    num_warps: int
    num_stages: int
    windowed: bool = False  # the sliding-window variant (HAS_WINDOW)


@dataclass(frozen=True)
class Compiled:
    candidate: Candidate
    registers: int | None
    stack_bytes: int | None
    shared_bytes: int | None
    seconds: float
    error: str | None

    @property
    def ok(self) -> bool:
        return (
            self.error is None
            and self.stack_bytes == 0
            and self.shared_bytes is not None
            and self.shared_bytes <= SM90_SHARED_LIMIT
        )


def _prune_bound(kernel: str) -> int:
    hook = TUNED[kernel].early_config_prune if hasattr(TUNED[kernel], "early_config_prune") else None
    if hook is None:  # older/newer Triton: fall back to the module default
        return kernels._IEEE_DOT_MAX_VOLUME
    return hook.keywords.get("ieee_max_volume", kernels._IEEE_DOT_MAX_VOLUME)


def candidates(kernel_names, dtype_labels, head_dims, length_bucket: int = 512, windowed=(False,)) -> list[Candidate]:
    """The configs the autotuner would time, per kernel, dtype and head dim (deduplicated), for the
    global and/or sliding-window (`windowed`) variant."""
    seen: dict[tuple, Candidate] = {}
    for kernel in kernel_names:
        for label in dtype_labels:
            _, precision = DTYPES[label]
            for head_dim in head_dims:
                named_args = {"T_BUCKET": length_bucket, "HALF": head_dim // 2}
                configs = kernels._autotune_candidates(
                    None, named_args, ieee_max_volume=_prune_bound(kernel), PRECISION=precision
                )
                for config, window in ((config, window) for config in configs for window in windowed):
                    kw = config.kwargs
                    key = (kernel, label, kw["BLOCK_M"], kw["BLOCK_N"], kw["HALF_PAD"], kw["USE_DOT"],
                           config.num_warps, config.num_stages, window)
                    # Head dims with the same padded width compile to the same program.
                    seen.setdefault(key, Candidate(kernel, label, head_dim, kw["BLOCK_M"], kw["BLOCK_N"],
                                                   kw["HALF_PAD"], kw["USE_DOT"], config.num_warps, config.num_stages,
                                                   window))
    return list(seen.values())


def _signature(kernel, pointer_dtype: str, constants: dict) -> dict:
    def kind(name: str) -> str:
        if name in constants:
            return "constexpr"
        if name in POINTERS_IN:
            return "*" + pointer_dtype
        if name in POINTERS_FP32:
            return "*fp32"
        return "fp32" if name in ("qk_scale", "sm_scale") else "i32"

    return {name: kind(name) for name in kernel.arg_names}


def compile_candidate(candidate: Candidate) -> Compiled:
    pointer_dtype, precision = DTYPES[candidate.dtype]
    kernel = KERNELS[candidate.kernel]
    # Value rotation on: it is a superset of the plain kernel (more live tiles, more registers).
    constants = dict(BLOCK_M=candidate.block_m, BLOCK_N=candidate.block_n, HALF_PAD=candidate.half_pad,
                     USE_DOT=candidate.use_dot, ROTATE_V=True, PRECISION=precision, UPCAST_DOT=False,
                     HAS_WINDOW=candidate.windowed)
    start = time.perf_counter()
    try:
        source = ASTSource(fn=kernel, signature=_signature(kernel, pointer_dtype, constants), constexprs=constants)
        compiled = triton.compile(source, target=GPUTarget("cuda", 90, 32),
                                  options=dict(num_warps=candidate.num_warps, num_stages=candidate.num_stages))
        seconds = time.perf_counter() - start
        with tempfile.NamedTemporaryFile(suffix=".cubin") as cubin:
            cubin.write(compiled.asm["cubin"])
            cubin.flush()
            usage = subprocess.run([str(NVIDIA_BIN / "cuobjdump"), "--dump-resource-usage", cubin.name],
                                   capture_output=True, text=True, check=True).stdout
        found = re.search(r"REG:(\d+) STACK:(\d+)", usage)
        registers, stack = (int(found.group(1)), int(found.group(2))) if found else (None, None)
        return Compiled(candidate, registers, stack, int(compiled.metadata.shared), seconds, None)
    except Exception as error:  # noqa: BLE001 - a failed candidate is a result, reported below
        return Compiled(
            candidate, None, None, None, time.perf_counter() - start, f"{type(error).__name__}: {error}"[:300]
        )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--kernels", default=",".join(KERNELS), help="comma-separated subset of " + ",".join(KERNELS))
    parser.add_argument("--dtypes", default=",".join(DTYPES), help="comma-separated subset of " + ",".join(DTYPES))
    parser.add_argument("--head-dims", default="8,16,64,128", help="head dimensions d (d/2 rotary pairs)")
    parser.add_argument("--quick", action="store_true", help="head dims 8 and 64, dtypes bf16 and exact fp32")
    parser.add_argument("--jobs", type=int, default=max(1, (os.cpu_count() or 1)), help="parallel compiles")
    parser.add_argument("--json", type=Path, help="also write every result to this JSON file")
    parser.add_argument("--windowed", action="store_true",
                        help="also compile the sliding-window variant (HAS_WINDOW) of every candidate")
    args = parser.parse_args()
    if not (NVIDIA_BIN / "ptxas").exists():
        print(f"this triton build ships no CUDA ptxas ({NVIDIA_BIN}); nothing to compile")
        return 1
    dtype_labels = ["fp32", "bf16"] if args.quick else args.dtypes.split(",")
    head_dims = [8, 64] if args.quick else [int(d) for d in args.head_dims.split(",")]
    unknown = set(dtype_labels) - set(DTYPES) | set(args.kernels.split(",")) - set(KERNELS)
    if unknown:
        parser.error(f"unknown kernel or dtype: {sorted(unknown)}")
    todo = candidates(args.kernels.split(","), dtype_labels, head_dims,
                      windowed=(False, True) if args.windowed else (False,))
    print(f"triton {triton.__version__}: compiling {len(todo)} autotune candidates for sm_90 "
          f"with {args.jobs} job(s)", flush=True)
    start = time.perf_counter()
    results = []
    with ProcessPoolExecutor(max_workers=args.jobs) as pool:
        for done, result in enumerate(pool.map(compile_candidate, todo), 1):
            results.append(result)
            c = result.candidate
            flag = "ok " if result.ok else "BAD"
            detail = result.error or (f"reg {result.registers:3d} stack {result.stack_bytes:4d} "
                                      f"shared {result.shared_bytes / 1024:6.1f} KiB")
            print(f"[{done:3d}/{len(todo)}] {flag} {c.kernel:8s} {c.dtype:9s} d<={2 * c.half_pad:3d} "
                  f"{c.block_m:3d}x{c.block_n:<3d} w{c.num_warps} s{c.num_stages} "
                  f"{'dot' if c.use_dot else 'fma'}{' win' if c.windowed else ''} {detail} "
                  f"({result.seconds:.1f} s)", flush=True)
    bad = [r for r in results if not r.ok]
    compiled = [r for r in results if r.error is None]
    print(f"\n{len(results)} candidates in {time.perf_counter() - start:.0f} s: {len(results) - len(bad)} ok, "
          f"{sum(r.error is not None for r in results)} failed to compile, "
          f"{sum(r.error is None and r.stack_bytes != 0 for r in results)} spill, "
          f"{sum(r.error is None and (r.shared_bytes or 0) > SM90_SHARED_LIMIT for r in results)} over shared memory")
    if compiled:
        print(f"max registers {max(r.registers or 0 for r in compiled)}, "
              f"max shared {max(r.shared_bytes or 0 for r in compiled) / 1024:.1f} KiB "
              f"(sm_90 limit {SM90_SHARED_LIMIT / 1024:.0f} KiB)")
    if args.json:
        rows = [dict(asdict(r.candidate), registers=r.registers, stack_bytes=r.stack_bytes,
                     shared_bytes=r.shared_bytes, seconds=round(r.seconds, 2), error=r.error, ok=r.ok)
                for r in results]
        args.json.write_text(json.dumps({"triton": triton.__version__, "results": rows}, indent=1))
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
