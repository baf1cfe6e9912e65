#!/usr/bin/env python3
"""An independent model of what `bgtq eval` measures for KIVI keys, in plain Python.

Usage: kivi_reference.py Q.npy K.npy BITS SINK RECENT FIRST_QUERY
Prints "logit_mae KL" for kivi@BITS (asymmetric, 32-token key blocks), queries
FIRST_QUERY..T-1, every query head, all causal keys, K only, with the cache's fp16
window: the first SINK tokens, then 32-token blocks that are quantized once RECENT
tokens have arrived after them, from the keys rounded to fp16, per channel with an fp16
scale and zero point (include/bgtq/codec/kivi.hpp). Written from docs/RESULTS.md and
the cache's append rule, not from the eval's code: tests/cli/test_eval_kivi_reference.cmake
compares it with the tool.
"""
import ast
import math
import struct
import sys

BLOCK = 32


def load(path):
    b = open(path, "rb").read()
    assert b[:6] == b"\x93NUMPY"
    n_header = struct.unpack("<H", b[8:10])[0]
    header = ast.literal_eval(b[10:10 + n_header].decode())
    assert header["descr"] == "<f4" and not header["fortran_order"]
    shape = header["shape"]
    count = 1
    for s in shape:
        count *= s
    return shape, struct.unpack("<%df" % count, b[10 + n_header:10 + n_header + 4 * count])


def f32(x):
    return struct.unpack("<f", struct.pack("<f", x))[0]


def half(x):
    return struct.unpack("<e", struct.pack("<e", max(-65504.0, min(65504.0, x))))[0]


def quantize_block(rows, bits):
    """KIVI keys of one block [tokens][D]: per channel, scale (hi - lo) / levels and
    zero lo, both stored in fp16; codes round to nearest, clamped."""
    levels = (1 << bits) - 1
    out = [list(r) for r in rows]
    for j in range(len(rows[0])):
        lo = min(r[j] for r in rows)
        hi = max(r[j] for r in rows)
        scale = half(f32(f32(hi - lo) / levels))
        zero = half(lo)
        for i, r in enumerate(rows):
            if not scale > 0:
                code = 0
            else:
                c = f32(f32(r[j] - zero) / scale)
                code = 0 if not c > -0.5 else (levels if c >= levels else math.floor(f32(c + 0.5)))
            out[i][j] = f32(zero + f32(scale * code))
    return out


def main():
    q_path, k_path, bits, sink, recent, first = sys.argv[1], sys.argv[2], *map(int, sys.argv[3:7])
    (layers, T, Hq, D), q = load(q_path)
    (_, _, Hkv, _), k = load(k_path)
    assert layers == 1
    G = Hq // Hkv
    inv_sqrt_d = 1.0 / math.sqrt(D)
    mae = kl = 0.0
    pairs = queries = 0
    for h in range(Hkv):
        keys = [list(k[(t * Hkv + h) * D:(t * Hkv + h + 1) * D]) for t in range(T)]
        window = [[half(x) for x in row] for row in keys]
        for t in range(first, T):
            n = t + 1
            # replay the cache: sink, then the tail, which hands its oldest block to the
            # pages once it holds recent + BLOCK tokens
            held, tail, blocks = set(range(min(n, sink))), [], []
            for i in range(sink, n):
                tail.append(i)
                if len(tail) >= recent + BLOCK:
                    blocks.append(tail[:BLOCK])
                    tail = tail[BLOCK:]
            held |= set(tail)
            stored = {}
            for blk in blocks:
                for i, row in zip(blk, quantize_block([window[i] for i in blk], bits)):
                    stored[i] = row
            for g in range(h * G, (h + 1) * G):
                qt = q[(t * Hq + g) * D:(t * Hq + g + 1) * D]
                s = [inv_sqrt_d * sum(a * b for a, b in zip(qt, keys[u])) for u in range(n)]
                sh = [inv_sqrt_d * sum(a * b for a, b in zip(qt, window[u] if u in held else stored[u])) for u in range(n)]
                mae += sum(abs(a - b) for a, b in zip(s, sh))
                pairs += n
                m, mh = max(s), max(sh)
                p = [math.exp(a - m) for a in s]
                ph = [math.exp(b - mh) for b in sh]
                z, zh = sum(p), sum(ph)
                # KL(p || p_hat) = sum_u p_u (log p_u - log p_hat_u), log p_u = s_u - m - log z
                kl += max(sum(pi / z * ((a - m) - (b - mh)) for pi, a, b in zip(p, s, sh)) - math.log(z / zh), 0.0)
                queries += 1
    print("%.17g %.17g" % (mae / pairs, kl / queries))


if __name__ == "__main__":
    main()
