// bgtq eval's metrics (eval/metrics.hpp, compare_attention): one layer, every query
// against all its causal keys, Hq = 4, Hkv = 2, K + V or K only (bgtq eval without --v).
//   build/bin/bench_eval [--benchmark_filter=T:2048]
// Args: {T, D, threads, V} (threads 1: no pool; the pool includes the calling thread; V 0: K only;
// UseRealTime, so with threads the time is the wall time). items/s = causal (query head, query, key) triples per second. Keys and
// values are N(0, 1); the "quantized" copies add N(0, 0.1^2) noise.
#include <benchmark/benchmark.h>

#include <bgtq/core/rng.hpp>
#include <bgtq/eval/metrics.hpp>

#include <memory>
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
  const int threads = static_cast<int>(s.range(2));
  const bool with_v = s.range(3) != 0;
  std::unique_ptr<bgtq::thread_pool> pool;
  if (threads > 1) pool = std::make_unique<bgtq::thread_pool>(threads);
  bgtq::attention_metrics m;
  for (auto _ : s) {
    m = bgtq::compare_attention(sh, q.data(), k.data(), kh.data(), with_v ? v.data() : nullptr,
                                   with_v ? vh.data() : nullptr, 0, pool.get());
    benchmark::DoNotOptimize(m);
  }
  s.SetItemsProcessed(s.iterations() * m.pairs);
  s.counters["kl"] = m.kl;  // the workload's result, so a run on degenerate data shows
}

}  // namespace

BENCHMARK(BM_compare_attention)
    ->ArgNames({"T", "D", "threads", "V"})
    ->Args({1024, 64, 1, 1})
    ->Args({2048, 64, 1, 1})
    ->Args({2048, 128, 1, 1})
    ->Args({2048, 128, 2, 1})
    ->Args({2048, 64, 1, 0})
    ->Args({2048, 128, 1, 0})
    ->UseRealTime()
    ->Unit(benchmark::kMillisecond);
BENCHMARK_MAIN();
