#pragma once
//! @file error.hpp
//! The library's single error type. Host code throws `bgtq::error`; every error
//! carries a machine-readable `errc` and a message that names the problem (shape,
//! value, file offset). Hot paths that must not throw return an `errc` instead.

#include <new>
#include <stdexcept>
#include <cstddef>
#include <string>

namespace bgtq {

//! Error categories. `ok` is zero so an `errc` can be tested like a status code.
enum class errc : int {
  ok = 0,
  invalid_argument,     //!< a parameter is out of its documented range
  shape_mismatch,       //!< array shapes disagree with each other or with a plan
  non_finite,           //!< NaN or Inf where finite values are required
  infeasible,           //!< a bit budget that cannot be met
  io_error,             //!< a file could not be opened, read or written
  format_error,         //!< a file is malformed (bad magic, header, size)
  checksum_mismatch,    //!< stored checksum disagrees with the content
  version_unsupported,  //!< a file from a newer format version
  capacity_exhausted,   //!< the page pool has no room left
  not_found,            //!< an id (sequence, layer, head) that does not exist
  unsupported,          //!< a valid request this build cannot serve
  device_error,         //!< a CUDA call failed
};

//! Short stable name of an error category, e.g. "shape_mismatch".
inline const char* to_string(errc e) noexcept {
  switch (e) {
    case errc::ok: return "ok";
    case errc::invalid_argument: return "invalid_argument";
    case errc::shape_mismatch: return "shape_mismatch";
    case errc::non_finite: return "non_finite";
    case errc::infeasible: return "infeasible";
    case errc::io_error: return "io_error";
    case errc::format_error: return "format_error";
    case errc::checksum_mismatch: return "checksum_mismatch";
    case errc::version_unsupported: return "version_unsupported";
    case errc::capacity_exhausted: return "capacity_exhausted";
    case errc::not_found: return "not_found";
    case errc::unsupported: return "unsupported";
    case errc::device_error: return "device_error";
  }
  return "unknown";
}

//! Exception thrown by host-side library code. `what()` is the full message.
class error : public std::runtime_error {
 public:
  error(errc code, const std::string& message) : std::runtime_error(message), code_(code) {}
  //! The error category.
  errc code() const noexcept { return code_; }

 private:
  errc code_;
};

//! Throws `bgtq::error(code, message)`.
[[noreturn]] inline void fail(errc code, const std::string& message) { throw error(code, message); }

//! f(), with std::bad_alloc reported as bgtq::error(capacity_exhausted) naming `what`: a
//! size within the limits that the machine cannot hold is an error of the library's own
//! kind (docs/errors.md, section 1), not an exception of another type.
template <class F>
auto or_capacity_exhausted(const std::string& what, F&& f) -> decltype(f()) {
  try {
    return f();
  } catch (const std::bad_alloc&) {
    fail(errc::capacity_exhausted, what + ": out of memory");
  }
}

namespace detail {

//! Renders untrusted bytes for an error message: printable ASCII as is, the rest as \xNN,
//! at most `max` input bytes (then "...").
inline std::string printable_bytes(const unsigned char* p, std::size_t n, std::size_t max = 48) {
  static const char hex[] = "0123456789abcdef";
  std::string s;
  const std::size_t m = n < max ? n : max;
  for (std::size_t i = 0; i < m; ++i) {
    const unsigned char c = p[i];
    if (c >= 0x20 && c < 0x7f && c != '\\') {
      s += static_cast<char>(c);
    } else {
      s += "\\x";
      s += hex[c >> 4];
      s += hex[c & 15];
    }
  }
  if (n > m) s += "...";
  return s;
}

}  // namespace detail

}  // namespace bgtq

//! Throws `bgtq::error(code, msg)` unless `cond` holds. `msg` may be any expression
//! convertible to std::string; it is evaluated only on failure.
#define BGTQ_REQUIRE(cond, code, msg)            \
  do {                                           \
    if (!(cond)) ::bgtq::fail((code), (msg));    \
  } while (0)
