#!/usr/bin/env python3
"""bench/gpu/sass_trace.py - dynamic SASS instruction counts of the tensor-core decode
kernel without a GPU: the instructions one warp executes for one 64-token unit, along a
path through the compiled kernel that a decisions file names branch by branch.

    python3 bench/gpu/sass_trace.py loops                  # loop bodies with tensor-core work
    python3 bench/gpu/sass_trace.py trace bench/gpu/sass_paths/tq_k3v3.json
    python3 bench/gpu/sass_trace.py trace bench/gpu/sass_paths/tq_k3v3_setup.json  # a CTA's setup
    python3 bench/gpu/sass_trace.py dump > /tmp/k.sass     # the listing, to write decisions
    python3 bench/gpu/sass_trace.py rebase OLD.json > NEW.json   # a path carried to this build
    python3 bench/gpu/sass_trace.py anchor NEW.json > P.json     # ... and anchored again
    python3 bench/gpu/sass_trace.py selftest                     # the parser on a recorded listing
    python3 bench/gpu/sass_trace.py rotations    # the query rotation's and the merge's batch loops

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
the cost of each instruction (all count 1; docs/gpu.md, "Dynamic counts"). `trace` also
sorts the instructions by the execution pipe they issue to (an estimate from the opcode,
PIPES below): on sm_80/sm_90 the integer ALU pipe accepts a warp instruction every other
cycle, so a unit whose ALU instructions are more than half its issue is bound by that
pipe, not by the issue rate.

A path with an "entry" (the kernel's first address) is the setup of a CTA instead: from
the entry until it first reaches the start (the unit loop). Its trace also runs a
latency model of the global loads (load_waits: the scoreboards each instruction sets and
waits for, read from its control bits) and prints the round trips to memory that follow
one another on the path, the most a CTA of a short sequence pays before its first unit
(docs/gpu.md, "The split kernel's setup"). A path's "kernel" and "source" name another
kernel and its file in kernels/ (--kernel and --source do it for `dump` and `loops`):
sass_paths/rotate_query_setup.json and merge_setup.json trace rotate_query_kernel and
merge_kernel from their entry to their rotation loop (docs/gpu.md, "The rotation kernels").

A kernel change moves every address, so a path is carried to the new build by `rebase`:
`anchor` records, for each decided address, its source line and its rank among the
branches of that line ("decode_mma.cu:169#b0"), and the git blob of each source file
(written to the local object store); `rebase` maps each line through a diff of the file
between that blob and the checkout, and finds the branch of the same rank there.
Branches on lines the change touched are dropped, and `trace` stops at them, to be
decided again; the counts' opcode mix (64 HMMA per K3V3 unit, 13 copies) is the check
that the rest still fits.
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


def build(arch, tmp, source="decode_mma.cu"):
    """The cubin of kernels/<source> (nvcc -cubin, the library's flags)."""
    nvcc = shutil.which("nvcc") or die("nvcc is not on PATH")
    cubin = os.path.join(tmp, source.replace(".cu", ".cubin"))
    cmd = [nvcc, "-cubin", f"-arch=sm_{arch}", *FLAGS, "-I" + os.path.join(ROOT, "include"), "-I" + os.path.join(ROOT, "kernels"),
           os.path.join(ROOT, "kernels", source), "-o", cubin]
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
    """A BRA's target address, decoded from its two words."""
    w = k["lo"] | (k["hi"] << 64)
    f = ((w >> 16) & 0xFF) | (((w >> 34) & ((1 << 48) - 1)) << 8)
    if f >> 55:  # a 56-bit signed offset
        f -= 1 << 56
    return k["addr"] + 16 + 4 * f


def check_targets(ins, listing):
    """Every label the disassembler printed must be where the decoded offsets lead."""
    labels = label_addrs(listing)
    bad = 0
    for k in ins:
        if op(k) == "BRA" and k["txt"]:
            m = re.search(r"`\((\.L_x_\d+)\)", k["txt"])
            if m and m.group(1) in labels and labels[m.group(1)] != target(k):
                bad += 1
    if bad:
        die(f"{bad} branch targets disagree with the disassembler's labels: the offset decoding does not fit this build")


# Execution pipe of an opcode on sm_80/sm_90, as the profiler's documentation and NVIDIA's
# forum answers describe them (an estimate: the split between pipes is not documented per
# opcode). The integer ALU pipe takes 16 lanes per sub-partition and clock, so a warp
# instruction occupies it for 2 clocks: at most one ALU instruction every other cycle per
# scheduler, whatever else issues. IMAD (moves and shifts included) and FP32 go to the FMA
# pipes, VIADD/VIMNMX (sm_90, printed as op_xxx by older disassemblers) are counted as ALU.
PIPES = {
    "alu": {"LOP3", "LOP", "SHF", "PRMT", "ISETP", "FSETP", "IADD3", "LEA", "FMNMX", "IMNMX", "SEL", "FSEL", "PLOP3",
            "MOV", "F2FP", "BMSK", "SGXT", "FLO", "P2R", "R2P", "op_836", "op_c36", "op_846", "op_446",
            "op_248", "op_848", "op_c48", "CS2R", "S2R"},
    "fma": {"IMAD", "FFMA", "FMUL", "FADD", "HFMA2", "HADD2", "HMUL2", "IDP", "IMUL"},
    "lsu": {"LDS", "STS", "LDG", "STG", "LDGSTS", "LDSM", "SHFL", "LDC", "LDGDEPBAR", "DEPBAR", "ATOMS", "RED"},
    "tensor": {"HMMA", "IMMA", "HGMMA"},
    "xu": {"MUFU", "I2F", "F2I", "I2FP", "F2IP", "POPC"},
    "branch": {"BRA", "BRX", "BSSY", "BSYNC", "WARPSYNC", "BREAK", "EXIT", "CALL", "RET", "NOP", "BAR"},
}


def pipe_of(o):
    if o.startswith("U") or o in ("R2UR", "S2UR"):
        return "uniform"
    return next((p for p, ops in PIPES.items() if o in ops), "other")


def back_edges(ins):
    """(first, last) addresses of every loop: a branch to an earlier (or its own) address."""
    return [(target(k), k["addr"]) for k in ins if op(k) == "BRA" and target(k) <= k["addr"]]


def loops(ins):
    """The loops whose body holds tensor-core work: (first, last, size, opcode counts)."""
    idx = {k["addr"]: i for i, k in enumerate(ins)}
    out = []
    for first, last in back_edges(ins):
        body = ins[idx[first]:idx[last] + 1]
        c = collections.Counter(op(x) for x in body)
        if c["HMMA"]:
            out.append((first, last, len(body), c))
    return out


def trace(ins, path):
    """The instructions along `path`: from its start until it returns there, or, with an
    "entry" (the setup before the unit loop), from the entry until it first reaches the
    start. Returns (instructions, None) or (the instructions so far, why it stopped)."""
    idx = {k["addr"]: i for i, k in enumerate(ins)}
    start = int(path["start"], 16)
    entry = int(path["entry"], 16) if "entry" in path else None
    br = {int(a, 16) if a.startswith("0x") else a: v for a, v in path.get("branches", {}).items()}
    brx = {int(a, 16): [int(t, 16) for t in v] for a, v in path.get("brx", {}).items()}
    used = collections.Counter()
    seq, i = [], idx[start if entry is None else entry]

    def ctx(j):
        return "\n".join(f"  {ins[x]['addr']:#7x}  {ins[x]['txt'] or op(ins[x])}   [{ins[x]['line']}]"
                         for x in range(max(0, j - 8), j + 1))

    while True:
        k = ins[i]
        if k["addr"] == start and (seq or entry is not None):
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


GLOBAL_LOADS = {"LDG", "LD", "ATOMG", "ATOM"}


def control(k):
    """The scheduling bits of an instruction (bits 105..125 of the 128-bit word: stall
    cycles, yield, the scoreboard it sets when its result is written (7: none), the one it
    sets when its operands are read, the scoreboards it waits for)."""
    h = k["hi"]
    return dict(stall=(h >> 41) & 15, wbar=(h >> 46) & 7, rbar=(h >> 49) & 7, wait=(h >> 52) & 63)


def load_waits(seq, latency):
    """A latency model of the global loads along seq: one cycle per instruction, each
    global load's result ready `latency` cycles after it issues, an instruction that waits
    on a scoreboard (its control bits) waits for everything behind it (a scoreboard counts
    its operations: ptxas lets loads share one, and a wait for one is a wait for all).
    Returns (the model's cycles, the round trips, those of them after the wait for the
    previous kernel (griddepcontrol.wait, ACQBULK on sm_90: what comes before it overlaps
    that kernel's tail), the global loads): a round trip is a wait of more than half the
    latency, one memory access that the path could not overlap with the previous; loads
    issued together share one."""
    t, ready, stalls, after, waited = 0, [0] * 6, 0, 0, False
    for k in seq:
        c = control(k)
        waited = waited or op(k) == "ACQBULK"
        for b in range(6):
            if c["wait"] >> b & 1 and ready[b] > t:
                stalls += ready[b] - t > latency // 2
                after += waited and ready[b] - t > latency // 2
                t = ready[b]
            if c["wait"] >> b & 1:
                ready[b] = 0
        t += 1
        if op(k) in GLOBAL_LOADS and c["wbar"] < 6:
            ready[c["wbar"]] = max(ready[c["wbar"]], t + latency)
    return t, stalls, after, sum(1 for k in seq if op(k) in GLOBAL_LOADS)


def function_lines(path, signature):
    """(first, last) source lines of the function whose definition line holds `signature`
    (to its first line that is a lone closing brace)."""
    lines = open(path).read().splitlines()
    first = next(i for i, l in enumerate(lines) if signature in l) + 1
    last = next(i for i in range(first, len(lines)) if lines[i] == "}") + 1
    return first, last


def rotation_loops(ins, first, last, latency):
    """The innermost loop of a kernel whose global loads come from kernel_math.hpp lines
    first..last (rotated_coord): (first address, last address, instructions, opcode counts,
    load_waits of one straight pass through the body)."""
    idx = {k["addr"]: i for i, k in enumerate(ins)}

    def ours(k):
        m = re.match(r"kernel_math\.hpp:(\d+)$", k["line"] or "")
        return op(k) == "LDG" and m and first <= int(m.group(1)) <= last

    best = None
    for f, l in back_edges(ins):
        body = ins[idx[f]:idx[l] + 1]
        if any(ours(k) for k in body) and (best is None or len(body) < len(best)):
            best = body
    if best is None:
        return None
    return best[0]["addr"], best[-1]["addr"], len(best), collections.Counter(op(k) for k in best), load_waits(best, latency)


def rotations(arch, latency):
    """`rotations` mode: the rotation loops of rotate_query_kernel and merge_kernel
    (kernels/decode_attention.cu), one batch of rotated_coord's matrix loads each."""
    first, last = function_lines(os.path.join(ROOT, "include", "bgtq", "cuda", "kernel_math.hpp"),
                                 "BGTQ_HOST_DEVICE float rotated_coord(")
    with tempfile.TemporaryDirectory() as tmp:
        listing = disassemble(build(arch, tmp, "decode_attention.cu"), tmp)
    for kernel in ("rotate_query_kernel", "merge_kernel"):
        ins = parse(listing, kernel)
        check_targets(ins, listing)
        r = rotation_loops(ins, first, last, latency)
        if r is None:
            die(f"{kernel}: no loop with rotated_coord's loads (kernel_math.hpp:{first}-{last})")
        f, l, n, c, (cyc, rts, _, nld) = r
        print(f"{kernel}, sm_{arch}: rotation batch loop {f:#x}..{l:#x}: {n} instructions, {c['LDG']} global loads, "
              f"{c['FFMA']} FFMA; one pass: {rts} round trips, {cyc} cycles at {latency} per global load")


def anchors_of(ins):
    """addr -> 'file:line#n' for every instruction (n: its rank among the instructions of
    that source line, in address order), and for conditional branches and indirect jumps
    a rank among those alone ('file:line#bn' / '#xn'), which survives edits elsewhere."""
    rank, out = collections.Counter(), {}
    for k in ins:
        o = op(k)
        if o == "BRX" or (o == "BRA" and predicated(k) and "BRA.DIV" not in (k["txt"] or "")):
            key = (k["line"], "x" if o == "BRX" else "b")
            out[k["addr"]] = f"{k['line']}#{key[1]}{rank[key]}"
            rank[key] += 1
        else:
            out[k["addr"]] = f"{k['line']}#{rank[(k['line'], 'i')]}"
            rank[(k["line"], "i")] += 1
    return out


def brx_table(k, labels):
    """The targets of an indirect jump, in its table's order (the labels it names)."""
    names = re.findall(r"\.L_x_\d+", (k["txt"] or "").split("BRANCH_TARGETS", 1)[-1])
    return [labels.get(n) for n in names]


def label_addrs(listing):
    """label -> address: a label's line precedes its instruction's (the older disassembler
    prints no label before an instruction it cannot decode)."""
    labels, pend = {}, []
    for l in listing.splitlines():
        m = re.match(r"^(\.L_x_\d+):", l.strip())
        if m:
            pend.append(m.group(1))
            continue
        t = TEXT.search(l)
        if t and pend:
            for p in pend:
                labels[p] = int(t.group(1), 16)
            pend = []
    return labels


def anchor_path(ins, listing, path):
    """The path with 'anchors' (each decided address's file:line#rank) and each indirect
    jump's targets also as case numbers, so that `rebase` can carry it to another build."""
    an = anchors_of(ins)
    labels = label_addrs(listing)
    idx = {k["addr"]: k for k in ins}
    addrs = [path["start"], *[a for a in path.get("branches", {}) if a.startswith("0x")], *path.get("brx", {})]
    path["anchors"] = {a: an[int(a, 16)] for a in addrs}
    cases = {}
    for a, targets in path.get("brx", {}).items():
        table = brx_table(idx[int(a, 16)], labels)
        cases[a] = [table.index(int(t, 16)) if int(t, 16) in table else None for t in targets]
        if None in cases[a]:
            die(f"indirect jump {a}: a target is not in its table {[hex(x) if x else None for x in table]}")
    path["brx_cases"] = cases
    line_keys = [a for a in path.get("branches", {}) if not a.startswith("0x")]  # "file:line" keys
    files = sorted({v.split(":", 1)[0] for v in [*path["anchors"].values(), *line_keys]})
    path["sources"] = {f: blob_of(f) for f in files}
    return path


def source_path(base):
    """The checkout's file of a basename the line table names (kernels/, then include/bgtq/
    and its folders: cuda/, attention/ (softmax.hpp), core/, ...)."""
    dirs = [os.path.join(ROOT, "kernels")]
    for d, _, _ in sorted(os.walk(os.path.join(ROOT, "include", "bgtq"))):
        dirs.append(d)
    for d in dirs:
        q = os.path.join(d, base)
        if os.path.isfile(q):
            return q
    return None


def blob_of(base):
    """The git blob of a source file as it is now (written to the object store, so that a
    later `rebase` can read this version back)."""
    q = source_path(base)
    if q is None:
        return None
    r = subprocess.run(["git", "-C", ROOT, "hash-object", "-w", q], capture_output=True, text=True)
    return r.stdout.strip() if r.returncode == 0 else None


def line_map(base, blob):
    """old line -> new line of a source file, for the lines an edit left as they were."""
    import difflib
    q = source_path(base)
    if q is None or not blob:
        return {}
    r = subprocess.run(["git", "-C", ROOT, "cat-file", "-p", blob], capture_output=True, text=True)
    if r.returncode != 0:
        return {}
    old, new = r.stdout.splitlines(), open(q).read().splitlines()
    m = {}
    for tag, i1, i2, j1, j2 in difflib.SequenceMatcher(None, old, new, autojunk=False).get_opcodes():
        if tag == "equal":
            for d in range(i2 - i1):
                m[i1 + d + 1] = j1 + d + 1
    return m


def rebase_path(ins, listing, path, digest):
    """The path carried to this build through its anchors."""
    if "anchors" not in path:
        die("the path has no anchors: run `anchor` on it with the build it was written for")
    back = {v: a for a, v in anchors_of(ins).items()}
    labels = label_addrs(listing)
    idx = {k["addr"]: k for k in ins}

    # anchors an edit moved: their lines carried through a diff of each source file between
    # the version the path was anchored on and the checkout's; lines the edit changed are lost
    maps = {f: line_map(f, b) for f, b in path.get("sources", {}).items()}

    def moved(v):
        f, rest = v.split(":", 1)
        line, rank = rest.split("#", 1)
        nl = maps.get(f, {}).get(int(line))
        return f"{f}:{nl}#{rank}" if nl else None

    new, dropped = {}, []
    for a, v in path["anchors"].items():
        w = moved(v) if v.split(":", 1)[0] in maps else v
        if w in back:
            if w != v:
                print(f"rebase: {v} taken as {w}", file=sys.stderr)
            new[a] = f"{back[w]:#x}"
        else:
            dropped.append(a)
            print(f"rebase: {v} not found: its decisions are dropped (trace stops there)", file=sys.stderr)
    if path["start"] not in new:
        die("the start is not in this build")
    for a in path.get("branches", {}):
        if a.startswith("0x") and a not in path["anchors"]:
            die(f"branch {a} has no anchor (decided after `anchor` ran): anchor the path again on its own build")
    out = dict(path)
    out.pop("ranges", None)  # addresses of the old build
    out["code_sha256"] = digest
    out["start"] = new[path["start"]]
    out["branches"] = {}
    for a, v in path.get("branches", {}).items():
        if a.startswith("0x"):
            if a not in dropped:
                out["branches"][new[a]] = v
            continue
        f, line = a.split(":", 1)  # a "file:line" key: its line carried like an anchor's
        nl = maps.get(f, {}).get(int(line)) if f in maps else int(line)
        if nl is None:
            print(f"rebase: {a} not found: its decisions are dropped (trace stops there)", file=sys.stderr)
        else:
            out["branches"][f"{f}:{nl}"] = v
    out["brx"] = {}
    for a, cs in path.get("brx_cases", {}).items():
        if a in dropped:
            continue
        table = brx_table(idx[int(new[a], 16)], labels)
        if any(c >= len(table) or table[c] is None for c in cs):
            die(f"indirect jump {new[a]}: its table {table} lacks a case of {cs}")
        out["brx"][new[a]] = [f"{table[c]:#x}" for c in cs]
    out["brx_cases"] = {new[a]: cs for a, cs in path.get("brx_cases", {}).items() if a in new}
    out.pop("anchors")  # written again by `anchor` once the path is complete and checked
    out.pop("sources", None)
    return out


def selftest(fixture):
    """Checks the listing parser, the branch decoding, the trace and the anchors on a
    recorded listing (tests/cuda/sass/mini.sass: tests/cuda/sass/mini.cu for sm_90 by CUDA
    13.0, disassembled by 11.8's nvdisasm from the patched header) - no nvcc, no
    disassembler needed; ctest runs it."""
    listing = open(fixture).read()
    ins = parse(listing, "mini")
    check_targets(ins, listing)
    fails = []

    def expect(cond, what):
        if not cond:
            fails.append(what)

    expect(len(ins) == 208, f"208 instructions, not {len(ins)}")
    expect(sum(k["txt"] is None for k in ins) == 11, "11 instructions without text (VIADD)")
    expect(all(b["addr"] == a["addr"] + 16 for a, b in zip(ins, ins[1:])), "contiguous addresses")
    back = back_edges(ins)
    expect(back == [(0x210, 0x560), (0x7E0, 0x900), (0x970, 0x9F0), (0xC70, 0xC70)], f"back edges {back}")
    seq, err = trace(ins, {"start": "0x210", "branches": {"0x560": [True]}})
    expect(err is None and len(seq) == 54, f"one turn of the unrolled loop: 54 instructions, not {len(seq)} ({err})")
    seq, err = trace(ins, {"start": "0x210", "branches": {"0x560": [False]}})
    expect(err is not None and "undecided branch" in err, "a path leaving the loop stops at the next undecided branch")
    # control bits: every global load sets a write scoreboard (0..5), only variable-latency
    # operations set one, and the loop turn's 16 loads, issued together, are one round trip
    ld = [k for k in ins if op(k) == "LDG"]
    expect(len(ld) == 33 and all(control(k)["wbar"] < 6 for k in ld), "each of the 33 LDG sets a scoreboard 0..5")
    setters = {op(k) for k in ins if control(k)["wbar"] != 7}
    expect(setters <= {"LDG", "LDC", "S2R", "S2UR"}, f"write scoreboards set by {sorted(setters)}")
    seq, _ = trace(ins, {"start": "0x210", "branches": {"0x560": [True]}})
    lw = load_waits(seq, 600)
    expect(lw == (642, 1, 0, 16), f"one loop turn: 642 cycles, 1 round trip, 16 loads at latency 600, not {lw}")
    an = anchors_of(ins)
    expect(len(set(an.values())) == len(an), "anchors are unique")
    expect([pipe_of(o) for o in ("PRMT", "IMAD", "HMMA", "ULDC", "LDS")] == ["alu", "fma", "tensor", "uniform", "lsu"],
           "pipe classes")
    for f in fails:
        print(f"sass_trace selftest: FAIL {f}")
    print(f"sass_trace selftest: {'ok' if not fails else 'FAILED'} ({len(ins)} instructions read)")
    sys.exit(1 if fails else 0)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("mode", choices=["loops", "trace", "dump", "anchor", "rebase", "selftest", "rotations"])
    ap.add_argument("path", nargs="?", help="trace, anchor, rebase: a path file (JSON)")
    ap.add_argument("--arch", default="90")
    ap.add_argument("--show", help="trace: print the path's instructions between two addresses, A-B")
    ap.add_argument("--latency", type=int, default=600, help="trace of a setup path, rotations: cycles of a global load (default 600)")
    ap.add_argument("--kernel", help=f"the kernel (default: the path's \"kernel\", else {KERNEL})")
    ap.add_argument("--source", help="its file in kernels/ (default: the path's \"source\", else decode_mma.cu)")
    a = ap.parse_args()
    if a.mode == "selftest":
        selftest(a.path or os.path.join(ROOT, "tests", "cuda", "sass", "mini.sass"))
    if a.mode == "rotations":
        rotations(a.arch, a.latency)
        return
    path = json.load(open(a.path)) if a.path else {}
    kernel = a.kernel or path.get("kernel", KERNEL)
    with tempfile.TemporaryDirectory() as tmp:
        cubin = build(a.arch, tmp, a.source or path.get("source", "decode_mma.cu"))
        listing = disassemble(cubin, tmp)
    ins = parse(listing, kernel)
    check_targets(ins, listing)
    # the build's identity: its instruction words (not the cubin, whose line tables name the checkout's path)
    digest = hashlib.sha256(b"".join(struct.pack("<QQ", k["lo"], k["hi"]) for k in ins)).hexdigest()
    if a.mode == "dump":
        for k in ins:
            print(f"{k['addr']:#7x}  {k['txt'] or op(k):60s}  [{k['line']}]")
        return
    print(f"{kernel}, sm_{a.arch}: {len(ins)} instructions (code sha256 {digest})", file=sys.stderr if a.mode in ("anchor", "rebase") else sys.stdout)
    if a.mode == "loops":
        print("loop (first..back edge)   body  HMMA  LDS  PRMT  SHF  LOP3")
        for s, e, n, c in loops(ins):
            print(f"{s:#8x}..{e:#8x}   {n:6d}  {c['HMMA']:4d} {c['LDS']:4d}  {c['PRMT']:4d} {c['SHF']:4d} {c['LOP3']:4d}")
        return
    if not a.path:
        die(f"{a.mode} needs a path file")
    if a.mode == "rebase":  # to stdout: the path carried to this build
        json.dump(rebase_path(ins, listing, path, digest), sys.stdout, indent=1)
        print()
        return
    if path.get("code_sha256") != digest:
        die(f"{a.path} was written for another build (code {path.get('code_sha256', '?')[:16]}..., this one "
            f"{digest[:16]}...): its addresses do not apply; write the path again for this build (see the docstring)")
    if a.mode == "anchor":  # to stdout: the path with its anchors
        json.dump(anchor_path(ins, listing, path), sys.stdout, indent=1)
        print()
        return
    seq, err = trace(ins, path)
    if err:
        print(f"after {len(seq)} instructions: {err}")
        sys.exit(2)
    c = collections.Counter(op(k) for k in seq)
    if "entry" in path:
        cyc, stalls, after, nld = load_waits(seq, a.latency)
        print(f"{path.get('name', a.path)}: {len(seq)} warp instructions from the entry to {path['start']}; {nld} global "
              f"loads in {stalls} round trips, {after} of them after the wait for the previous kernel; {cyc} cycles at "
              f"{a.latency} per global load and 1 per instruction (no other latency)")
    else:
        print(f"{path.get('name', a.path)}: {len(seq)} warp instructions per unit, {len(seq) / 64:.1f} per token and KV head")
    print("  " + ", ".join(f"{o} {n}" for o, n in c.most_common(16)))
    pc = collections.Counter(pipe_of(op(k)) for k in seq)
    imad = sum(1 for k in seq if op(k) in ("IMAD", "IMUL", "IDP"))  # the FMA pipe's half-rate part (fmaheavy only)
    print("  by pipe (estimated): " + ", ".join(f"{p} {n}" for p, n in pc.most_common()) +
          ("" if "entry" in path else f"; cycles of a scheduler per unit: issue {len(seq)}, ALU pipe {2 * pc['alu']}, "
                                      f"IMAD {2 * imad}; bound {max(len(seq), 2 * pc['alu'], 2 * imad)}"))
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
