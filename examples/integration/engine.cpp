// How an inference engine embeds the Block-GTQ cache: calibrate from .npy dumps, size
// and create the cache, serve requests (prefill, decode steps, batching, freeing), walk
// the page table, handle a full pool and non-finite input. Every snippet of
// docs/integration.md is the text between an `example-begin NAME` / `example-end NAME`
// pair in this file or in parallel.cpp (tests/docs checks them byte for byte).
//
// usage: integration_engine [DIR]   DIR holds q.npy, k.npy, v.npy ([L,T,H,D], post-RoPE,
// half pairing, T >= 132); without DIR a synthetic dump is written to a temporary folder
// first. Every result is checked; the exit code is 1 if one is off or if the program
// stops on an error (a message names it).
#include <bgtq/bgtq.hpp>

#include <cstdio>
#include <exception>
#include <filesystem>
#include <span>
#include <stdexcept>
#include <string>
#include <vector>

#include <unistd.h>

#include "reference.hpp"

namespace {

using example::require;

std::string make_dump() {
  const auto dir = std::filesystem::temp_directory_path() / ("bgtq_integration_example." + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  example::write_synthetic_dump(dir.string(), /*layers=*/2, /*tokens=*/256, /*q_heads=*/8, /*kv_heads=*/2, /*dim=*/128);
  return dir.string();
}

void calibrate(const std::string& dir) {
  // example-begin calibrate_npy
  // Post-RoPE Q [L,T,Hq,D] and K [L,T,Hkv,D], e.g. dumped from PyTorch (see above).
  const bgtq::npy_array q = bgtq::read_npy(dir + "/q.npy");
  const bgtq::npy_array k = bgtq::read_npy(dir + "/k.npy");
  if (q.shape.size() != 4 || k.shape.size() != 4 || k.shape[0] != q.shape[0] || k.shape[1] != q.shape[1] ||
      k.shape[3] != q.shape[3])
    throw std::invalid_argument(dir + ": q.npy and k.npy must be [L,T,Hq,D] and [L,T,Hkv,D] (4-D)");
  const int L = int(q.shape[0]), T = int(q.shape[1]), Hq = int(q.shape[2]), Hkv = int(k.shape[2]), D = int(q.shape[3]);
  bgtq::energy_estimator energy(L, Hq, Hkv, bgtq::rope_layout(D, bgtq::rope_pairing::half));
  for (int l = 0; l < L; ++l)  // add() may be called again with more tokens (streaming)
    energy.add(l, q.data.data() + size_t(l) * T * Hq * D, k.data.data() + size_t(l) * T * Hkv * D, T);
  bgtq::plan_options opt;
  opt.avg_bits = 3.0;
  bgtq::save_plan(dir + "/plan.bin", bgtq::build_plan(L, Hkv, Hq, energy.rope(), energy.scores(), opt, T));
  // example-end calibrate_npy
}

int run(int argc, char** argv) {
  const std::string dir = argc > 1 ? argv[1] : make_dump();
  calibrate(dir);  // checks that q.npy and k.npy are 4-D and agree
  const bgtq::npy_array qa = bgtq::read_npy(dir + "/q.npy");
  const bgtq::npy_array ka = bgtq::read_npy(dir + "/k.npy");
  const bgtq::npy_array va = bgtq::read_npy(dir + "/v.npy");
  if (va.shape != ka.shape) throw std::invalid_argument(dir + ": v.npy must have the shape of k.npy, [L,T,Hkv,D]");
  const int L = int(qa.shape[0]), T = int(qa.shape[1]), Hq = int(qa.shape[2]), Hkv = int(ka.shape[2]), D = int(qa.shape[3]);
  // the full-pool check below appends one page + sink + recent = 132 tokens to one sequence
  if (T < 132)
    throw std::invalid_argument(dir + ": the example needs at least 132 tokens, the dump has " + std::to_string(T));
  // row t of layer l: q [Hq][D], k and v [Hkv][D]
  auto q_at = [&](int l, int t) { return qa.data.data() + (size_t(l) * T + t) * Hq * D; };
  auto k_at = [&](int l, int t) { return ka.data.data() + (size_t(l) * T + t) * Hkv * D; };
  auto v_at = [&](int l, int t) { return va.data.data() + (size_t(l) * T + t) * Hkv * D; };
  const std::size_t budget_bytes = 64u << 20;

  // example-begin create_cache
  const bgtq::plan plan = bgtq::load_plan(dir + "/plan.bin");  // checksummed and validated
  bgtq::cache_config cfg = bgtq::config_for(plan, /*max_pages=*/0, /*page_tokens=*/64);
  cfg.sink = 4;     // the first 4 tokens of every sequence stay in fp16 ...
  cfg.recent = 64;  // ... and so do the last 64 (quantized as they age out)
  cfg.nonfinite = bgtq::nonfinite_policy::reject;  // NaN/Inf input: an error, nothing stored
  // A page holds 64 tokens of every layer and KV head: size the pool from a memory budget.
  const std::size_t page_bytes = bgtq::make_bgtq_cache(plan, cfg).page_bytes();
  cfg.max_pages = int(budget_bytes / page_bytes);
  auto cache = bgtq::make_bgtq_cache(plan, cfg);  // allocates the whole pool, once
  // example-end create_cache

  const int prompt_len = T / 2;
  std::vector<float> out(size_t(Hq) * D);
  // example-begin serve
  // A request arrives: prefill its prompt layer by layer, as the forward pass makes K/V.
  int seq = cache.add_sequence();
  for (int l = 0; l < L; ++l) cache.append(seq, l, k_at(l, 0), v_at(l, 0), prompt_len);

  // Each decode step, in every layer: store the new token's K/V, then attend with its query.
  bgtq::attention_workspace ws(cache);  // scratch for decode_attention, one per thread
  for (int t = prompt_len; t < T; ++t)
    for (int l = 0; l < L; ++l) {
      cache.append(seq, l, k_at(l, t), v_at(l, t), 1);
      bgtq::decode_attention(cache, l, std::span<const int>(&seq, 1), q_at(l, t), out.data(), ws);
      // ... out [Hq][D] goes on to the output projection
      // example-end serve
      if (l == L - 1 && (t == prompt_len || t == T - 1)) {
        const double e = example::rel_l2(out, example::exact_attention(q_at(l, t), k_at(l, 0), v_at(l, 0), t + 1, Hq, Hkv, D));
        std::printf("step %d, layer %d: attention output relative L2 error %.3f\n", t, l, e);
        require(e < 0.6, "attention error of a decode step");
      }
      // example-begin serve
    }
  // example-end serve

  // memory: pages in use + occupied fp16 window slots
  const std::int64_t quantized = cache.view(seq, 0).quantized;
  const std::int64_t window = T - quantized;
  require(quantized == T - cfg.sink - cfg.recent, "tokens in pages = all but the sink and recent windows");
  // example-begin memory
  std::printf("pool: %zu bytes reserved, %zu in use (%d of %d pages)\n", cache.bytes_reserved(), cache.bytes_used(),
              cache.pages_used(), cache.pages_total());
  std::printf("packed: %.1f bytes per token per (layer, KV head); fp16 window: %d\n", cache.bytes_per_token(0, 0),
              4 * D);
  // example-end memory
  const std::size_t expect_used = size_t(cache.pages_used()) * cache.page_bytes() + size_t(window) * L * Hkv * D * 4;
  require(cache.bytes_used() == expect_used, "bytes_used = pages * page_bytes + window tokens * 4 * D * Hkv * L");

  // example-begin page_walk
  // Positions [0, sink) are in the fp16 sink, then `quantized` tokens in pages (page table
  // order, P tokens each), then the fp16 recent tail, oldest first.
  const auto view = cache.view(seq, /*layer=*/0);
  for (std::int64_t i = 0; i * cfg.page_tokens < view.quantized; ++i) {
    const std::uint8_t* keys = cache.page_ptr(view.pages[i], /*layer=*/0, /*h=*/0);  // key part
    const std::uint8_t* values = keys + cache.value_offset(0, 0);                    // value part
    (void)values;  // layouts: cache/gtq_pages.hpp, cache/page_layout.hpp
  }
  const std::uint16_t* first = cache.window_key(seq, 0, 0, /*i=*/0);  // fp16 bits, [D]
  // example-end page_walk
  require(bgtq::half_bits_to_float(first[0]) == bgtq::half_bits_to_float(bgtq::float_to_half_bits(k_at(0, 0)[0])),
          "sink token 0 is stored as fp16");
  require(view.sink == 4 && view.quantized + view.sink + view.tail == T, "sequence view");

  // batching: two sequences in one call, q and out are [B][Hq][D]
  const int seq2 = cache.add_sequence();
  for (int l = 0; l < L; ++l) cache.append(seq2, l, k_at(l, 0), v_at(l, 0), prompt_len);
  std::vector<float> qb(size_t(2) * Hq * D), outb(size_t(2) * Hq * D);
  std::copy(q_at(0, T - 1), q_at(0, T - 1) + Hq * D, qb.begin());
  std::copy(q_at(0, prompt_len - 1), q_at(0, prompt_len - 1) + Hq * D, qb.begin() + Hq * D);
  // example-begin batch
  const std::vector<int> batch = {seq, seq2};  // sequences of different lengths
  bgtq::decode_attention(cache, /*layer=*/0, batch, qb.data(), outb.data(), ws);
  // example-end batch
  const double eb = example::rel_l2(std::vector<float>(outb.begin() + Hq * D, outb.end()),
                                    example::exact_attention(q_at(0, prompt_len - 1), k_at(0, 0), v_at(0, 0), prompt_len, Hq, Hkv, D));
  require(eb < 0.6, "batched attention of the second sequence");

  // example-begin free
  cache.free_sequence(seq);  // its pages go back to the pool; ids are reused
  cache.free_sequence(seq2);
  // example-end free
  require(cache.pages_used() == 0, "all pages free");

  // a full pool: a cache with room for one page
  cfg.max_pages = 1;
  auto small = bgtq::make_bgtq_cache(plan, cfg);
  const int s = small.add_sequence();
  small.append(s, 0, k_at(0, 0), v_at(0, 0), 64 + 4 + 64);  // one page + sink + recent: fits
  const std::int64_t before = small.length(s, 0);
  const float* k = k_at(0, 0);
  const float* v = v_at(0, 0);
  bool refused = false;
  // example-begin capacity
  try {
    small.append(s, /*layer=*/0, k, v, 64);
  } catch (const bgtq::error& e) {
    if (e.code() != bgtq::errc::capacity_exhausted) throw;
    // Nothing was appended. Preempt: free (or swap out) another sequence, then retry.
    std::printf("pool full: %s\n", e.what());
    refused = true;
  }
  // example-end capacity
  require(refused && small.length(s, 0) == before, "a full pool refuses and leaves the cache unchanged");

  // non-finite input, in the last layer (layer 0 of a one-layer dump, whose pool is full:
  // the input is checked first)
  std::vector<float> bad(size_t(Hkv) * D, 0.0f);
  bad[3] = std::nanf("");
  const std::int64_t last_before = small.length(s, L - 1);
  bool rejected = false;
  try {
    small.append(s, L - 1, bad.data(), bad.data(), 1);
  } catch (const bgtq::error& e) {
    rejected = e.code() == bgtq::errc::non_finite && small.length(s, L - 1) == last_before;
    std::printf("rejected: %s\n", e.what());
  }
  require(rejected, "non-finite input is rejected");
  if (argc <= 1) std::filesystem::remove_all(dir);  // the temporary dump
  std::printf("integration example: all checks passed\n");
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  try {
    return run(argc, argv);
  } catch (const bgtq::error& e) {
    std::fprintf(stderr, "integration example: error (%s): %s\n", bgtq::to_string(e.code()), e.what());
    if (e.code() == bgtq::errc::capacity_exhausted)  // a dump too long for the pool: docs/integration.md, section 3
      std::fprintf(stderr, "integration example: the pool is budget_bytes = 64 MiB; this dump needs more\n");
  } catch (const std::exception& e) {
    std::fprintf(stderr, "integration example: error: %s\n", e.what());
  }
  return 1;
}
