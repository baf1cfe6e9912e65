#!/usr/bin/env bash
# ctest fuzz:smoke_selftest: tests/fuzz/smoke.sh (make fuzz-smoke) on fake builds whose
# "fuzz targets" are shell scripts, so it needs no clang: a missing or empty target list
# fails before anything runs, a failing or missing target fails the run after every
# target ran, and a build whose targets all pass succeeds.
#   usage: tests/fuzz/smoke_selftest.sh SCRATCH_DIR
set -uo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
smoke="$here/smoke.sh"
work=${1:?usage: smoke_selftest.sh SCRATCH_DIR}
rm -rf "$work"
mkdir -p "$work"
fails=0
# expect NAME RC PATTERN BUILD: smoke.sh BUILD 1 exits RC and prints PATTERN (grep -E)
expect() {
  local name=$1 want=$2 pattern=$3 build=$4 out rc
  out=$(bash "$smoke" "$build" 1 2>&1)
  rc=$?
  if [ "$rc" -ne "$want" ] || ! grep -qE -- "$pattern" <<< "$out"; then
    echo "FAIL $name: exit $rc (want $want), output should match /$pattern/:"
    echo "$out" | sed 's/^/  | /'
    fails=$((fails + 1))
  else
    echo "ok   $name"
  fi
}
# fake_target BUILD NAME RC: a "fuzz target" that prints libFuzzer's final stats, exits RC
fake_target() {
  printf '#!/bin/sh\necho "stat::number_of_executed_units: 7"\nexit %s\n' "$3" > "$1/fuzz_$2"
  chmod +x "$1/fuzz_$2"
}

mkdir -p "$work/no_list"
expect "missing targets.txt" 1 "no target list .*targets.txt" "$work/no_list"
[ -e "$work/no_list/fuzz-smoke.txt" ] && { echo "FAIL missing targets.txt: a summary was written"; fails=$((fails + 1)); }

mkdir -p "$work/empty"
printf ' \n' > "$work/empty/targets.txt"
expect "empty targets.txt" 1 "names no target" "$work/empty"

mkdir -p "$work/pass"
echo "a b" > "$work/pass/targets.txt"
fake_target "$work/pass" a 0
fake_target "$work/pass" b 0
expect "all targets pass" 0 "^b +7 .* ok$" "$work/pass"

mkdir -p "$work/crash"
echo "a b" > "$work/crash/targets.txt"
fake_target "$work/crash" a 1
fake_target "$work/crash" b 0
expect "a crash fails, the later targets still run" 1 "^a .*CRASH \(exit 1\)" "$work/crash"
grep -qE "^b +7 .* ok$" "$work/crash/fuzz-smoke.txt" || { echo "FAIL crash: b did not run after a's crash"; fails=$((fails + 1)); }

mkdir -p "$work/missing"
echo "a gone" > "$work/missing/targets.txt"
fake_target "$work/missing" a 0
expect "a target missing from the build fails" 1 "^gone .*MISSING" "$work/missing"

echo "smoke_selftest: $fails failure(s)"
[ "$fails" -eq 0 ]
