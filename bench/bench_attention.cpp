// CPU decode attention per step, one thread, with the cache's pages contiguous or
// scattered through the pool the way a serving engine's are.
//   build/bin/bench_attention [--benchmark_filter='BM_decode/cache:2/T:65536/S:4']
// Args: {cache: 0 fp16, 1 uniform TQ K3V3, 2 Block-GTQ K3V3 (the bench plan of
// `bgtq bench attention`)}, {T tokens}, {S sequences the pool is shared by: 1 = one
// sequence, contiguous pages; S > 1 = S sequences of T tokens filled 64 tokens at a time
// in random order, so the timed sequence's pages are spread over an S-times larger
// pool}. D = 128, Hq = 32, Hkv = 8. Counters: tokens_per_s (cached tokens attended per
// second, all KV heads). The caches are built once per argument set and kept.
// BM_decode_cold: the same steps with the cache's page pool (and any fp16 window) flushed
// from the CPU caches before each one (outside the timing), as in a model whose other layers displaced it.
// BM_key_pass / BM_value_pass: one pass of the packed kernels alone (gtq_pages::score_page,
// gtq_pages::accumulate_span over spans of 4 pages) over the 64 pages of one KV head of a
// 4K-token sequence (warm), G = 4 query heads; Args {plan: 1 uniform TQ, 2 Block-GTQ (the
// bench plan)}, {key and value bits}. Counter time_per_coord_block: time per (coordinate,
// 64-token page), the unit docs/PERFORMANCE.md quotes the passes in; the console prints it
// with an SI prefix ("4.5n" is 4.5 ns), --benchmark_format=json in seconds (4.5e-09).
#include <benchmark/benchmark.h>

#include <bgtq/bench/timing.hpp>
#include <bgtq/bench/workload.hpp>
#include <bgtq/bgtq.hpp>

#include <algorithm>
#include <map>
#include <memory>
#include <tuple>
#include <vector>

namespace {

constexpr int D = 128, Hq = 32, Hkv = 8;

struct setup_base {
  virtual ~setup_base() = default;
  virtual void step(std::vector<float>& out) = 0;
  virtual void flush() const = 0;
};

template <class Cache>
struct setup final : setup_base {
  Cache cache;
  int seq = 0;
  bgtq::attention_workspace ws;
  std::vector<float> q;
  setup(Cache c, int T, int S) : cache(std::move(c)), seq(bgtq::bench::fill_sequences(cache, T, S)), ws(cache) {
    bgtq::counter_rng r(5);
    q.resize(static_cast<std::size_t>(Hq) * D);
    for (float& x : q) x = static_cast<float>(r.normal());
  }
  void step(std::vector<float>& out) override {
    const int s[1] = {seq};
    bgtq::decode_attention(cache, 0, std::span<const int>(s, 1), q.data(), out.data(), ws);
  }
  void flush() const override { bgtq::bench::flush_decode_reads(cache, std::span<const int>(&seq, 1), 0); }
};

// One layer, D = 128, Hq = 32, Hkv = 8, room for S sequences of T tokens.
bgtq::cache_config bench_config(int T, int S) {
  bgtq::cache_config cfg;
  cfg.layers = 1;
  cfg.kv_heads = Hkv;
  cfg.q_heads = Hq;
  cfg.head_dim = D;
  cfg.max_pages = ((T + 63) / 64 + 1) * S;
  return cfg;
}

// kind 1: uniform TQ-MSE; 2: the Block-GTQ plan `bgtq bench attention` times; `bits` for
// keys (on average) and values.
bgtq::plan bench_plan(int kind, int bits) {
  const bgtq::rope_layout rope(D, bgtq::rope_pairing::half);
  bgtq::plan_options o;
  o.avg_bits = bits;
  o.value_bits = bits;
  return kind == 1 ? bgtq::uniform_plan(1, Hkv, Hq, rope, bits, o)
                   : bgtq::build_plan(1, Hkv, Hq, rope, bgtq::bench::spread_energies(1, Hkv, rope.num_blocks()), o);
}

std::unique_ptr<setup_base> make(int kind, int T, int S) {
  const bgtq::cache_config cfg = bench_config(T, S);
  if (kind == 0)
    return std::make_unique<setup<bgtq::fp16_cache<>>>(
        bgtq::fp16_cache<>(cfg, bgtq::fp16_states(1, Hkv, D), bgtq::fp16_states(1, Hkv, D)), T, S);
  auto c = bgtq::make_bgtq_cache(bench_plan(kind, 3), cfg);
  return std::make_unique<setup<decltype(c)>>(std::move(c), T, S);
}

void decode(benchmark::State& state, bool cold) {
  const int kind = static_cast<int>(state.range(0)), T = static_cast<int>(state.range(1)), S = static_cast<int>(state.range(2));
  static std::map<std::tuple<int, int, int>, std::unique_ptr<setup_base>> built;  // fill once per argument set
  auto& su = built[{kind, T, S}];
  if (!su) su = make(kind, T, S);
  std::vector<float> out(static_cast<std::size_t>(Hq) * D);
  su->step(out);  // warm
  for (auto _ : state) {
    if (cold) {
      state.PauseTiming();
      su->flush();
      state.ResumeTiming();
    }
    su->step(out);
    benchmark::DoNotOptimize(out.data());
    benchmark::ClobberMemory();
  }
  state.counters["tokens_per_s"] = benchmark::Counter(static_cast<double>(T) * static_cast<double>(state.iterations()),
                                                      benchmark::Counter::kIsRate);
  state.SetLabel(std::string(kind == 0 ? "fp16" : kind == 1 ? "tq-k3v3" : "bgtq-k3v3") + (S > 1 ? " scattered" : " contiguous") +
                 (cold ? " cold" : "") + " " + bgtq::simd_path());
}
void BM_decode(benchmark::State& state) { decode(state, false); }
void BM_decode_cold(benchmark::State& state) { decode(state, true); }

// One pass of the packed kernels over one KV head's pages (see the header).
void pass(benchmark::State& state, bool keys) {
  const int kind = static_cast<int>(state.range(0)), bits = static_cast<int>(state.range(1));
  constexpr int T = 4096, G = Hq / Hkv, span = bgtq::attention_workspace::span_pages;
  const bgtq::cache_config cfg = bench_config(T, 1);
  auto cache = bgtq::make_bgtq_cache(bench_plan(kind, bits), cfg);
  const int seq = bgtq::bench::fill_sequences(cache, T);
  using C = decltype(cache);
  const auto view = cache.view(seq, 0);
  const int P = cfg.page_tokens, np = static_cast<int>(view.quantized / P);
  const auto& ks = cache.key(0, 0);
  const auto& vs = cache.value(0, 0);
  std::vector<const std::uint8_t*> kpages, vpages;
  for (int i = 0; i < np; ++i) {
    kpages.push_back(cache.page_ptr(view.pages[i], 0, 0));
    vpages.push_back(kpages.back() + cache.value_offset(0, 0));
  }
  // decode's own scratch buffers (their relative placement matters: attention_workspace)
  bgtq::attention_workspace ws(cache);
  bgtq::counter_rng r(9);
  std::vector<float> q(static_cast<std::size_t>(G) * D);
  for (float& x : q) x = static_cast<float>(r.normal());
  for (std::size_t i = 0; i < static_cast<std::size_t>(span) * G * P; ++i)
    ws.weights[i] = static_cast<float>(r.uniform());  // weights in (0, 1), as after the softmax
  std::fill(ws.acc.begin(), ws.acc.begin() + static_cast<std::ptrdiff_t>(C::value_codec::acc_floats(vs, G)), 0.0f);
  C::key_codec::prepare_query(ks, q.data(), G, ws.qbuf.data());
  for (auto _ : state) {
    if (keys) {
      for (int i = 0; i < np; ++i)
        C::key_codec::template score_page<C::layout>(ks, ws.qbuf.data(), G, kpages[static_cast<std::size_t>(i)], P,
                                                     ws.scores.data() + static_cast<std::size_t>(i % span) * G * P);
      benchmark::DoNotOptimize(ws.scores.data());
    } else {
      for (int i = 0; i < np; i += span)
        C::value_codec::template accumulate_span<C::layout>(vs, vpages.data() + i, span, P, ws.weights.data(), G, ws.acc.data(),
                                                            ws.tmp.data());
      benchmark::DoNotOptimize(ws.acc.data());
    }
    benchmark::ClobberMemory();
  }
  state.counters["time_per_coord_block"] = benchmark::Counter(  // seconds (kIsRate | kInvert)
      static_cast<double>(np) * D * static_cast<double>(state.iterations()), benchmark::Counter::kIsRate | benchmark::Counter::kInvert);
  state.SetLabel(std::string(kind == 1 ? "tq" : "bgtq") + " K" + std::to_string(bits) + "V" + std::to_string(bits) + " " +
                 bgtq::simd_path());
}
void BM_key_pass(benchmark::State& state) { pass(state, true); }
void BM_value_pass(benchmark::State& state) { pass(state, false); }

BENCHMARK(BM_key_pass)->ArgNames({"plan", "bits"})->ArgsProduct({{1, 2}, {2, 3}})->Unit(benchmark::kMicrosecond)->MinTime(0.3);
BENCHMARK(BM_value_pass)->ArgNames({"plan", "bits"})->ArgsProduct({{1, 2}, {2, 3}})->Unit(benchmark::kMicrosecond)->MinTime(0.3);
BENCHMARK(BM_decode)
    ->ArgNames({"cache", "T", "S"})
    ->ArgsProduct({{0, 1, 2}, {4096, 16384, 65536}, {1, 4}})
    ->Unit(benchmark::kMillisecond)
    ->MinTime(0.5);
BENCHMARK(BM_decode_cold)
    ->ArgNames({"cache", "T", "S"})
    ->ArgsProduct({{0, 1, 2}, {16384, 65536}, {1}})
    ->Unit(benchmark::kMillisecond)
    ->MinTime(0.5);

}  // namespace

BENCHMARK_MAIN();
