#pragma once
// Exact float attention (double accumulation) over raw, unquantized K and V: what the
// examples check the packed cache's decode attention against.
#include <algorithm>
#include <cmath>
#include <cstddef>
#include <vector>

namespace example {

//! Exact attention of one query token q[Hq][D] over tokens [0, T) of k, v ([T][Hkv][D]).
inline std::vector<float> exact_attention(const float* q, const float* k, const float* v, int T, int q_heads, int kv_heads,
                                          int D) {
  std::vector<float> out(static_cast<std::size_t>(q_heads) * D, 0.0f);
  for (int g = 0; g < q_heads; ++g) {
    const int h = g / (q_heads / kv_heads);
    std::vector<double> s(static_cast<std::size_t>(T));
    double mx = -INFINITY, sum = 0;
    for (int t = 0; t < T; ++t) {
      double d = 0;
      for (int j = 0; j < D; ++j) d += double(q[g * D + j]) * k[(static_cast<std::size_t>(t) * kv_heads + h) * D + j];
      s[static_cast<std::size_t>(t)] = d / std::sqrt(double(D));
      mx = std::max(mx, s[static_cast<std::size_t>(t)]);
    }
    for (auto& x : s) sum += (x = std::exp(x - mx));
    for (int t = 0; t < T; ++t)
      for (int j = 0; j < D; ++j)
        out[static_cast<std::size_t>(g) * D + j] +=
            static_cast<float>(s[static_cast<std::size_t>(t)] / sum * v[(static_cast<std::size_t>(t) * kv_heads + h) * D + j]);
  }
  return out;
}

}  // namespace example
