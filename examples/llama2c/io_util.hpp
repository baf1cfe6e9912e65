#pragma once
//! @file io_util.hpp
//! Internal helper of the llama2c example library: bounded file reads and memory checks
//! with clear errors (docs/errors.md: sizes no machine holds are errors, never std::bad_alloc).

#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <limits>
#include <new>
#include <string>
#include <vector>

#include <bgtq/core/error.hpp>

namespace bgtq::llama2c::detail {

//! A file read from its start in stages, never more than asked for: a reader takes what
//! a header says it needs (plus a byte, to see whether anything trails), so that a stream
//! that never ends (`/dev/zero`, a FIFO) fails on its first bytes instead of filling memory.
class bounded_reader {
 public:
  //! @throws bgtq::error(io_error) if `path` cannot be opened (`what`, e.g. "checkpoint",
  //!         labels messages).
  bounded_reader(const std::string& path, const char* what) : path_(path), what_(what) {
    f_ = std::fopen(path.c_str(), "rb");
    if (!f_) fail(errc::io_error, std::string("cannot open ") + what + " '" + path + "'");
  }
  ~bounded_reader() {
    if (f_) std::fclose(f_);
  }
  bounded_reader(const bounded_reader&) = delete;
  bounded_reader& operator=(const bounded_reader&) = delete;

  //! Reads until bytes() holds `n` bytes or the file ends; returns whether it holds `n`.
  //! @throws bgtq::error(io_error) if a read fails, (capacity_exhausted) if the bytes
  //!         cannot be held in memory.
  bool fill_to(std::size_t n) {
    unsigned char buf[1 << 16];
    try {
      while (bytes_.size() < n && !ended_) {
        const std::size_t step = std::min<std::size_t>(n - bytes_.size(), sizeof buf);
        const std::size_t got = std::fread(buf, 1, step, f_);
        bytes_.insert(bytes_.end(), buf, buf + got);
        if (std::ferror(f_)) fail(errc::io_error, std::string("error reading ") + what_ + " '" + path_ + "'");
        ended_ = got < step;
      }
    } catch (const std::bad_alloc&) {
      fail(errc::capacity_exhausted, std::string("reading ") + what_ + " '" + path_ + "': cannot allocate " +
                                         std::to_string(bytes_.size()) + "+ bytes to hold it");
    }
    return bytes_.size() >= n;
  }
  const std::vector<unsigned char>& bytes() const { return bytes_; }

 private:
  std::string path_;
  const char* what_;
  std::FILE* f_ = nullptr;
  std::vector<unsigned char> bytes_;
  bool ended_ = false;
};

//! The most memory this process can use: the machine's physical memory, or the address
//! space limit (`ulimit -v`) when that is lower.
inline std::uint64_t memory_limit() {
  std::uint64_t lim = std::numeric_limits<std::uint64_t>::max();
  const long pages = ::sysconf(_SC_PHYS_PAGES), page = ::sysconf(_SC_PAGE_SIZE);
  if (pages > 0 && page > 0) lim = static_cast<std::uint64_t>(pages) * static_cast<std::uint64_t>(page);
  struct rlimit rl {};
  if (::getrlimit(RLIMIT_AS, &rl) == 0 && rl.rlim_cur != RLIM_INFINITY)
    lim = std::min<std::uint64_t>(lim, static_cast<std::uint64_t>(rl.rlim_cur));
  return lim;
}

//! "68719476736 bytes (64.0 GiB)".
inline std::string bytes_text(std::uint64_t b) {
  char buf[64];
  std::snprintf(buf, sizeof buf, " (%.1f GiB)", static_cast<double>(b) / (1024.0 * 1024.0 * 1024.0));
  return std::to_string(b) + " bytes" + buf;
}

//! Refuses an allocation of `bytes` above `limit` (0: memory_limit()) before it is tried.
//! `what` says what needs it and how the size is made up.
//! @throws bgtq::error(capacity_exhausted) naming the size, its parts and the limit.
inline void check_allocation(std::uint64_t bytes, const std::string& what, std::uint64_t limit = 0) {
  const std::uint64_t lim = limit ? limit : memory_limit();
  if (bytes > lim)
    fail(errc::capacity_exhausted, what + " needs " + bytes_text(bytes) + ", more than the memory limit of " +
                                       bytes_text(lim) + (limit ? "" : " (physical memory or ulimit -v)"));
}

}  // namespace bgtq::llama2c::detail
