#include <catch2/catch.hpp>

#include <bgtq/io/checksum.hpp>

#include <cstdint>
#include <string>
#include <vector>

TEST_CASE("CRC-32C known answers (catalogue check value and RFC 3720 B.4 vectors)", "[io][checksum]") {
  const std::string check = "123456789";
  CHECK(bgtq::crc32c(check.data(), check.size()) == 0xE3069283u);
  CHECK(bgtq::crc32c(nullptr, 0) == 0u);
  std::vector<unsigned char> b(32, 0x00);
  CHECK(bgtq::crc32c(b.data(), b.size()) == 0x8A9136AAu);
  b.assign(32, 0xFF);
  CHECK(bgtq::crc32c(b.data(), b.size()) == 0x62A8AB43u);
  for (int i = 0; i < 32; ++i) b[static_cast<std::size_t>(i)] = static_cast<unsigned char>(i);
  CHECK(bgtq::crc32c(b.data(), b.size()) == 0x46DD794Eu);
  for (int i = 0; i < 32; ++i) b[static_cast<std::size_t>(i)] = static_cast<unsigned char>(31 - i);
  CHECK(bgtq::crc32c(b.data(), b.size()) == 0x113FDB5Cu);
}

TEST_CASE("CRC-32C is incremental and sees every single-byte change", "[io][checksum]") {
  std::vector<unsigned char> m(257);
  for (std::size_t i = 0; i < m.size(); ++i) m[i] = static_cast<unsigned char>(i * 131 + 7);
  const std::uint32_t whole = bgtq::crc32c(m.data(), m.size());
  for (std::size_t cut = 0; cut <= m.size(); cut += 13)
    CHECK(bgtq::crc32c_update(bgtq::crc32c(m.data(), cut), m.data() + cut, m.size() - cut) == whole);
  for (std::size_t i = 0; i < m.size(); ++i) {
    for (unsigned x : {0x01u, 0x80u, 0xFFu, 0x5Au}) {
      m[i] ^= static_cast<unsigned char>(x);
      REQUIRE(bgtq::crc32c(m.data(), m.size()) != whole);
      m[i] ^= static_cast<unsigned char>(x);
    }
  }
}
