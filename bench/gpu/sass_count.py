#!/usr/bin/env python3
"""bench/gpu/sass_count.py - SASS instruction counts of the tensor-core decode kernel's
inner pieces, read off the compiled cubin: no GPU needed, only nvcc and readelf.

    python3 bench/gpu/sass_count.py                 # sm_80 and sm_90, the bench's plans
    python3 bench/gpu/sass_count.py --arch 90 --plan 'mine=2:40,3:56,4:32/3:128'

How: bench/gpu/sass_probe.cu compiles one key k-tile, half a k-tile, one value m-tile
and one key group with its radii per code width (1..8 bits), and a unit's softmax and
value weights, as straight-line probe kernels, with nvcc -cubin and the library's own
flags. Every SASS instruction of sm_80/sm_90 is 16 bytes, so a kernel's count is its
.text section's size over 16, less the trailing padding (NOPs and the self-branch after
the last EXIT; a non-inlined callee such as the wide value m-tile sits inside its
caller's section, before that padding). A probe's count minus the baseline probe's (the
same loads and stores, no work) is the piece's own cost in warp instructions: static
counts of straight-line code, equal to what one warp executes for the piece, without the
dispatch on the width, the run-time half-tile test and the group's address arithmetic,
which the probes' constants remove. A key group's radii are the difference of two
probes and move most with the surrounding code: the estimate takes their median over
the widths (the radii code does not depend on the width).

The probes also count a key group's radii (per group and unit), a full unit's softmax
and its value radii + weight transpose. A plan 'name=K/V' lists key groups and value
groups as bits:coordinates (one head); its estimate is the instructions one warp
executes per 64-token unit (k-tiles of 16 coordinates, a last tile of <= 8 coordinates
counted as half; the group radii; the values; the softmax and weights), over 64: per
token and KV head, without the copies into shared memory and the loop's own control.
Probe counts move by up to ~10% with the surrounding code (register moves; the radii
difference more), so read them as estimates. docs/gpu.md, "Performance model",
records the figures; the device's InstructionStats (bench/gpu/profile.sh) measure the
total."""
import argparse
import os
import re
import shutil
import struct
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
FLAGS = ["-O3", "-DNDEBUG", "-std=c++20", "--expt-relaxed-constexpr", "-fmad=false"]
NOP, BRA = 0x918, 0x947  # low 12 bits of the first instruction word (sm_80, sm_90)

# bench_decode's synthetic greedy plans (tests/cuda/gpu_checks.hpp key_widths, 64 blocks,
# head 0; heads 2, 3, 4, 7 move one block between the two lowest widths) and uniform TQ-MSE.
DEFAULT_PLANS = [
    "TQ-MSE K3V3=3:128/3:128",
    "Block-GTQ K3V3=2:36,3:62,4:24,5:6/3:128",
    "TQ-MSE K2V2=2:128/2:128",
    "Block-GTQ K2V2=1:36,2:62,3:24,4:6/2:128",
]


def die(msg):
    print(f"sass_count: {msg}", file=sys.stderr)
    sys.exit(1)


def text_counts(cubin):
    """{kernel name: SASS instructions} of every .text section of a cubin."""
    data = open(cubin, "rb").read()
    listing = subprocess.run(["readelf", "-S", "-W", cubin], capture_output=True, text=True, check=True).stdout
    counts = {}
    for line in listing.splitlines():
        m = re.search(r"\]\s+\.text\.(\S+)\s+PROGBITS\s+\S+\s+(\S+)\s+(\S+)", line)
        if not m:
            continue
        off, size = int(m.group(2), 16), int(m.group(3), 16)
        if size % 16:
            die(f"{cubin}: section of {m.group(1)} is {size} bytes, not whole 16-byte instructions")
        ops = [struct.unpack_from("<Q", data, off + 16 * i)[0] & 0xFFF for i in range(size // 16)]
        n = len(ops)
        while n and ops[n - 1] == NOP:
            n -= 1
        if n and ops[n - 1] == BRA:
            n -= 1
        name = subprocess.run(["c++filt", m.group(1)], capture_output=True, text=True).stdout.strip()
        name = name.replace("bgtq::cuda::(anonymous namespace)::", "").replace("void ", "")
        counts[re.sub(r"\(.*", "", name)] = n
    return counts


def compile_cubin(nvcc, arch, src, out):
    cmd = [nvcc, "-cubin", f"-arch=sm_{arch}", *FLAGS, "-I", os.path.join(ROOT, "include"), "-I",
           os.path.join(ROOT, "kernels"), src, "-o", out]
    r = subprocess.run(cmd, capture_output=True, text=True)
    if r.returncode != 0:
        die(f"{' '.join(cmd)} failed:\n{r.stderr}")


def parse_groups(text, what):
    groups = []
    for item in text.split(","):
        try:
            b, n = (int(x) for x in item.split(":"))
        except ValueError:
            die(f"{what} group '{item}': expected bits:coordinates (e.g. 3:128)")
        if not (1 <= b <= 8 and 1 <= n <= 128):
            die(f"{what} group '{item}': bits must be 1..8 and coordinates 1..128")
        groups.append((b, n))
    return groups


def parse_plan(plan):
    """(name, key groups, value groups) of 'name=K/V'."""
    name, _, spec = plan.partition("=")
    if not name.strip() or "/" not in spec:
        die(f"plan '{plan}': expected name=keys/values, e.g. 'x=2:36,3:92/3:128'")
    ks, vs = spec.split("/", 1)
    return name.strip(), parse_groups(ks, "key"), parse_groups(vs, "value")


def plan_estimate(keys_spec, values_spec, key_full, key_half, value_tile):
    """(k-tiles, key instructions, value instructions) per 64-token unit."""
    keys = tiles = 0
    for b, n in keys_spec:
        for k0 in range(0, n, 16):
            keys += key_full[b] if n - k0 > 8 else key_half[b]
            tiles += 1
    values = sum(value_tile[b] * ((n + 15) // 16) for b, n in values_spec)
    return tiles, keys, values


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--arch", default="80,90", help="comma-separated SM versions (default 80,90)")
    ap.add_argument("--plan", action="append", help="name=keys/values (bits:coords,...); repeatable")
    ap.add_argument("--nvcc", default=None, help="nvcc to use (default: PATH, then $CUDA_HOME/bin)")
    ap.add_argument("--kernels", action="store_true", help="also list the static size of every kernel of kernels/*.cu")
    ap.add_argument("--check", action="store_true",
                    help="exit 1 unless every piece costs something and a half k-tile (1..4 bits) costs less than a whole one")
    a = ap.parse_args()
    nvcc = a.nvcc or shutil.which("nvcc") or (os.path.join(os.environ["CUDA_HOME"], "bin", "nvcc") if "CUDA_HOME" in os.environ else None)
    if not nvcc or not os.path.exists(nvcc):
        die("nvcc not found (PATH, $CUDA_HOME/bin or --nvcc)")
    if not shutil.which("readelf") or not shutil.which("c++filt"):
        die("readelf and c++filt (binutils) are needed")
    version = subprocess.run([nvcc, "--version"], capture_output=True, text=True).stdout.strip().splitlines()[-1]
    plans = [parse_plan(p) for p in (a.plan or DEFAULT_PLANS)]
    archs = [x.strip() for x in a.arch.split(",")]
    for arch in archs:
        if not arch.isdigit():
            die(f"--arch '{arch}': expected SM numbers such as 80,90")
    with tempfile.TemporaryDirectory() as tmp:
        for arch in archs:
            cubin = os.path.join(tmp, f"probe_{arch}.cubin")
            compile_cubin(nvcc, arch, os.path.join(ROOT, "bench", "gpu", "sass_probe.cu"), cubin)
            c = text_counts(cubin)
            base = c.get("sass_probe<1, 0>")
            if base is None:
                die("the baseline probe is missing from the cubin")
            piece = {}
            for b in range(1, 9):
                for mode in (1, 2, 3):
                    key = f"sass_probe<{b}, {mode}>"
                    if key not in c:
                        die(f"{key} is missing from the cubin")
                    piece[(b, mode)] = c[key] - base
            steps = {}
            for mode, what in ((5, "softmax"), (6, "weights")):
                key = f"sass_probe<1, {mode}>"
                if key not in c:
                    die(f"{key} is missing from the cubin")
                steps[what] = c[key] - base
            for b in range(1, 9):
                key = f"sass_probe<{b}, 4>"
                if key not in c:
                    die(f"{key} is missing from the cubin")
                piece[(b, 4)] = c[key] - base
            group_by_width = sorted(piece[(b, 4)] - piece[(b, 1)] for b in range(1, 9))
            group = (group_by_width[3] + group_by_width[4]) // 2  # the median of 8
            key_full = {b: piece[(b, 1)] for b in range(1, 9)}
            key_half = {b: piece[(b, 2)] for b in range(1, 9)}
            value_tile = {b: piece[(b, 3)] for b in range(1, 9)}
            if a.check:
                bad = [f"{k}: {v}" for k, v in list(piece.items()) + list(steps.items()) if v <= 0]
                if group <= 0:
                    bad.append(f"a key group's radii: {group}")
                bad += [f"bits {b}: half k-tile {key_half[b]} >= k-tile {key_full[b]}" for b in range(1, 5)
                        if key_half[b] >= key_full[b]]
                if bad:
                    die(f"sm_{arch}: implausible counts (probes optimised away or not straight-line?): " + "; ".join(bad))
            print(f"sm_{arch} ({version}); warp instructions per piece (64 tokens), baseline probe {base} subtracted")
            print(f"{'bits':>4} {'key k-tile':>11} {'key half':>9} {'value m-tile':>13}")
            for b in range(1, 9):
                print(f"{b:>4} {key_full[b]:>11} {key_half[b]:>9} {value_tile[b]:>13}")
            print(f"a key group's radii per unit: {group} (median over the widths; "
                  f"{group_by_width[0]}..{group_by_width[-1]})")
            print(f"per full unit: softmax {steps['softmax']}, value radii + weight transpose {steps['weights']}")
            print(f"\nper 64-token unit and KV head (keys with their radii, values, softmax, weights;")
            print(f"not the copies and the loop):")
            print(f"{'plan':<18} {'k-tiles':>7} {'keys':>6} {'values':>7} {'steps':>6} {'sum':>6} {'per token':>10}")
            for name, ks, vs in plans:
                tiles, keys, values = plan_estimate(ks, vs, key_full, key_half, value_tile)
                keys += group * len(ks)
                st = steps["softmax"] + steps["weights"]
                total = keys + values + st
                print(f"{name:<18} {tiles:>7} {keys:>6} {values:>7} {st:>6} {total:>6} {total / 64:>10.1f}")
            if a.kernels:
                print(f"\nstatic size of each kernel (instructions, loops counted once):")
                for src in sorted(f for f in os.listdir(os.path.join(ROOT, "kernels")) if f.endswith(".cu")):
                    out = os.path.join(tmp, f"{src}_{arch}.cubin")
                    compile_cubin(nvcc, arch, os.path.join(ROOT, "kernels", src), out)
                    for name, n in sorted(text_counts(out).items()):
                        print(f"  {n:>6}  {src}: {name}")
            print()


if __name__ == "__main__":
    main()
