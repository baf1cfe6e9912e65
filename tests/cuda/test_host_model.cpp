// CPU-only checks of the CUDA kernels' building blocks: the BGTQ_HOST_DEVICE helpers
// of kernel_math.hpp against the CPU codecs, the uploaded tables against the host cache
// layout, and the host model of the kernels (host_model.hpp: same decomposition, same
// helpers, same tables) against the CPU cache encoder and decode_attention. These run
// everywhere the cuda family is built, GPU or not.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <string>
#include <vector>

#include "common.hpp"
#include "gpu_checks.hpp"
#include "host_model.hpp"

using namespace bgtq_gpu;
namespace bc = bgtq::cuda;

TEST_CASE("canonical_sum_squares matches the CPU canonical order bit for bit", "[cuda][host]") {
  for (int n = 1; n <= 300; n += (n < 40 ? 1 : 13)) {
    std::vector<float> x = normal_floats(static_cast<std::size_t>(n), 11, static_cast<std::uint64_t>(n), 3.0f);
    const float want = bgtq::detail::sum_squares(x.data(), n);
    const float want_scalar = bgtq::detail::sum_squares_scalar(x.data(), n);
    const float got = bc::canonical_sum_squares([&](int j) { return x[static_cast<std::size_t>(j)]; }, n);
    // token-minor getter as the encode kernel reads it
    std::vector<float> tm(static_cast<std::size_t>(n) * 32, -1.0f);
    for (int j = 0; j < n; ++j) tm[static_cast<std::size_t>(j) * 32 + 5] = x[static_cast<std::size_t>(j)];
    const float got_tm = bc::canonical_sum_squares(bc::token_minor_get{tm.data(), 5}, n);
    INFO("n = " << n);
    REQUIRE(std::memcmp(&want, &got, 4) == 0);
    REQUIRE(std::memcmp(&want_scalar, &got, 4) == 0);
    REQUIRE(std::memcmp(&got_tm, &got, 4) == 0);
  }
}

TEST_CASE("tq_norm matches tq_quantizer's radius, including the overflow rescue", "[cuda][host]") {
  for (int n : {2, 6, 16, 64, 128}) {
    for (float scale : {1.0f, 1e-20f, 3e18f, 1e30f}) {
      std::vector<float> x = normal_floats(static_cast<std::size_t>(n), 5, static_cast<std::uint64_t>(n), scale);
      bgtq::tq_params p;
      p.dim = n;
      p.bits = 3;
      p.radius = bgtq::radius_format::fp32;
      p.rotation = bgtq::rotation_kind::identity;
      const bgtq::tq_quantizer q(p);
      std::vector<std::uint8_t> codes(static_cast<std::size_t>(n));
      float r = 0.0f;
      REQUIRE(q.quantize(x.data(), codes.data(), r) == bgtq::errc::ok);
      const float got = bc::tq_norm([&](int j) { return x[static_cast<std::size_t>(j)]; }, n);
      INFO("n = " << n << " scale = " << scale);
      if (bc::tq_radius_is_zero(got, true)) {
        REQUIRE(r == 0.0f);
      } else {  // the norm, then the stored radius (fp32: exact up to fp32_radius_max, 2^100)
        const float stored = bc::tq_stored_radius(got, 0.0f, false, true);
        REQUIRE(std::memcmp(&r, &stored, 4) == 0);
        if (got <= bgtq::detail::fp32_radius_max) REQUIRE(std::memcmp(&r, &got, 4) == 0);
      }
    }
  }
}

TEST_CASE("bit-plane word helpers agree with bit_plane_layout for every slot, coordinate and plane", "[cuda][host]") {
  for (int P : {64, 128, 192}) {
    for (int B = 1; B <= 8; ++B) {
      const int n = 6;
      REQUIRE(bc::bit_plane_bytes(n, B, P) == bgtq::bit_plane_layout::bytes(n, B, P));
      std::vector<std::uint8_t> region(bgtq::bit_plane_layout::bytes(n, B, P), 0);
      bgtq::counter_rng r(static_cast<std::uint64_t>(P * 10 + B));
      std::vector<std::vector<std::uint8_t>> codes(static_cast<std::size_t>(P), std::vector<std::uint8_t>(n));
      for (int t = 0; t < P; ++t) {
        for (int j = 0; j < n; ++j) codes[static_cast<std::size_t>(t)][static_cast<std::size_t>(j)] = static_cast<std::uint8_t>(r.below(1u << B));
        bgtq::bit_plane_layout::store(region.data(), n, B, P, t, codes[static_cast<std::size_t>(t)].data());
      }
      for (int j = 0; j < n; ++j)
        for (int t0 = 0; t0 < P; t0 += 32) {
          std::uint32_t w[8];
          unsigned c32[32];
          for (int k = 0; k < B; ++k) w[k] = bc::load_word_le(region.data() + bc::plane_word_offset(j, k, B, P, t0 + 7));
          for (int t = 0; t < 32; ++t) {
            c32[t] = codes[static_cast<std::size_t>(t0 + t)][static_cast<std::size_t>(j)];
            REQUIRE(bc::code_from_planes(w, B, t) == c32[t]);
          }
          for (int k = 0; k < B; ++k) REQUIRE(bc::plane_word(c32, k) == w[k]);
        }
    }
  }
}

TEST_CASE("plane_bit_to is ((w >> t) & 1) << k for every t and k", "[cuda][host]") {
  bgtq::counter_rng r(3);
  for (int rep = 0; rep < 64; ++rep) {
    const std::uint32_t w = rep == 0 ? 0xFFFFFFFFu : rep == 1 ? 0u : r.next_u32();
    for (int t = 0; t < 32; ++t)
      for (int k = 0; k < 8; ++k) REQUIRE(bc::plane_bit_to(w, t, k) == ((w >> t) & 1u) << k);
  }
}

TEST_CASE("split plans cover every tile exactly once and fill the machine", "[cuda][host]") {
  for (long long T : {0LL, 1LL, 54LL, 97LL, 128LL, 129LL, 1000LL, 5000LL, 131072LL, 524288LL})
    for (int ctas : {1, 8, 17 * 8, 128, 4096})
      for (int req : {0, 1, 3, 7, 100000}) {
        const bc::split_plan sp = bc::plan_splits(ctas, T, 132, req);
        const long long tiles = (T + bc::decode_tile - 1) / bc::decode_tile;
        INFO("T = " << T << " ctas = " << ctas << " requested = " << req);
        REQUIRE(sp.splits >= 1);
        REQUIRE(sp.tiles_per_split >= 1);
        if (tiles > 0) {
          REQUIRE(static_cast<long long>(sp.splits) * sp.tiles_per_split >= tiles);
          REQUIRE(static_cast<long long>(sp.splits - 1) * sp.tiles_per_split < tiles);  // no empty split
        }
        if (req == 0 && tiles >= 2 * 132 * 4) REQUIRE(static_cast<long long>(sp.splits) * ctas >= 132 * 4 / 2);
      }
}

TEST_CASE("one-wave split plans never exceed one wave and cover every tile", "[cuda][host]") {
  // the tensor-core kernel's planner: 132 SMs x 3 CTAs (an H200 at 166 registers/thread)
  for (long long T : {1LL, 54LL, 97LL, 4096LL, 32768LL, 131072LL, 524288LL})
    for (int ctas : {8, 16 * 8, 17 * 8, 396, 397, 4096}) {
      const bc::split_plan sp = bc::plan_splits_one_wave(ctas, T, 132, 3);
      const long long tiles = (T + bc::decode_tile - 1) / bc::decode_tile;
      INFO("T = " << T << " ctas = " << ctas << ": " << sp.splits << " splits");
      REQUIRE(sp.splits >= 1);
      REQUIRE(static_cast<long long>(sp.splits) * sp.tiles_per_split >= tiles);
      REQUIRE(static_cast<long long>(sp.splits - 1) * sp.tiles_per_split < tiles);
      if (ctas <= 396) REQUIRE(static_cast<long long>(sp.splits) * ctas <= 396);  // no partial second wave
      if (tiles >= 2 * 396) REQUIRE(static_cast<long long>(sp.splits + 1) * ctas > 396);  // and the wave is full
    }
  REQUIRE(bc::plan_splits_one_wave(16 * 8, 524288, 132, 3).splits == 3);  // 384 CTAs, not 4 x 128 = 512
  REQUIRE(bc::plan_splits_one_wave(8, 524288, 132, 3).splits == 49);     // 392, not 400
}

TEST_CASE("shared-memory and workspace layouts are aligned and disjoint", "[cuda][host]") {
  for (int gm : {1, 2, 4, 8})
    for (int kc : {2, 64, 128, 256})
      for (int vg : {0, 1, 3}) {
        const bc::split_smem L = bc::split_smem_layout(gm, kc, 510, 256, vg);
        REQUIRE(L.q % 4 == 0);
        REQUIRE(L.kc >= L.q + kc * gm);
        REQUIRE(L.vc >= L.kc + 510);
        REQUIRE(L.w >= L.vc + 256);
        REQUIRE(L.rv >= L.w + gm * bc::decode_tile);
        REQUIRE(L.wr >= L.rv + vg * bc::decode_tile);
        REQUIRE(L.st >= L.wr + std::max(vg, 1) * bc::decode_tile * gm);
        REQUIRE(L.floats >= L.st + 3 * gm);
        for (int o : {L.kc, L.vc, L.w, L.rv, L.wr, L.st}) REQUIRE(o % 4 == 0);
        // the end-of-split part reduction reuses wr: parts * tpp * gm <= 128 * gm
        REQUIRE(std::max(vg, 1) * bc::decode_tile * gm >= bc::decode_threads * gm);
      }
  const bc::decode_workspace_layout w = bc::decode_workspace(17, 32, 128, 9);
  REQUIRE(w.ml >= 17u * 32u * 128u * 4u);
  REQUIRE(w.acc >= w.ml + 17u * 32u * 9u * 8u);
  REQUIRE(w.bytes >= w.acc + 17u * 32u * 9u * 128u * 4u);
  REQUIRE(w.ml % 256 == 0);
  REQUIRE(w.acc % 256 == 0);
}

namespace {

std::vector<method> methods_for_tests() {
  std::vector<method> m;
  method a;
  a.name = "gtq-mixed-1..8";
  a.keys = key_kind::mixed;
  a.value_bits = 3;
  m.push_back(a);
  method b;
  b.name = "tq2";
  b.keys = key_kind::uniform;
  b.key_bits = 2;
  b.value_bits = 2;
  m.push_back(b);
  method c;
  c.name = "tq3-normcorr-fp32";
  c.keys = key_kind::uniform;
  c.key_bits = 3;
  c.value_bits = 4;
  c.norm_correction = true;
  c.fp32_radius = true;
  c.pairing = bgtq::rope_pairing::half;
  m.push_back(c);
  return m;
}

}  // namespace

TEST_CASE("uploaded tables reproduce the host cache's byte layout", "[cuda][host]") {
  for (const method& m : methods_for_tests())
    for (int D : {64, 128, 96}) {
      shape s;
      s.layers = 2;
      s.kv_heads = 3;
      s.q_heads = 12;
      s.head_dim = D;
      s.max_pages = 5;
      s.page_tokens = 128;
      const auto c = make_cache(s, m, 3);
      const bc::cache_desc d = bc::describe(c);
      std::string msg;
      REQUIRE(bc::validate_desc(d, &msg) == bgtq::errc::ok);
      const bc::device_tables t = bc::build_tables(d);
      std::size_t pool = 0;
      for (int l = 0; l < s.layers; ++l)
        for (int h = 0; h < s.kv_heads; ++h) {
          const bc::head_meta& hm = t.heads[static_cast<std::size_t>(l * s.kv_heads + h)];
          INFO(m.name << " D = " << D << " layer " << l << " head " << h);
          REQUIRE(hm.offset == static_cast<std::size_t>(c.page_ptr(0, l, h) - c.page_ptr(0, 0, 0)));
          REQUIRE(hm.page_bytes == c.head_page_bytes(l, h));
          REQUIRE(hm.value_offset == c.value_offset(l, h));
          REQUIRE(hm.key_coords <= D);
          REQUIRE(hm.value_coords == D);
          // the overflow guard's key bound: the CPU cache's, to the bit
          REQUIRE(hm.key_bound == bgtq::gtq_pages::key_norm_bound(c.key(l, h)));
          REQUIRE(hm.key_bound > 0.0);
          pool += hm.page_bytes * static_cast<std::size_t>(s.max_pages);
          // rotation tables: fwd = P^T, bwd = P of the quantizer's own rotation
          const auto& g0 = c.key(l, h).codec.groups().front();
          const bc::group_meta& gm = t.groups[static_cast<std::size_t>(hm.key_first)];
          std::vector<float> x = normal_floats(static_cast<std::size_t>(gm.n), 9, 1), y(static_cast<std::size_t>(gm.n));
          g0.quantizer.rotation().apply(x.data(), y.data());
          for (int o = 0; o < gm.n; ++o) {
            const float yo = bc::rotated_coord(t.rot.data() + gm.rot, gm.n, o, [&](int i) { return x[static_cast<std::size_t>(i)]; });
            REQUIRE(std::fabs(yo - y[static_cast<std::size_t>(o)]) <= 1e-5f * (1.0f + std::fabs(y[static_cast<std::size_t>(o)])));
          }
          // rot_coords: each rotated coordinate's group, head dim and matrix column, read
          // against the description (not the group table); coordinates no group holds are 0
          REQUIRE(t.rot_coords.size() == static_cast<std::size_t>(s.layers * s.kv_heads * 2 * D));
          for (int part = 0; part < 2; ++part) {
            const std::size_t hi = static_cast<std::size_t>(l * s.kv_heads + h);
            const bc::codec_desc& cd = part == 0 ? d.keys[hi] : d.values[hi];
            const bc::rotation_coord* rc = t.rot_coords.data() + (hi * 2 + static_cast<std::size_t>(part)) * static_cast<std::size_t>(D);
            std::vector<int> seen(static_cast<std::size_t>(D), 0);
            for (const bc::group_desc& g : cd.groups) {
              const std::size_t n = static_cast<std::size_t>(g.dim);
              for (std::size_t o = 0; o < n; ++o) {
                const bc::rotation_coord& e = rc[static_cast<std::size_t>(g.coord_off) + o];
                INFO("part " << part << " coordinate " << g.coord_off + static_cast<int>(o));
                ++seen[static_cast<std::size_t>(g.coord_off) + o];
                REQUIRE(e.n() == g.dim);
                REQUIRE(e.first() == g.coord_off);
                REQUIRE(e.dim() == g.dims[o]);
                // keys: rotated_coord reads rot[col + j*n] = P[o][j]; values: P[j][o]
                for (std::size_t j = 0; j < n; ++j)
                  REQUIRE(t.rot[e.col + j * n] == (part == 0 ? g.matrix[o * n + j] : g.matrix[j * n + o]));
              }
            }
            for (int c = 0; c < D; ++c) {
              REQUIRE(seen[static_cast<std::size_t>(c)] <= 1);
              if (seen[static_cast<std::size_t>(c)] == 0) REQUIRE((rc[c].meta == 0 && rc[c].col == 0));
            }
          }
        }
      REQUIRE(t.pool_bytes == pool);
    }
}

TEST_CASE("validate_desc rejects malformed and unsupported descriptions", "[cuda][host]") {
  shape s;
  const auto c = make_cache(s, methods_for_tests()[0], 1);
  const bc::cache_desc good = bc::describe(c);
  REQUIRE(bc::validate_desc(good) == bgtq::errc::ok);
  std::string msg;
  bc::cache_desc d = good;
  d.head_dim = 512;
  REQUIRE(bc::validate_desc(d, &msg) == bgtq::errc::unsupported);
  REQUIRE(msg.find("head_dim") != std::string::npos);
  d = good;
  d.page_tokens = 96;
  REQUIRE(bc::validate_desc(d, &msg) == bgtq::errc::invalid_argument);
  d = good;
  d.keys[0].groups[1].dims[0] = 64;
  REQUIRE(bc::validate_desc(d, &msg) == bgtq::errc::invalid_argument);
  REQUIRE(msg.find("key group 1") != std::string::npos);
  d = good;
  d.values[1].groups[0].radii = d.values[1].bytes;
  REQUIRE(bc::validate_desc(d, &msg) == bgtq::errc::invalid_argument);
  d = good;
  d.keys.pop_back();
  REQUIRE(bc::validate_desc(d, &msg) == bgtq::errc::shape_mismatch);
  d = good;
  d.keys[0].groups.resize(17, d.keys[0].groups[0]);
  REQUIRE(bc::validate_desc(d, &msg) == bgtq::errc::unsupported);
}

namespace {

//! Encodes the L tokens of sequence `seq` (k, v: [L][Hkv][D] floats, what the CPU cache
//! was given) with the host model into `pool` at the CPU cache's slots, counting clamps
//! in `clamped`, and compares every page part with the CPU's.
code_diff model_encode_compare(const bgtq_cache<>& c, const bc::device_tables& t, std::vector<std::uint8_t>& pool, int seq,
                               int L, const float* k, const float* v, unsigned long long* clamped = nullptr) {
  const int P = c.config().page_tokens, Hkv = c.config().kv_heads, D = c.config().head_dim;
  const auto view = c.view(seq, 0);
  auto part_of = [&](int h, int page) {
    const bc::head_meta& hm = t.heads[static_cast<std::size_t>(h)];
    return pool.data() + hm.offset + static_cast<std::size_t>(page) * hm.page_bytes;
  };
  auto row = [&](const float* x, int i, int h) { return x + (static_cast<std::size_t>(i) * Hkv + h) * D; };
  for (int i = 0; i < L; ++i)
    for (int h = 0; h < Hkv; ++h) {
      const bc::head_meta& hm = t.heads[static_cast<std::size_t>(h)];
      std::uint8_t* part = part_of(h, view.pages[static_cast<std::size_t>(i / P)]);
      model_encode_row(t, hm, false, row(k, i, h), P, part, i % P, clamped);
      model_encode_row(t, hm, true, row(v, i, h), P, part, i % P, clamped);
    }
  code_diff total;
  for (int h = 0; h < Hkv; ++h)
    for (int pi = 0; pi * P < L; ++pi) {
      const int used = std::min(P, L - pi * P);
      std::vector<const float*> kr, vr;
      for (int tt = 0; tt < used; ++tt) {
        kr.push_back(row(k, pi * P + tt, h));
        vr.push_back(row(v, pi * P + tt, h));
      }
      const int page = view.pages[static_cast<std::size_t>(pi)];
      total += compare_page_part(c, 0, h, c.page_ptr(page, 0, h), part_of(h, page), used, kr, vr);
    }
  return total;
}

std::string describe(const code_diff& d) {
  return std::to_string(d.mismatches) + " of " + std::to_string(d.codes) + " codes differ (" +
         std::to_string(d.near_threshold) + " near a threshold), " + std::to_string(d.radius_far) + " radii far, " +
         std::to_string(d.other_bytes) + " other bytes; first: " + d.first;
}

}  // namespace

TEST_CASE("host model of encode_kernel writes the CPU encoder's bytes", "[cuda][host]") {
  for (const method& m : methods_for_tests())
    for (int D : {64, 128}) {
      shape s;
      s.kv_heads = 2;
      s.q_heads = 4;
      s.head_dim = D;
      s.max_pages = 8;
      auto c = make_cache(s, m, 21);
      const std::vector<int> lengths{97, 54};
      const filled_cache f = fill_cache(c, lengths, 22, bc::dtype::f16);
      const bc::device_tables t = bc::build_tables(bc::describe(c));
      std::vector<std::uint8_t> pool(t.pool_bytes, 0);
      code_diff total;
      for (std::size_t si = 0; si < lengths.size(); ++si)
        total += model_encode_compare(c, t, pool, f.seqs[si], lengths[si], f.k[si][0].data(), f.v[si][0].data());
      INFO(m.name << " D = " << D << ": " << describe(total));
      REQUIRE(total.ok());
      REQUIRE(total.near_threshold * 1000 <= total.codes);
#if defined(BGTQ_SIMD_AVX2)
      // Haar groups (every group of D = 64 with haar_max_dim 64) use the CPU's FMA order: exact
      if (D == 64) REQUIRE(total.mismatches == 0);
#endif
    }
}

TEST_CASE("host model of encode_kernel: norms above 2^100 or overflowing, tiny rows, clamped radii", "[cuda][host]") {
  // scale_extreme_rows: the CPU quantizes such rows from a power-of-two scaled copy
  // (tq_quantizer), the kernel must too (tq_norm_parts); without it the rotation of a
  // row of norm > FLT_MAX overflows and its codes are wrong.
  for (const method& m : methods_for_tests())
    for (int D : {64, 128})
      for (bc::dtype type : {bc::dtype::f32, bc::dtype::bf16}) {
        shape s;
        s.kv_heads = 2;
        s.q_heads = 4;
        s.head_dim = D;
        s.max_pages = 4;
        auto c = make_cache(s, m, 23);
        const int L = 70;
        const std::size_t row = static_cast<std::size_t>(s.kv_heads) * static_cast<std::size_t>(D);
        std::vector<float> k = normal_floats(L * row, 24, 1, 1.5f), v = normal_floats(L * row, 24, 2);
        scale_extreme_rows(k, row);
        scale_extreme_rows(v, row);
        round_to(k, type);
        round_to(v, type);
        const int seq = c.add_sequence();
        c.append(seq, 0, k.data(), v.data(), L);
        const bc::device_tables t = bc::build_tables(bc::describe(c));
        std::vector<std::uint8_t> pool(t.pool_bytes, 0);
        unsigned long long clamped = 0;
        const code_diff total = model_encode_compare(c, t, pool, seq, L, k.data(), v.data(), &clamped);
        INFO(m.name << " D = " << D << (type == bc::dtype::f32 ? " f32: " : " bf16: ") << describe(total));
        REQUIRE(total.ok());
        REQUIRE(total.near_threshold * 1000 <= total.codes);
        // every radius the CPU clamped, the model clamped, and there were some
        INFO("clamped: model " << clamped << ", cpu " << c.stats().clamped_radii);
        REQUIRE(clamped == c.stats().clamped_radii);
        REQUIRE(clamped > 0);
      }
}

TEST_CASE("host model of the decode kernels matches CPU decode_attention", "[cuda][host]") {
  struct cfg {
    int D, Hkv, G, sink, recent, splits;
    std::vector<int> lengths;
    int method;
  };
  const std::vector<cfg> cases = {
      {64, 2, 4, 0, 0, 0, {1, 54, 97, 1000}, 0},
      {128, 1, 8, 4, 16, 0, {5000}, 1},
      {64, 4, 1, 2, 8, 3, {97, 1, 1000, 54, 2}, 2},
      {128, 2, 4, 0, 32, 7, {1000, 300}, 0},
      {64, 1, 16, 1, 4, 0, {700}, 1},
  };
  const auto methods = methods_for_tests();
  for (const cfg& k : cases) {
    shape s;
    s.head_dim = k.D;
    s.kv_heads = k.Hkv;
    s.q_heads = k.Hkv * k.G;
    s.sink = k.sink;
    s.recent = k.recent;
    s.max_pages = 0;
    for (int L : k.lengths) s.max_pages += (L + s.page_tokens - 1) / s.page_tokens;
    const method& m = methods[static_cast<std::size_t>(k.method)];
    auto c = make_cache(s, m, 40);
    const filled_cache f = fill_cache(c, k.lengths, 41);
    const int B = static_cast<int>(k.lengths.size());
    std::vector<float> q = normal_floats(static_cast<std::size_t>(B) * s.q_heads * k.D, 42, 0, 0.7f);
    std::vector<float> want(q.size()), got(q.size(), NAN);
    bgtq::attention_workspace ws(c);
    bgtq::decode_attention(c, 0, f.seqs, q.data(), want.data(), ws);
    const bc::batch_tables bt = bc::gather_batch(c, 0, f.seqs);
    const bc::cache_desc d = bc::describe(c);
    const bc::device_tables t = bc::build_tables(d);
    model_decode_in in;
    in.batch = B;
    in.q = q.data();
    in.page_table = bt.page_table.data();
    in.max_pages_per_seq = bt.max_pages_per_seq;
    in.quantized = bt.quantized.data();
    in.max_quantized = bt.max_quantized;
    in.window_k = bt.window_k.data();
    in.window_v = bt.window_v.data();
    in.window_len = bt.window_len.data();
    in.window_cap = bt.window_cap;
    in.splits = k.splits;
    model_decode(d, t, c.page_ptr(0, 0, 0), in, got.data());
    INFO(m.name << " D = " << k.D << " Hkv = " << k.Hkv << " G = " << k.G << " window " << k.sink << "+" << k.recent);
    REQUIRE(rel_max_error(got, want) <= 1e-4);
  }
}
