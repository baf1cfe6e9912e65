// Decode attention from several threads over one cache: the cache is only read, each
// thread has its own attention_workspace. Checked against the single-threaded batch call.
#include <bgtq/bgtq.hpp>

#include <cstdio>
#include <span>
#include <thread>
#include <vector>

#include "reference.hpp"

int main() {
  const int L = 1, Hq = 8, Hkv = 2, D = 64, batch = 6;
  // a uniform 3-bit plan and random keys/values are enough to exercise the threading
  const bgtq::plan plan = bgtq::uniform_plan(L, Hkv, Hq, bgtq::rope_layout(D, bgtq::rope_pairing::interleaved), 3);
  auto cache = bgtq::make_bgtq_cache(plan, bgtq::config_for(plan, /*max_pages=*/64));
  bgtq::counter_rng rng(7);
  std::vector<int> seqs;
  for (int b = 0; b < batch; ++b) {
    const int n = 50 + 37 * b;
    std::vector<float> k(size_t(n) * Hkv * D), v(k.size());
    for (auto& x : k) x = float(rng.normal());
    for (auto& x : v) x = float(rng.normal());
    seqs.push_back(cache.add_sequence());
    cache.append(seqs.back(), 0, k.data(), v.data(), n);
  }
  std::vector<float> q(size_t(batch) * Hq * D), out(q.size()), serial(q.size());
  for (auto& x : q) x = float(rng.normal());
  const int layer = 0;
  {
    bgtq::attention_workspace ws(cache);
    bgtq::decode_attention(cache, layer, seqs, q.data(), serial.data(), ws);
  }
  const int threads = 3;
  // example-begin threads
  // Mutation (add_sequence, append, free_sequence) needs exclusive access; attention over
  // a cache nobody mutates may run on many threads, each with its own workspace.
  std::vector<std::thread> pool;
  for (int t = 0; t < threads; ++t)
    pool.emplace_back([&, t] {
      bgtq::attention_workspace ws(cache);  // per thread (allocates; make it once per thread)
      for (int b = t; b < batch; b += threads)
        bgtq::decode_attention(cache, layer, std::span<const int>(&seqs[b], 1), q.data() + size_t(b) * Hq * D,
                               out.data() + size_t(b) * Hq * D, ws);
    });
  for (auto& th : pool) th.join();
  // example-end threads
  example::require(out == serial, "threaded attention equals the batched call bit for bit");
  std::printf("parallel example: %d sequences on %d threads, identical to the single-threaded result\n", batch, threads);
  return 0;
}
