#!/usr/bin/env bash
# bench/gpu/run.sh - the device script of the CUDA kernels (docs/gpu.md).
#
# On a GPU machine with only the CUDA toolkit (nvcc, a host g++ >= 10) and PyTorch:
#   1. builds the kernels and bench_decode with nvcc/g++ directly (no CMake, Eigen or
#      Catch2 needed; the kernels and the benchmark use only the std library);
#   2. checks the kernels against the CPU reference: with CMake + Catch2 + Eigen present,
#      the Catch2 suite (`ctest -L gpu`, 4 at a time, 120 s each at most); otherwise
#      `bench_decode --check`, a subset of the same device checks without Catch2 (a bare
#      machine can get Catch2 and Eigen from a carried prefix: CMAKE_PREFIX_PATH, docs/gpu.md);
#   3. measures device-to-device copy bandwidth and times packed decode attention
#      (bench_decode), then fp16 SDPA on the same shapes (sdpa.py), and prints ONE table;
#   3b. times the same decode with a 132-token fp16 window (window_table.txt, appended to the table);
#   4. runs compute-sanitizer (memcheck, racecheck, synccheck) over a few short checks
#      per kernel in the time left under the guard (sanitizer.txt), and prints the table again.
# Results go to $OUT (if set) or build-gpu/out: gpu_decode_table.txt, gpu_decode.json,
# checks.txt, packed.json (CUDA-core split kernel), packed_tc.json (tensor-core split kernel;
# each split kernel runs in its own process, so a fault in one keeps the other's results). Stops itself after 7 minutes (BGTQ_GPU_TIMEOUT seconds).
# Environment: OUT, BGTQ_GPU_BUILD (work dir), BGTQ_GPU_ARCH (e.g. 90), BGTQ_GPU_CTEST=0
# (skip the CMake/Catch2 path), BGTQ_GPU_QUICK=1 (T up to 32K only), BGTQ_GPU_SANITIZE=0 (skip step 4),
# BGTQ_GPU_WINDOW=N (window rows with N tokens, 0 skips them), BGTQ_GPU_TIMEOUT, CXX, CUDACXX,
# BGTQ_NO_PDL=1 (plain launches throughout; a failed check is rerun so once by itself),
# BGTQ_GPU_BUILD_ONLY=1 (stop after building bench_decode and probing the device: bench/gpu/profile.sh).
# Dry run without a GPU (ctest gpu_script:run_sh_dry): BGTQ_GPU_BENCH_BIN=<a built bench_decode>
# skips step 1 and nvcc (the CPU emulator's build/bin/bench_decode_emu runs everything after
# it), BGTQ_GPU_DRY=1 takes dry-run sizes (bench_decode --dry: T 256, 3 timed runs, and
# --sanitize's short checks in place of --check): a test of this script, not a measurement.
# Exit status: 0 all good, 1 a check failed or a step broke, 124 the time guard fired.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
GUARD_S="${BGTQ_GPU_TIMEOUT:-420}"

if [[ -z "${BGTQ_GPU_GUARDED:-}" ]] && command -v timeout >/dev/null 2>&1; then
  export BGTQ_GPU_GUARDED=1
  set +e
  timeout --signal=TERM --kill-after=15 "$GUARD_S" bash "${BASH_SOURCE[0]}" "$@"
  rc=$?
  set -e
  if [[ $rc -eq 124 || $rc -eq 137 ]]; then
    echo "run.sh: stopped by the ${GUARD_S}s time guard (partial results, if any, are in \$OUT)" >&2
  fi
  exit "$rc"
fi

log() { echo "[run.sh $(date +%H:%M:%S)] $*" >&2; }
die() { echo "run.sh: error: $*" >&2; exit 1; }

WORK="${BGTQ_GPU_BUILD:-$ROOT/build-gpu}"
OUTDIR="${OUT:-$WORK/out}"
mkdir -p "$WORK/obj" "$OUTDIR"
JOBS="$(nproc 2>/dev/null || echo 4)"
START=$SECONDS

BENCH="${BGTQ_GPU_BENCH_BIN:-}"
DRY="${BGTQ_GPU_DRY:-0}"
if [[ -n "$BENCH" ]]; then
  [[ -x "$BENCH" ]] || die "BGTQ_GPU_BENCH_BIN=$BENCH is not an executable"
  log "BGTQ_GPU_BENCH_BIN: no build, running $BENCH; results in $OUTDIR"
  CUDA_HOME="$(dirname "$(dirname "$(command -v nvcc || echo /usr/local/cuda/bin/nvcc)")")"
  NVCC="" SM_CC=""
else
# ---------------------------------------------------------------- toolchain
NVCC="${CUDACXX:-}"
[[ -z "$NVCC" ]] && NVCC="$(command -v nvcc || true)"
[[ -z "$NVCC" && -x /usr/local/cuda/bin/nvcc ]] && NVCC=/usr/local/cuda/bin/nvcc
[[ -n "$NVCC" ]] || die "nvcc not found (set CUDACXX or put the CUDA toolkit's bin/ on PATH)"
CUDA_HOME="$(cd "$(dirname "$NVCC")/.." && pwd)"
CXX="${CXX:-g++}"
command -v "$CXX" >/dev/null 2>&1 || die "host compiler $CXX not found (set CXX)"
log "nvcc: $("$NVCC" --version | tail -1)"
log "host compiler: $("$CXX" --version | head -1)"
if command -v nvidia-smi >/dev/null 2>&1; then
  nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader >&2 || true
  SM_CC="$(nvidia-smi --query-gpu=compute_cap --format=csv,noheader 2>/dev/null | head -1 | tr -d ' .')"
else
  SM_CC=""
fi
SM_CC="${BGTQ_GPU_ARCH:-$SM_CC}"  # override, e.g. 90 (also allows a build-only dry run without a GPU)
if [[ -n "$SM_CC" && "$SM_CC" =~ ^[0-9]+$ ]]; then
  ARCH="-gencode=arch=compute_${SM_CC},code=sm_${SM_CC}"
else
  ARCH="-arch=native"
fi
log "target: $ARCH, $JOBS jobs, work dir $WORK, results in $OUTDIR"

# ---------------------------------------------------------------- 1. build
NVFLAGS=(-std=c++20 -O3 $ARCH -fmad=false --expt-relaxed-constexpr -lineinfo -I"$ROOT/include" -I"$ROOT/kernels")
pids=()
objs=()
for cu in "$ROOT"/kernels/*.cu; do
  o="$WORK/obj/$(basename "${cu%.cu}").o"
  objs+=("$o")
  "$NVCC" "${NVFLAGS[@]}" -c "$cu" -o "$o" > "$o.log" 2>&1 &
  pids+=($!)
done
fail=0
for i in "${!pids[@]}"; do
  if ! wait "${pids[$i]}"; then
    cat "${objs[$i]}.log" >&2
    fail=1
  fi
done
[[ $fail -eq 0 ]] || die "kernel build failed"
log "kernels built ($((SECONDS - START)) s)"
CUDA_LIBS=(-L"$CUDA_HOME/lib64" -L"$CUDA_HOME/targets/x86_64-linux/lib" -L"$CUDA_HOME/lib" -lcudart_static -lrt -ldl -lpthread)
"$CXX" -std=c++20 -O2 -march=native -ffp-contract=off -I"$ROOT/include" -I"$ROOT/tests/cuda" -I"$CUDA_HOME/include" \
  "$ROOT/bench/gpu/bench_decode.cpp" "${objs[@]}" "${CUDA_LIBS[@]}" -o "$WORK/bench_decode" \
  || die "bench_decode build failed"
log "bench_decode built ($((SECONDS - START)) s)"
BENCH="$WORK/bench_decode"
fi
set +e
"$BENCH" --probe >&2
probe=$?
set -e
[[ $probe -eq 0 ]] || die "no usable CUDA device (bench_decode --probe exit $probe); nothing was measured"
if [[ "${BGTQ_GPU_BUILD_ONLY:-0}" == "1" ]]; then log "built $BENCH (BGTQ_GPU_BUILD_ONLY=1: no checks, no timings)"; exit 0; fi

# ---------------------------------------------------------------- 2. correctness
checks_ok=1
CHECKS="$OUTDIR/checks.txt"
: > "$CHECKS"
use_ctest=0
check_mode=--check
[[ "$DRY" == "1" ]] && check_mode=--sanitize
if [[ -n "${BGTQ_GPU_BENCH_BIN:-}" ]]; then
  log "BGTQ_GPU_BENCH_BIN: $BENCH $check_mode (no Catch2 build)"
elif [[ "${BGTQ_GPU_CTEST:-auto}" != "0" ]] && command -v cmake >/dev/null 2>&1 && command -v ctest >/dev/null 2>&1; then
  if cmake -S "$ROOT" -B "$WORK/cmake" -DCMAKE_BUILD_TYPE=Release -DBGTQ_CUDA_ARCHITECTURES="${SM_CC:-native}" \
       -DCMAKE_CUDA_COMPILER="$NVCC" -DBGTQ_BUILD_TOOLS=OFF -DBGTQ_BUILD_BENCH=OFF -DBGTQ_BUILD_TESTS=ON \
       > "$WORK/cmake-configure.log" 2>&1; then
    use_ctest=1
  else
    log "CMake configure failed (Eigen or Catch2 missing?), see $WORK/cmake-configure.log: using bench_decode --check"
  fi
else
  log "no CMake: using bench_decode --check"
fi
if [[ $use_ctest -eq 1 ]]; then
  log "Catch2 suite: building test_cuda"
  if cmake --build "$WORK/cmake" -j "$JOBS" --target test_cuda > "$WORK/cmake-build.log" 2>&1; then
    (cd "$WORK/cmake" && ctest -L gpu -j 4 --timeout 120 --output-on-failure) 2>&1 | tee -a "$CHECKS" >&2 || checks_ok=0
  else
    tail -40 "$WORK/cmake-build.log" >&2
    log "test_cuda build failed: falling back to bench_decode --check"
    use_ctest=0
  fi
fi
if [[ $use_ctest -eq 0 ]]; then
  # one process per split kernel: a fault in one (a sticky CUDA error) cannot hide the other's results
  "$BENCH" $check_mode --path cuda_cores 2>&1 | tee -a "$CHECKS" >&2 || checks_ok=0
  "$BENCH" $check_mode --path tensor_cores 2>&1 | tee -a "$CHECKS" >&2 || checks_ok=0
fi
if [[ $checks_ok -eq 1 ]]; then
  log "checks passed ($((SECONDS - START)) s)"
else
  log "CHECKS FAILED (see $CHECKS)"
  # the CPU emulator never overlaps launches: rerun with plain ones to tell a
  # programmatic-dependent-launch fault from a kernel fault (a line per split kernel)
  if [[ -z "${BGTQ_NO_PDL:-}" ]]; then
    for path in cuda_cores tensor_cores; do
      set +e
      BGTQ_NO_PDL=1 timeout --kill-after=5 90 "$BENCH" $check_mode --path "$path" > "$WORK/check_no_pdl_$path.txt" 2>&1
      nrc=$?
      set -e
      verdict="FAILS too (exit $nrc): not the launch overlap"
      [[ $nrc -eq 0 ]] && verdict="passes: the fault needs overlapped launches (programmatic dependent launch)"
      echo "diagnosis: bench_decode $check_mode --path $path with BGTQ_NO_PDL=1 $verdict" | tee -a "$CHECKS" >&2
    done
  fi
fi

# ---------------------------------------------------------------- 3. benchmark
QUICK=()
[[ "${BGTQ_GPU_QUICK:-0}" == "1" ]] && QUICK=(--quick)
[[ "$DRY" == "1" ]] && QUICK=(--dry)
WINDOW_SIZES=--quick
[[ "$DRY" == "1" ]] && WINDOW_SIZES=--dry
log "benchmark: copy bandwidth and packed decode attention (CUDA-core split kernel)"
"$BENCH" ${QUICK[@]+"${QUICK[@]}"} --runs 25 --path cuda_cores --json "$OUTDIR/packed.json" \
  > "$OUTDIR/packed_table.txt" || die "bench_decode (cuda_cores) failed"
log "packed decode timed, CUDA cores ($((SECONDS - START)) s)"
PACKED=(--packed "$OUTDIR/packed.json")
log "benchmark: the tensor-core split kernel (compared with the CUDA-core output at every shape)"
set +e
"$BENCH" ${QUICK[@]+"${QUICK[@]}"} --runs 25 --path tensor_cores --json "$OUTDIR/packed_tc.json" \
  > "$OUTDIR/packed_tc_table.txt"
tc_rc=$?
set -e
if [[ $tc_rc -eq 0 || $tc_rc -eq 3 ]]; then
  PACKED+=(--packed "$OUTDIR/packed_tc.json")
  [[ $tc_rc -eq 3 ]] && { checks_ok=0; log "TENSOR-CORE OUTPUT DISAGREES with the CUDA-core output (see above)"; }
else
  checks_ok=0
  log "bench_decode (tensor_cores) failed with exit $tc_rc: the table has CUDA-core rows only"
fi
log "packed decode timed ($((SECONDS - START)) s)"
PY="$(command -v python3 || command -v python || true)"
if [[ -n "$PY" ]]; then
  "$PY" "$ROOT/bench/gpu/sdpa.py" "${PACKED[@]}" --out "$OUTDIR" --runs 25 \
    || { log "sdpa.py failed: packed-only tables follow"; cat "$OUTDIR/packed_table.txt" "$OUTDIR/packed_tc_table.txt" 2>/dev/null; }
else
  log "no python: packed-only tables follow (no fp16 SDPA baseline)"
  cat "$OUTDIR/packed_table.txt" "$OUTDIR/packed_tc_table.txt" 2>/dev/null
fi

# ---------------------------------------------------------------- 3b. with an fp16 window
# The same packed decode with a 4 + 128-token fp16 window per sequence (sink + recent, as
# a serving engine keeps them; the merge kernel attends it), T = 4K and 32K, CUDA cores:
# window.json / window_table.txt, printed after the main table. Skipped when the guard
# leaves under 150 s (the sanitizer runs get the rest).
WINDOW_TOKENS="${BGTQ_GPU_WINDOW:-132}"
left=$((GUARD_S - (SECONDS - START)))
if [[ "$WINDOW_TOKENS" != "0" ]] && (( left >= 150 )); then
  log "benchmark: packed decode with a ${WINDOW_TOKENS}-token fp16 window (bench_decode $WINDOW_SIZES)"
  set +e
  timeout --kill-after=5 60 "$BENCH" $WINDOW_SIZES --window "$WINDOW_TOKENS" --runs 20 --path cuda_cores \
    --json "$OUTDIR/window.json" > "$OUTDIR/window_table.txt"
  wrc=$?
  set -e
  if [[ $wrc -eq 0 ]]; then
    { echo; echo "packed decode attention with a ${WINDOW_TOKENS}-token fp16 window per sequence (CUDA cores; bytes include the window):";
      cat "$OUTDIR/window_table.txt"; } | tee -a "$OUTDIR/gpu_decode_table.txt"
  else
    log "bench_decode --window failed or timed out (exit $wrc): no window rows"
  fi
else
  log "window rows skipped (${left}s left under the guard, BGTQ_GPU_WINDOW=$WINDOW_TOKENS)"
fi

# ---------------------------------------------------------------- 4. compute-sanitizer
# Races, out-of-bounds accesses and barrier misuse that the CPU emulator cannot show:
# memcheck, racecheck and synccheck over `bench_decode --sanitize` (a few short cases per
# kernel), in whatever time the guard leaves after the table. rc 9: the tool found errors.
SAN="$(command -v compute-sanitizer || true)"
[[ -z "$SAN" && -x "$CUDA_HOME/bin/compute-sanitizer" ]] && SAN="$CUDA_HOME/bin/compute-sanitizer"
[[ -z "$SAN" && -x "$CUDA_HOME/compute-sanitizer/compute-sanitizer" ]] && SAN="$CUDA_HOME/compute-sanitizer/compute-sanitizer"
SANLOG="$OUTDIR/sanitizer.txt"
: > "$SANLOG"
san_summary=()
if [[ "${BGTQ_GPU_SANITIZE:-1}" == "0" ]]; then
  san_summary+=("compute-sanitizer: skipped (BGTQ_GPU_SANITIZE=0)")
elif [[ -z "$SAN" ]]; then
  san_summary+=("compute-sanitizer: not found, skipped")
else
  for tool in memcheck racecheck synccheck; do
    left=$((GUARD_S - (SECONDS - START) - 25))
    if (( left < 30 )); then san_summary+=("$tool: skipped (${left}s left under the time guard)"); continue; fi
    (( left > 60 )) && left=60
    log "compute-sanitizer --tool $tool (at most ${left}s)"
    set +e
    timeout --kill-after=5 "$left" "$SAN" --tool "$tool" --error-exitcode 9 --print-limit 20 \
      "$BENCH" --sanitize > "$WORK/sanitizer_$tool.txt" 2>&1
    src=$?
    set -e
    { echo "== $tool (exit $src)"; cat "$WORK/sanitizer_$tool.txt"; } >> "$SANLOG"
    if [[ $src -eq 0 ]] && grep -q "^check: .* passed, 0 failed" "$WORK/sanitizer_$tool.txt"; then
      san_summary+=("$tool: clean")
    elif [[ $src -eq 9 ]] || grep -q "^FAIL " "$WORK/sanitizer_$tool.txt"; then
      checks_ok=0
      san_summary+=("$tool: ERRORS (see sanitizer.txt)")
    elif [[ $src -eq 124 || $src -eq 137 ]]; then
      san_summary+=("$tool: did not finish in ${left}s (inconclusive)")
    else
      san_summary+=("$tool: could not run (exit $src, inconclusive; see sanitizer.txt)")
    fi
  done
fi
for line in "${san_summary[@]}"; do echo "sanitizer: $line" | tee -a "$CHECKS"; done

# the table last, where the reply's output tail shows it
[[ -f "$OUTDIR/gpu_decode_table.txt" ]] && { echo; cat "$OUTDIR/gpu_decode_table.txt"; }
[[ $checks_ok -eq 1 ]] || echo "NOTE: the correctness checks FAILED; the timings above are not trustworthy (see $CHECKS)"
log "done in $((SECONDS - START)) s"
[[ $checks_ok -eq 1 ]]
