#!/usr/bin/env bash
# Regenerates the figures of the README (docs/img/*.svg) from `bgtq synth` data:
# D = 128, 4 layers, 32 query / 8 KV heads, half pairing, a 3-bit Block-GTQ plan, and
# `bgtq eval` at 2, 3 and 4 bits with V. About a minute on two cores.
#   usage: docs/img/regenerate.sh [BGTQ (build/bin/bgtq)] [OUT_DIR (docs/img)]
# (--rotary-dim 128 is synth's default, all of D; it is spelled out to match eval's.)
set -euo pipefail
bgtq=${1:-build/bin/bgtq}
out=${2:-docs/img}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
"$bgtq" synth --layers 4 --tokens 512 --q-heads 32 --kv-heads 8 --dim 128 --rope half --rotary-dim 128 \
  --quiet -o "$work"
"$bgtq" calibrate --q "$work/q.npy" --k "$work/k.npy" --rope half --avg-bits 3 --quiet -o "$work/plan.bin" > /dev/null
"$bgtq" eval --q "$work/q.npy" --k "$work/k.npy" --v "$work/v.npy" --rope half --bits 2,3,4 --quiet \
  -o "$work/results.json" > /dev/null
"$bgtq" plot energy --plan "$work/plan.bin" --layer 0 --head 0 -o "$out/energy.svg"
"$bgtq" plot fingerprint --plan "$work/plan.bin" -o "$out/fingerprint.svg"
"$bgtq" plot eval --results "$work/results.json" -o "$out/eval.svg"
