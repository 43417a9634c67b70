"""The Triton kernels compile for a real GPU (sm_90, H100/H200) without spilling, no GPU needed.

The interpreter checks semantics but not lowering: this compiles two representative variants
ahead of time with Triton's bundled ptxas, in a subprocess without TRITON_INTERPRET (the kernels
are decorated in interpreter mode otherwise), and reads the register/stack use with cuobjdump.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

triton = pytest.importorskip("triton", reason="compiling the kernels needs the triton package")
NVIDIA_BIN = Path(triton.__file__).parent / "backends" / "nvidia" / "bin"

PROGRAM = r"""
import re, subprocess, sys, tempfile
import triton
from triton.backends.compiler import GPUTarget
from triton.compiler import ASTSource
import formal_rope.kernels.triton_attention as kernels

POINTERS_IN = {"Q", "K", "V", "OUT", "DO"}
POINTERS_FP32 = {"COS", "SIN", "LSE", "DELTA", "DQ", "DK", "DV"}


def signature(kernel, dtype, constants):
    def kind(name):
        if name in constants:
            return "constexpr"
        if name in POINTERS_IN:
            return "*" + dtype
        if name in POINTERS_FP32:
            return "*fp32"
        return "fp32" if name in ("qk_scale", "sm_scale") else "i32"
    return {name: kind(name) for name in kernel.arg_names}


variants = [
    # exact fp32, small-head (rank-1 update) path, value rotation: what d = 8 training/eval may pick
    (kernels._attention_fwd_kernel, "fp32", dict(BLOCK_M=64, BLOCK_N=32, HALF_PAD=4, USE_DOT=False), 4, 2),
    # bf16 tensor cores, the largest kernel (dk and dv), value rotation
    (kernels._attention_bwd_dkdv_kernel, "bf16", dict(BLOCK_M=64, BLOCK_N=64, HALF_PAD=16, USE_DOT=True), 4, 2),
]
for kernel, dtype, tiles, warps, stages in variants:
    constants = dict(tiles, ROTATE_V=True, PRECISION="ieee" if dtype == "fp32" else "tf32", UPCAST_DOT=False)
    source = ASTSource(fn=kernel, signature=signature(kernel, dtype, constants), constexprs=constants)
    compiled = triton.compile(source, target=GPUTarget("cuda", 90, 32), options=dict(num_warps=warps, num_stages=stages))
    with tempfile.NamedTemporaryFile(suffix=".cubin") as cubin:
        cubin.write(compiled.asm["cubin"])
        cubin.flush()
        usage = subprocess.run([sys.argv[1], "--dump-resource-usage", cubin.name], capture_output=True, text=True).stdout
    found = re.search(r"REG:(\d+) STACK:(\d+)", usage)
    print(kernel.__name__, dtype, "REG", found.group(1), "STACK", found.group(2))
"""


@pytest.mark.skipif(not (NVIDIA_BIN / "ptxas").exists(), reason="this triton build ships no CUDA ptxas")
def test_kernels_compile_for_sm90_without_spills():
    env = {key: value for key, value in os.environ.items() if key != "TRITON_INTERPRET"}
    result = subprocess.run(
        [sys.executable, "-c", PROGRAM, str(NVIDIA_BIN / "cuobjdump")],
        env=env, capture_output=True, text=True, timeout=600,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    lines = result.stdout.strip().splitlines()
    assert len(lines) == 2, result.stdout
    for line in lines:
        fields = line.split()
        registers, stack = int(fields[fields.index("REG") + 1]), int(fields[fields.index("STACK") + 1])
        assert registers <= 255 and stack == 0, line  # a non-zero stack frame means register spills
