// bgtq eval's metrics (eval/metrics.hpp, compare_attention): one layer, every query
// against all its causal keys, K + V, Hq = 4, Hkv = 2.
//   build/bin/bench_eval [--benchmark_filter=T:2048]
// Args: {T, D}. items/s = causal (query head, query, key) triples per second. Keys and
// values are N(0, 1); the "quantized" copies add N(0, 0.1^2) noise.
#include <benchmark/benchmark.h>

#include <bgtq/core/rng.hpp>
#include <bgtq/eval/metrics.hpp>

#include <vector>

namespace {

void BM_compare_attention(benchmark::State& s) {
  const int T = static_cast<int>(s.range(0)), D = static_cast<int>(s.range(1)), Hq = 4, Hkv = 2;
  const std::size_t nq = static_cast<std::size_t>(T) * Hq * D, nk = static_cast<std::size_t>(T) * Hkv * D;
  std::vector<float> q(nq), k(nk), kh(nk), v(nk), vh(nk);
  bgtq::counter_rng r(1);
  for (float& x : q) x = static_cast<float>(r.normal());
  for (std::size_t i = 0; i < nk; ++i) {
    k[i] = static_cast<float>(r.normal());
    kh[i] = k[i] + 0.1f * static_cast<float>(r.normal());
    v[i] = static_cast<float>(r.normal());
    vh[i] = v[i] + 0.1f * static_cast<float>(r.normal());
  }
  const bgtq::layer_shape sh{T, Hq, Hkv, D};
  bgtq::attention_metrics m;
  for (auto _ : s) {
    m = bgtq::compare_attention(sh, q.data(), k.data(), kh.data(), v.data(), vh.data(), 0);
    benchmark::DoNotOptimize(m);
  }
  s.SetItemsProcessed(s.iterations() * m.pairs);
  s.counters["kl"] = m.kl;  // the workload's result, so a run on degenerate data shows
}

}  // namespace

BENCHMARK(BM_compare_attention)->ArgNames({"T", "D"})->Args({1024, 64})->Args({2048, 64})->Args({2048, 128})->Unit(benchmark::kMillisecond);
BENCHMARK_MAIN();
