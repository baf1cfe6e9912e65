#pragma once
// Helpers of the integration examples (not part of the snippets): synthetic stand-in
// activations and exact float attention to check the cache against.
#include <bgtq/io/npy.hpp>
#include <bgtq/synth/synth.hpp>

#include "../common/exact_attention.hpp"

#include <cmath>
#include <cstdio>
#include <string>
#include <vector>

namespace example {

//! Writes q.npy, k.npy, v.npy ([L,T,H,D] float32, post-RoPE, half pairing) into dir, as a
//! PyTorch dump would look (bgtq synth does the same from the command line).
inline void write_synthetic_dump(const std::string& dir, int layers, int tokens, int q_heads, int kv_heads, int dim) {
  bgtq::synth_config sc;
  sc.layers = layers;
  sc.tokens = tokens;
  sc.q_heads = q_heads;
  sc.kv_heads = kv_heads;
  sc.rope = bgtq::rope_layout(dim, bgtq::rope_pairing::half);
  const bgtq::synth_data d = bgtq::generate_synth(sc);
  const auto L = static_cast<std::size_t>(layers), T = static_cast<std::size_t>(tokens), D = static_cast<std::size_t>(dim);
  bgtq::write_npy(dir + "/q.npy", d.q.data(), {L, T, static_cast<std::size_t>(q_heads), D});
  bgtq::write_npy(dir + "/k.npy", d.k.data(), {L, T, static_cast<std::size_t>(kv_heads), D});
  bgtq::write_npy(dir + "/v.npy", d.v.data(), {L, T, static_cast<std::size_t>(kv_heads), D});
}


//! Relative L2 distance ||a - b|| / ||b||.
inline double rel_l2(const std::vector<float>& a, const std::vector<float>& b) {
  double e = 0, n = 0;
  for (std::size_t i = 0; i < a.size(); ++i) {
    e += (double(a[i]) - b[i]) * (double(a[i]) - b[i]);
    n += double(b[i]) * b[i];
  }
  return std::sqrt(e / n);
}

//! Exits with a message unless cond holds.
inline void require(bool cond, const std::string& what) {
  if (!cond) {
    std::fprintf(stderr, "integration example: check failed: %s\n", what.c_str());
    std::exit(1);
  }
}

}  // namespace example
