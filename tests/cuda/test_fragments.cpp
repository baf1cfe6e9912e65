// The tensor-core decode path's fragment helpers (include/bgtq/cuda/mma_fragments.hpp)
// against direct bit extraction, and the emulated mma.sync against a plain matrix
// product. CPU only: part of test_cuda (with nvcc) and of test_cuda_emu (always).
#include <catch2/catch.hpp>

#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <set>
#include <string>
#include <thread>
#include <tuple>
#include <vector>

#include <bgtq/core/half.hpp>
#include <bgtq/core/rng.hpp>
#include <bgtq/cuda/kernel_math.hpp>
#include <bgtq/cuda/mma_fragments.hpp>
#include <bgtq/cuda/tables.hpp>

#if defined(BGTQ_CUDA_EMULATION)
#include <cuda_runtime.h>
#endif

#include "gpu_checks.hpp"

namespace mma = bgtq::cuda::mma;

namespace {

// code of token t (0..31) from plane words w[0..bits)
unsigned code_of(const std::vector<std::uint32_t>& w, int t) {
  unsigned c = 0;
  for (std::size_t k = 0; k < w.size(); ++k) c |= ((w[k] >> t) & 1u) << k;
  return c;
}

std::vector<std::uint32_t> random_words(bgtq::counter_rng& r, int bits) {
  std::vector<std::uint32_t> w(static_cast<std::size_t>(bits));
  for (auto& x : w) x = static_cast<std::uint32_t>(r.next_u64());
  return w;
}

template <int B>
void check_selectors(bgtq::counter_rng& r) {
  for (int trial = 0; trial < 200; ++trial) {
    const auto wj = random_words(r, B), wj2 = random_words(r, B);
    for (int g = 0; g < 8; ++g) {
      const std::uint32_t sel = mma::key_selector<B>(wj.data(), wj2.data(), g);
      for (int i = 0; i < 4; ++i) {
        REQUIRE(((sel >> (8 * i)) & 15u) == code_of(wj, g + 8 * i));
        REQUIRE(((sel >> (8 * i + 4)) & 15u) == code_of(wj2, g + 8 * i));
      }
    }
    for (int tq = 0; tq < 4; ++tq) {
      const std::uint32_t sel = mma::value_selector<B>(wj.data(), tq);
      for (int i = 0; i < 8; ++i) REQUIRE(((sel >> (4 * i)) & 15u) == code_of(wj, tq + 4 * i));
    }
  }
}

// the key selectors of both chunks from the 64-bit plane rows (key_selector_pair): byte 0
// of sa holds chunk 1's token g + 24, bytes 1..3 chunk 0's tokens g, g + 8, g + 16; sb the
// same with the chunks swapped; low nibble coordinate j, high nibble j + 1
template <int B>
void check_selector_pair(bgtq::counter_rng& r) {
  for (int trial = 0; trial < 200; ++trial) {
    unsigned long long ra[B], rb[B];
    std::vector<std::uint32_t> ja[2], jb[2];  // [chunk] plane words, for code_of
    for (int k = 0; k < B; ++k) {
      ra[k] = r.next_u64();
      rb[k] = r.next_u64();
      for (int c = 0; c < 2; ++c) {
        ja[c].push_back(static_cast<std::uint32_t>(ra[k] >> (32 * c)));
        jb[c].push_back(static_cast<std::uint32_t>(rb[k] >> (32 * c)));
      }
    }
    for (int g = 0; g < 8; ++g) {
      std::uint32_t sa = 0, sb = 0;
      mma::key_selector_pair<B>(ra, rb, mma::key_multiplier(g), sa, sb);
      for (int byte = 0; byte < 4; ++byte) {
        // (chunk, token within the chunk) held by this byte of sa; sb has the chunks swapped
        const int ca = byte == 0 ? 1 : 0, ta = byte == 0 ? g + 24 : g + 8 * (byte - 1);
        REQUIRE(((sa >> (8 * byte)) & 15u) == code_of(ja[ca], ta));
        REQUIRE(((sa >> (8 * byte + 4)) & 15u) == code_of(jb[ca], ta));
        REQUIRE(((sb >> (8 * byte)) & 15u) == code_of(ja[1 - ca], ta));
        REQUIRE(((sb >> (8 * byte + 4)) & 15u) == code_of(jb[1 - ca], ta));
      }
    }
  }
  REQUIRE(mma::upper16(0x89ABCDEFu) == 0x89ABu);
  REQUIRE(mma::mulhi32(0xFFFFFFFFu, 0xFFFFFFFFu) == 0xFFFFFFFEu);
}

// codes of 5..8 bits: the selector pair and wide_code_bytes give every token's whole code
template <int B>
void check_wide_selectors(bgtq::counter_rng& r) {
  for (int trial = 0; trial < 200; ++trial) {
    const auto wj = random_words(r, B), wj2 = random_words(r, B);
    for (int g = 0; g < 8; ++g) {
      std::uint32_t lo, hi, even, odd;
      mma::key_selectors_wide<B>(wj.data(), wj2.data(), g, lo, hi);
      mma::wide_code_bytes(lo, hi, even, odd);
      for (int i = 0; i < 4; ++i) {  // nibble 2i: token g + 8i at the first coordinate, 2i + 1 at the second
        REQUIRE(mma::byte_of(even, i) == code_of(wj, g + 8 * i));
        REQUIRE(mma::byte_of(odd, i) == code_of(wj2, g + 8 * i));
      }
    }
    for (int tq = 0; tq < 4; ++tq) {
      std::uint32_t lo, hi, even, odd;
      mma::value_selectors_wide<B>(wj.data(), tq, lo, hi);
      mma::wide_code_bytes(lo, hi, even, odd);
      for (int m = 0; m < 4; ++m) {  // nibble n: token tq + 4n
        REQUIRE(mma::byte_of(even, m) == code_of(wj, tq + 4 * (2 * m)));
        REQUIRE(mma::byte_of(odd, m) == code_of(wj, tq + 4 * (2 * m + 1)));
      }
    }
  }
}

template <int B>
void check_lookups(bgtq::counter_rng& r) {
  for (int trial = 0; trial < 100; ++trial) {
    std::uint16_t h[16];
    for (int v = 0; v < (1 << B); ++v) h[v] = bgtq::float_to_half_bits(static_cast<float>(r.normal()));
    const mma::lut16 t = mma::make_lut(h, B);
    for (int s = 0; s < 50; ++s) {
      unsigned n[8];
      std::uint32_t sel = 0;
      for (int i = 0; i < 8; ++i) {
        n[i] = r.below(1u << B);
        sel |= n[i] << (4 * i);
      }
      for (int half = 0; half < 2; ++half) {
        std::uint32_t lo, hi, k0, k1, v0, v1;
        mma::lookup_bytes<B>(sel >> (16 * half), t, lo, hi);
        const unsigned* c = n + 4 * half;
        for (int i = 0; i < 4; ++i) {
          REQUIRE(((lo >> (8 * i)) & 0xFFu) == (h[c[i]] & 0xFFu));
          REQUIRE(((hi >> (8 * i)) & 0xFFu) == static_cast<unsigned>(h[c[i]] >> 8));
        }
        mma::key_pairs(lo, hi, k0, k1);
        REQUIRE(k0 == (h[c[0]] | (static_cast<std::uint32_t>(h[c[1]]) << 16)));
        REQUIRE(k1 == (h[c[2]] | (static_cast<std::uint32_t>(h[c[3]]) << 16)));
        mma::value_pairs(lo, hi, v0, v1);
        REQUIRE(v0 == (h[c[0]] | (static_cast<std::uint32_t>(h[c[2]]) << 16)));
        REQUIRE(v1 == (h[c[1]] | (static_cast<std::uint32_t>(h[c[3]]) << 16)));
      }
    }
  }
}

}  // namespace

TEST_CASE("prmt follows PTX prmt.b32 (byte select and sign replication)", "[gpu][mma]") {
  bgtq::counter_rng r(11);
  for (int trial = 0; trial < 2000; ++trial) {
    const std::uint32_t a = static_cast<std::uint32_t>(r.next_u64()), b = static_cast<std::uint32_t>(r.next_u64());
    const std::uint32_t c = static_cast<std::uint32_t>(r.next_u64());
    const std::uint8_t bytes[8] = {static_cast<std::uint8_t>(a), static_cast<std::uint8_t>(a >> 8), static_cast<std::uint8_t>(a >> 16),
                                   static_cast<std::uint8_t>(a >> 24), static_cast<std::uint8_t>(b), static_cast<std::uint8_t>(b >> 8),
                                   static_cast<std::uint8_t>(b >> 16), static_cast<std::uint8_t>(b >> 24)};
    const std::uint32_t d = mma::prmt(a, b, c);
    for (int n = 0; n < 4; ++n) {
      const unsigned s = (c >> (4 * n)) & 15u;
      const std::uint8_t want = (s & 8u) ? static_cast<std::uint8_t>((bytes[s & 7u] & 0x80u) ? 0xFF : 0x00) : bytes[s & 7u];
      REQUIRE(((d >> (8 * n)) & 0xFFu) == want);
    }
  }
  REQUIRE(mma::rotr(0x80000001u, 1) == 0xC0000000u);
  REQUIRE(mma::rotr(0x80000001u, -1) == 0x00000003u);
  REQUIRE(mma::rotr(0x12345678u, 32) == 0x12345678u);
  REQUIRE(mma::half2_bits(1.0f, -2.0f) == 0xC0003C00u);
}

TEST_CASE("key and value selectors put every token's code in its nibble (widths 1..4)", "[gpu][mma]") {
  bgtq::counter_rng r(12);
  check_selectors<1>(r);
  check_selectors<2>(r);
  check_selectors<3>(r);
  check_selectors<4>(r);
}

TEST_CASE("key selector pairs from 64-bit plane rows put every token's code in its nibble (widths 1..4)", "[gpu][mma]") {
  bgtq::counter_rng r(13);
  check_selector_pair<1>(r);
  check_selector_pair<2>(r);
  check_selector_pair<3>(r);
  check_selector_pair<4>(r);
}

TEST_CASE("wide selector pairs give every token's whole code (widths 5..8)", "[gpu][mma]") {
  bgtq::counter_rng r(14);
  check_wide_selectors<5>(r);
  check_wide_selectors<6>(r);
  check_wide_selectors<7>(r);
  check_wide_selectors<8>(r);
}

TEST_CASE("byte-permute lookups give the fp16 centroid of every code (widths 1..4)", "[gpu][mma]") {
  bgtq::counter_rng r(13);
  check_lookups<1>(r);
  check_lookups<2>(r);
  check_lookups<3>(r);
  check_lookups<4>(r);
}

TEST_CASE("value B operand: every weight slot is written by the score lane that holds it and read by the lane that needs it",
          "[gpu][mma]") {
  // score lanes (gid', tq') hold unit tokens 16 mt + gid' + 8 rr of heads 2 tq' + x and
  // write the pair (rr = 0, rr = 1) of m-tile mt to wbuf_word(head, mt / 2, mt % 2, gid' / 4, gid' % 4)
  std::vector<int> writer_token(mma::wbuf_words * 2, -1), writer_head(mma::wbuf_words, -1);
  for (int lane = 0; lane < 32; ++lane) {
    const int gid = lane / 4, tq = lane % 4;
    for (int mt = 0; mt < 4; ++mt)
      for (int x = 0; x < 2; ++x) {
        const int w = mma::wbuf_word(2 * tq + x, mt >> 1, mt & 1, gid >> 2, gid & 3);
        REQUIRE(w >= 0);
        REQUIRE(w < mma::wbuf_words);
        REQUIRE(writer_head[static_cast<std::size_t>(w)] == -1);  // each word written once
        writer_head[static_cast<std::size_t>(w)] = 2 * tq + x;
        writer_token[2 * static_cast<std::size_t>(w)] = mma::key_token(mt, gid);
        writer_token[2 * static_cast<std::size_t>(w) + 1] = mma::key_token(mt, gid + 8);
      }
  }
  // the B lane (gid = head, tq) needs, for chunk c and k-tile kap, k-rows 2tq, 2tq+1
  // (register 0) and 2tq+8, 2tq+9 (register 1): chunk tokens value_token(kap, row)
  std::set<std::tuple<int, int>> seen;
  for (int lane = 0; lane < 32; ++lane) {
    const int gid = lane / 4, tq = lane % 4;
    for (int c = 0; c < 2; ++c)
      for (int kap = 0; kap < 2; ++kap)
        for (int reg = 0; reg < 2; ++reg) {
          const int w = mma::wbuf_word(gid, c, kap, reg, tq);
          REQUIRE(writer_head[static_cast<std::size_t>(w)] == gid);
          for (int e = 0; e < 2; ++e) {
            const int krow = 2 * tq + 8 * reg + e;
            const int tok = 32 * c + mma::value_token(kap, krow);
            REQUIRE(writer_token[2 * static_cast<std::size_t>(w) + e] == tok);
            seen.emplace(gid, tok);
          }
        }
  }
  REQUIRE(seen.size() == 8u * 64u);  // every (head, token) of the unit reaches the product once
  // the value A side: k-column kc of k-tile kap is nibble (2 (kc % 8 >= 4 ? 1 : 0) + ...) of the
  // lane's selector: value_pairs' (0, 2), (1, 3) pairing over tokens tq + 4i
  for (int tq = 0; tq < 4; ++tq)
    for (int kap = 0; kap < 2; ++kap) {
      const int nib[4] = {0, 2, 1, 3};  // r0 = nibbles (0, 2) -> k-cols 2tq, 2tq+1; r1 = (1, 3) -> 2tq+8, 2tq+9
      for (int q = 0; q < 4; ++q) {
        const int kc = 2 * tq + (q & 1) + 8 * (q >> 1);
        REQUIRE(mma::value_token(kap, kc) == tq + 4 * (nib[q] + 4 * kap));
      }
    }
}

TEST_CASE("tensor-core helpers: powers of two, stage images, shared-memory layout, layer support", "[gpu][mma]") {
  using namespace bgtq::cuda;
  REQUIRE(pow2i(0) == 1.0f);
  REQUIRE(pow2i(-3) == 0.125f);
  REQUIRE(pow2i(127) == std::ldexp(1.0f, 127));
  REQUIRE(pow2i(-200) == std::ldexp(1.0f, -126));
  for (float x : {1.0f, 0.75f, 3.0f, 65504.0f, 1e-30f, 6e-5f}) {
    const int e = exponent_above(x);
    REQUIRE(std::ldexp(1.0, e) > x);
    REQUIRE(std::ldexp(1.0, e - 1) <= x);
  }
  REQUIRE(exponent_above(0.0f) == -126);
  REQUIRE(exponent_above(INFINITY) == 0);
  // stage images: the P = 64 page part, and a P = 128 cache's unit image equal to it
  using namespace bgtq_gpu;
  method m;
  m.keys = key_kind::mixed;
  shape s64, s128;
  s128.page_tokens = 128;
  const auto c64 = make_cache(s64, m, 5), c128 = make_cache(s128, m, 5);
  const cache_desc d64 = describe(c64), d128 = describe(c128);
  const device_tables t64 = build_tables(d64), t128 = build_tables(d128);
  for (std::size_t i = 0; i < t64.heads.size(); ++i) {
    const mma_stage a = mma_stage_of(t64.heads[i], t64.groups.data(), 64);
    const mma_stage b = mma_stage_of(t128.heads[i], t128.groups.data(), 128);
    REQUIRE(a.bytes == static_cast<int>(t64.heads[i].page_bytes));
    REQUIRE(b.value_base % 16 == 0);
    REQUIRE(b.bytes <= a.bytes);
    for (int gi = 0; gi < t64.heads[i].key_count; ++gi) {
      const group_meta& g64 = t64.groups[static_cast<std::size_t>(t64.heads[i].key_first + gi)];
      const group_meta& g128 = t128.groups[static_cast<std::size_t>(t128.heads[i].key_first + gi)];
      REQUIRE(mma_stage_offset(g128.region, 128) == static_cast<int>(g64.region));
      REQUIRE(mma_stage_offset(g128.radii, 128) == static_cast<int>(g64.radii));
    }
  }
  const mma_layer_info info = mma_layer_support(t64, d64, 0);
  REQUIRE(info.ok);
  REQUIRE(info.smem.bytes <= mma_max_smem);
  REQUIRE(info.smem.qstride % 2 == 0);
  REQUIRE(((info.smem.qstride / 2) % 8) == 4);  // query rows 4 banks apart: conflict-free B loads
  REQUIRE(info.smem.warp_bytes >= info.smem.stage0 + 2 * info.stage_bytes);
  std::string why;
  REQUIRE_FALSE(mma_layer_support(t64, d64, 1, &why).ok);
  REQUIRE(why.find("layer") != std::string::npos);
  // a hand-made layout the staging would misread (radii not where gtq_pages puts them)
  device_tables bad = t64;
  bad.groups[static_cast<std::size_t>(bad.heads[0].key_first)].radii += 8;
  REQUIRE_FALSE(mma_layer_support(bad, d64, 0, &why).ok);
  REQUIRE(why.find("page layout") != std::string::npos);
  bad = t128;
  bad.groups[static_cast<std::size_t>(bad.heads[0].value_first)].region += 8;  // not on a 16-byte row
  REQUIRE_FALSE(mma_layer_support(bad, d128, 0, &why).ok);
  REQUIRE(why.find("page layout") != std::string::npos);
  REQUIRE(mma_layer_support(t128, d128, 0).ok);
}

TEST_CASE("mma_unit_page: a unit's page by multiply and shift equals the division for every page size", "[gpu][mma]") {
  using namespace bgtq::cuda;
  bgtq::counter_rng r(77);
  for (int P = 64; P <= 4096; P += 64) {
    const std::uint64_t mul = mma_page_multiplier(P);
    const int upp = P / 64;
    INFO("P = " << P);
    for (int x = 0; x < (1 << 16); ++x) REQUIRE(mma_unit_page(x, mul) == x / upp);
    for (int i = 0; i < 20000; ++i) {  // up to 2^25 units (2^31 tokens), and the top of that range
      const int x = i < 64 ? (1 << 25) - 1 - i : static_cast<int>(r.next_u64() & ((1u << 25) - 1));
      REQUIRE(mma_unit_page(x, mul) == x / upp);
    }
  }
}

TEST_CASE("build_mma_tables: per-head group rows, wide centroid tables, query positions and stage images", "[gpu][mma]") {
  using namespace bgtq::cuda;
  using namespace bgtq_gpu;
  // mixed: every width 1..8 in each head, different group counts per head and layer
  for (const key_kind kk : {key_kind::mixed, key_kind::uniform, key_kind::greedy}) {
    method m;
    m.keys = kk;
    for (int P : {64, 192}) {
      shape s;
      s.layers = 2;
      s.kv_heads = 3;
      s.q_heads = 6;
      s.head_dim = 96;
      s.page_tokens = P;
      const auto c = make_cache(s, m, 7);
      const cache_desc d = describe(c);
      const device_tables t = build_tables(d);
      const mma_head_tables mt = build_mma_tables(t, d);
      INFO("keys " << static_cast<int>(kk) << " P = " << P);
      REQUIRE(mt.hstride % 8 == 0);
      REQUIRE(mt.groups.size() == t.heads.size() * static_cast<std::size_t>(mt.gstride));
      REQUIRE(mt.half.size() == t.heads.size() * static_cast<std::size_t>(mt.hstride));
      REQUIRE(mt.cstride == s.head_dim);
      REQUIRE(mt.cpos.size() == t.heads.size() * static_cast<std::size_t>(mt.cstride));
      REQUIRE(mt.zmask.size() == t.heads.size() * 32u);
      REQUIRE(mt.stages.size() == t.heads.size());
      for (int l = 0; l < s.layers; ++l) {
        const mma_layer_info info = mma_layer_support(t, d, l);
        REQUIRE(info.ok);
        REQUIRE(info.key_groups + 1 <= mt.gstride);   // a CTA copies key_groups + 1 rows
        REQUIRE(info.half_table <= mt.hstride);        // ... and half_table halves
        REQUIRE(info.half_table % 8 == 0);
        REQUIRE(info.smem.qstride <= 32 * mma_qrow_slots);  // the padding masks cover a query row
      }
      for (std::size_t hi = 0; hi < t.heads.size(); ++hi) {
        const head_meta& hm = t.heads[hi];
        const mma_group* rows = mt.groups.data() + hi * static_cast<std::size_t>(mt.gstride);
        const std::uint16_t* ht = mt.half.data() + hi * static_cast<std::size_t>(mt.hstride);
        const std::int16_t* cp = mt.cpos.data() + hi * static_cast<std::size_t>(mt.cstride);
        const std::uint32_t* zm = mt.zmask.data() + hi * 32u;
        const auto zero_at = [&](int pp) { return (zm[pp % 32] >> (pp / 32) & 1u) != 0; };
        const mma_stage st = mma_stage_of(hm, t.groups.data(), P), sm = mt.stages[hi];
        REQUIRE(std::memcmp(&st, &sm, sizeof st) == 0);
        std::vector<int> seen(static_cast<std::size_t>(32 * mma_qrow_slots), 0);  // by query position
        std::vector<int> half_used(static_cast<std::size_t>(mt.hstride), 0);
        int padded = 0;
        for (int i = 0; i <= hm.key_count; ++i) {
          const bool key = i < hm.key_count;
          const group_meta& g = t.groups[static_cast<std::size_t>(key ? hm.key_first + i : hm.value_first)];
          const mma_group& r = rows[i];
          INFO("head " << hi << " group " << i);
          REQUIRE(r.n == g.n);
          REQUIRE(r.bits == g.bits);
          REQUIRE(r.coord_off == g.coord_off);
          REQUIRE(r.code == mma_stage_offset(g.region, P));
          REQUIRE(r.radii == mma_stage_offset(g.radii, P));
          for (int v = 0; v < (1 << g.bits); ++v) {  // every centroid, as fp16, through the row's own lookup
            const std::uint16_t want = bgtq::float_to_half_bits(t.cent[static_cast<std::size_t>(g.cent + v)]);
            std::uint16_t got;
            if (g.bits <= mma::max_lut_bits) {
              const int w = v >> 2, sh = 8 * (v & 3);
              got = static_cast<std::uint16_t>(((r.lo[w] >> sh) & 0xFFu) | (((r.hi[w] >> sh) & 0xFFu) << 8));
            } else {
              REQUIRE(r.half + v < mt.hstride);
              got = ht[r.half + v];
              ++half_used[static_cast<std::size_t>(r.half + v)];
            }
            REQUIRE(got == want);
          }
          if (key) {
            REQUIRE(r.qoff == padded);
            REQUIRE(r.qoff % 16 == 0);
            for (int j = 0; j < g.n; ++j) {  // the group's coordinates at its positions, then zeros
              REQUIRE(cp[g.coord_off + j] == r.qoff + j);
              REQUIRE_FALSE(zero_at(r.qoff + j));
              ++seen[static_cast<std::size_t>(r.qoff + j)];
            }
            for (int j = g.n; j < 16 * ((g.n + 15) / 16); ++j) {
              REQUIRE(zero_at(r.qoff + j));
              ++seen[static_cast<std::size_t>(r.qoff + j)];
            }
            padded += 16 * ((g.n + 15) / 16);
          }
        }
        for (int pp = padded; pp < 32 * mma_qrow_slots; ++pp) REQUIRE_FALSE(zero_at(pp));  // past the row: untouched
        for (int c = hm.key_coords; c < s.head_dim; ++c) REQUIRE(cp[c] == -1);
        for (int pp = 0; pp < padded; ++pp) REQUIRE(seen[static_cast<std::size_t>(pp)] == 1);  // written once each
        for (int n : half_used) REQUIRE(n <= 1);  // the wide tables do not overlap
        for (int i = hm.key_count + 1; i < mt.gstride; ++i) REQUIRE(rows[i].n == 0);
      }
    }
  }
}

#if defined(BGTQ_CUDA_EMULATION)
namespace {

// one warp: D = A B + C from fragments loaded as the PTX ISA describes (loads written
// here independently of the emulator's index formulas)
void mma_probe_kernel(const std::uint16_t* A, const std::uint16_t* Bm, const float* C, float* D) {
  const int lane = static_cast<int>(threadIdx.x), gid = lane / 4, tq = lane % 4;
  std::uint32_t a[4];
  for (int i = 0; i < 4; ++i) {
    const int row = gid + 8 * (i & 1), col = 2 * tq + 8 * (i >> 1);
    a[i] = A[row * 16 + col] | (static_cast<std::uint32_t>(A[row * 16 + col + 1]) << 16);
  }
  std::uint32_t b[2];
  for (int i = 0; i < 2; ++i) {
    const int k = 2 * tq + 8 * i;
    b[i] = Bm[k * 8 + gid] | (static_cast<std::uint32_t>(Bm[(k + 1) * 8 + gid]) << 16);
  }
  float d[4];
  for (int e = 0; e < 4; ++e) d[e] = C[(gid + 8 * (e >> 1)) * 8 + 2 * tq + (e & 1)];
  bgtq_emu::mma_m16n8k16(d, a, b[0], b[1]);
  for (int e = 0; e < 4; ++e) D[(gid + 8 * (e >> 1)) * 8 + 2 * tq + (e & 1)] = d[e];
}

// one warp: lane l copies 16 bytes src[l] -> dst[l] in group 0 and src[32 + l] ->
// dst[32 + l] in group 1, and notes what its destinations hold: seen[l][0..5] = first
// words after issue (group 0, 1), after cp_wait(1), after cp_wait(0); `wait` = false
// leaves group 1 pending at the kernel's end
struct words4 {
  std::uint32_t w[4];
};
void cp_async_probe_kernel(const words4* src, words4* dst, std::uint32_t* seen, bool wait) {
  const int lane = static_cast<int>(threadIdx.x);
  std::uint32_t* mine = seen + 6 * lane;
  bgtq_emu::cp_async(&dst[lane], &src[lane], sizeof(words4));
  bgtq_emu::cp_commit();
  bgtq_emu::cp_async(&dst[32 + lane], &src[32 + lane], sizeof(words4));
  mine[0] = dst[lane].w[0];
  mine[1] = dst[32 + lane].w[3];
  bgtq_emu::cp_commit();
  bgtq_emu::cp_wait(1);
  mine[2] = dst[lane].w[0];
  mine[3] = dst[32 + lane].w[3];
  if (!wait) return;
  bgtq_emu::cp_wait(0);
  mine[4] = dst[lane].w[0];
  mine[5] = dst[32 + lane].w[3];
}

// grid (n), 64 threads: each thread notes what its word of a static __shared__ array and
// of the dynamic shared memory hold at the CTA's start, then writes its CTA's number
// there (so a next CTA that is not given fresh memory sees it); thread 0 appends the
// CTA's number to `order`
void smem_probe_kernel(std::uint32_t* seen, unsigned* order, unsigned* count) {
  __shared__ std::uint32_t s_word[64];
  std::uint32_t* dyn = static_cast<std::uint32_t*>(bgtq_emu::dynamic_smem());
  const unsigned t = threadIdx.x, b = blockIdx.x;
  seen[(b * 64 + t) * 2] = s_word[t];
  seen[(b * 64 + t) * 2 + 1] = dyn[t];
  __syncthreads();
  s_word[t] = b + 1;
  dyn[t] = b + 1;
  if (t == 0) order[(*count)++] = b;
}

}  // namespace

TEST_CASE("the emulator: shared memory poisoned at every CTA's start (0xFF, then 0x55), CTAs forward and reversed by turns",
          "[gpu]") {
  constexpr unsigned n = 5;
  std::vector<std::uint32_t> seen(n * 64 * 2, 0);
  std::vector<unsigned> order(2 * n, 99);
  unsigned count = 0;
  // each launch: every word read at a CTA's start is that launch's poison: not zero (a
  // C++ static's initial value) and not the previous CTA's numbers; the next launch of
  // the kernel gets the other poison
  std::uint32_t poison = 0;
  for (int launch = 0; launch < 2; ++launch) {
    bgtq_emu::launch(smem_probe_kernel, dim3(n), dim3(64), 64 * 4, seen.data(), order.data(), &count);
    const std::uint32_t want = launch == 0 ? seen[1] : (poison == 0xFFFFFFFFu ? 0x55555555u : 0xFFFFFFFFu);
    if (launch == 0) {
      poison = want;
      REQUIRE((want == 0xFFFFFFFFu || want == 0x55555555u));
    }
    for (std::size_t i = 0; i < seen.size(); ++i) {
#if defined(BGTQ_EMU_ASAN)
      if (i % 2 == 0) continue;  // static shared memory stays unpoisoned under AddressSanitizer (cuda_runtime.h)
#endif
      INFO("launch " << launch << " CTA " << i / 128 << " thread " << i / 2 % 64 << (i % 2 ? " dynamic" : " static"));
      REQUIRE(seen[i] == want);
    }
  }
  REQUIRE(count == 2 * n);
  std::vector<unsigned> forward(n), reverse(n);
  for (unsigned i = 0; i < n; ++i) {
    forward[i] = i;
    reverse[i] = n - 1 - i;
  }
  const std::vector<unsigned> first(order.begin(), order.begin() + n), second(order.begin() + n, order.end());
  switch (bgtq_emu::configured_cta_order()) {
    case bgtq_emu::cta_order::alternate:
      REQUIRE(((first == forward && second == reverse) || (first == reverse && second == forward)));
      break;
    case bgtq_emu::cta_order::forward:
      REQUIRE((first == forward && second == forward));
      break;
    case bgtq_emu::cta_order::reverse:
      REQUIRE((first == reverse && second == reverse));
      break;
  }
}

TEST_CASE("mma_stage_offset: the 32-bit and 64-bit divisions agree on both sides of 2^26", "[gpu][mma]") {
  using bgtq::cuda::mma_stage_offset;
  const auto wide = [](std::uint32_t off, int P) {
    return static_cast<int>(static_cast<std::uint64_t>(off) * 64u / static_cast<std::uint64_t>(P));
  };
  const std::uint32_t edge = 1u << 26;
  for (int P : {64, 128, 192, 256, 320, 1024, 4096, 65536}) {
    for (std::uint32_t off : {0u, 1u, 7u, 8u, 12345u, edge - 65u, edge - 64u, edge - 1u, edge, edge + 1u, edge + 4096u,
                              0x7FFFFFFFu, 0xFFFFFFFFu}) {
      INFO("part offset " << off << ", P " << P);
      REQUIRE(mma_stage_offset(off, P) == wide(off, P));
    }
  }
  bgtq::counter_rng r(2026, 12);
  for (int i = 0; i < 20000; ++i) {
    const std::uint32_t off = static_cast<std::uint32_t>(r.next_u64() >> (32 + (i % 8)));
    const int P = 64 * (1 + static_cast<int>(r.next_u64() % 64));
    INFO("part offset " << off << ", P " << P);
    REQUIRE(mma_stage_offset(off, P) == wide(off, P));
  }
}

TEST_CASE("rotated_coord is the plain multiply-add chain bit for bit, at every group size", "[gpu][rotation]") {
  // rotated_coord (the query rotation and the merge's rotation back) reads the matrix in
  // whole batches of 64 and pads the last one with (-0) * (+0) terms; the sum must be
  // acc = fmaf(x_i, m_i, acc) over i = 0..n-1 from +0, to the bit. The tiny case makes
  // the chain end at -0 (products that underflow), which a +0 padding term would flip.
  using bgtq::cuda::rotated_coord;
  const auto bits = [](float v) {
    std::uint32_t b;
    std::memcpy(&b, &v, 4);
    return b;
  };
  bgtq::counter_rng r(77, 5);
  for (int n : {2, 6, 24, 36, 62, 63, 64, 65, 96, 127, 128, 129, 192, 256}) {
    for (int kind = 0; kind < 3; ++kind) {
      std::vector<float> fwd(static_cast<std::size_t>(n) * static_cast<std::size_t>(n)), x(static_cast<std::size_t>(n));
      for (auto& v : fwd) v = kind == 2 ? 1e-20f * static_cast<float>(1.0 + r.uniform()) : static_cast<float>(r.normal());
      for (auto& v : x) v = kind == 2 ? -1e-30f : static_cast<float>(r.normal());
      if (kind == 1)  // signed zeros among the inputs
        for (std::size_t i = 0; i < x.size(); i += 3) x[i] = i % 2 ? 0.0f : -0.0f;
      std::size_t minus_zero = 0;
      for (int o = 0; o < n; ++o) {
        float want = 0.0f;
        for (int i = 0; i < n; ++i)
          want = std::fma(x[static_cast<std::size_t>(i)], fwd[static_cast<std::size_t>(i) * n + static_cast<std::size_t>(o)], want);
        const float got = rotated_coord(fwd.data(), n, o, [&](int i) { return x[static_cast<std::size_t>(i)]; });
        INFO("n " << n << ", kind " << kind << ", coordinate " << o);
        REQUIRE(bits(got) == bits(want));
        minus_zero += bits(want) == 0x80000000u;
      }
      if (kind == 2) REQUIRE(minus_zero == static_cast<std::size_t>(n));  // the case it is there for
    }
  }
}

TEST_CASE("the emulated mma.sync m16n8k16 equals a plain matrix product", "[gpu][mma]") {
  bgtq::counter_rng r(14);
  std::vector<std::uint16_t> A(16 * 16), Bm(16 * 8);
  std::vector<float> C(16 * 8), D(16 * 8, NAN);
  for (auto& x : A) x = bgtq::float_to_half_bits(static_cast<float>(r.normal()));
  for (auto& x : Bm) x = bgtq::float_to_half_bits(static_cast<float>(r.normal()));
  for (auto& x : C) x = static_cast<float>(r.normal());
  bgtq_emu::launch(mma_probe_kernel, dim3(1), dim3(32), 0, A.data(), Bm.data(), C.data(), D.data());
  for (int i = 0; i < 16; ++i)
    for (int j = 0; j < 8; ++j) {
      double want = C[static_cast<std::size_t>(i * 8 + j)];
      for (int k = 0; k < 16; ++k)
        want += static_cast<double>(bgtq::half_bits_to_float(A[static_cast<std::size_t>(i * 16 + k)])) *
                bgtq::half_bits_to_float(Bm[static_cast<std::size_t>(k * 8 + j)]);
      REQUIRE(D[static_cast<std::size_t>(i * 8 + j)] == Approx(want).epsilon(1e-6).margin(1e-6));
    }
}

TEST_CASE("the emulated cp.async: destinations poisoned until their group is waited for, copies left pending fail the launch",
          "[gpu][mma]") {
  std::vector<words4> src(64), dst(64);
  for (std::size_t i = 0; i < src.size(); ++i)
    for (int j = 0; j < 4; ++j) src[i].w[j] = static_cast<std::uint32_t>(0x1000u * i + static_cast<unsigned>(j));
  const std::uint32_t poison = 0xFFFFFFFFu;
  std::vector<std::uint32_t> seen(32 * 6, 0);
  (void)cudaGetLastError();
  bgtq_emu::launch(cp_async_probe_kernel, dim3(1), dim3(32), 0, src.data(), dst.data(), seen.data(), true);
  REQUIRE(cudaGetLastError() == cudaSuccess);
  for (int l = 0; l < 32; ++l) {
    const std::uint32_t* s = seen.data() + 6 * l;
    INFO("lane " << l);
    CHECK(s[0] == poison);  // issued, not waited for
    CHECK(s[1] == poison);
    CHECK(s[2] == src[static_cast<std::size_t>(l)].w[0]);  // wait_group 1: the older group is done
    CHECK(s[3] == poison);                                // ... the newest is not
    CHECK(s[4] == src[static_cast<std::size_t>(l)].w[0]);
    CHECK(s[5] == src[static_cast<std::size_t>(32 + l)].w[3]);
  }
  REQUIRE(std::memcmp(dst.data(), src.data(), src.size() * sizeof(words4)) == 0);
  // a kernel that returns with a group pending: the launch fails, the next one does not
  bgtq_emu::launch(cp_async_probe_kernel, dim3(2), dim3(32), 0, src.data(), dst.data(), seen.data(), false);
  REQUIRE(cudaGetLastError() == cudaErrorLaunchFailure);
  bgtq_emu::launch(cp_async_probe_kernel, dim3(2), dim3(32), 0, src.data(), dst.data(), seen.data(), true);
  REQUIRE(cudaGetLastError() == cudaSuccess);
}
#endif

#if defined(BGTQ_CUDA_EMULATION)
namespace {
// every thread's own threadIdx, __syncthreads_or count and cp.async queue survive the
// switches: each thread passes 40 barriers (CTA, warp, shuffles, OR-barriers) and then
// writes what it holds
void fiber_state_kernel(unsigned* out) {
  const unsigned t = threadIdx.x;
  unsigned acc = 0, ors = 0;
  float staged = 0.0f, later = 0.0f;
  static const float src[128] = {};
  for (int i = 0; i < 10; ++i) {
    __syncthreads();
    acc += __shfl_xor_sync(0xffffffffu, t, 1);  // the lane's neighbour
    __syncwarp();
    ors += static_cast<unsigned>(__syncthreads_or(t == static_cast<unsigned>(i)));
  }
  // two groups of this thread's own: waiting for all but the newest lands the first and
  // leaves the second poisoned (a queue shared by the threads would have counted every
  // thread's commits: the wait would land both)
  bgtq_emu::cp_async(&staged, &src[t], sizeof(float));
  bgtq_emu::cp_commit();
  __syncthreads();
  bgtq_emu::cp_async(&later, &src[t], sizeof(float));
  bgtq_emu::cp_commit();
  __syncthreads();
  bgtq_emu::cp_wait(1);
  std::uint32_t later_bits = 0;
  std::memcpy(&later_bits, &later, sizeof later_bits);
  const bool first_landed = staged == 0.0f, second_pending = later_bits == 0xFFFFFFFFu;
  bgtq_emu::cp_wait(0);
  out[t * 4] = threadIdx.x;
  out[t * 4 + 1] = acc;
  out[t * 4 + 2] = ors;
  out[t * 4 + 3] = first_landed && second_pending && later == 0.0f ? 1u : 0u;
}
}  // namespace

TEST_CASE("the emulator keeps each thread's index, OR-barrier count and copy queue across barriers (fibers: switches)", "[gpu]") {
  std::vector<unsigned> out(128 * 4, 99);
  bgtq_emu::launch(fiber_state_kernel, dim3(3), dim3(128), 0, out.data());
  for (unsigned t = 0; t < 128; ++t) {
    INFO("thread " << t);
    REQUIRE(out[t * 4] == t);
    REQUIRE(out[t * 4 + 1] == 10 * (t ^ 1u));
    REQUIRE(out[t * 4 + 2] == 10);  // threads 0..9 each made one call true
    REQUIRE(out[t * 4 + 3] == 1);
  }
}

#endif

#if defined(BGTQ_EMU_FIBERS)
namespace {
// thread 0 returns before the __syncthreads that the other 63 call: its end-of-CTA
// arrival meets theirs there, and at the end of the CTA they wait for it in vain
void deadlock_kernel(int* out) {
  if (threadIdx.x == 0) return;
  __syncthreads();
  out[threadIdx.x] = 1;
}
}  // namespace

TEST_CASE("fibers: a barrier some threads skip aborts the launch as a deadlock", "[.deadlock]") {
  // run by ctest's test_cuda_emu:deadlock entry, which expects the abort's message
  std::vector<int> out(64, 0);
  bgtq_emu::launch(deadlock_kernel, dim3(1), dim3(64), 0, out.data());
  FAIL("the launch returned");
}
#endif

#if defined(BGTQ_EMU_TSAN)
// Race probes: the ThreadSanitizer build must report a kernel that leaves out a barrier
// (a data race naming the probe's kernel) and stay silent when the barrier is there.
// Each "missing" and "ordered" variant runs in a process of its own
// (tests/cuda/emu/race_probe.sh: ctest's race_probe:fibers and race_probe:os_threads),
// so that they check the emulator's model of each ordering in both thread modes.
namespace {
// every thread writes its slot and reads its neighbour's: needs the CTA barrier
void probe_block_kernel(bool ordered, int* out) {
  __shared__ int s[64];
  const unsigned t = threadIdx.x;
  s[t] = static_cast<int>(t);
  if (ordered) __syncthreads();
  out[t] = s[(t + 1) % 64];
}
// The last thread to reach the first barrier writes; thread 0 reads. Over fibers the
// last thread runs on past the first barrier and arrives at the second before thread 0
// resumes: a barrier that released into one sync object for all its generations would
// order thread 0's read after that write (emu_barrier: one per generation parity). Over
// OS threads the writer sleeps before the first barrier so that it is the last there
// too, and it usually arrives at the second while most of the others are still waking
// from the first (with std::barrier's own synchronisation visible to ThreadSanitizer,
// 11 of 20 runs went unreported).
void probe_next_phase_kernel(bool ordered, int* out) {
  __shared__ int s[1];
  const unsigned t = threadIdx.x;
  if (t == 0) s[0] = 0;
  if (t == blockDim.x - 1) std::this_thread::sleep_for(std::chrono::milliseconds(20));
  __syncthreads();
  if (t == blockDim.x - 1) s[0] = 1;
  if (ordered) __syncthreads();
  if (t == 0) out[0] = s[0];
  __syncthreads();
}
// a shuffle makes the lanes meet but orders no memory: needs the __syncwarp
void probe_warp_kernel(bool ordered, int* out) {
  __shared__ int s[32];
  const unsigned lane = threadIdx.x % 32;
  s[lane] = static_cast<int>(lane);
  const int v = __shfl_xor_sync(0xffffffffu, static_cast<int>(lane), 1);
  if (ordered) __syncwarp();
  out[lane] = s[lane ^ 1u] + v;
}
// an overlapped launch reads its predecessor's output: needs its grid_dependency_wait
void probe_producer_kernel(int* buf) { buf[threadIdx.x] = static_cast<int>(threadIdx.x) + 1; }
void probe_dependency_kernel(bool ordered, const int* buf, int* out) {
  if (ordered) bgtq_emu::dependency_wait();
  out[threadIdx.x] = buf[threadIdx.x];
}
// a lane reads its neighbour's cp.async destination: needs the neighbour's wait first
void probe_cp_async_kernel(bool ordered, const int* src, int* out) {
  __shared__ int s[32];
  const unsigned lane = threadIdx.x % 32;
  bgtq_emu::cp_async(&s[lane], &src[lane], sizeof(int));
  bgtq_emu::cp_commit();
  if (ordered) bgtq_emu::cp_wait(0);
  __syncwarp();
  out[lane] = s[lane ^ 1u];
  bgtq_emu::cp_wait(0);
}

void run_race_probe(const char* probe, bool ordered) {
  std::vector<int> src(64, 7), buf(64, 0), out(64, -1);
  const std::string p = probe;
  if (p == "block") {
    bgtq_emu::launch(probe_block_kernel, dim3(1), dim3(64), 0, ordered, out.data());
  } else if (p == "next_phase") {
    bgtq_emu::launch(probe_next_phase_kernel, dim3(1), dim3(64), 0, ordered, out.data());
  } else if (p == "warp") {
    bgtq_emu::launch(probe_warp_kernel, dim3(1), dim3(32), 0, ordered, out.data());
  } else if (p == "dependency") {
    bgtq_emu::stream_launch(false, probe_producer_kernel, dim3(1), dim3(32), 0, buf.data());
    bgtq_emu::stream_launch(true, probe_dependency_kernel, dim3(1), dim3(32), 0, ordered,
                            static_cast<const int*>(buf.data()), out.data());
    bgtq_emu::host_sync();
  } else if (p == "cp_async") {
    bgtq_emu::launch(probe_cp_async_kernel, dim3(1), dim3(32), 0, ordered, static_cast<const int*>(src.data()),
                     out.data());
  } else {
    FAIL("no race probe " << p);
  }
  REQUIRE(cudaGetLastError() == cudaSuccess);
  if (ordered) {  // with the barrier the results are defined
    if (p == "block") REQUIRE(out[0] == 1);
    if (p == "next_phase") REQUIRE(out[0] == 1);
    if (p == "warp") REQUIRE(out[0] == 2);  // s[1] + lane 1's value
    if (p == "dependency") REQUIRE(out[31] == 32);
    if (p == "cp_async") REQUIRE(out[0] == 7);
  }
}
}  // namespace

#define BGTQ_RACE_PROBE(probe)                                                                            \
  TEST_CASE("race probe: " probe " missing", "[.race]") { run_race_probe(probe, false); }              \
  TEST_CASE("race probe: " probe " ordered", "[.race]") { run_race_probe(probe, true); }
BGTQ_RACE_PROBE("block")
BGTQ_RACE_PROBE("next_phase")
BGTQ_RACE_PROBE("warp")
BGTQ_RACE_PROBE("dependency")
BGTQ_RACE_PROBE("cp_async")
#undef BGTQ_RACE_PROBE
#endif
