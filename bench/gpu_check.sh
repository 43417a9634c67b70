#!/usr/bin/env bash
# One-shot GPU check of the fused Triton rotary attention (issue 5), for a bare CUDA machine.
#
#   bash bench/gpu_check.sh            # from the repository root (or anywhere: it cd's there)
#
# What it does, in about 4-5 minutes on an H100/H200 (hard cap per stage, whole script < 5 min):
#   1. reports the environment and uses the python3 that already has torch (prints which);
#      installs missing test deps from ./.whl (carried wheels) or, if reachable, from PyPI;
#      makes the package importable (pip install -e . --no-deps, falling back to PYTHONPATH);
#   2. a pytest-free smoke check: fused forward/backward vs the torch reference on the GPU
#      (global and sliding-window attention);
#   3. the kernel tests (tests/test_kernels_*.py) on the GPU with real Triton (xdist if present);
#   4. a compile + autotune warm-up of the benchmark's kernels (2-4 run concurrently, <= 140 s);
#   5. bench/attention.py alone on the GPU (fused vs rotation + SDPA, training and eval shapes);
#   6. bench/packed_training.py --device cuda: packed training at paper dims, R = 1, 16, 64, 256;
#   7. writes a short report to $OUT/gpu_report.txt (or ./gpu_report.txt) plus logs beside it.
# Environment knobs: PYTHON (interpreter), PARALLEL_TIMEOUT, BENCH_TIMEOUT, BENCH_DTYPES, XDIST_WORKERS;
# GPU_CHECK_ALLOW_CPU=1 dry-runs the whole script without a GPU (Triton interpreter, no speed claims).
set -u
cd "$(dirname "$0")/.."
REPO=$(pwd)
START=$SECONDS
OUT_DIR=${OUT:-$REPO}
REPORT="$OUT_DIR/gpu_report.txt"
LOGS="$OUT_DIR"
mkdir -p "$OUT_DIR"
PY=${PYTHON:-python3}
PARALLEL_TIMEOUT=${PARALLEL_TIMEOUT:-140}
BENCH_TIMEOUT=${BENCH_TIMEOUT:-90}
PACK_TIMEOUT=${PACK_TIMEOUT:-60}
ATLAS_TIMEOUT=${ATLAS_TIMEOUT:-90}
BENCH_DTYPES=${BENCH_DTYPES:-float32,bfloat16}
XDIST_WORKERS=${XDIST_WORKERS:-8}
ALLOW_CPU=${GPU_CHECK_ALLOW_CPU:-0}
unset TRITON_INTERPRET  # real Triton on the GPU
export PYTHONUNBUFFERED=1
export PYTHONPATH="$REPO${PYTHONPATH:+:$PYTHONPATH}"

log() { echo "[gpu_check +$((SECONDS - START))s] $*"; }
: >"$REPORT"
report() { echo "$*" | tee -a "$REPORT"; }

report "formal-rope GPU check (fused Triton rotary attention), $(date -u +%Y-%m-%dT%H:%M:%SZ)"
report "commit: $(git rev-parse --short HEAD 2>/dev/null || echo unknown)$(git diff --quiet 2>/dev/null || echo ' (+local changes)')"
report "machine: $(uname -m); GPU: $(nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader 2>/dev/null || echo 'nvidia-smi unavailable')"

# ---- 1. python, torch, triton, test deps ------------------------------------------------------
if ! "$PY" -c "import torch" 2>/dev/null; then
  for candidate in python3 python /opt/torch/.venv/bin/python3; do
    if "$candidate" -c "import torch" 2>/dev/null; then PY=$candidate; break; fi
  done
fi
install() {  # install python packages: carried wheels first, then PyPI if reachable
  if [ -d "$REPO/.whl" ]; then
    "$PY" -m pip install --quiet --no-index --find-links "$REPO/.whl" "$@" && return 0
  fi
  timeout 120 "$PY" -m pip install --quiet "$@"
}
if ! "$PY" -c "import torch" 2>/dev/null; then
  log "no torch found: trying to install torch + triton (slow, needs .whl or network)"
  install torch triton || { report "FAILED: no python with torch, and it could not be installed"; exit 1; }
fi
"$PY" -c "import triton" 2>/dev/null || install triton
for module in pytest hypothesis numpy; do
  "$PY" -c "import $module" 2>/dev/null || { log "installing $module"; install "$module"; }
done
ENV_LINE=$("$PY" - <<'EOF'
import sys, torch
try:
    import triton; tv = triton.__version__
except Exception as error:
    tv = f"missing ({error})"
cuda = torch.cuda.is_available()
name = torch.cuda.get_device_name() if cuda else "none"
print(f"python {sys.version.split()[0]} at {sys.executable}; torch {torch.__version__} (cuda {torch.version.cuda}, available={cuda}, device={name}); triton {tv}")
EOF
)
report "used: $ENV_LINE"
if ! "$PY" -c "import torch, sys; sys.exit(0 if torch.cuda.is_available() else 1)"; then
  if [ "$ALLOW_CPU" != 1 ]; then
    report "FAILED: torch sees no CUDA device; nothing GPU-specific can be checked"
    exit 1
  fi
  report "DRY RUN WITHOUT A GPU (GPU_CHECK_ALLOW_CPU=1): Triton interpreter on CPU; nothing below is a GPU result"
  export TRITON_INTERPRET=1
fi
if [ "$("$PY" -c 'import formal_rope, os; print(os.path.dirname(os.path.dirname(os.path.abspath(formal_rope.__file__))))' 2>/dev/null)" = "$REPO" ] \
  && PYTHONPATH= "$PY" -c 'import formal_rope' 2>/dev/null; then
  report "package: already installed from $REPO"
elif timeout 60 "$PY" -m pip install --quiet --no-deps --no-build-isolation -e . >"$LOGS/gpu_pip.log" 2>&1; then
  report "package: pip install -e . --no-deps (editable)"
else
  report "package: editable install failed (see gpu_pip.log); using PYTHONPATH=$REPO"
fi


# ---- 2-4. smoke check, kernel tests and compile warm-up, concurrently ------------------------
# Triton compiles each kernel variant on the CPU (a second or two each). Running these three at
# once on the 16 cores, which also fills Triton's on-disk cache, leaves the timed benchmark
# (step 5) alone on a quiet GPU with nothing left to compile.
SMOKE_PY=$(mktemp /tmp/gpu_smoke_XXXX.py)
cat >"$SMOKE_PY" <<'SMOKE'
import torch
from formal_rope.kernels.reference import rotary_attention_reference
from formal_rope.kernels.triton_attention import rotary_attention_triton

torch.manual_seed(0)
device = "cuda" if torch.cuda.is_available() else "cpu"
tolerance = {torch.float32: 1e-5, torch.bfloat16: 2e-2, torch.float16: 2e-2}
worst = {}
cases = ((1, 8, True, False, "dot", None), (17, 8, False, True, "fma", None), (64, 16, True, False, "dot", None),
         (300, 64, True, True, "dot", None), (77, 128, False, False, "dot", None), (130, 8, True, True, "fma", None))
# Sliding windows (hybrid models' windowed layers, E.6's w = 32): i - w <= j < i.
windowed = ((300, 16, True, True, "dot", 32), (130, 8, False, False, "fma", 17), (500, 64, False, True, "dot", 32))
# Every case compiles three kernels: all cases in fp32, a spread of them in bf16 and fp16.
plan = {torch.float32: cases + windowed, torch.bfloat16: cases[:2] + cases[3::2] + windowed[:1],
        torch.float16: cases[2:5:2] + windowed[2:]}
for dtype, dtype_cases in plan.items():
    for length, dim, rotate_values, per_batch, matmul, window in dtype_cases:
        shape = (2, 2, length, dim)
        q, k, v = (torch.randn(shape, device=device, dtype=dtype, requires_grad=True) for _ in range(3))
        angles = torch.randn((2, length, dim // 2) if per_batch else (length, dim // 2), device=device, requires_grad=True)
        grad = torch.randn(shape, device=device, dtype=dtype)
        # Fixed tiles: autotuning every case here would compile ~10x more variants.
        fused = rotary_attention_triton(q, k, v, angles.cos(), angles.sin(), rotate_values=rotate_values,
                                        block_m=32, block_n=32, matmul=matmul, window=window)
        g_fused = torch.autograd.grad(fused, (q, k, v, angles), grad)
        leaves = [t.detach().float().requires_grad_() for t in (q, k, v)] + [angles]
        exact = rotary_attention_reference(*leaves[:3], angles.cos(), angles.sin(), rotate_values=rotate_values,
                                           window=window)
        g_exact = torch.autograd.grad(exact, leaves, grad.float())
        errors = [((a.float() - b).abs().max() / b.abs().max().clamp_min(1e-30)).item()
                  for a, b in zip((fused, *g_fused), (exact, *g_exact))]
        status = "ok" if max(errors) <= tolerance[dtype] else "FAIL"
        print(f"{status} {str(dtype):15s} T={length:3d} d={dim:3d} rotate_v={rotate_values!s:5s} per_batch={per_batch!s:5s} "
              f"{matmul} window={window} rel.err out/dq/dk/dv/dangles = " + " ".join(f"{e:.1e}" for e in errors), flush=True)
        worst[dtype] = max(worst.get(dtype, 0.0), max(errors))
print("worst relative error per dtype:", {str(k): f"{v:.2e}" for k, v in worst.items()})
raise SystemExit(0 if all(worst[d] <= tol for d, tol in tolerance.items()) else 1)
SMOKE
log "smoke check, kernel tests and benchmark warm-up (concurrent, cap ${PARALLEL_TIMEOUT}s)"
timeout "$PARALLEL_TIMEOUT" "$PY" "$SMOKE_PY" >"$LOGS/gpu_smoke.log" 2>&1 &
SMOKE_PID=$!
XDIST=()
if "$PY" -c "import xdist" 2>/dev/null; then XDIST=(-n "$XDIST_WORKERS"); fi
timeout "$PARALLEL_TIMEOUT" "$PY" -m pytest tests/test_kernels_*.py -o addopts= -q -rfE \
  -p no:cacheprovider ${XDIST[@]+"${XDIST[@]}"} >"$LOGS/gpu_tests.log" 2>&1 &
TEST_PID=$!
WARM_DIR=$(mktemp -d /tmp/gpu_warm_XXXX)
WARM_PIDS=()
for case in train eval; do
  for dtype in ${BENCH_DTYPES//,/ }; do
    timeout "$PARALLEL_TIMEOUT" "$PY" bench/attention.py --warmup-only --cases "$case" --dtypes "$dtype" \
      >"$WARM_DIR/$case-$dtype.log" 2>&1 &
    WARM_PIDS+=($!)
  done
done
wait "$SMOKE_PID"; SMOKE_RC=$?
wait "$TEST_PID"; TEST_RC=$?
WARM_RC=0
for pid in "${WARM_PIDS[@]}"; do wait "$pid" || WARM_RC=$?; done
for f in "$WARM_DIR"/*.log; do echo "== $(basename "$f")"; cat "$f"; done >"$LOGS/gpu_warmup.log"
log "concurrent phase done"

timed_out() { [ "$1" = 124 ] && echo ' (TIMED OUT)'; }
report ""
report "== smoke check (fused vs fp32 reference, fwd + all grads, fixed 32x32 tiles), rc=$SMOKE_RC$(timed_out $SMOKE_RC)"
grep -c '^ok' "$LOGS/gpu_smoke.log" | sed 's/^/cases ok: /' | tee -a "$REPORT"
grep -E '^FAIL|worst|Error|error' "$LOGS/gpu_smoke.log" | head -20 | tee -a "$REPORT"
report ""
report "== kernel tests (${XDIST[*]:-serial}), rc=$TEST_RC$(timed_out $TEST_RC)"
grep -E '(passed|failed|error)' "$LOGS/gpu_tests.log" | tail -1 | tee -a "$REPORT"
grep -E '^(FAILED|ERROR)' "$LOGS/gpu_tests.log" | head -15 | tee -a "$REPORT"
report ""
report "== benchmark warm-up (compile + autotune; cases x dtypes in parallel), rc=$WARM_RC$(timed_out $WARM_RC)"
grep -E 'warmed up|Error|error' "$LOGS/gpu_warmup.log" | head -10 | tee -a "$REPORT"

# ---- 5. timed benchmark, alone on the GPU -------------------------------------------------------
log "benchmark"
timeout "$BENCH_TIMEOUT" "$PY" bench/attention.py --dtypes "$BENCH_DTYPES" --json "$LOGS/gpu_bench.json" >"$LOGS/gpu_bench.log" 2>&1
BENCH_RC=$?
report ""
report "== bench/attention.py (fused vs rotation + SDPA with explicit strict mask), rc=$BENCH_RC$(timed_out $BENCH_RC)"
grep -E '^(train|eval)|tuned:|evaluation shapes|no GPU|Error' "$LOGS/gpu_bench.log" | tee -a "$REPORT"

# ---- 6. packed training at paper dims (issue 10): run-steps/s of packs of R runs ----------------
log "packed training"
PACK_DEVICE=cuda; [ "$ALLOW_CPU" = 1 ] && ! "$PY" -c "import torch,sys; sys.exit(not torch.cuda.is_available())" && PACK_DEVICE=cpu
timeout "$PACK_TIMEOUT" "$PY" bench/packed_training.py --single-process --device "$PACK_DEVICE" --dims paper --packs 1,16,64,256 \
  --seconds 2 --warmup 3 >"$LOGS/gpu_packed.log" 2>&1
PACK_RC=$?
report ""
report "== bench/packed_training.py --device cuda (paper dims, R = 1, 16, 64, 256; target >= 20x at R = 64), rc=$PACK_RC$(timed_out $PACK_RC)"
grep -E 'pack|Error' "$LOGS/gpu_packed.log" | tail -8 | tee -a "$REPORT"

# ---- 7. an atlas slice on the GPU (issue 37): generated LTL[P,MOD] languages, NoPE vs RoPE_P, Ray tasks sharing the GPU
log "atlas slice"
ATLAS_BACKEND=(--backend ray --gpus-per-run 0.25 --workers 4)
[ "$ALLOW_CPU" = 1 ] && ! "$PY" -c "import torch,sys; sys.exit(not torch.cuda.is_available())" && ATLAS_BACKEND=(--workers 2)
timeout "$ATLAS_TIMEOUT" "$PY" -m formal_rope.cli atlas --set "generated:family=ltl_p_mod,period=2/3,count=1" \
  --pe nope,rope_p --seeds 1 --steps 300 --worst-case-budget 16 "${ATLAS_BACKEND[@]}" --out "$LOGS/atlas_slice" \
  >"$LOGS/gpu_atlas.log" 2>&1
ATLAS_RC=$?
report ""
report "== atlas slice (2 generated LTL[P,MOD] languages x NoPE, RoPE_P; 300 steps; agreement table), rc=$ATLAS_RC$(timed_out $ATLAS_RC)"
grep -E 'run\(s\) finished|\| (nope|rope_p) |Error' "$LOGS/gpu_atlas.log" | head -12 | tee -a "$REPORT"

report ""
report "total: $((SECONDS - START)) s; logs: gpu_smoke.log gpu_tests.log gpu_warmup.log gpu_bench.log gpu_bench.json gpu_packed.log gpu_atlas.log in $LOGS"
rm -rf "$SMOKE_PY" "$WARM_DIR"
[ $SMOKE_RC = 0 ] && [ $TEST_RC = 0 ] && [ $WARM_RC = 0 ] && [ $BENCH_RC = 0 ] && [ $PACK_RC = 0 ] && [ $ATLAS_RC = 0 ]
