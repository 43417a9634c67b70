"""The Triton kernels compile for a real GPU (sm_90, H100/H200) without spilling, no GPU needed.

The interpreter checks semantics but not lowering: this compiles two representative variants
ahead of time with Triton's bundled ptxas, in a subprocess without TRITON_INTERPRET (the kernels
are decorated in interpreter mode otherwise), and reads the register/stack use with cuobjdump
(through bench/sm90_compile.py, which does the same for every autotune candidate).
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

triton = pytest.importorskip("triton", reason="compiling the kernels needs the triton package")
NVIDIA_BIN = Path(triton.__file__).parent / "backends" / "nvidia" / "bin"

BENCH = Path(__file__).resolve().parent.parent / "bench"
# Compiled by bench/sm90_compile.py's own routine (which covers every autotune candidate).
PROGRAM = r"""
import sys
sys.path.insert(0, sys.argv[1])
from sm90_compile import Candidate, compile_candidate

variants = [
    # exact fp32, small-head (rank-1 update) path, value rotation: what d = 8 training/eval may pick
    Candidate("fwd", "fp32", 8, 64, 32, 4, False, 4, 2),
    # bf16 tensor cores, the largest kernel (dk and dv), value rotation
    Candidate("bwd_dkdv", "bf16", 8, 64, 64, 16, True, 8, 2),
    # the sliding-window variants of both (hybrid models' windowed layers)
    Candidate("fwd", "fp32", 8, 64, 32, 4, False, 4, 2, windowed=True),
    Candidate("bwd_dkdv", "bf16", 8, 64, 64, 16, True, 8, 2, windowed=True),
]
for variant in variants:
    result = compile_candidate(variant)
    assert result.error is None, result.error
    print(variant.kernel, variant.dtype, variant.windowed, "REG", result.registers, "STACK", result.stack_bytes,
          "SHARED", result.shared_bytes)
"""


@pytest.mark.skipif(not (NVIDIA_BIN / "ptxas").exists(), reason="this triton build ships no CUDA ptxas")
def test_kernels_compile_for_sm90_without_spills():
    env = {key: value for key, value in os.environ.items() if key != "TRITON_INTERPRET"}
    result = subprocess.run(
        [sys.executable, "-c", PROGRAM, str(BENCH)],
        env=env, capture_output=True, text=True, timeout=600,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    lines = result.stdout.strip().splitlines()
    assert len(lines) == 4, result.stdout
    for line in lines:
        fields = line.split()
        registers, stack = int(fields[fields.index("REG") + 1]), int(fields[fields.index("STACK") + 1])
        assert registers <= 255 and stack == 0, line  # a non-zero stack frame means register spills
        assert int(fields[fields.index("SHARED") + 1]) <= 227 * 1024, line  # sm_90 per-block limit
