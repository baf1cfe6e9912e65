#!/usr/bin/env python3
"""fp16 baseline for bench/gpu/run.sh: times torch.nn.functional.scaled_dot_product_attention
decode (one query token per sequence, GQA) on an fp16 KV cache of the same shapes as
bench_decode's packed runs, then prints ONE table with both and writes it (text + JSON)
under --out.

GQA without enable_gqa: the G query heads of a KV head are passed as a query "sequence"
of length G, q [B, Hkv, G, D], k/v [B, Hkv, T, D], no mask: exactly decode attention
for every query head, and the form every SDPA backend accepts. Each shape is timed with
PyTorch's own dispatch and with each backend pinned (flash, efficient, cuDNN, where they
accept it); the table's x_fp16 is against the default dispatch, x_best against the
fastest backend, x_floor against the fp16 bytes at the measured copy bandwidth. The L2
is evicted before every timed call, as in bench_decode.

Usage: sdpa.py --packed packed.json [--packed more.json ...] [--out DIR] [--runs N]
Without PyTorch or a GPU the packed rows are still printed (fp16 columns "n/a").
"""
import argparse
import datetime
import json
import os
import statistics
import sys


def l2_flusher(torch):
    """A function that evicts the L2 cache (a memset of four times its size, at least
    64 MiB), run before every timed call outside the events, as bench_decode does."""
    try:
        l2 = int(torch.cuda.get_device_properties(0).L2_cache_size)
    except Exception:  # an older PyTorch without the field
        l2 = 64 << 20
    buf = torch.empty(max(4 * l2, 64 << 20), dtype=torch.uint8, device="cuda")
    return buf.zero_


def time_calls(torch, fn, runs, flush=None):
    """Median microseconds of fn() over `runs` CUDA-event-timed calls, after 3 warm-ups;
    flush() (untimed) before each."""
    for _ in range(3):
        out = fn()
    torch.cuda.synchronize()
    times = []
    for _ in range(runs):
        if flush is not None:
            flush()
        e0 = torch.cuda.Event(enable_timing=True)
        e1 = torch.cuda.Event(enable_timing=True)
        e0.record()
        out = fn()
        e1.record()
        e1.synchronize()
        times.append(e0.elapsed_time(e1) * 1e3)  # us
    return statistics.median(times), out


def sdpa_backends(torch):
    """(name, context factory) for each SDPA backend PyTorch can be pinned to; [] if this
    PyTorch has no torch.nn.attention.sdpa_kernel."""
    try:
        from torch.nn.attention import SDPBackend, sdpa_kernel
    except ImportError:
        return []
    out = []
    for name in ("FLASH_ATTENTION", "EFFICIENT_ATTENTION", "CUDNN_ATTENTION"):
        b = getattr(SDPBackend, name, None)
        if b is not None:
            out.append((name.split("_")[0].lower(), lambda b=b: sdpa_kernel(b)))
    return out


def time_sdpa(torch, F, B, Hkv, G, T, D, runs, flush=None):
    """Times fp16 SDPA decode at one shape: PyTorch's own dispatch ("default") and each
    backend pinned in turn (one that refuses the shape is left out). Every output must
    be finite and agree with the default's (fp16 rounding: 2e-2 of max |out|).
    Returns {backend: microseconds}."""
    k = torch.randn(B, Hkv, T, D, device="cuda", dtype=torch.float16)
    v = torch.randn(B, Hkv, T, D, device="cuda", dtype=torch.float16)
    q = torch.randn(B, Hkv, G, D, device="cuda", dtype=torch.float16)
    call = lambda: F.scaled_dot_product_attention(q, k, v)
    us, ref = time_calls(torch, call, runs, flush)
    if not torch.isfinite(ref).all():
        raise RuntimeError("non-finite SDPA output")
    res = {"default": us}
    scale = float(ref.float().abs().max())
    for name, ctx in sdpa_backends(torch):
        def pinned(ctx=ctx):
            with ctx():
                return call()
        try:
            us, out = time_calls(torch, pinned, runs, flush)
        except Exception as e:  # the backend refuses this shape or dtype on this device
            print(f"fp16 SDPA B={B} T={T}: backend {name} not used ({str(e).splitlines()[0][:120]})", file=sys.stderr)
            continue
        err = float((out.float() - ref.float()).abs().max())
        if not torch.isfinite(out).all() or err > 2e-2 * scale:
            raise RuntimeError(f"SDPA backend {name} disagrees with the default dispatch: max |diff| {err:.3g} "
                               f"of max |out| {scale:.3g}")
        res[name] = us
    del k, v, q, ref
    torch.cuda.empty_cache()
    return res


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
        try:
            with open(path) as f:
                part = json.load(f)
            part["rows"], part["shape"], part["copy_bw_Bps"]  # the fields used below
        except (OSError, ValueError, KeyError, TypeError) as e:
            print(f"sdpa.py: {path}: not a bench_decode --json file ({type(e).__name__}: {e})", file=sys.stderr)
            return 2
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
        flush = l2_flusher(torch)
        for B, T in shapes:
            try:
                per = time_sdpa(torch, F, B, Hkv, G, T, D, runs, flush)
                us = per["default"]
                best = min(per, key=per.get)
                nbytes = 2 * B * Hkv * T * D * 2 + 2 * B * Hq * D * 2
                sdpa[(B, T)] = {"time_us": us, "bytes": nbytes, "frac_copy_bw": nbytes / (us * 1e-6) / copy_bw,
                                "backends_us": per, "best": best, "best_us": per[best],
                                "floor_us": nbytes / copy_bw * 1e6}
                print(f"fp16 SDPA B={B:2d} T={T:7d}: " + ", ".join(f"{n} {t:.1f} us" for n, t in per.items()),
                      file=sys.stderr)
            except Exception as e:  # out of memory or a backend refusing the shape: say so, keep going
                print(f"fp16 SDPA B={B} T={T} failed: {e}", file=sys.stderr)
                if torch is not None:
                    torch.cuda.empty_cache()

    def ratios(s, us):
        """x_fp16 (default SDPA), x_best (fastest SDPA backend), x_floor (fp16 bytes at copy bandwidth)."""
        if s is None:
            return [None, None, None]
        return [s["time_us"] / us, s["best_us"] / us, s["floor_us"] / us]

    def fmt(x):
        return f"{x:>7.2f}" if x is not None else f"{'n/a':>7}"

    lines = []
    hdr = (f"{'method':<16} {'kv':<5} {'batch':>5} {'T':>7} {'time_us':>10} {'bytes':>13} {'frac_bw':>8} "
           f"{'x_fp16':>7} {'x_best':>7} {'x_floor':>7}")
    lines.append(hdr)
    rows_out = []
    for B, T in shapes:
        s = sdpa.get((B, T))
        if s is not None:
            fp16_rows = [("fp16 SDPA", s["time_us"])]
            if s["best"] != "default":
                fp16_rows.append((f"fp16 {s['best']}", s["best_us"]))
            for name, us in fp16_rows:
                x = ratios(s, us)
                lines.append(f"{name:<16} {'fp16':<5} {B:>5} {T:>7} {us:>10.1f} {s['bytes']:>13.0f} "
                             f"{s['bytes'] / (us * 1e-6) / copy_bw:>8.3f} {fmt(x[0])} {fmt(x[1])} {fmt(x[2])}")
            rows_out.append({"method": "fp16 SDPA", "kv": "fp16", "batch": B, "T": T, **s, "speedup_vs_fp16": 1.0,
                             "speedup_vs_best_fp16": s["best_us"] / s["time_us"],
                             "speedup_vs_fp16_floor": s["floor_us"] / s["time_us"]})
        for r in packed["rows"]:
            if (r["batch"], r["T"]) != (B, T):
                continue
            x = ratios(s, r["time_us"])
            lines.append(f"{r['method']:<16} {r['kv']:<5} {B:>5} {T:>7} {r['time_us']:>10.1f} {r['bytes']:>13.0f} "
                         f"{r['frac_copy_bw']:>8.3f} {fmt(x[0])} {fmt(x[1])} {fmt(x[2])}")
            rows_out.append({**r, "speedup_vs_fp16": x[0], "speedup_vs_best_fp16": x[1], "speedup_vs_fp16_floor": x[2]})
    packed_runs = packed.get("runs", runs)
    runs_text = f"{runs} runs" if packed_runs == runs else f"{runs} runs (packed rows: {packed_runs})"
    foot = [
        f"device: {packed['device']} ({packed['sms']} SMs); copy bandwidth {copy_bw * 1e-9:.1f} GB/s "
        f"(cudaMemcpy D2D, 2 x bytes / time); Hq={Hq} Hkv={Hkv} D={D}; median of {runs_text} (CUDA events, "
        "L2 evicted before each)",
        "frac_bw: bytes moved / time / copy bandwidth; x_fp16: fp16 SDPA time (PyTorch's own dispatch) / this time "
        "(>1 = faster); x_best: the fastest SDPA backend pinned (flash, efficient, cudnn; row 'fp16 <name>' when it "
        "beats the default) / this time; x_floor: fp16 K+V bytes at the copy bandwidth (no fp16 kernel can be "
        "faster) / this time",
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
