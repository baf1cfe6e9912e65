// bgtq bench encode|attention: throughput next to a floor measured in the same run.
#include <bgtq/attention/decode.hpp>
#include <bgtq/bench/timing.hpp>
#include <bgtq/bench/workload.hpp>
#include <bgtq/cache/factory.hpp>
#include <bgtq/codec/tq_codec.hpp>
#include <bgtq/io/json.hpp>
#include <bgtq/plan/build.hpp>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <iostream>
#include <string>
#include <memory>
#include <vector>

#include "cli.hpp"

namespace {
namespace cmd_bench {  // cli.hpp: the CLI is one translation unit

using namespace bgtq;

struct encode_row {
  std::string rotation;
  int bits, dim;
  double enc_gbps, dec_gbps;
};

int bench_encode(cli::args& a) {
  const bool json = a.flag("json");
  const int dim = static_cast<int>(a.get_int("dim", 128, 2, max_codec_dim));
  const auto bits_list = a.get_list("bits", "2,3,4");
  const auto rot_list = a.get_list("rotations", "hadamard,structured,haar");
  const double mb = a.get_double("mb", 64, 1, 4096);
  const int reps = static_cast<int>(a.get_int("reps", 5, 1, 1000));
  a.finish();
  // every list entry is checked before anything is allocated or measured
  std::vector<rotation_kind> rotations;
  for (const auto& rs : rot_list) {
    try {
      rotations.push_back(parse_rotation_kind(rs));
    } catch (const bgtq::error& e) {
      throw cli::usage_error(std::string("--rotations: ") + e.what());
    }
  }
  const bool pow2 = (dim & (dim - 1)) == 0;
  if (!pow2 && std::all_of(rotations.begin(), rotations.end(), [](rotation_kind k) { return k == rotation_kind::hadamard; }))
    throw cli::usage_error("--rotations hadamard needs a power-of-two --dim, got " + std::to_string(dim));
  std::vector<int> bits;
  for (const auto& bs : bits_list) {
    const long long b = cli::parse_int(bs, "--bits");
    if (b < 1 || b > 8) throw cli::usage_error("--bits entries must be in 1..8, got " + bs);
    bits.push_back(static_cast<int>(b));
  }
  const std::size_t count = static_cast<std::size_t>(mb * (1 << 20) / (4.0 * dim));
  std::vector<float> x(count * static_cast<std::size_t>(dim));
  counter_rng r(1);
  for (auto& v : x) v = static_cast<float>(r.normal());
  cli::progress("[bench encode] copy and read bandwidth ...");
  const double copy = bench::copy_bandwidth_gbps();
  const double read = bench::read_bandwidth_gbps();
  std::vector<encode_row> rows;
  for (const rotation_kind rk : rotations) {
    if (rk == rotation_kind::hadamard && !pow2) {
      cli::progress("[bench encode] hadamard skipped: --dim " + std::to_string(dim) + " is not a power of two");
      continue;
    }
    for (const int b : bits) {
      tq_params p;
      p.dim = dim;
      p.bits = b;
      p.rotation = rk;
      p.seed = 7;
      const tq_mse_codec c(p);
      std::vector<std::uint8_t> out(count * c.bytes());
      std::vector<float> back(x.size());
      std::vector<double> te, td;
      for (int rep = 0; rep < reps; ++rep) {
        double t0 = bench::now_s();
        for (std::size_t i = 0; i < count; ++i) (void)c.encode(x.data() + i * dim, out.data() + i * c.bytes());
        te.push_back(bench::now_s() - t0);
        t0 = bench::now_s();
        for (std::size_t i = 0; i < count; ++i) c.decode(out.data() + i * c.bytes(), back.data() + i * dim);
        td.push_back(bench::now_s() - t0);
        bench::do_not_optimize(back[static_cast<std::size_t>(rep)]);
      }
      const double bytes = static_cast<double>(x.size()) * 4.0;
      rows.push_back({to_string(rk), b, dim, bytes / bench::median(te) * 1e-9, bytes / bench::median(td) * 1e-9});
      cli::progress("[bench encode] " + rows.back().rotation + " b=" + std::to_string(b) + " done");
    }
  }
  if (json) {
    json_writer w(std::cout);
    w.begin_object().key("copy_gbps").value(copy).key("read_gbps").value(read).key("simd").value(simd_path()).key("threads").value(1);
    w.key("results").begin_array();
    for (const auto& e : rows) {
      w.begin_object().key("codec").value("tq").key("rotation").value(e.rotation).key("bits").value(e.bits).key("dim").value(e.dim);
      w.key("encode_gbps").value(e.enc_gbps).key("decode_gbps").value(e.dec_gbps);
      w.key("encode_ratio_to_copy").value(e.enc_gbps / copy).key("decode_ratio_to_copy").value(e.dec_gbps / copy);
      w.key("encode_mvec_per_s").value(e.enc_gbps * 1e3 / (4.0 * e.dim)).end_object();
    }
    w.end_array().end_object();
    std::cout << "\n";
  } else {
    std::printf("TQ-MSE encode/decode of fp32 input, single thread, %s, %.0f MiB of vectors\n", simd_path(), mb);
    std::printf("memory copy: %.2f GB/s (source bytes/s: the floor x copy divides by); read-only stream: %.2f GB/s (same run)\n",
                copy, read);
    std::printf("GB/s: encode counts the fp32 input read, decode the fp32 output written\n\n");
    std::printf("%-11s %4s %4s %12s %9s %12s %9s %10s\n", "rotation", "bits", "dim", "encode GB/s", "x copy", "decode GB/s",
                "x copy", "Mvec/s enc");
    for (const auto& e : rows)
      std::printf("%-11s %4d %4d %12.2f %9.2f %12.2f %9.2f %10.2f\n", e.rotation.c_str(), e.bits, e.dim, e.enc_gbps,
                  e.enc_gbps / copy, e.dec_gbps, e.dec_gbps / copy, e.enc_gbps * 1e3 / (4.0 * e.dim));
  }
  return 0;
}

template <class Cache>
double time_attention(Cache& cache, int seq, const std::vector<float>& q, int reps, std::vector<float>& out,
                      thread_pool* pool, bool cold) {
  std::vector<attention_workspace> ws;
  for (int i = 0; i < (pool ? pool->size() : 1); ++i) ws.emplace_back(cache);
  const int seqs[1] = {seq};
  auto step = [&] {
    if (pool)
      bgtq::decode_attention(cache, 0, std::span<const int>(seqs, 1), q.data(), out.data(), *pool,
                             std::span<attention_workspace>(ws));
    else
      bgtq::decode_attention(cache, 0, std::span<const int>(seqs, 1), q.data(), out.data(), ws[0]);
  };
  // cold: the pages and the fp16 window come from memory in every timed step (flushed
  // outside the timing)
  auto flush = [&] {
    if (cold) bench::flush_decode_reads(cache, std::span<const int>(seqs, 1), 0);
  };
  std::vector<double> t;
  step();  // warm
  for (int r = 0; r < reps; ++r) {
    flush();
    const double t0 = bench::now_s();
    step();
    t.push_back(bench::now_s() - t0);
  }
  return bench::median(t) * 1e3;
}

int bench_attention(cli::args& a) {
  const bool json = a.flag("json");
  const bool cold = a.flag("cold");
  const auto tok_list = a.get_list("tokens", "1024,4096,16384,65536");
  const int D = static_cast<int>(a.get_int("dim", 128, 8, 512));
  const int Hq = static_cast<int>(a.get_int("q-heads", 32, 1, 256));
  const int Hkv = static_cast<int>(a.get_int("kv-heads", 8, 1, 256));
  const int reps = static_cast<int>(a.get_int("reps", 7, 1, 1000));
  const int threads = static_cast<int>(a.get_int("threads", 1, 1, 256));
  const auto method_list = a.get_list("methods", "tq,bgtq");
  const auto kv_list = a.get_list("kv-bits", "3,2");
  const int sink = static_cast<int>(a.get_int("sink", 0, 0, 4096));
  const int recent = static_cast<int>(a.get_int("recent", 0, 0, 65536));
  a.finish();
  if (Hq % Hkv) throw cli::usage_error("--q-heads must be a multiple of --kv-heads");
  if (D % 2) throw cli::usage_error("--dim must be even (RoPE pairs dims), got " + std::to_string(D));
  // packed caches to time (fp16 always runs: it is the ratio's baseline)
  std::vector<std::string> methods;
  for (const auto& m : method_list) {
    if (m != "tq" && m != "bgtq") throw cli::usage_error("--methods entries must be tq or bgtq, got '" + m + "'");
    methods.push_back(m);
  }
  std::vector<int> kv_bits;
  for (const auto& b : kv_list) {
    const long long v = cli::parse_int(b, "--kv-bits");
    if (v < 1 || v > 8) throw cli::usage_error("--kv-bits entries must be in 1..8, got " + b);
    kv_bits.push_back(static_cast<int>(v));
  }
  std::vector<int> token_counts;  // validated before anything is measured
  for (const auto& ts : tok_list) {
    const long long T = cli::parse_int(ts, "--tokens");
    if (T < 1 || T > (1 << 22)) throw cli::usage_error("--tokens entries must be in 1..4194304, got " + ts);
    token_counts.push_back(static_cast<int>(T));
  }
  for (const int T : token_counts)
    if (sink + recent > 0 && T <= sink + recent)
      cli::warn("bench", "--tokens " + std::to_string(T) + " <= --sink " + std::to_string(sink) + " + --recent " +
                             std::to_string(recent) + ": the fp16 window holds every token, nothing is packed (all rows read fp16)");
  std::unique_ptr<thread_pool> pool;
  if (threads > 1) pool = std::make_unique<thread_pool>(threads);
  struct row {
    std::string method, kv;
    int tokens;
    double ms, ratio;
    double bytes;  //!< bytes one step reads (packed pages + fp16 window)
    double gbps() const { return bytes * 1e-9 / (ms * 1e-3); }
    //! what a token of a head costs the step on average, the fp16 window's 4 D bytes included
    double bytes_per_token(int kv_heads) const { return bytes / (static_cast<double>(tokens) * kv_heads); }
  };
  // what one step must read: the packed pages at the codec's size, the window in fp16
  auto step_bytes = [&](const auto& c, int s) {
    const auto v = c.view(s, 0);
    const double page_b = static_cast<double>(v.quantized) * c.bytes_per_token(0, 0);
    const double win_b = static_cast<double>(v.sink + v.tail) * 4.0 * D;
    return (page_b + win_b) * Hkv;
  };
  std::vector<row> rows;
  const rope_layout rope(D, rope_pairing::half);
  cli::progress("[bench attention] copy and read bandwidth, multiply-add rate ...");
  const double copy = bench::copy_bandwidth_gbps();
  const double read = bench::read_bandwidth_gbps();
  const double fma = bench::fma_rate_gmacs();  // one thread; the floor assumes `threads` times it
  // what one step must compute: 2 * Hq * D multiply-adds per token (scores and values)
  auto fma_floor_ms = [&](int T) { return 2.0 * T * Hq * D / (fma * 1e9 * threads) * 1e3; };
  for (const int T : token_counts) {
    cache_config cfg;
    cfg.layers = 1;
    cfg.kv_heads = Hkv;
    cfg.q_heads = Hq;
    cfg.head_dim = D;
    cfg.sink = sink;
    cfg.recent = recent;
    cfg.max_pages = (T + 63) / 64 + 1;
    std::vector<float> q(static_cast<std::size_t>(Hq) * D), out(q.size());
    counter_rng r(5);
    for (auto& x : q) x = static_cast<float>(r.normal());
    double fp16_ms = 0;
    {
      fp16_cache<> c(cfg, fp16_states(1, Hkv, D), fp16_states(1, Hkv, D));
      const int s = bench::fill_sequences(c, T);
      fp16_ms = time_attention(c, s, q, reps, out, pool.get(), cold);
      rows.push_back({"fp16", "k16v16", T, fp16_ms, 1.0, step_bytes(c, s)});
      cli::progress("[bench attention] T=" + std::to_string(T) + " fp16 " + std::to_string(fp16_ms) + " ms");
    }
    for (int bits : kv_bits) {
      for (const std::string& m : methods) {
        plan_options o;
        o.avg_bits = bits;
        o.value_bits = bits;
        const plan p = m == "tq" ? uniform_plan(1, Hkv, Hq, rope, bits, o)
                                 : build_plan(1, Hkv, Hq, rope, bench::spread_energies(1, Hkv, rope.num_blocks()), o);
        auto c = make_bgtq_cache(p, cfg);
        const int s = bench::fill_sequences(c, T);
        const double ms = time_attention(c, s, q, reps, out, pool.get(), cold);
        char kv_text[24];  // "k3v3"; not "k" + std::to_string(bits) + ...: inlined in the
        std::snprintf(kv_text, sizeof kv_text, "k%dv%d", bits, bits);  // one-file CLI, GCC 12 warns
        const std::string kv = kv_text;  // falsely on operator+ (-Wrestrict, GCC bug 105329)
        rows.push_back({m, kv, T, ms, fp16_ms / ms, step_bytes(c, s)});
        cli::progress("[bench attention] T=" + std::to_string(T) + " " + m + " " + kv + " " + std::to_string(ms) + " ms");
      }
    }
  }
  if (json) {
    json_writer w(std::cout);
    w.begin_object().key("copy_gbps").value(copy).key("read_gbps").value(read).key("fma_gmacs").value(fma).key("simd").value(simd_path()).key("threads").value(threads);
    w.key("cold").value(cold);
    w.key("dim").value(D).key("q_heads").value(Hq).key("kv_heads").value(Hkv);
    w.key("sink").value(sink).key("recent").value(recent);
    w.key("results").begin_array();
    for (const auto& e : rows) {
      w.begin_object().key("method").value(e.method).key("kv").value(e.kv).key("tokens").value(e.tokens);
      w.key("ms_per_step").value(e.ms).key("ratio_to_fp16").value(e.ratio);
      w.key("bytes_per_token_per_head").value(e.bytes_per_token(Hkv)).key("gbps").value(e.gbps());
      w.key("ratio_to_copy").value(e.gbps() / copy).key("ratio_to_read").value(e.gbps() / read);
      w.key("ratio_to_fma_floor").value(fma_floor_ms(e.tokens) / e.ms).end_object();
    }
    w.end_array().end_object();
    std::cout << "\n";
  } else {
    std::printf("decode attention, one query token, D=%d Hq=%d Hkv=%d, fp16 window sink=%d recent=%d, %d thread(s), %s\n", D, Hq,
                Hkv, sink, recent, threads, simd_path());
    std::printf("pages %s\n", cold ? "cold: flushed from the CPU caches before every timed step"
                                     : "warm: as the previous step left them in the CPU caches (--cold flushes them)");
    std::printf("memory copy: %.2f GB/s; read-only stream: %.2f GB/s; multiply-adds: %.1f G/s per thread (same run)\n", copy,
                read, fma);
    std::printf("GB/s = bytes the step reads / time; x read = that / the read stream (one thread reading one buffer in order:\n"
                "a memory-bound step comes near 1); x copy = that / the copy's source bytes/s (a copy also writes its bytes,\n"
                "so a step that only reads can pass 1);\n"
                "x fma = time of the 2*Hq*D multiply-adds per token at that rate / time\n\n");
    std::printf("%-6s %-7s %8s %10s %10s %8s %8s %8s %8s %12s\n", "method", "kv", "tokens", "ms/step", "B/tok/hd", "GB/s", "x read",
                "x copy", "x fma", "x fp16 speed");
    for (const auto& e : rows) {
      const double gbps = e.gbps();
      std::printf("%-6s %-7s %8d %10.3f %10.1f %8.2f %8.2f %8.2f %8.2f %12.2f\n", e.method.c_str(), e.kv.c_str(), e.tokens, e.ms,
                  e.bytes_per_token(Hkv), gbps, gbps / read, gbps / copy, fma_floor_ms(e.tokens) / e.ms, e.ratio);
    }
  }
  return 0;
}

int run(cli::args& a) {
  const auto& pos = a.positional();
  if (pos.empty()) throw cli::usage_error("which benchmark? encode or attention");
  const std::string what = pos.front();
  // one positional only: `bench attention 65536` (meant as --tokens) ran the default sweep
  if (pos.size() > 1) throw cli::usage_error("unexpected argument '" + pos[1] + "' (options take --name value)");
  cli::args rest = a;
  rest.drop_positional();
  if (what == "encode") return bench_encode(rest);
  if (what == "attention") return bench_attention(rest);
  throw cli::usage_error("unknown benchmark '" + what + "' (expected encode or attention)");
}

cli::registrar reg{{"bench", "throughput of encode/decode and decode attention next to the copy and read bandwidth (and the multiply-add rate)",
                    "encode|attention [--json] [encode: --dim N --bits 2,3,4 --rotations LIST --mb M --reps R] "
                    "[attention: --tokens LIST --methods tq,bgtq --kv-bits 3,2 --dim D --q-heads H --kv-heads H --sink N --recent N "
                    "--reps R --threads N --cold]",
                    &run, {"json", "cold"}}};

}  // namespace cmd_bench
}  // namespace
