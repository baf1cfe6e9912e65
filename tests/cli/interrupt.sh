#!/usr/bin/env bash
# bgtq killed while writing its outputs (docs/errors.md: no *.tmp.* left behind): synth's
# v.npy is a FIFO nobody reads, so the run blocks opening it after q.npy and k.npy were
# written to their temporaries; SIGTERM then must remove both and kill the process.
# Usage: interrupt.sh BGTQ WORK
set -euo pipefail
bgtq=$1
work=$2
rm -rf "$work"
mkdir -p "$work/out"
mkfifo "$work/out/v.npy"
"$bgtq" synth --layers 1 --tokens 64 --q-heads 2 --kv-heads 1 --dim 8 --rope half --quiet -o "$work/out" &
pid=$!
n=0
for _ in $(seq 1 200); do  # up to 20 s for the two temporaries to appear
  n=$(find "$work/out" -name '*.tmp.*' | wc -l)
  [ "$n" -ge 2 ] && break
  sleep 0.1
done
if [ "$n" -lt 2 ]; then
  kill -KILL "$pid" 2>/dev/null || true
  echo "FAIL: the run did not reach its FIFO output (temporaries: $n)"
  exit 1
fi
kill -TERM "$pid"
set +e
wait "$pid"
rc=$?
set -e
if [ "$rc" -ne 143 ]; then
  echo "FAIL: exit status $rc, expected 143 (killed by SIGTERM)"
  exit 1
fi
left=$(find "$work/out" -name '*.tmp.*')
if [ -n "$left" ]; then
  echo "FAIL: temporaries left behind: $left"
  exit 1
fi
if [ -e "$work/out/q.npy" ] || [ -e "$work/out/k.npy" ]; then
  echo "FAIL: an output appeared although the run was killed before its renames"
  exit 1
fi
echo "ok: SIGTERM removed the temporaries"
