#pragma once
//! @file core/prefetch.hpp
//! Software prefetch of the next page while the current one is scored, spread over the
//! scoring loop. All at once, the ~100 cache lines of a packed page (512 of an fp16 one)
//! fill the core's line-fill buffers and the prefetch instructions themselves stall the
//! pipeline until memory answers (perf put ~14% of a 16K-token decode step on them); one
//! line per iteration of a kernel's coordinate loop lets them drain behind the arithmetic.

#include <cstddef>

#include "../config.hpp"

namespace bgtq {

//! A byte range to prefetch a line at a time: next() issues one line (a no-op once the
//! range is covered), flush() the rest. Only a hint: it never changes a result.
class prefetch_stream {
 public:
  //! The range to fetch next (replaces any rest of the previous one).
  void reset(const void* p, std::size_t bytes) noexcept {
    base_ = static_cast<const char*>(p);
    off_ = 0;
    bytes_ = bytes;
  }
  BGTQ_FORCEINLINE void next() noexcept {
    if (off_ < bytes_) {
      fetch(base_ + off_);
      off_ += line;
    }
  }
  void flush() noexcept {
    for (; off_ < bytes_; off_ += line) fetch(base_ + off_);
  }
  //! A stream with nothing to fetch, for callers that do not prefetch (never written).
  static prefetch_stream& idle() noexcept {
    static prefetch_stream s;
    return s;
  }

 private:
  static constexpr std::size_t line = 64;
  BGTQ_FORCEINLINE static void fetch(const char* p) noexcept {
#if defined(__GNUC__) || defined(__clang__)
    __builtin_prefetch(p, 0, 3);
#else
    (void)p;
#endif
  }
  const char* base_ = nullptr;
  std::size_t off_ = 0;  // next line to fetch, bytes from base_ (only addresses inside the range are formed)
  std::size_t bytes_ = 0;
};

}  // namespace bgtq
