#pragma once
//! @file core/utf8.hpp
//! UTF-8 validation for the text bgtq writes (JSON strings, SVG text): file names and
//! titles come from the command line as raw bytes, and a byte that is not part of a valid
//! UTF-8 sequence would make the whole JSON or SVG file unreadable to a strict parser.

#include <cstddef>
#include <string>
#include <string_view>

namespace bgtq::detail {

//! Length (1-4) of the valid UTF-8 sequence (RFC 3629: no overlong forms, no surrogates,
//! nothing above U+10FFFF) that starts at p[0], or 0 if none does. n: bytes left (>= 1).
inline int utf8_sequence_length(const unsigned char* p, std::size_t n) noexcept {
  const unsigned char c = p[0];
  if (c < 0x80) return 1;
  int len = 0;
  unsigned char lo = 0x80, hi = 0xBF;  // the allowed range of the second byte
  if (c >= 0xC2 && c <= 0xDF) {
    len = 2;
  } else if (c >= 0xE0 && c <= 0xEF) {
    len = 3;
    if (c == 0xE0) lo = 0xA0;  // overlong below U+0800
    if (c == 0xED) hi = 0x9F;  // U+D800..U+DFFF: surrogates
  } else if (c >= 0xF0 && c <= 0xF4) {
    len = 4;
    if (c == 0xF0) lo = 0x90;  // overlong below U+10000
    if (c == 0xF4) hi = 0x8F;  // above U+10FFFF
  } else {
    return 0;  // a continuation byte, C0/C1 (overlong) or F5..FF
  }
  if (n < static_cast<std::size_t>(len) || p[1] < lo || p[1] > hi) return 0;
  for (int i = 2; i < len; ++i)
    if (p[i] < 0x80 || p[i] > 0xBF) return 0;
  return len;
}

//! U+FFFD REPLACEMENT CHARACTER, written for each byte that starts no valid sequence.
inline constexpr const char* utf8_replacement = "\xEF\xBF\xBD";

//! `s` as valid UTF-8: each byte that starts no valid sequence becomes U+FFFD; with
//! `drop_noncharacters`, U+FFFE and U+FFFF (valid UTF-8 that XML forbids) are left out.
//! ASCII is copied as is, for the caller's own escaping.
inline std::string utf8_sanitized(std::string_view s, bool drop_noncharacters = false) {
  std::string out;
  out.reserve(s.size());
  const auto* b = reinterpret_cast<const unsigned char*>(s.data());
  for (std::size_t i = 0; i < s.size();) {
    const int len = utf8_sequence_length(b + i, s.size() - i);
    if (len == 0) {
      out += utf8_replacement;
      ++i;
      continue;
    }
    const bool nonchar = len == 3 && b[i] == 0xEF && b[i + 1] == 0xBF && b[i + 2] >= 0xBE;
    if (!(drop_noncharacters && nonchar)) out.append(s.data() + i, static_cast<std::size_t>(len));
    i += static_cast<std::size_t>(len);
  }
  return out;
}

}  // namespace bgtq::detail
