// The AVX2 key pass's folded lookups (gtq_pages::score_group_codes): every codebook kind
// is antisymmetric bit for bit, so 4-6-bit groups look up half the table; the folded
// centroids and the scores of whole pages must be bit for bit those of the full lookup.
// The lookup and page cases exist only in AVX2-only builds, the only ones with the folded
// path: test_attention_avx2 on AVX-512 machines, test_attention itself on a CPU without
// AVX-512 (where the _avx2 copy is not built: it would be the same program).
#include <catch2/catch.hpp>

#include <bgtq/cache/gtq_pages.hpp>
#include <bgtq/cache/page_layout.hpp>
#include <bgtq/core/rng.hpp>
#include <bgtq/plan/plan.hpp>

#include <cstring>
#include <vector>

TEST_CASE("every codebook kind and width is antisymmetric bit for bit", "[attention][folded]") {
  for (const auto kind : {bgtq::codebook_kind::sphere, bgtq::codebook_kind::gaussian, bgtq::codebook_kind::uniform})
    for (const int dim : {2, 8, 64, 128})
      for (int bits = 1; bits <= 8; ++bits) {
        bgtq::tq_params p;
        p.dim = dim;
        p.bits = bits;
        p.codebook = kind;
        INFO("kind " << bgtq::to_string(kind) << " dim " << dim << " bits " << bits);
        CHECK(bgtq::gtq_pages::antisymmetric_codebook(bgtq::tq_quantizer(p)));
      }
  bgtq::tq_params none;
  none.dim = 8;
  none.bits = 0;
  CHECK_FALSE(bgtq::gtq_pages::antisymmetric_codebook(bgtq::tq_quantizer(none)));
}

#if defined(BGTQ_SIMD_AVX2_ONLY)
namespace {
template <int B>
void check_folded_lookup(bgtq::counter_rng& r) {
  constexpr int K = 1 << B;
  alignas(32) float table[256] = {};
  for (int i = 0; i < K / 2; ++i) {
    table[i] = -static_cast<float>(1.0 + r.uniform()) * static_cast<float>(K / 2 - i);
    table[K - 1 - i] = -table[i];
  }
  for (int base = 0; base < K; base += 32) {
    alignas(32) std::uint8_t codes[32], folded[32];
    for (int l = 0; l < 32; ++l) codes[l] = static_cast<std::uint8_t>((base + l * 7) % K);
    _mm256_store_si256(reinterpret_cast<__m256i*>(folded),
                       bgtq::simd::fold_codes32<B>(_mm256_load_si256(reinterpret_cast<const __m256i*>(codes))));
    for (int half = 0; half < 2; ++half) {
      alignas(64) float got[16], full[16];
      bgtq::simd::store(got, bgtq::simd::lookup_folded<B>(table, bgtq::simd::load_s8(folded + 16 * half)));
      bgtq::simd::store(full, bgtq::simd::lookup<B>(table, bgtq::simd::load_u8(codes + 16 * half)));
      for (int l = 0; l < 16; ++l) {
        const int c = codes[16 * half + l];
        INFO("bits " << B << " code " << c);
        CHECK(std::memcmp(&got[l], &table[c], sizeof(float)) == 0);
        CHECK(std::memcmp(&full[l], &table[c], sizeof(float)) == 0);
      }
    }
  }
}
}  // namespace

TEST_CASE("folded lookups give the full table's centroids for every code", "[attention][folded]") {
  bgtq::counter_rng r(97);
  check_folded_lookup<4>(r);
  check_folded_lookup<5>(r);
  check_folded_lookup<6>(r);
  check_folded_lookup<7>(r);
}

TEST_CASE("AVX2 page scores with folded 4-6-bit groups equal the full lookup's bit for bit", "[attention][folded]") {
  using layout = bgtq::bit_plane_layout;
  constexpr int D = 64;
  // widths per RoPE block: groups of 4, 5 and 6 bits (folded) beside 1-3 and 7-8 (not)
  std::vector<int> w(D / 2);
  for (int b = 0; b < D / 2; ++b) w[static_cast<std::size_t>(b)] = 1 + (b * 5) % 8;
  for (const auto kind : {bgtq::codebook_kind::sphere, bgtq::codebook_kind::uniform})
    for (const int P : {64, 128})
      for (const int nvalid : {1, 40, 64, P})
        for (const int G : {1, 3, 4}) {
          INFO("kind " << bgtq::to_string(kind) << " P " << P << " nvalid " << nvalid << " G " << G);
          const bgtq::key_codec_options o{kind, bgtq::radius_format::fp16, false};
          const bgtq::rope_layout rope(D, bgtq::rope_pairing::half);
          auto folded = bgtq::gtq_pages::make(bgtq::block_gtq_codec(bgtq::make_head_plan(w, 11, 64), rope, o));
          int folded_groups = 0;
          for (std::size_t gi = 0; gi < folded.codec.groups().size(); ++gi) {
            const int b = folded.codec.groups()[gi].quantizer.bits();
            REQUIRE(folded.antisymmetric.at(gi) == 1);
            folded_groups += b >= 4 && b <= 6;
          }
          REQUIRE(folded_groups == 3);
          const std::size_t bytes = bgtq::gtq_pages::configure<layout>(folded, P);
          auto full = folded;
          full.antisymmetric.assign(full.antisymmetric.size(), 0);
          bgtq::counter_rng r(static_cast<std::uint64_t>(1000 + P + nvalid + G));
          std::vector<float> x(static_cast<std::size_t>(nvalid) * D), q(static_cast<std::size_t>(G) * D);
          for (float& v : x) v = static_cast<float>(r.normal());
          for (float& v : q) v = static_cast<float>(r.normal());
          std::vector<std::uint8_t> page(bytes, 0);
          bgtq::gtq_pages::encode_block<layout>(folded, x.data(), D, nvalid, page.data(), 0, nullptr);
          std::vector<float> qbuf(bgtq::gtq_pages::query_floats(folded, G));
          bgtq::gtq_pages::prepare_query(folded, q.data(), G, qbuf.data());
          std::vector<float> s1(static_cast<std::size_t>(G) * P, 1.0f), s2(s1.size(), 2.0f);
          bgtq::gtq_pages::score_page<layout>(folded, qbuf.data(), G, page.data(), nvalid, s1.data());
          bgtq::gtq_pages::score_page<layout>(full, qbuf.data(), G, page.data(), nvalid, s2.data());
          for (int h = 0; h < G; ++h)
            for (int t = 0; t < nvalid; ++t) {
              const std::size_t i = static_cast<std::size_t>(h) * P + static_cast<std::size_t>(t);
              INFO("head " << h << " token " << t << ": " << s1[i] << " vs " << s2[i]);
              CHECK(std::memcmp(&s1[i], &s2[i], sizeof(float)) == 0);
            }
        }
}
#endif
