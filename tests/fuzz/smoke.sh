#!/usr/bin/env bash
# make fuzz-smoke: runs every fuzz target of a `make fuzz` build for a bounded time
# from its seed corpus (tests/fuzz/corpus/<name>/) and its regressions
# (tests/fuzz/regressions/<name>/), one after another, all of them even when one
# fails, then prints a summary and exits 1 if any target crashed, leaked, timed out,
# ran out of memory or is missing from the build. It exits 1 before running anything
# when the build's target list (BUILD_DIR/targets.txt, written when tests/fuzz is
# configured) is missing or empty. New inputs go to a scratch corpus under the build
# directory, never into the committed seeds. A crashing input is saved as
# <build>/crashes/<name>-crash-<sha1>: copy it to tests/fuzz/regressions/<name>/ (where
# test_fuzz replays it) and fix the bug.
#   usage: tests/fuzz/smoke.sh BUILD_DIR SECONDS_PER_TARGET
set -uo pipefail
build=${1:-build-fuzz}
secs=${2:-60}
src="$(cd "$(dirname "$0")" && pwd)"
list="$build/targets.txt"
if [ ! -r "$list" ]; then
  echo "fuzz-smoke: no target list $list: build the fuzz targets first (make fuzz)" >&2
  exit 1
fi
names=$(tr -s '[:space:]' ' ' < "$list")
if [ -z "${names// /}" ]; then
  echo "fuzz-smoke: $list names no target: nothing to run" >&2
  exit 1
fi
mkdir -p "$build/crashes" "$build/work"
summary="$build/fuzz-smoke.txt"
printf '%-20s %12s %10s %8s %s\n' target executions exec/s corpus result > "$summary"
status=0
for n in $names; do
  work="$build/work/$n"
  mkdir -p "$work"
  dirs=("$work")
  for d in "$src/corpus/$n" "$src/regressions/$n"; do [ -d "$d" ] && dirs+=("$d"); done
  log="$build/work/$n.log"
  if [ ! -x "$build/fuzz_$n" ]; then
    printf '%-20s %12s %10s %8s %s\n' "$n" - - - "MISSING ($build/fuzz_$n)" | tee -a "$summary"
    status=1
    continue
  fi
  echo "== fuzz_$n for ${secs} s"
  "$build/fuzz_$n" -max_total_time="$secs" -timeout=10 -rss_limit_mb=2048 -max_len=65536 \
    -print_final_stats=1 -artifact_prefix="$build/crashes/$n-" "${dirs[@]}" > "$log" 2>&1
  rc=$?
  execs=$(grep -o 'stat::number_of_executed_units: *[0-9]*' "$log" | grep -o '[0-9]*$' || echo "?")
  rate=$(grep -o 'stat::average_exec_per_sec: *[0-9]*' "$log" | grep -o '[0-9]*$' || echo "?")
  size=$(ls "$work" | wc -l)
  if [ $rc -ne 0 ]; then
    result="CRASH (exit $rc)"
    status=1
    grep -E "ERROR|SUMMARY|runtime error|invariant|Test unit written" "$log" | head -20
  else
    result=ok
  fi
  printf '%-20s %12s %10s %8s %s\n' "$n" "${execs:-?}" "${rate:-?}" "$size" "$result" | tee -a "$summary"
done
echo "== summary ($summary)"
cat "$summary"
exit $status
