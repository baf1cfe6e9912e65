#pragma once
//! @file attention/reference.hpp
//! Reference decode attention in double precision over keys and values decoded from
//! the cache one by one (slow, obviously correct; for tests).

#include <cmath>
#include <vector>

#include "../core/error.hpp"

namespace bgtq {

//! out[q_heads][D] = softmax(scale * q . k_t) v_t over every cached position of `seq`
//! in `layer`, computed in double from cache.decode_key / decode_value.
template <class Cache>
void reference_attention(const Cache& cache, int layer, int seq, const float* q, float* out, double scale = 0.0) {
  const auto& cfg = cache.config();
  const std::int64_t T = cache.length(seq, layer);  // throws for an unknown sequence or layer
  const int G = cfg.q_heads / cfg.kv_heads;
  const int D = cfg.head_dim;
  BGTQ_REQUIRE(T > 0, errc::invalid_argument, "reference_attention: empty sequence");
  const double sc = scale == 0.0 ? 1.0 / std::sqrt(static_cast<double>(D)) : scale;
  std::vector<float> k(static_cast<std::size_t>(T) * D), v(static_cast<std::size_t>(T) * D);
  std::vector<double> logits(static_cast<std::size_t>(T));
  for (int h = 0; h < cfg.kv_heads; ++h) {
    for (std::int64_t t = 0; t < T; ++t) {
      cache.decode_key(seq, layer, h, t, k.data() + t * D);
      cache.decode_value(seq, layer, h, t, v.data() + t * D);
    }
    for (int g = 0; g < G; ++g) {
      const float* qg = q + (static_cast<std::size_t>(h) * G + g) * D;
      double mx = -INFINITY;
      for (std::int64_t t = 0; t < T; ++t) {
        double s = 0;
        for (int j = 0; j < D; ++j) s += static_cast<double>(qg[j]) * k[static_cast<std::size_t>(t * D + j)];
        logits[static_cast<std::size_t>(t)] = s * sc;
        mx = std::max(mx, logits[static_cast<std::size_t>(t)]);
      }
      double z = 0;
      for (auto& x : logits) z += (x = std::exp(x - mx));
      float* o = out + (static_cast<std::size_t>(h) * G + g) * D;
      for (int j = 0; j < D; ++j) {
        double a = 0;
        for (std::int64_t t = 0; t < T; ++t) a += logits[static_cast<std::size_t>(t)] * v[static_cast<std::size_t>(t * D + j)];
        o[j] = static_cast<float>(a / z);
      }
    }
  }
}

}  // namespace bgtq
