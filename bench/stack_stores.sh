#!/usr/bin/env bash
# bench/stack_stores.sh - lists the hot decode kernels of a binary that store vector
# registers to the stack (spills, or arrays the compiler kept in memory), with counts.
#   bench/stack_stores.sh [binary] [function-regex] [register-class]
# Defaults: build/bin/bgtq, the page codecs' and attention's functions, zmm (an AVX-512
# build; pass ymm for an AVX2-only one, where a few spills of the 5-8-bit lookups are
# expected). Empty output: none does. Stores through %rsp and %rbp count (a function that
# realigns its stack for zmm addresses its spills through %rbp). A count is static, so read the function's loop to
# see whether a store sits on the hot path; docs/PERFORMANCE.md has the case this found
# (score_group64, 2026-12-01: 16 accumulator stores per coordinate).
set -euo pipefail
bin="${1:-build/bin/bgtq}"
pat="${2:-gtq_pages::|fp16_pages::|kivi_pages::|attend_head|attend_window}"
reg="${3:-zmm}"
command -v objdump >/dev/null || { echo "stack_stores.sh: objdump not found (binutils)" >&2; exit 2; }
[[ -f "$bin" ]] || { echo "stack_stores.sh: no binary $bin (build it first)" >&2; exit 2; }
objdump -d --no-show-raw-insn -C "$bin" | awk -v pat="$pat" -v reg="$reg" '
  function flush() { if (name != "" && n > 0) printf "%5d vector stores to the stack  %s\n", n, substr(name, 1, 160) }
  /^[0-9a-f]+ <.*>:$/ { flush(); name = ($0 ~ pat) ? $0 : ""; n = 0; next }
  name != "" && $0 ~ ("vmov(aps|ups|apd|upd|dqa64|dqu64|dqa32|dqu32|dqu16|dqu8|dqa|dqu)[ \t]+%" reg "[0-9]+,[^,]*\\(%r[sb]p[,)]") { n++ }
  END { flush() }'
