// Rotation policies: time of one apply() per vector, single thread.
//   build/bin/bench_rotation [--benchmark_filter=/128]
// items/s = vectors/s; bytes/s counts the n floats read plus the n floats written.
// BM_rht_rounds shows what each randomized-Hadamard round costs (hadamard uses 2
// rounds; structured 3 at powers of two; see the headers for the mixing measurements).
#include <benchmark/benchmark.h>

#include <bgtq/core/rng.hpp>
#include <bgtq/rotation/rotation.hpp>

#include <cstring>
#include <vector>

namespace {

std::vector<float> random_vectors(int n, int count) {
  bgtq::counter_rng rng(7);
  std::vector<float> v(static_cast<std::size_t>(n) * count);
  for (float& x : v) x = static_cast<float>(rng.normal());
  return v;
}

// Cycles through 64 vectors so the input is not one hot cache line.
template <class R, bool Transpose>
void run(benchmark::State& state, const R& r) {
  const int n = r.dim();
  constexpr int kVecs = 64;
  std::vector<float> in = random_vectors(n, kVecs), out(in.size());
  std::size_t k = 0;
  for (auto _ : state) {
    const float* x = in.data() + k * n;
    float* y = out.data() + k * n;
    if constexpr (Transpose)
      r.apply_transpose(x, y);
    else
      r.apply(x, y);
    benchmark::DoNotOptimize(y);
    benchmark::ClobberMemory();
    k = (k + 1) % kVecs;
  }
  state.SetItemsProcessed(state.iterations());
  state.SetBytesProcessed(state.iterations() * 2 * n * static_cast<std::int64_t>(sizeof(float)));
  state.counters["n"] = n;
  state.SetLabel(bgtq::simd_path());
}

void BM_identity(benchmark::State& s) { run<bgtq::identity_rotation, false>(s, bgtq::identity_rotation(s.range(0))); }
void BM_haar(benchmark::State& s) { run<bgtq::haar_rotation, false>(s, bgtq::haar_rotation(s.range(0), 1)); }
void BM_haar_transpose(benchmark::State& s) { run<bgtq::haar_rotation, true>(s, bgtq::haar_rotation(s.range(0), 1)); }
void BM_hadamard(benchmark::State& s) { run<bgtq::hadamard_rotation, false>(s, bgtq::hadamard_rotation(s.range(0), 1)); }
void BM_hadamard_transpose(benchmark::State& s) {
  run<bgtq::hadamard_rotation, true>(s, bgtq::hadamard_rotation(s.range(0), 1));
}
void BM_structured(benchmark::State& s) { run<bgtq::structured_rotation, false>(s, bgtq::structured_rotation(s.range(0), 1)); }
void BM_structured_transpose(benchmark::State& s) {
  run<bgtq::structured_rotation, true>(s, bgtq::structured_rotation(s.range(0), 1));
}
void BM_any_hadamard(benchmark::State& s) {
  run<bgtq::any_rotation, false>(s, bgtq::any_rotation(bgtq::rotation_kind::hadamard, s.range(0), 1));
}

// Randomized Hadamard with R rounds (args: n, R).
struct rht_rounds {
  int n, rounds;
  std::vector<float> signs;
  int dim() const { return n; }
  void apply(const float* in, float* out) const { bgtq::detail::rht<false>(in, out, signs.data(), rounds, n); }
  void apply_transpose(const float* in, float* out) const { bgtq::detail::rht<true>(in, out, signs.data(), rounds, n); }
};
void BM_rht_rounds(benchmark::State& s) {
  const int n = static_cast<int>(s.range(0)), rounds = static_cast<int>(s.range(1));
  bgtq::counter_rng rng(1);
  run<rht_rounds, false>(s, rht_rounds{n, rounds, bgtq::detail::hadamard_signs(n, rounds, rng)});
}

// Memory copy of the same bytes, for scale.
void BM_memcpy(benchmark::State& state) {
  const int n = static_cast<int>(state.range(0));
  std::vector<float> in = random_vectors(n, 64), out(in.size());
  std::size_t k = 0;
  for (auto _ : state) {
    std::memcpy(out.data() + k * n, in.data() + k * n, sizeof(float) * n);
    benchmark::ClobberMemory();
    k = (k + 1) % 64;
  }
  state.SetItemsProcessed(state.iterations());
  state.SetBytesProcessed(state.iterations() * 2 * n * static_cast<std::int64_t>(sizeof(float)));
}

#define BGTQ_POW2_SIZES ->Arg(8)->Arg(16)->Arg(32)->Arg(64)->Arg(128)->Arg(256)
BENCHMARK(BM_memcpy) BGTQ_POW2_SIZES;
BENCHMARK(BM_identity) BGTQ_POW2_SIZES;
BENCHMARK(BM_haar) BGTQ_POW2_SIZES;
BENCHMARK(BM_haar_transpose) BGTQ_POW2_SIZES;
BENCHMARK(BM_hadamard) BGTQ_POW2_SIZES;
BENCHMARK(BM_hadamard_transpose) BGTQ_POW2_SIZES;
BENCHMARK(BM_any_hadamard) BGTQ_POW2_SIZES;
BENCHMARK(BM_structured) BGTQ_POW2_SIZES->Arg(6)->Arg(24)->Arg(76)->Arg(96)->Arg(100)->Arg(254);
BENCHMARK(BM_structured_transpose) BGTQ_POW2_SIZES->Arg(76)->Arg(96);
BENCHMARK(BM_rht_rounds)->ArgsProduct({{32, 64, 128, 256}, {1, 2, 3, 4}});

}  // namespace

BENCHMARK_MAIN();
