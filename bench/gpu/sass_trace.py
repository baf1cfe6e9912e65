#!/usr/bin/env python3
"""bench/gpu/sass_trace.py - dynamic SASS instruction counts of the tensor-core decode
kernel without a GPU: the instructions one warp executes for one 64-token unit, along a
path through the compiled kernel that a decisions file names branch by branch.

    python3 bench/gpu/sass_trace.py loops                  # loop bodies with tensor-core work
    python3 bench/gpu/sass_trace.py trace bench/gpu/sass_paths/tq_k3v3.json
    python3 bench/gpu/sass_trace.py dump > /tmp/k.sass     # the listing, to write decisions

Needs nvcc and a disassembler for sm_90 cubins: `nvdisasm` (NVDISASM=path, else PATH,
else the CUDA toolkit's bin). CUDA 13.0's toolkit here ships without it; CUDA 11.8's
works (Debian bookworm's non-free nvidia-cuda-toolkit: `apt-get download
nvidia-cuda-toolkit` with the non-free component enabled, `dpkg -x` the .deb, use
usr/bin/nvdisasm; nothing needs installing). Two things this script handles for that
older disassembler: CUDA 13 writes the cubin's architecture into the ELF header in a
newer form, which 11.8 rejects, so a copy gets the old form (e_flags = sm | sm << 16 |
0x500, ABI version 7; the code is untouched); and 11.8 prints no text for a few newer
opcodes (VIADD and kin), so instructions are read from the raw words (two 64-bit words
each), their text where the disassembler gave one, and branch targets are decoded from
the words (offset bits 16..23 and 34..81, in 4-byte units; checked
against every label the disassembler did print).

A path is a JSON file: the SHA-256 of the kernel's instruction words (a path is only
valid for the build it was written against: any change to the kernel or the compiler
moves every address; `loops` prints the digest), the
unit loop's first address, and for each conditional branch the outcomes in the order
the path meets it ("branches": {"0xADDR": [true, false, ...]}, the last one repeated;
a key may also be "file:line", for a branch repeated at many addresses), for each
indirect jump (BRX, a switch) its targets in order ("brx"). `trace` walks from the
start until it returns there, counting every instruction issued (predicated-off ones
too: they issue), and stops at the first branch the file does not decide, printing it
with its context: the way to write a path is to run it, decide that branch from the
source line shown, and run it again. BRA.DIV (taken only by a diverged warp) is not
taken. What a count leaves out: the setup before the unit loop, the merge after it, and
the cost of each instruction (all count 1; docs/gpu.md, "Dynamic counts").
"""
import argparse
import collections
import hashlib
import json
import os
import re
import shutil
import struct
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
FLAGS = ["-O3", "-DNDEBUG", "-std=c++20", "--expt-relaxed-constexpr", "-fmad=false", "-lineinfo"]
KERNEL = "decode_split_mma_kernel"


def die(msg):
    print(f"sass_trace: {msg}", file=sys.stderr)
    sys.exit(1)


def find_nvdisasm():
    cand = [os.environ.get("NVDISASM"), shutil.which("nvdisasm")]
    nvcc = shutil.which("nvcc")
    if nvcc:
        cand.append(os.path.join(os.path.dirname(nvcc), "nvdisasm"))
    for c in cand:
        if c and os.path.isfile(c) and os.access(c, os.X_OK):
            return c
    die("no nvdisasm (set NVDISASM=path; the module docstring says where to get one)")


def build(arch, tmp):
    """The kernel's cubin (nvcc -cubin, the library's flags)."""
    nvcc = shutil.which("nvcc") or die("nvcc is not on PATH")
    cubin = os.path.join(tmp, "decode_mma.cubin")
    cmd = [nvcc, "-cubin", f"-arch=sm_{arch}", *FLAGS, "-I" + os.path.join(ROOT, "include"), "-I" + os.path.join(ROOT, "kernels"),
           os.path.join(ROOT, "kernels", "decode_mma.cu"), "-o", cubin]
    r = subprocess.run(cmd, capture_output=True, text=True)
    if r.returncode != 0:
        die("nvcc failed:\n" + r.stderr[-2000:])
    return cubin


def disassemble(cubin, tmp):
    """nvdisasm -c -hex -g output of a copy of the cubin with the old ELF header form."""
    b = bytearray(open(cubin, "rb").read())
    flags = struct.unpack_from("<I", b, 0x30)[0]
    if b[8] >= 8:  # the newer form: the SM in bits 8..15
        sm = (flags >> 8) & 0xFF
        struct.pack_into("<I", b, 0x30, sm | (sm << 16) | 0x500)
        b[8] = 7
    patched = os.path.join(tmp, "patched.cubin")
    open(patched, "wb").write(b)
    r = subprocess.run([find_nvdisasm(), "-c", "-hex", "-g", patched], capture_output=True, text=True)
    if r.returncode != 0:
        die("nvdisasm failed:\n" + r.stderr[-2000:])
    return r.stdout


WORD = re.compile(r"/\* 0x([0-9a-f]{16}) \*/\s*$")
TEXT = re.compile(r"/\*([0-9a-f]{4,})\*/\s+(.*?)\s*;")
LINE = re.compile(r'//## File "([^"]+)", line (\d+)')


def parse(listing, kernel):
    """The kernel's instructions: dicts of addr, txt (None where the disassembler printed
    none), lo and hi (the two words) and line (the source file:line)."""
    lines = listing.splitlines()
    start = next((i for i, l in enumerate(lines) if l.startswith("//-----") and kernel in l), None)
    if start is None:
        die(f"no section of {kernel} in the listing")
    end = next((i for i in range(start + 1, len(lines)) if lines[i].startswith("//-----")), len(lines))
    words, cur = [], None  # (word, text match or None, source line), in listing order
    for l in lines[start:end]:
        m = LINE.search(l)
        if m:
            cur = m.group(1).split("/")[-1] + ":" + m.group(2)
            continue
        m = WORD.search(l)
        if m:
            words.append((int(m.group(1), 16), TEXT.search(l), cur))
    if len(words) % 2 or any(t for _, t, _ in words[1::2]):
        die("unexpected listing: instructions are not pairs of words, text on the first")
    ins = []
    for (lo, t, line), (hi, _, _) in zip(words[0::2], words[1::2]):
        addr = int(t.group(1), 16) if t else (ins[-1]["addr"] + 16 if ins else 0)
        ins.append(dict(addr=addr, txt=t.group(2) if t else None, lo=lo, hi=hi, line=line))
    for a, b in zip(ins, ins[1:]):
        if b["addr"] != a["addr"] + 16:
            die(f"listing not contiguous at {a['addr']:#x} -> {b['addr']:#x}")
    return ins


def op(k):
    if k["txt"] is None:
        return "op_%03x" % (k["lo"] & 0xFFF)
    return re.sub(r"^@!?U?P[T0-9]+\s+", "", k["txt"]).split()[0].split(".")[0]


def predicated(k):
    return ((k["lo"] >> 12) & 0xF) != 7  # the guard predicate is not PT


def target(k):
    """A BRA's target address, decoded from its first word."""
    w = k["lo"] | (k["hi"] << 64)
    f = ((w >> 16) & 0xFF) | (((w >> 34) & ((1 << 48) - 1)) << 8)
    if f >> 55:  # a 56-bit signed offset
        f -= 1 << 56
    return k["addr"] + 16 + 4 * f


def check_targets(ins, listing):
    """Every label the disassembler printed must be where the decoded offsets lead."""
    labels, pend = {}, []
    addrs = iter(k["addr"] for k in ins)
    lines = listing.splitlines()
    # label -> address: a label line precedes its instruction's line
    for l in lines:
        m = re.match(r"^(\.L_x_\d+):", l.strip())
        if m:
            pend.append(m.group(1))
            continue
        t = TEXT.search(l)
        if t and pend:
            for p in pend:
                labels[p] = int(t.group(1), 16)
            pend = []
    bad = 0
    for k in ins:
        if op(k) == "BRA" and k["txt"]:
            m = re.search(r"`\((\.L_x_\d+)\)", k["txt"])
            if m and m.group(1) in labels and labels[m.group(1)] != target(k):
                bad += 1
    if bad:
        die(f"{bad} branch targets disagree with the disassembler's labels: the offset decoding does not fit this build")


def loops(ins):
    """Back edges (a branch to an earlier address) whose body holds tensor-core work."""
    idx = {k["addr"]: i for i, k in enumerate(ins)}
    out = []
    for i, k in enumerate(ins):
        if op(k) == "BRA" and target(k) <= k["addr"]:
            body = ins[idx[target(k)]:i + 1]
            c = collections.Counter(op(x) for x in body)
            if c["HMMA"]:
                out.append((target(k), k["addr"], len(body), c))
    return out


def trace(ins, path):
    idx = {k["addr"]: i for i, k in enumerate(ins)}
    start = int(path["start"], 16)
    br = {int(a, 16) if a.startswith("0x") else a: v for a, v in path.get("branches", {}).items()}
    brx = {int(a, 16): [int(t, 16) for t in v] for a, v in path.get("brx", {}).items()}
    used = collections.Counter()
    seq, i = [], idx[start]

    def ctx(j):
        return "\n".join(f"  {ins[x]['addr']:#7x}  {ins[x]['txt'] or op(ins[x])}   [{ins[x]['line']}]"
                         for x in range(max(0, j - 8), j + 1))

    while True:
        k = ins[i]
        if k["addr"] == start and seq:
            return seq, None
        seq.append(k)
        if len(seq) > 200000:
            return seq, "no return to the start after 200000 instructions (a loop decided as always taken?)"
        o = op(k)
        if o == "BRX":
            if k["addr"] not in brx:
                return seq, f"undecided indirect jump at {k['addr']:#x}:\n{ctx(i)}\n  targets: {k['txt']}"
            d = brx[k["addr"]]
            i = idx[d[min(used[k["addr"]], len(d) - 1)]]
            used[k["addr"]] += 1
            continue
        if o == "BRA":
            if "BRA.DIV" in (k["txt"] or ""):
                take = False
            elif predicated(k):
                key = k["addr"] if k["addr"] in br else k["line"]
                if key not in br:
                    return seq, f"undecided branch at {k['addr']:#x} (to {target(k):#x}):\n{ctx(i)}"
                d = br[key]
                take = bool(d[min(used[key], len(d) - 1)])
                used[key] += 1
            else:
                take = True
            if take:
                i = idx[target(k)]
                continue
        if o == "EXIT" and not predicated(k):
            return seq, f"the path reaches EXIT at {k['addr']:#x}"
        i += 1


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("mode", choices=["loops", "trace", "dump"])
    ap.add_argument("path", nargs="?", help="trace: a path file (JSON)")
    ap.add_argument("--arch", default="90")
    ap.add_argument("--show", help="trace: print the path's instructions between two addresses, A-B")
    a = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        cubin = build(a.arch, tmp)
        listing = disassemble(cubin, tmp)
    ins = parse(listing, KERNEL)
    check_targets(ins, listing)
    # the build's identity: its instruction words (not the cubin, whose line tables name the checkout's path)
    digest = hashlib.sha256(b"".join(struct.pack("<QQ", k["lo"], k["hi"]) for k in ins)).hexdigest()
    if a.mode == "dump":
        for k in ins:
            print(f"{k['addr']:#7x}  {k['txt'] or op(k):60s}  [{k['line']}]")
        return
    print(f"{KERNEL}, sm_{a.arch}: {len(ins)} instructions (code sha256 {digest})")
    if a.mode == "loops":
        print("loop (first..back edge)   body  HMMA  LDS  PRMT  SHF  LOP3")
        for s, e, n, c in loops(ins):
            print(f"{s:#8x}..{e:#8x}   {n:6d}  {c['HMMA']:4d} {c['LDS']:4d}  {c['PRMT']:4d} {c['SHF']:4d} {c['LOP3']:4d}")
        return
    if not a.path:
        die("trace needs a path file")
    path = json.load(open(a.path))
    if path.get("code_sha256") != digest:
        die(f"{a.path} was written for another build (code {path.get('code_sha256', '?')[:16]}..., this one "
            f"{digest[:16]}...): its addresses do not apply; write the path again for this build (see the docstring)")
    seq, err = trace(ins, path)
    if err:
        print(f"after {len(seq)} instructions: {err}")
        sys.exit(2)
    c = collections.Counter(op(k) for k in seq)
    print(f"{path.get('name', a.path)}: {len(seq)} warp instructions per unit, {len(seq) / 64:.1f} per token and KV head")
    print("  " + ", ".join(f"{o} {n}" for o, n in c.most_common(16)))
    for name, r in path.get("ranges", {}).items():
        lo, hi = (int(x, 16) for x in r.split("-"))
        print(f"  {name}: {sum(1 for k in seq if lo <= k['addr'] <= hi)}")
    if a.show:
        lo, hi = (int(x, 16) for x in a.show.split("-"))
        for k in seq:
            if lo <= k["addr"] <= hi:
                print(f"{k['addr']:#7x}  {k['txt'] or op(k):60s}  [{k['line']}]")


if __name__ == "__main__":
    main()
