#!/usr/bin/env python3
"""fp16 baseline for bench/gpu/run.sh: times torch.nn.functional.scaled_dot_product_attention
decode (one query token per sequence, GQA) on an fp16 KV cache of the same shapes as
bench_decode's packed runs, then prints ONE table with both and writes it (text + JSON)
under --out.

GQA without enable_gqa: the G query heads of a KV head are passed as a query "sequence"
of length G, q [B, Hkv, G, D], k/v [B, Hkv, T, D], no mask: exactly decode attention
for every query head, and the form every SDPA backend accepts.

Usage: sdpa.py --packed packed.json [--packed more.json ...] [--out DIR] [--runs N]
Without PyTorch or a GPU the packed rows are still printed (fp16 columns "n/a").
"""
import argparse
import datetime
import json
import os
import statistics
import sys


def time_sdpa(torch, F, B, Hkv, G, T, D, runs):
    k = torch.randn(B, Hkv, T, D, device="cuda", dtype=torch.float16)
    v = torch.randn(B, Hkv, T, D, device="cuda", dtype=torch.float16)
    q = torch.randn(B, Hkv, G, D, device="cuda", dtype=torch.float16)
    for _ in range(3):
        out = F.scaled_dot_product_attention(q, k, v)
    torch.cuda.synchronize()
    times = []
    for _ in range(runs):
        e0 = torch.cuda.Event(enable_timing=True)
        e1 = torch.cuda.Event(enable_timing=True)
        e0.record()
        out = F.scaled_dot_product_attention(q, k, v)
        e1.record()
        e1.synchronize()
        times.append(e0.elapsed_time(e1) * 1e3)  # us
    if not torch.isfinite(out).all():
        raise RuntimeError("non-finite SDPA output")
    del k, v, q, out
    torch.cuda.empty_cache()
    return statistics.median(times)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--packed", required=True, action="append",
                    help="JSON written by bench_decode --json (repeat to merge runs, e.g. one per split kernel; "
                         "device, copy bandwidth and shape come from the first)")
    ap.add_argument("--out", default=os.environ.get("OUT", ""), help="folder for the table and JSON")
    ap.add_argument("--runs", type=int, default=25, help="timed runs per shape (median, >= 20)")
    args = ap.parse_args()
    runs = max(20, args.runs)
    packed = None
    for path in args.packed:
        with open(path) as f:
            part = json.load(f)
        if packed is None:
            packed = part
        else:
            packed["rows"] = packed["rows"] + part["rows"]
            packed["encode"] = packed.get("encode", []) + [e for e in part.get("encode", []) if e not in packed.get("encode", [])]
    Hq, Hkv, D = packed["shape"]["Hq"], packed["shape"]["Hkv"], packed["shape"]["D"]
    G = Hq // Hkv
    copy_bw = packed["copy_bw_Bps"]
    shapes = sorted({(r["batch"], r["T"]) for r in packed["rows"]})

    sdpa, note, torch_version = {}, "", None
    try:
        import torch
        import torch.nn.functional as F

        torch_version = torch.__version__
        if not torch.cuda.is_available():
            note = "PyTorch has no CUDA device: fp16 SDPA not measured"
    except ImportError:
        torch = None
        note = "PyTorch is not installed: fp16 SDPA not measured"
    if torch is not None and not note:
        for B, T in shapes:
            try:
                us = time_sdpa(torch, F, B, Hkv, G, T, D, runs)
                nbytes = 2 * B * Hkv * T * D * 2 + 2 * B * Hq * D * 2
                sdpa[(B, T)] = {"time_us": us, "bytes": nbytes, "frac_copy_bw": nbytes / (us * 1e-6) / copy_bw}
                print(f"fp16 SDPA B={B:2d} T={T:7d}: {us:9.1f} us", file=sys.stderr)
            except Exception as e:  # out of memory or a backend refusing the shape: say so, keep going
                print(f"fp16 SDPA B={B} T={T} failed: {e}", file=sys.stderr)
                if torch is not None:
                    torch.cuda.empty_cache()

    lines = []
    hdr = f"{'method':<12} {'kv':<5} {'batch':>5} {'T':>7} {'time_us':>10} {'bytes':>13} {'frac_bw':>8} {'x_fp16':>7}"
    lines.append(hdr)
    rows_out = []
    for B, T in shapes:
        s = sdpa.get((B, T))
        if s is not None:
            lines.append(f"{'fp16 SDPA':<12} {'fp16':<5} {B:>5} {T:>7} {s['time_us']:>10.1f} {s['bytes']:>13.0f} "
                         f"{s['frac_copy_bw']:>8.3f} {1.0:>7.2f}")
            rows_out.append({"method": "fp16 SDPA", "kv": "fp16", "batch": B, "T": T, **s, "speedup_vs_fp16": 1.0})
        for r in packed["rows"]:
            if (r["batch"], r["T"]) != (B, T):
                continue
            sp = s["time_us"] / r["time_us"] if s is not None else None
            sps = f"{sp:>7.2f}" if sp is not None else f"{'n/a':>7}"
            lines.append(f"{r['method']:<12} {r['kv']:<5} {B:>5} {T:>7} {r['time_us']:>10.1f} {r['bytes']:>13.0f} "
                         f"{r['frac_copy_bw']:>8.3f} {sps}")
            rows_out.append({**r, "speedup_vs_fp16": sp})
    foot = [
        f"device: {packed['device']} ({packed['sms']} SMs); copy bandwidth {copy_bw * 1e-9:.1f} GB/s "
        f"(cudaMemcpy D2D, 2 x bytes / time); Hq={Hq} Hkv={Hkv} D={D}; median of {runs} runs (CUDA events)",
        "frac_bw: bytes moved / time / copy bandwidth; x_fp16: fp16 SDPA time / this time (>1 = faster)",
        "<method>/tc: the tensor-core split kernel (decode_path::tensor_cores); the others: CUDA cores (exact fp32)",
        f"date: {datetime.date.today().isoformat()}; torch {torch_version}" + (f"; {note}" if note else ""),
    ]
    text = "\n".join(lines + [""] + foot) + "\n"
    sys.stdout.write(text)
    if args.out:
        os.makedirs(args.out, exist_ok=True)
        with open(os.path.join(args.out, "gpu_decode_table.txt"), "w") as f:
            f.write(text)
        with open(os.path.join(args.out, "gpu_decode.json"), "w") as f:
            json.dump({"device": packed["device"], "sms": packed["sms"], "copy_bw_Bps": copy_bw, "runs": runs,
                       "date": datetime.date.today().isoformat(), "torch": torch_version, "note": note,
                       "encode": packed.get("encode", []), "rows": rows_out}, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
