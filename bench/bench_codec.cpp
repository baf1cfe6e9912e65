// TQ-MSE codec: encode and decode throughput per rotation x bits, single thread.
//   build/bin/bench_codec [--benchmark_filter=encode/.../128]
// Args: {rotation kind, bits, n}. items/s = vectors/s; bytes/s = fp32 bytes/s of the
// vectors (encode's input, decode's output), in Google Benchmark's 1024-based units
// (bytes_per_second 4.29G is 4.29 GiB/s = 4.61 GB/s).
// n = 128 is a whole head; n = 2..64 are Block-GTQ group sizes. Inputs cycle through
// 4096 random vectors (2 MiB at n = 128), so they come from L2/L3, not one hot line:
// this program measures the codec's arithmetic and has no memory floor; `bgtq bench
// encode` (64 MiB from memory) gives the ratio to the copy bandwidth of its own run.
#include <benchmark/benchmark.h>

#include <bgtq/codec/tq_codec.hpp>
#include <bgtq/core/rng.hpp>

#include <vector>

namespace {

constexpr int kVecs = 4096;

std::vector<float> random_vectors(int n) {
  bgtq::counter_rng rng(11);
  std::vector<float> v(static_cast<std::size_t>(n) * kVecs);
  for (float& x : v) x = static_cast<float>(rng.normal());
  return v;
}

bgtq::tq_mse_codec make(const benchmark::State& s) {
  bgtq::tq_params p;
  p.rotation = static_cast<bgtq::rotation_kind>(s.range(0));
  p.bits = static_cast<int>(s.range(1));
  p.dim = static_cast<int>(s.range(2));
  p.seed = 3;
  return bgtq::tq_mse_codec(p);
}

void label(benchmark::State& s, const bgtq::tq_mse_codec& c) {
  const int n = c.dim();
  s.SetItemsProcessed(s.iterations());
  s.SetBytesProcessed(s.iterations() * n * static_cast<std::int64_t>(sizeof(float)));
  s.counters["bits_per_value"] = static_cast<double>(8 * c.bytes()) / n;
  s.SetLabel(std::string(bgtq::to_string(c.quantizer().params().rotation)) + " " + bgtq::simd_path());
}

void BM_encode(benchmark::State& s) {
  const auto c = make(s);
  const int n = c.dim();
  const auto x = random_vectors(n);
  std::vector<std::uint8_t> out(c.bytes() * kVecs);
  std::size_t k = 0;
  for (auto _ : s) {
    benchmark::DoNotOptimize(c.encode(x.data() + k * n, out.data() + k * c.bytes()));
    k = (k + 1) % kVecs;
  }
  label(s, c);
}

void BM_decode(benchmark::State& s) {
  const auto c = make(s);
  const int n = c.dim();
  const auto x = random_vectors(n);
  std::vector<std::uint8_t> enc(c.bytes() * kVecs);
  for (int i = 0; i < kVecs; ++i) (void)c.encode(x.data() + static_cast<std::size_t>(i) * n, enc.data() + static_cast<std::size_t>(i) * c.bytes());
  std::vector<float> y(x.size());
  std::size_t k = 0;
  for (auto _ : s) {
    c.decode(enc.data() + k * c.bytes(), y.data() + k * n);
    benchmark::ClobberMemory();
    k = (k + 1) % kVecs;
  }
  label(s, c);
}

// rotation kinds: 1 haar, 2 hadamard, 3 structured
void whole_head(benchmark::internal::Benchmark* b) { b->ArgsProduct({{1, 2, 3}, {2, 3, 4}, {128}}); }
void groups(benchmark::internal::Benchmark* b) {
  b->ArgsProduct({{1, 3}, {2, 3, 4}, {2, 6, 8, 16, 32, 64}});
  b->ArgsProduct({{2}, {3}, {8, 16, 32, 64}});
}

}  // namespace

BENCHMARK(BM_encode)->Apply(whole_head)->Apply(groups);
BENCHMARK(BM_decode)->Apply(whole_head)->Apply(groups);
BENCHMARK_MAIN();
