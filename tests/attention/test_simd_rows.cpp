// The 16-lane reductions and the fp16-window row kernels of decode attention against
// plain scalar loops, on random rows of awkward lengths. Built per ISA (default, scalar,
// avx2) with the rest of the attention family.
#include <catch2/catch.hpp>

#include <bgtq/attention/decode.hpp>
#include <bgtq/cache/page_layout.hpp>
#include <bgtq/core/rng.hpp>
#include <bgtq/core/simd.hpp>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <type_traits>
#include <vector>

#include "common.hpp"

using namespace bgtq_test;

namespace {
float lanes_tree_sum(const float* a) {  // the hsum order of every ISA path: core/simd.hpp's canonical tree
  float s[16];
  std::memcpy(s, a, sizeof s);
  return bgtq::detail::tree_reduce16(s);
}
}  // namespace

TEST_CASE("hsum and hmax reduce all 16 lanes", "[attention][simd]") {
  bgtq::counter_rng r(41);
  int differs_from_seq = 0;  // inputs where the order shows, so the order check can fail
  for (int rep = 0; rep < 200; ++rep) {
    float a[16];
    for (float& x : a) x = static_cast<float>(r.normal()) * (rep % 7 == 0 ? 1e6f : 1.0f);
    const int big = static_cast<int>(r.below(16));
    if (rep % 3 == 0) a[big] = 3e7f;  // the maximum sits in any lane
    const bgtq::simd::vf16 v = bgtq::simd::load(a);
    float mx = a[0], seq = 0.0f;
    for (float x : a) {
      mx = std::max(mx, x);
      seq += x;
    }
    REQUIRE(bgtq::simd::hmax(v) == mx);
    // bit-identical to the documented tree order (the same on every ISA path)
    REQUIRE(bgtq::simd::hsum(v) == lanes_tree_sum(a));
    if (bgtq::simd::hsum(v) != seq) ++differs_from_seq;
    double exact = 0;
    for (float x : a) exact += x;
    double mag = 0;
    for (float x : a) mag += std::fabs(x);
    REQUIRE(std::fabs(bgtq::simd::hsum(v) - exact) <= 16 * 6e-8 * mag);
  }
  REQUIRE(differs_from_seq > 20);
}

TEST_CASE("window row kernels match scalar loops at awkward head dims", "[attention][simd]") {
  bgtq::counter_rng r(43);
  for (int D : {2, 6, 14, 16, 18, 30, 32, 46, 64, 128, 130, 256}) {
    std::vector<std::uint16_t> h(static_cast<std::size_t>(D));
    std::vector<float> q(static_cast<std::size_t>(D)), x(static_cast<std::size_t>(D) + 1, -7.0f), y(static_cast<std::size_t>(D));
    for (int j = 0; j < D; ++j) {
      h[static_cast<std::size_t>(j)] = bgtq::float_to_half_bits(static_cast<float>(r.normal()) * 3.0f);
      q[static_cast<std::size_t>(j)] = static_cast<float>(r.normal());
      y[static_cast<std::size_t>(j)] = static_cast<float>(r.normal());
    }
    if (D >= 6) h[5] = 0x0001u;  // a subnormal
    bgtq::detail::half_row_to_float(h.data(), D, x.data());
    INFO("D = " << D);
    for (int j = 0; j < D; ++j) REQUIRE(x[static_cast<std::size_t>(j)] == bgtq::half_bits_to_float(h[static_cast<std::size_t>(j)]));
    REQUIRE(x[static_cast<std::size_t>(D)] == -7.0f);  // nothing written past D
    double dot = 0, mag = 0;
    for (int j = 0; j < D; ++j) {
      dot += static_cast<double>(q[static_cast<std::size_t>(j)]) * x[static_cast<std::size_t>(j)];
      mag += std::fabs(static_cast<double>(q[static_cast<std::size_t>(j)]) * x[static_cast<std::size_t>(j)]);
    }
    REQUIRE(std::fabs(bgtq::detail::dot_row(q.data(), x.data(), D) - dot) <= 1e-6 * mag + 1e-30);
    const float w = 0.37f;
    std::vector<float> want(y);
    for (int j = 0; j < D; ++j) want[static_cast<std::size_t>(j)] += w * x[static_cast<std::size_t>(j)];
    bgtq::detail::axpy_row(w, x.data(), D, y.data());
    for (int j = 0; j < D; ++j) REQUIRE(std::fabs(y[static_cast<std::size_t>(j)] - want[static_cast<std::size_t>(j)]) <= 1e-6f * (1.0f + std::fabs(want[static_cast<std::size_t>(j)])));
  }
}

TEST_CASE("exp_shift_sum writes exactly n weights and returns their sum", "[attention][simd]") {
  bgtq::counter_rng r(47);
  for (std::size_t n : {1u, 5u, 15u, 16u, 17u, 31u, 32u, 33u, 132u}) {
    std::vector<float> s(n + 16);
    for (float& v : s) v = static_cast<float>(r.normal()) * 4.0f;
    for (std::size_t i = n; i < n + 16; ++i) s[i] = 1e30f;  // the padding: read, never used or written
    const std::vector<float> in(s);
    const float m = 2.5f;
    const float sum = bgtq::detail::exp_shift_sum(s.data(), n, m);
    double want_sum = 0;
    INFO("n = " << n);
    for (std::size_t i = 0; i < n; ++i) {
      const double e = std::exp(static_cast<double>(in[i] - m));  // the float difference, as the kernel forms it
      REQUIRE(std::fabs(s[i] - e) <= 4e-7 * e + 1e-37);
      want_sum += e;
    }
    for (std::size_t i = n; i < n + 16; ++i) REQUIRE(s[i] == 1e30f);
    REQUIRE(std::fabs(sum - want_sum) <= 1e-6 * want_sum);
  }
}

#if defined(BGTQ_SIMD_CODES64)
// The 64-token value kernels' token order (gtq_pages::span_blocks64): code lanes from
// bit_plane_layout::strided16 and weights from simd::transpose_stride4 must both put token
// 4d + c in lane d of chunk c. Built on the AVX-512 paths (the default program on such a
// machine, test_attention_avx512 for the path without GFNI) and the AVX2 one
// (test_attention_avx2, or the default program on an AVX2-only CPU).
namespace {
void store_lanes(std::int32_t* p, bgtq::simd::vi16 idx) {
#if defined(BGTQ_SIMD_AVX512)
  _mm512_storeu_si512(p, idx.v);
#else
  _mm256_storeu_si256(reinterpret_cast<__m256i*>(p), idx.lo);
  _mm256_storeu_si256(reinterpret_cast<__m256i*>(p + 8), idx.hi);
#endif
}
template <int B>
void check_strided_codes(bgtq::counter_rng& r, int P) {
  const int n = 5;  // coordinates
  std::vector<std::uint8_t> region(bgtq::bit_plane_layout::bytes(n, B, P) + 64, 0xa5);  // + slack: no read past it
  std::vector<std::uint8_t> codes(static_cast<std::size_t>(P) * n);
  for (int t = 0; t < P; ++t) {
    for (int j = 0; j < n; ++j) codes[static_cast<std::size_t>(t) * n + j] = static_cast<std::uint8_t>(r.below(1u << B));
    bgtq::bit_plane_layout::store(region.data(), n, B, P, t, codes.data() + static_cast<std::size_t>(t) * n);
  }
  alignas(64) float table[256];
  for (float& x : table) x = static_cast<float>(r.normal());
  for (int t0 = 0; t0 < P; t0 += 64)
    for (int j = 0; j < n; ++j) {
      const auto check = [&](auto bytes) {
        const auto chunk = [&](auto c_tag) {
          constexpr int C = decltype(c_tag)::value;
          const auto idx = bgtq::bit_plane_layout::strided16<B, C>(bytes);
          alignas(64) std::int32_t lane[16];
          store_lanes(lane, idx);
          alignas(64) float looked[16];
          bgtq::simd::store(looked, bgtq::simd::lookup<B>(table, idx));
          for (int d = 0; d < 16; ++d) {
            const int want = codes[static_cast<std::size_t>(t0 + 4 * d + C) * n + j];
            INFO("B " << B << " P " << P << " t0 " << t0 << " j " << j << " chunk " << C << " lane " << d);
            REQUIRE((lane[d] & ((1 << B) - 1)) == want);
            REQUIRE(looked[d] == table[want]);
          }
        };
        chunk(std::integral_constant<int, 0>{});
        chunk(std::integral_constant<int, 1>{});
        chunk(std::integral_constant<int, 2>{});
        chunk(std::integral_constant<int, 3>{});
      };
      check(bgtq::bit_plane_layout::load64<B>(region.data(), P, t0, j));
      if (P == 64) check(bgtq::bit_plane_layout::load64<B, true>(region.data(), P, t0, j));
    }
}
}  // namespace

TEST_CASE("strided16 code lanes and transpose_stride4 put token 4d + c in lane d of chunk c, and untranspose_stride4 undoes it", "[attention][simd]") {
  bgtq::counter_rng r(97);
  for (int P : {64, 128}) {
    check_strided_codes<1>(r, P);
    check_strided_codes<2>(r, P);
    check_strided_codes<3>(r, P);
    check_strided_codes<4>(r, P);
    check_strided_codes<5>(r, P);
    check_strided_codes<6>(r, P);
    check_strided_codes<7>(r, P);
    check_strided_codes<8>(r, P);
  }
  for (int rep = 0; rep < 20; ++rep) {
    alignas(64) float x[64];
    for (float& v : x) v = static_cast<float>(r.normal());
    bgtq::simd::vf16 v[4] = {bgtq::simd::load(x), bgtq::simd::load(x + 16), bgtq::simd::load(x + 32), bgtq::simd::load(x + 48)};
    bgtq::simd::transpose_stride4(v);
    for (int c = 0; c < 4; ++c) {
      alignas(64) float out[16];
      bgtq::simd::store(out, v[c]);
      for (int d = 0; d < 16; ++d) REQUIRE(out[d] == x[4 * d + c]);
    }
#if defined(BGTQ_SIMD_AVX512)  // (the AVX-512 key pass's; AVX2 has no untranspose_stride4)
    bgtq::simd::untranspose_stride4(v);  // and back
    for (int k = 0; k < 4; ++k) {
      alignas(64) float out[16];
      bgtq::simd::store(out, v[k]);
      for (int i = 0; i < 16; ++i) REQUIRE(out[i] == x[16 * k + i]);
    }
#endif
  }
}
#endif
