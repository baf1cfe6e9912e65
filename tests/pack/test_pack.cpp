#include <catch2/catch.hpp>

#include <bgtq/core/rng.hpp>
#include <bgtq/pack/pack.hpp>

#include <vector>

TEMPLATE_TEST_CASE("packing layouts round-trip every code value at every width", "[pack]", bgtq::bit_tight,
                   bgtq::word_aligned) {
  for (int b = 1; b <= 8; ++b) {
    for (std::size_t n : {1u, 2u, 3u, 7u, 8u, 9u, 10u, 11u, 31u, 32u, 33u, 64u, 127u, 256u}) {
      // exhaustive over values: code j = (j * 37 + b) mod 2^b cycles through all values
      std::vector<std::uint8_t> codes(n), back(n);
      for (std::size_t j = 0; j < n; ++j) codes[j] = static_cast<std::uint8_t>((j * 37 + b) & ((1u << b) - 1));
      std::vector<std::uint8_t> buf(TestType::bytes(n, b) + 4, 0xA5);
      TestType::pack(codes.data(), n, b, buf.data());
      TestType::unpack(buf.data(), n, b, back.data());
      INFO("b = " << b << " n = " << n);
      REQUIRE(back == codes);
      for (std::size_t j = 0; j < n; ++j) REQUIRE(TestType::get(buf.data(), j, b) == codes[j]);
      // nothing written past bytes(n, b)
      for (std::size_t k = TestType::bytes(n, b); k < buf.size(); ++k) REQUIRE(buf[k] == 0xA5);
    }
  }
}

TEST_CASE("bit_tight takes exactly ceil(n*b/8) bytes", "[pack]") {
  REQUIRE(bgtq::bit_tight::bytes(128, 3) == 48);
  REQUIRE(bgtq::bit_tight::bytes(3, 3) == 2);
  REQUIRE(bgtq::bit_tight::bytes(1, 1) == 1);
  REQUIRE(bgtq::bit_tight::bytes(0, 5) == 0);
  for (int b = 1; b <= 8; ++b)
    for (std::size_t n = 0; n < 100; ++n) REQUIRE(bgtq::bit_tight::bytes(n, b) == (n * b + 7) / 8);
  REQUIRE(bgtq::word_aligned::bytes(128, 3) == 52);  // 13 words of 10 codes
}

TEST_CASE("bit_tight packs exhaustively at every bit offset without touching neighbours", "[pack]") {
  bgtq::counter_rng rng(99);
  for (int b = 1; b <= 8; ++b) {
    const std::uint32_t vmax = (1u << b);
    for (std::size_t off = 0; off < 16; ++off) {
      // every code value at this offset, single code
      for (std::uint32_t v = 0; v < vmax; ++v) {
        std::uint8_t buf[4] = {0xFF, 0xFF, 0xFF, 0xFF};
        std::uint8_t code = static_cast<std::uint8_t>(v);
        bgtq::bit_tight::pack(&code, 1, b, buf, off);
        REQUIRE(bgtq::bit_tight::get(buf, 0, b, off) == v);
        // all other bits are still 1
        for (std::size_t bit = 0; bit < 32; ++bit) {
          if (bit >= off && bit < off + static_cast<std::size_t>(b)) continue;
          REQUIRE(((buf[bit / 8] >> (bit % 8)) & 1u) == 1u);
        }
      }
      // a random run of codes at this offset
      const std::size_t n = 1 + rng.below(70);
      std::vector<std::uint8_t> codes(n), back(n);
      for (auto& c : codes) c = static_cast<std::uint8_t>(rng.below(vmax));
      std::vector<std::uint8_t> buf(bgtq::bit_tight::bytes(n, b) + 3, 0);
      bgtq::bit_tight::pack(codes.data(), n, b, buf.data(), off);
      bgtq::bit_tight::unpack(buf.data(), n, b, back.data(), off);
      REQUIRE(back == codes);
    }
  }
}

TEST_CASE("all-zero and all-max codes pack to the expected bytes", "[pack]") {
  for (int b = 1; b <= 8; ++b) {
    const std::size_t n = 64;
    std::vector<std::uint8_t> zeros(n, 0), maxes(n, static_cast<std::uint8_t>((1u << b) - 1));
    std::vector<std::uint8_t> buf(bgtq::bit_tight::bytes(n, b));
    bgtq::bit_tight::pack(zeros.data(), n, b, buf.data());
    for (auto x : buf) REQUIRE(x == 0);
    bgtq::bit_tight::pack(maxes.data(), n, b, buf.data());
    for (auto x : buf) REQUIRE(x == 0xFF);  // 64*b bits fill whole bytes
  }
}

TEST_CASE("word_aligned puts code j at bit (j % cpw) * b of word j / cpw, unused bits zero, as documented", "[pack]") {
  // The round trip alone cannot see the order of codes inside a word (pack and get could
  // both reverse it): pin the bytes. 3 bits: 10 codes per word, bits 30-31 unused.
  const std::uint8_t c3[12] = {1, 2, 3, 4, 5, 6, 7, 0, 1, 2, 7, 5};
  std::vector<std::uint8_t> buf(bgtq::word_aligned::bytes(12, 3), 0xA5);
  REQUIRE(buf.size() == 8);
  bgtq::word_aligned::pack(c3, 12, 3, buf.data());
  std::uint32_t w0 = 0, w1 = 0;
  for (int j = 0; j < 10; ++j) w0 |= static_cast<std::uint32_t>(c3[j]) << (3 * j);
  w1 = 7u | (5u << 3);  // codes 10, 11; the rest of the last word is zero
  for (int k = 0; k < 4; ++k) {
    INFO("byte " << k);
    CHECK(buf[static_cast<std::size_t>(k)] == static_cast<std::uint8_t>(w0 >> (8 * k)));  // little-endian words
    CHECK(buf[static_cast<std::size_t>(4 + k)] == static_cast<std::uint8_t>(w1 >> (8 * k)));
  }
  // equal to bit_tight for b in {1, 2, 4, 8} when n fills whole words
  for (int b : {1, 2, 4, 8}) {
    const std::size_t n = 3 * static_cast<std::size_t>(bgtq::word_aligned::codes_per_word(b));
    std::vector<std::uint8_t> codes(n);
    for (std::size_t j = 0; j < n; ++j) codes[j] = static_cast<std::uint8_t>((j * 37 + 5) & ((1u << b) - 1));
    std::vector<std::uint8_t> a(bgtq::word_aligned::bytes(n, b)), t(bgtq::bit_tight::bytes(n, b));
    REQUIRE(a.size() == t.size());
    bgtq::word_aligned::pack(codes.data(), n, b, a.data());
    bgtq::bit_tight::pack(codes.data(), n, b, t.data());
    INFO("b = " << b);
    CHECK(a == t);
  }
}
