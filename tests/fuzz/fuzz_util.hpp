#pragma once
//! @file tests/fuzz/fuzz_util.hpp
//! Helpers shared by the fuzz targets (tests/fuzz/target_*.hpp). A target is one inline
//! function `int <name>_one(const std::uint8_t* data, std::size_t size)` that must never
//! crash, read or write out of bounds, hit undefined behaviour, or throw anything but
//! bgtq::error for any input. The same function runs under libFuzzer (fuzz_main.cpp,
//! `make fuzz`) and in the normal test suite (test_replay.cpp replays the seed corpora
//! and every crash found so far, tests/fuzz/regressions/<name>/).

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>

namespace bgtq_fuzz {

//! Reads configuration bytes from the front of a fuzz input; past the end it yields 0.
class byte_reader {
 public:
  byte_reader(const std::uint8_t* d, std::size_t n) : d_(d), n_(n) {}
  std::uint8_t u8() { return pos_ < n_ ? d_[pos_++] : 0; }
  std::uint16_t u16() {
    const std::uint16_t lo = u8();
    return static_cast<std::uint16_t>(lo | (u8() << 8));
  }
  std::uint32_t u32() {
    const std::uint32_t lo = u16();
    return lo | (static_cast<std::uint32_t>(u16()) << 16);
  }
  //! The bytes not consumed yet.
  const std::uint8_t* rest() const { return d_ + (pos_ < n_ ? pos_ : n_); }
  std::size_t rest_size() const { return pos_ < n_ ? n_ - pos_ : 0; }

 private:
  const std::uint8_t* d_;
  std::size_t n_;
  std::size_t pos_ = 0;
};

//! Fills dst[0, n) by repeating src[0, m) (zeros if m == 0).
inline void tile(std::uint8_t* dst, std::size_t n, const std::uint8_t* src, std::size_t m) {
  if (m == 0) {
    if (n) std::memset(dst, 0, n);
    return;
  }
  for (std::size_t i = 0; i < n; i += m) std::memcpy(dst + i, src, n - i < m ? n - i : m);
}

//! A broken invariant that is not a memory error (e.g. a parse that does not round-trip):
//! prints the reason and aborts, so libFuzzer records the input as a crash and the
//! replay test fails.
[[noreturn]] inline void invariant_failed(const char* target, const char* what) {
  std::fprintf(stderr, "bgtq fuzz target %s: invariant violated: %s\n", target, what);
  std::abort();
}

}  // namespace bgtq_fuzz

#define BGTQ_FUZZ_CHECK(target, cond) \
  do {                                \
    if (!(cond)) ::bgtq_fuzz::invariant_failed(target, #cond); \
  } while (0)
