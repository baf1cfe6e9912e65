#!/usr/bin/env bash
# gpu_script:run_sh_dry - bench/gpu/run.sh, the device script, run end to end without a GPU,
# so that a session lent a device (15 minutes) does not spend them on a broken script.
#   run_sh_dry.sh <bench_decode_emu> <work dir>
# 1. the real run: BGTQ_GPU_BENCH_BIN = the CPU emulator's bench_decode, BGTQ_GPU_DRY=1
#    (T 256, 3 timed runs, --sanitize's short checks), a stand-in PyTorch
#    (tests/cuda/sdpa/faketorch) and a stand-in compute-sanitizer that runs its program:
#    every step runs, exit 0, one table with the packed rows of both split kernels, the fp16
#    SDPA rows, the window rows, both checks and three clean sanitizer lines.
# 2. replays (a stand-in bench_decode that replays run 1's JSON and tables), each failure
#    run.sh must report, with exit 1: a tensor-core check that fails only with overlapped
#    launches (the BGTQ_NO_PDL diagnosis), the tensor-core output disagreeing (exit 3: rows
#    kept, run marked), a sanitizer reporting errors (exit 9); then the tensor-core
#    benchmark crashing (its rows dropped, the CUDA-core ones kept); last, the time guard
#    stopping a hung benchmark (exit 124, a message).
set -euo pipefail
EMU="$1"
WORK="$2"
SRC="$(cd "$(dirname "${BASH_SOURCE[0]}")/../../.." && pwd)"
rm -rf "$WORK"
mkdir -p "$WORK/bin"
fail() { echo "run_sh_dry: FAIL: $*" >&2; exit 1; }
has() {  # has FILE REGEX WHAT
  grep -Eq -- "$2" "$1" || { echo "---- $1:" >&2; cat "$1" >&2; fail "$3: no line matches '$2' in $(basename "$1")"; }
}
hasnt() {
  if grep -Eq -- "$2" "$1"; then echo "---- $1:" >&2; cat "$1" >&2; fail "$3: a line matches '$2' in $(basename "$1")"; fi
}

# a compute-sanitizer that runs its program; FAKE_SAN_ERRORS=<tool> makes that tool report errors
cat > "$WORK/bin/compute-sanitizer" <<'EOF'
#!/usr/bin/env bash
tool=""
while [[ $# -gt 0 ]]; do
  case "$1" in
    --tool) tool="$2"; shift 2 ;;
    --error-exitcode|--print-limit) shift 2 ;;
    *) break ;;
  esac
done
if [[ "${FAKE_SAN_ERRORS:-}" == "$tool" ]]; then "$@"; echo "========= ERROR SUMMARY: 1 error (fake $tool)"; exit 9; fi
exec "$@"
EOF
chmod +x "$WORK/bin/compute-sanitizer"

run() {  # run NAME [VAR=value ...]: run.sh into $WORK/NAME, its exit status in $rc
  local name="$1"
  shift
  set +e
  env PATH="$WORK/bin:$PATH" PYTHONPATH="$SRC/tests/cuda/sdpa/faketorch" PYTHONDONTWRITEBYTECODE=1 \
    BGTQ_GPU_DRY=1 BGTQ_GPU_BUILD="$WORK/$name" OUT="$WORK/$name/out" "$@" \
    bash "$SRC/bench/gpu/run.sh" > "$WORK/$name.out" 2> "$WORK/$name.err"
  rc=$?
  set -e
  echo "run_sh_dry: $name: exit $rc"
}

# ---------------------------------------------------------------- 1. the real dry run
run real BGTQ_GPU_BENCH_BIN="$EMU"
[[ $rc -eq 0 ]] || { cat "$WORK/real.err" >&2; fail "the dry run exited $rc, want 0"; }
out="$WORK/real/out"
for f in checks.txt packed.json packed_tc.json gpu_decode.json gpu_decode_table.txt window.json sanitizer.txt; do
  [[ -s "$out/$f" ]] || fail "no $f in \$OUT"
done
T="$out/gpu_decode_table.txt"
for b in 1 2; do
  has "$T" "^fp16 SDPA +fp16 +$b +256 +100\.0 " "fp16 SDPA row (faketorch: 100 us), B=$b"
  for m in Block-GTQ TQ-MSE Block-GTQ/tc TQ-MSE/tc; do
    for kv in K3V3 K2V2; do
      has "$T" "^$m +$kv +$b +256 +[0-9.]+ +[0-9]+ +[0-9.]+ +[0-9.]+ " "packed row $m $kv B=$b"
    done
  done
done
has "$T" "median of 25 runs \(packed rows: 3\)" "the footer names the packed rows' run count"
has "$T" "132-token fp16 window" "the window section"
has "$T" "^TQ-MSE +K2V2 +2 +256 " "the window rows"
has "$WORK/real.out" "^method +kv +batch +T +time_us" "the table printed on stdout"
[[ $(grep -Ec "^check: [1-9][0-9]* passed, 0 failed" "$out/checks.txt") -eq 2 ]] || { cat "$out/checks.txt" >&2; fail "want two passing --sanitize checks (one per split kernel)"; }
has "$out/checks.txt" "^PASS decode gtq" "the CUDA-core check ran"
has "$out/checks.txt" "^PASS decode\[tensor cores\]" "the tensor-core check ran"
for tool in memcheck racecheck synccheck; do has "$out/checks.txt" "^sanitizer: $tool: clean$" "sanitizer summary"; done
hasnt "$WORK/real.out" "checks FAILED" "a passing run"

# ---------------------------------------------------------------- 2. replays
# bench_decode stand-in: --probe, --check/--sanitize (FAKE_FAIL_CHECK=<path>: that path fails
# unless BGTQ_NO_PDL is set), the benchmark (replays run 1's JSON and table for its path;
# FAKE_TC_RC=<n>: the tensor-core benchmark exits n, FAKE_HANG=1: it sleeps)
cat > "$WORK/bin/replay_bench" <<EOF
#!/usr/bin/env bash
REAL="$out"
EOF
cat >> "$WORK/bin/replay_bench" <<'EOF'
mode=bench path=both json="" window=0
while [[ $# -gt 0 ]]; do
  case "$1" in
    --probe) echo "1 CUDA device(s); device 0: replay"; exit 0 ;;
    --check|--sanitize) mode=check; shift ;;
    --path) path="$2"; shift 2 ;;
    --json) json="$2"; shift 2 ;;
    --window) window="$2"; shift 2 ;;
    --runs|--splits) shift 2 ;;
    *) shift ;;
  esac
done
if [[ $mode == check ]]; then
  if [[ "${FAKE_FAIL_CHECK:-}" == "$path" && -z "${BGTQ_NO_PDL:-}" ]]; then echo "FAIL decode[$path] replayed"; echo "check: 4 passed, 1 failed"; exit 1; fi
  echo "check: 5 passed, 0 failed"; exit 0
fi
[[ "${FAKE_HANG:-}" == 1 ]] && sleep 600
if [[ $window != 0 ]]; then cp "$REAL/window.json" "$json"; cat "$REAL/window_table.txt"; exit 0; fi
if [[ $path == tensor_cores ]]; then
  rc="${FAKE_TC_RC:-0}"
  [[ $rc == 1 ]] && { echo "bench_decode: replayed crash" >&2; exit 1; }
  cp "$REAL/packed_tc.json" "$json"; cat "$REAL/packed_tc_table.txt"; exit "$rc"
fi
cp "$REAL/packed.json" "$json"; cat "$REAL/packed_table.txt"
EOF
chmod +x "$WORK/bin/replay_bench"

run failures BGTQ_GPU_BENCH_BIN="$WORK/bin/replay_bench" FAKE_FAIL_CHECK=tensor_cores FAKE_TC_RC=3 FAKE_SAN_ERRORS=racecheck
[[ $rc -eq 1 ]] || { cat "$WORK/failures.err" >&2; fail "failing checks: exit $rc, want 1"; }
C="$WORK/failures/out/checks.txt"
has "$C" "^FAIL decode\[tensor_cores\] replayed" "the failing check's output kept"
has "$C" "^diagnosis: bench_decode --sanitize --path tensor_cores with BGTQ_NO_PDL=1 passes: the fault needs overlapped launches" "PDL diagnosis"
has "$C" "^diagnosis: bench_decode --sanitize --path cuda_cores with BGTQ_NO_PDL=1 passes" "PDL diagnosis of the other path"
has "$C" "^sanitizer: racecheck: ERRORS" "sanitizer errors"
has "$C" "^sanitizer: memcheck: clean$" "the other sanitizer tools"
has "$WORK/failures.err" "TENSOR-CORE OUTPUT DISAGREES" "exit 3 of the tensor-core benchmark"
has "$WORK/failures/out/gpu_decode_table.txt" "^Block-GTQ/tc +K3V3 +1 +256 " "tensor-core rows kept after exit 3"
has "$WORK/failures.out" "^NOTE: the correctness checks FAILED" "the table marked untrustworthy"

run tc_crash BGTQ_GPU_BENCH_BIN="$WORK/bin/replay_bench" FAKE_TC_RC=1 BGTQ_GPU_SANITIZE=0 BGTQ_GPU_WINDOW=0
[[ $rc -eq 1 ]] || { cat "$WORK/tc_crash.err" >&2; fail "tensor-core benchmark crash: exit $rc, want 1"; }
has "$WORK/tc_crash.err" "bench_decode \(tensor_cores\) failed with exit 1: the table has CUDA-core rows only" "the crash reported"
has "$WORK/tc_crash/out/gpu_decode_table.txt" "^Block-GTQ +K3V3 +1 +256 " "CUDA-core rows kept"
hasnt "$WORK/tc_crash/out/gpu_decode_table.txt" "/tc " "no tensor-core rows"
has "$WORK/tc_crash/out/checks.txt" "^sanitizer: compute-sanitizer: skipped \(BGTQ_GPU_SANITIZE=0\)" "BGTQ_GPU_SANITIZE=0"
hasnt "$WORK/tc_crash/out/gpu_decode_table.txt" "fp16 window" "BGTQ_GPU_WINDOW=0"

run hang BGTQ_GPU_BENCH_BIN="$WORK/bin/replay_bench" FAKE_HANG=1 BGTQ_GPU_TIMEOUT=4
[[ $rc -eq 124 ]] || { cat "$WORK/hang.err" >&2; fail "a hung benchmark: exit $rc, want 124 (the time guard)"; }
has "$WORK/hang.err" "stopped by the 4s time guard" "the guard's message"
echo "run_sh_dry: all passed"
