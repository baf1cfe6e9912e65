// Quickstart: calibrate a Block-GTQ plan on post-RoPE activations, fill a packed KV
// cache, and run decode attention from it. The lines between the example markers are
// the README's example, byte for byte (tests/docs checks it).
//
// Synthetic activations stand in for a model here (bgtq::generate_synth, the model of
// docs/synth.md): 2 layers, 512 tokens, 32 query / 8 KV heads, head_dim 128, half pairing.
// The program checks the attention output against exact float attention and exits
// non-zero if it is off by more than the K3V3 quantizer can explain.
#include <bgtq/bgtq.hpp>
#include <bgtq/synth/synth.hpp>

#include <cmath>
#include <cstdio>
#include <span>
#include <vector>

#include "../common/exact_attention.hpp"

int main() {
  const int layers = 2, T = 512, q_heads = 32, kv_heads = 8, D = 128, calib_tokens = 256;
  bgtq::synth_config sc;
  sc.layers = layers;
  sc.tokens = T;
  sc.q_heads = q_heads;
  sc.kv_heads = kv_heads;
  sc.rope = bgtq::rope_layout(D, bgtq::rope_pairing::half);
  const bgtq::synth_data data = bgtq::generate_synth(sc);
  // per-layer views of the [L][T][H][D] arrays
  auto q = [&](int l) { return data.q.data() + static_cast<std::size_t>(l) * T * q_heads * D; };
  auto k = [&](int l) { return data.k.data() + static_cast<std::size_t>(l) * T * kv_heads * D; };
  auto v = [&](int l) { return data.v.data() + static_cast<std::size_t>(l) * T * kv_heads * D; };
  const float* q_new = q(0) + static_cast<std::size_t>(T - 1) * q_heads * D;  // the last token's query
  const std::size_t fp16_bytes = static_cast<std::size_t>(T) * layers * kv_heads * D * 2 * 2;

  // example-begin quickstart
  // 1. Calibrate: energies of the RoPE blocks of post-RoPE Q and K -> key bit widths.
  bgtq::rope_layout rope(D, bgtq::rope_pairing::half);
  bgtq::energy_estimator energy(layers, q_heads, kv_heads, rope);
  for (int l = 0; l < layers; ++l) energy.add(l, q(l), k(l), calib_tokens);  // [T][H][D] floats
  bgtq::plan_options opt;
  opt.avg_bits = 3.0;  // key bits per coordinate on average; values get 3 bits too
  bgtq::plan plan = bgtq::build_plan(layers, kv_heads, q_heads, rope, energy.scores(), opt);

  // 2. Cache: a pool of 64-token pages for every layer and KV head, allocated once.
  auto cache = bgtq::make_bgtq_cache(plan, bgtq::config_for(plan, /*max_pages=*/32));
  int seq = cache.add_sequence();

  // 3. Append (prefill): K and V of T tokens per layer, [T][kv_heads][D], quantized on the way in.
  for (int l = 0; l < layers; ++l) cache.append(seq, l, k(l), v(l), T);

  // 4. Decode attention for one new query token [q_heads][D], straight from the packed pages.
  bgtq::attention_workspace ws(cache);  // scratch, one per thread
  std::vector<float> out(q_heads * D);
  bgtq::decode_attention(cache, /*layer=*/0, std::span<const int>(&seq, 1), q_new, out.data(), ws);
  std::printf("cache: %zu bytes for %d tokens (fp16: %zu)\n", cache.bytes_used(), T, fp16_bytes);
  // example-end quickstart

  const std::vector<float> ref = example::exact_attention(q_new, k(0), v(0), T, q_heads, kv_heads, D);
  double err = 0, norm = 0;
  for (std::size_t i = 0; i < ref.size(); ++i) {
    err += (double(out[i]) - ref[i]) * (double(out[i]) - ref[i]);
    norm += double(ref[i]) * ref[i];
  }
  const double rel = std::sqrt(err / norm);
  std::printf("key widths of layer 0, KV head 0:");
  for (int b : plan.head(0, 0).widths) std::printf(" %d", b);
  std::printf("\ncompression %.2fx, attention output relative L2 error vs exact float attention: %.3f\n",
              double(fp16_bytes) / double(cache.bytes_used()), rel);
  if (!(rel < 0.6)) {
    std::fprintf(stderr, "quickstart: attention error %.3f is larger than expected\n", rel);
    return 1;
  }
  return 0;
}
