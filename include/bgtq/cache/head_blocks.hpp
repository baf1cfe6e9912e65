#pragma once
//! @file cache/head_blocks.hpp
//! The page codecs' walk over the G query heads of one KV head in blocks: their kernels
//! are compiled for blocks of 1, 2, 4 (and on AVX-512, for some, 8) heads sharing one pass
//! over a page's codes, so G = 6 runs a 4-head block and then a 2-head one.

#include <type_traits>

#include "../config.hpp"

namespace bgtq::detail {

//! Largest head block of the scoring kernels that have an 8-head instance (AVX-512: 8 x 2
//! accumulators fit its 32 registers; AVX2 and scalar: 4).
#if defined(BGTQ_SIMD_AVX512)
inline constexpr int max_score_heads = 8;
#else
inline constexpr int max_score_heads = 4;
#endif

//! Calls f(h, std::integral_constant<int, GB>{}) for consecutive blocks [h, h + GB) of
//! the heads [0, G), each block the largest of Max, Max / 2, ..., 1 that fits in what is
//! left. GB reaches the kernels as a template argument (one instance per block size).
template <int Max, class F>
BGTQ_FORCEINLINE void for_head_blocks(int G, F&& f) {
  static_assert(Max == 1 || Max == 2 || Max == 4 || Max == 8, "head blocks of 1, 2, 4 or 8");
  for (int h = 0; h < G;) {
    const int left = G - h;
    if constexpr (Max >= 8) {
      if (left >= 8) {
        f(h, std::integral_constant<int, 8>{});
        h += 8;
        continue;
      }
    }
    if constexpr (Max >= 4) {
      if (left >= 4) {
        f(h, std::integral_constant<int, 4>{});
        h += 4;
        continue;
      }
    }
    if constexpr (Max >= 2) {
      if (left >= 2) {
        f(h, std::integral_constant<int, 2>{});
        h += 2;
        continue;
      }
    }
    f(h, std::integral_constant<int, 1>{});
    h += 1;
  }
}

}  // namespace bgtq::detail
