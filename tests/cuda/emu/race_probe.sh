#!/bin/sh
# race_probe.sh <test_cuda_emu built with ThreadSanitizer> <scratch dir>
# Runs each race probe of tests/cuda/test_fragments.cpp ([.race]) in a process of its own:
# the "missing" variant (a barrier left out) must end in a ThreadSanitizer data-race
# report naming the probe's kernel, the "ordered" one must pass without a report. The
# thread mode (BGTQ_EMU_THREADS=fibers or os) is the caller's. Reports go to the scratch
# dir, not to where `make test-tsan` looks for unexpected ones.
set -u
exe=$1
dir=$2
rm -rf "$dir" && mkdir -p "$dir" || exit 1
# the probes are the binary's "race probe: <probe> <missing|ordered>" cases
names=$("$exe" --list-test-names-only "[.race]" | grep '^race probe: [a-z_]* \(missing\|ordered\)$')
if [ "$(printf '%s\n' "$names" | grep -c ' missing$')" -lt 5 ] || [ "$(printf '%s\n' "$names" | grep -c ' ordered$')" -lt 5 ]; then
  echo "FAILED: $exe lists fewer than 5 race probes of each variant:"
  printf '%s\n' "$names"
  exit 1
fi
failed=0
IFS='
'
for name in $names; do
  probe=${name#race probe: }
  variant=${probe##* }
  probe=${probe% *}
  base="$dir/$probe-$variant"
  TSAN_OPTIONS="halt_on_error=1 exitcode=66 log_path=$base.report" "$exe" --warn NoTests "$name" >"$base.txt" 2>&1
  rc=$?
  reports=$(ls "$base".report.* 2>/dev/null)
  if [ "$variant" = missing ]; then
    if [ "$rc" = 66 ] && [ -n "$reports" ] && grep -q "WARNING: ThreadSanitizer: data race" $reports &&
      grep -q "probe_${probe}_kernel" $reports; then
      echo "ok: $name: reported"
      continue
    fi
    echo "FAILED: $name: exit $rc, expected a data race in probe_${probe}_kernel (exit 66):"
  else
    if [ "$rc" = 0 ] && [ -z "$reports" ] && grep -q "in 1 test case" "$base.txt"; then
      echo "ok: $name: no report"
      continue
    fi
    echo "FAILED: $name: exit $rc, expected the case to pass without a report:"
  fi
  failed=1
  cat "$base.txt"
  [ -n "$reports" ] && head -n 40 $reports
done
exit $failed
