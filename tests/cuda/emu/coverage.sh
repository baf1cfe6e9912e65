#!/usr/bin/env bash
# tests/cuda/emu/coverage.sh - which lines of the CUDA kernels the emulated GPU tests
# never run (docs/gpu.md, "Tests"). Builds test_cuda_emu and bench_decode_emu with gcov
# instrumentation (GCC --coverage, -O1) in BUILD (default build-cov), runs the
# `cuda_emu` ctest label there (the sass/sdpa script tests excluded: they run no
# kernel), and prints, per source file of kernels/ (and with --all, every project file
# the emulated kernels include), how many of its lines ran and the source of each line
# that never did. A line counts once however many template instantiations hold it.
# About 3 minutes on 2 cores once built (the first build adds 1-2). Needs gcov (GCC's) and python3; no GPU, no nvcc.
# Usage: tests/cuda/emu/coverage.sh [--all]   (environment: BUILD, JOBS, CMAKE_ARGS)
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../../.." && pwd)"
BUILD="${BUILD:-$ROOT/build-cov}"
JOBS="${JOBS:-$(nproc)}"
ALL=0
[[ "${1:-}" == "--all" ]] && ALL=1
command -v gcov >/dev/null || { echo "coverage.sh: gcov not found" >&2; exit 1; }
deps=()
[[ -d "$ROOT/.deps/usr" ]] && deps=("-DCMAKE_PREFIX_PATH=$ROOT/.deps/usr")
# shellcheck disable=SC2086
cmake -S "$ROOT" -B "$BUILD" -DCMAKE_BUILD_TYPE=Debug -DBGTQ_BUILD_BENCH=OFF -DBGTQ_ENABLE_CUDA=OFF \
  "-DCMAKE_CXX_FLAGS=--coverage -O1" "-DCMAKE_EXE_LINKER_FLAGS=--coverage" "${deps[@]}" ${CMAKE_ARGS:-} >/dev/null
# the old counts go before the build too: its test discovery runs the new test_cuda_emu,
# and gcov warns when a rebuilt object meets its predecessor's counts
find "$BUILD" -name '*.gcda' -delete
cmake --build "$BUILD" -j "$JOBS" --target test_cuda_emu bench_decode_emu >/dev/null
find "$BUILD" -name '*.gcda' -delete
(cd "$BUILD" && ctest -L cuda_emu -E 'sass|sdpa' -j "$JOBS" --output-on-failure >"$BUILD/coverage-ctest.log") ||
  { echo "coverage.sh: a cuda_emu test failed (see $BUILD/coverage-ctest.log)" >&2; exit 1; }
out="$BUILD/gcov-json"
rm -rf "$out"
mkdir -p "$out"
n=0
while IFS= read -r g; do
  n=$((n + 1))
  mkdir -p "$out/$n"
  (cd "$out/$n" && gcov -j -o "$(dirname "$g")" "$g" >/dev/null 2>&1)
done < <(find "$BUILD/tests/cuda/emu" -name '*.gcda')
python3 - "$ROOT" "$out" "$ALL" <<'PY'
import glob, gzip, json, os, sys
root, out, show_all = sys.argv[1], sys.argv[2], sys.argv[3] == "1"
counts = {}
for f in glob.glob(os.path.join(out, "*", "*.gcov.json.gz")):
    for fi in json.load(gzip.open(f))["files"]:
        name = os.path.realpath(os.path.join(root, fi["file"]) if not os.path.isabs(fi["file"]) else fi["file"])
        if not name.startswith(root + "/"):
            continue
        rel = os.path.relpath(name, root)
        if not show_all and not rel.startswith("kernels/"):
            continue
        c = counts.setdefault(rel, {})
        for l in fi["lines"]:
            c[l["line_number"]] = c.get(l["line_number"], 0) + l["count"]
total = missed = 0
for rel in sorted(counts):
    c = counts[rel]
    miss = sorted(n for n, k in c.items() if k == 0)
    total += len(c)
    missed += len(miss)
    print(f"{rel}: {len(c) - len(miss)} of {len(c)} lines ran, {len(miss)} never")
    src = open(os.path.join(root, rel), encoding="utf-8").read().split("\n")
    for n in miss:
        print(f"  {n:5d}: {src[n - 1].strip()[:110]}")
print(f"in all: {total - missed} of {total} lines ran, {missed} never")
PY
