#!/usr/bin/env bash
# bench/gpu/profile.sh - where the decode launches spend their time, kernel by kernel
# (docs/PERFORMANCE.md, "GPU"). On a GPU machine with the CUDA toolkit (nvcc, ncu):
#   1. builds bench_decode with run.sh (BGTQ_GPU_BUILD_ONLY=1);
#   2. runs Nsight Compute over three decode_attention calls (rotate_query, split, merge
#      kernels) of Block-GTQ K3V3 at B=1 T=4K and B=16 T=32K (D=128, Hq=32, Hkv=8), on each
#      split kernel: ncu_<path>_b<B>.txt (duration, throughput, occupancy, warp stalls),
#      and the CUDA-core kernels with a 132-token fp16 window at B=1 T=4K: ncu_window_b1.txt;
#      and uniform TQ-MSE K3V3 on the tensor cores at B=16 T=32K: ncu_tensor_cores_tq_b16.txt
#      (executed instructions per kernel: divided by B*Hkv*T, the instructions per token
#      and KV head of docs/gpu.md's performance model);
#   3. times `bench_decode --quick` with plain launches (BGTQ_NO_PDL=1) beside overlapped
#      ones, for the launch overlap's share at short T: pdl_on.txt, pdl_off.txt.
#   4. the tensor-core split kernel's stall reasons and most stalled source lines at
#      B=16 T=32K (ncu_stalls_*_b16.txt), and its issue rate per execution pipe, % of each
#      pipe's peak (ncu_pipes_*_b16.txt);
#   5. divides the split kernels' executed instructions by the tokens and KV heads:
#      instructions.txt, beside the static per-unit counts of sass_count.py: sass_count.txt.
# Results go to $OUT (if set) or build-gpu/profile. ncu runs with --clock-control none
# (the clocks as the benchmark sees them) and its default cache flush before each kernel.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
WORK="${BGTQ_GPU_BUILD:-$ROOT/build-gpu}"
OUTDIR="${OUT:-$WORK/profile}"
mkdir -p "$OUTDIR"
BGTQ_GPU_BUILD_ONLY=1 BGTQ_GPU_BUILD="$WORK" OUT="$OUTDIR" bash "$ROOT/bench/gpu/run.sh"
BENCH="$WORK/bench_decode"
NCU="$(command -v ncu || true)"
[[ -z "$NCU" && -n "${CUDA_HOME:-}" && -x "$CUDA_HOME/bin/ncu" ]] && NCU="$CUDA_HOME/bin/ncu"
[[ -z "$NCU" ]] && NCU="$(ls -d /usr/local/cuda/bin/ncu /opt/nvidia/nsight-compute/*/ncu 2>/dev/null | head -1 || true)"

# bench_decode --quick walks Block-GTQ K3V3 first, B in {1, 16} x T in {4K, 32K}; per
# shape it makes (tensor_cores: 1 untimed CUDA-core reference call +) 3 warm-up calls +
# 20 timed calls, 3 kernels each, so a shape's first warm-up call starts at kernel
#   tensor_cores: 72*s + 3, cuda_cores: 69*s   (s = 0 for B=1 T=4K, 3 for B=16 T=32K);
# TQ-MSE K3V3 follows Block-GTQ K3V3's four shapes (4*72 kernels on the tensor cores).
# profile OUTFILE SKIP BENCH_ARGS...: 9 decode kernels (3 calls) from kernel SKIP on
profile() {
  local out="$1" skip="$2"
  shift 2
  echo "ncu: bench_decode $* (kernels $skip..$((skip + 8))) -> $(basename "$out")" >&2
  timeout --kill-after=5 150 "$NCU" --clock-control none --kernel-name regex:'rotate_query|decode_split|merge_kernel' \
    --launch-skip "$skip" --launch-count 9 --section SpeedOfLight --section LaunchStats --section Occupancy \
    --section WarpStateStats --section SchedulerStats --section ComputeWorkloadAnalysis --section InstructionStats \
    "$BENCH" --quick --runs 20 "$@" > "$out" 2>&1 || echo "ncu exit $? ($*)" >&2
}
if [[ -n "$NCU" ]]; then
  for path in tensor_cores cuda_cores; do
    for s in 0 3; do
      if [[ $path == tensor_cores ]]; then skip=$((72 * s + 3)); else skip=$((69 * s)); fi
      b=1; [[ $s -eq 3 ]] && b=16
      profile "$OUTDIR/ncu_${path}_b$b.txt" "$skip" --path "$path"
    done
  done
  # the fp16 window's share (measured ~120 us per call on an H200 at every shape): the
  # CUDA-core kernels with a 132-token window, B=1 T=4K
  profile "$OUTDIR/ncu_window_b1.txt" 0 --path cuda_cores --window 132
  profile "$OUTDIR/ncu_tensor_cores_tq_b16.txt" $((4 * 72 + 72 * 3 + 3)) --path tensor_cores
  # why the tensor-core split kernel's warps wait (average warps stalled per issue, by
  # reason; and ncu's SourceCounters: the most sampled stall locations, by source line
  # since the kernels build with -lineinfo) at B=16 T=32K, Block-GTQ then TQ-MSE: with only this kernel counted, a shape
  # is 23 launches (3 warm-up + 20 timed; the CUDA-core reference call is not counted)
  for m in "blockgtq 69" "tq $((4 * 23 + 69))"; do
    read -r name skip <<< "$m"
    echo "ncu: stall reasons, $name (split launches $skip..$((skip + 2))) -> ncu_stalls_${name}_b16.txt" >&2
    timeout --kill-after=5 150 "$NCU" --clock-control none --kernel-name regex:'decode_split_mma' --launch-skip "$skip" \
      --launch-count 3 --section SourceCounters --metrics 'regex:^smsp__average_warps_issue_stalled_.*_per_issue_active\.ratio$' \
      "$BENCH" --quick --runs 20 --path tensor_cores > "$OUTDIR/ncu_stalls_${name}_b16.txt" 2>&1 || echo "ncu exit $? (stalls $name)" >&2
    # which execution pipes the same launches keep busy (instructions issued to each pipe,
    # % of its peak): the byte permutes, rotates and merges all go to the integer ALU pipe,
    # half the issue rate of the FP32 pipe on sm_90 (64 lanes per SM and clock), so an ALU
    # pipe near 100% would cap the IPC near 2 whatever the occupancy (a separate run: a
    # metric name this ncu lacks cannot cost the stall reasons above)
    echo "ncu: pipe utilization, $name -> ncu_pipes_${name}_b16.txt" >&2
    timeout --kill-after=5 150 "$NCU" --clock-control none --kernel-name regex:'decode_split_mma' --launch-skip "$skip" \
      --launch-count 3 --metrics 'regex:^sm__inst_executed_pipe_[a-z0-9_]+\.avg\.pct_of_peak_sustained_active$' \
      "$BENCH" --quick --runs 20 --path tensor_cores > "$OUTDIR/ncu_pipes_${name}_b16.txt" 2>&1 || echo "ncu exit $? (pipes $name)" >&2
  done
else
  echo "profile.sh: ncu not found, no per-kernel profile" >&2
fi
"$BENCH" --quick --runs 20 --path tensor_cores > "$OUTDIR/pdl_on.txt" 2>&1 || true
BGTQ_NO_PDL=1 "$BENCH" --quick --runs 20 --path tensor_cores > "$OUTDIR/pdl_off.txt" 2>&1 || true
for f in "$OUTDIR"/ncu_*.txt; do
  [[ -f "$f" && "$f" != */ncu_stalls_* && "$f" != */ncu_pipes_* ]] || continue
  grep -h "Duration\|Executed Instructions \|^  [a-z_]*kernel\|decode_split\|rotate_query\|merge_kernel" "$f" || true
done | head -160
# executed instructions of the split kernels per token and KV head (and per 64-token unit),
# beside the static per-unit counts (sass_count.py): their difference is what the probes
# leave out (the copies, the loop, the setup); and the stall reasons, averaged per reason
PY="$(command -v python3 || command -v python || true)"
if [[ -n "$PY" ]]; then
  "$PY" "$ROOT/bench/gpu/sass_count.py" --arch 90 > "$OUTDIR/sass_count.txt" 2>&1 || echo "sass_count.py failed" >&2
  "$PY" - "$OUTDIR" <<'PYEOF' | tee "$OUTDIR/instructions.txt" || true
import glob, os, re, sys
# a kernel's header line in ncu's output: "  name(args) (grid)x(block), Context 1, Stream 7, Device 0, CC 9.0"
header = re.compile(r"(decode_split_mma_kernel|decode_split_kernel|rotate_query_kernel|merge_kernel)\b.*, Context ")
shapes = {"b1": (1, 4096), "b16": (16, 32768)}  # bench_decode --quick shapes profiled above; Hkv = 8
for path in sorted(glob.glob(os.path.join(sys.argv[1], "ncu_*.txt"))):
    base = os.path.basename(path)
    m = re.search(r"_(b1|b16)\.txt$", base)
    if not m or "window" in base:
        continue
    kernel, seen, stalls, pipes = None, {}, {}, {}
    for line in open(path, errors="replace"):
        k = header.search(line)
        if k:
            kernel = k.group(1)
        e = re.match(r"\s*Executed Instructions\s+inst\s+([\d,]+)", line)
        if e and kernel and "split" in kernel:
            seen.setdefault(kernel, []).append(int(e.group(1).replace(",", "")))
        st = re.match(r"\s*smsp__average_warps_issue_stalled_(\w+?)_per_issue_active\.ratio\s+\S+\s+([-+\d.eE]+)\s*$", line)
        if st:
            stalls.setdefault(st.group(1), []).append(float(st.group(2)))
        pp = re.match(r"\s*sm__inst_executed_pipe_(\w+?)\.avg\.pct_of_peak_sustained_active\s+\S+\s+([-+\d.eE]+)\s*$", line)
        if pp:
            pipes.setdefault(pp.group(1), []).append(float(pp.group(2)))
    B, T = shapes[m.group(1)]
    th = B * 8 * T
    for kern, v in seen.items():
        n = sorted(v)[len(v) // 2]
        print(f"{base}: {kern} {n} warp instructions (median of {len(v)}): "
              f"{n / th:.1f} per token and KV head, {64 * n / th:.0f} per 64-token unit")
    if stalls:  # mean over the profiled launches, largest first
        ranked = sorted(((sum(v) / len(v), r) for r, v in stalls.items()), reverse=True)
        print(f"{base}: stalled warps per issue, " + ", ".join(f"{r} {x:.2f}" for x, r in ranked[:8]))
    if pipes:  # % of each pipe's peak issue rate, mean over the launches, busiest first
        ranked = sorted(((sum(v) / len(v), r) for r, v in pipes.items()), reverse=True)
        print(f"{base}: instructions issued per pipe, % of peak: " + ", ".join(f"{r} {x:.1f}" for x, r in ranked[:10]))
PYEOF
fi
grep -h "B=" "$OUTDIR/pdl_on.txt" "$OUTDIR/pdl_off.txt" | head -40 || true
