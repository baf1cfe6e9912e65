#pragma once
//! @file io/npy.hpp
//! NumPy `.npy` files (format versions 1.0, 2.0 and 3.0) holding little-endian float32
//! (``'<f4'``) or float16 (``'<f2'``) arrays in C order: the activation files of blockgtq.
//!
//! File layout (see docs/formats.md):
//! @code
//! offset 0   6 bytes  magic "\x93NUMPY"
//! offset 6   u8 major, u8 minor        (1.0, 2.0 or 3.0)
//! offset 8   u16 LE (v1) or u32 LE (v2, v3) header length H
//! offset 10 or 12: H bytes, a Python dict literal (latin1 in v1/v2, UTF-8 in v3)
//!            {'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }
//!            padded with spaces and ended by '\n' so that the data starts at a
//!            multiple of 64 bytes
//! then       prod(shape) * itemsize bytes of data, C order, little-endian; nothing after
//! @endcode
//!
//! The reader is strict and defensive: it walks the input with an explicit cursor and a
//! bounds check before every access, never reads past the buffer, checks the declared
//! array size against the bytes actually present before it allocates, and names the
//! file, the problem and (where it has one) the byte offset in every error. The writer
//! produces byte for byte what NumPy >= 1.24 `np.save` writes for the same array.

#include <bit>
#include <cerrno>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>
#include <ostream>
#include <string>
#include <system_error>
#include <utility>
#include <vector>

#include "../core/error.hpp"
#include "../core/half.hpp"
#include "atomic_file.hpp"

namespace bgtq {

//! Element type stored in a .npy file. Values are part of the public API: never renumber.
enum class npy_dtype : unsigned char {
  f32 = 0,  //!< IEEE binary32, descr '<f4'
  f16 = 1,  //!< IEEE binary16, descr '<f2'
};

//! "f32" or "f16".
inline const char* to_string(npy_dtype d) noexcept { return d == npy_dtype::f16 ? "f16" : "f32"; }
//! Bytes of one stored element (4 or 2).
inline constexpr std::size_t npy_itemsize(npy_dtype d) noexcept { return d == npy_dtype::f16 ? 2 : 4; }
//! NumPy descr string of a dtype ("<f4" or "<f2").
inline const char* npy_descr(npy_dtype d) noexcept { return d == npy_dtype::f16 ? "<f2" : "<f4"; }

//! A dense C-order array read from a .npy file, converted to float32.
struct npy_array {
  std::vector<std::size_t> shape;    //!< C order (last index fastest); empty for a 0-d array
  npy_dtype dtype = npy_dtype::f32;  //!< dtype stored in the file
  std::vector<float> data;           //!< prod(shape) values, converted to float32 exactly

  //! Number of elements: product of shape (1 for a 0-d array).
  std::size_t size() const noexcept {
    std::size_t n = 1;
    for (std::size_t s : shape) n *= s;
    return n;
  }
};

namespace detail {

inline constexpr unsigned char npy_magic[6] = {0x93, 'N', 'U', 'M', 'P', 'Y'};
//! Alignment of the data start that NumPy (and write_npy) pads the header to.
inline constexpr std::size_t npy_align = 64;
//! NumPy's GROWTH_AXIS_MAX_DIGITS: spare spaces reserved so the first dimension can grow
//! in place; np.save (NumPy >= 1.24) appends 21 - len(str(shape[0])) spaces to the dict.
inline constexpr std::size_t npy_growth_digits = 21;
//! Largest rank accepted by the reader (NumPy 2 allows 64).
inline constexpr std::size_t npy_max_rank = 64;

//! "(2, 3)", "(5,)" or "()": Python's repr of a shape tuple.
inline std::string shape_repr(const std::vector<std::size_t>& shape) {
  std::string s = "(";
  for (std::size_t i = 0; i < shape.size(); ++i) {
    if (i) s += ", ";
    s += std::to_string(shape[i]);
  }
  if (shape.size() == 1) s += ",";
  return s + ")";
}

//! Product of `shape`, or false if it overflows size_t.
inline bool checked_count(const std::vector<std::size_t>& shape, std::size_t& count) noexcept {
  std::size_t n = 1;
  for (std::size_t s : shape) {
    if (s != 0 && n > std::numeric_limits<std::size_t>::max() / s) return false;
    n *= s;
  }
  count = n;
  return true;
}

inline std::uint32_t load_le32(const unsigned char* p) noexcept {
  return static_cast<std::uint32_t>(p[0]) | (static_cast<std::uint32_t>(p[1]) << 8) |
         (static_cast<std::uint32_t>(p[2]) << 16) | (static_cast<std::uint32_t>(p[3]) << 24);
}

//! What the preamble and header of a .npy file say.
struct npy_header {
  int major = 1;                     //!< format version (1, 2 or 3); minor is always 0
  npy_dtype dtype = npy_dtype::f32;  //!< element type
  std::vector<std::size_t> shape;    //!< C-order shape
  std::size_t count = 1;             //!< prod(shape)
  std::size_t header_begin = 10;     //!< offset of the dict text (10 or 12)
  std::size_t data_offset = 0;       //!< offset of the first data byte
  std::size_t data_bytes = 0;        //!< count * itemsize (== file size - data_offset)
};

//! Checks magic, version and header length of a file of `file_size` bytes whose first
//! `avail` bytes are at `p`, and returns the offset where the data starts (end of the
//! header). Needs at most the first 12 bytes (`avail` may be larger).
//! @throws bgtq::error(format_error) naming `name`, the problem and its offset.
inline std::size_t npy_preamble(const unsigned char* p, std::size_t avail, std::size_t file_size, const std::string& name,
                                int& major, std::size_t& header_begin) {
  const std::size_t have = avail < file_size ? avail : file_size;
  for (std::size_t i = 0; i < 6 && i < have; ++i)
    if (p[i] != npy_magic[i])
      fail(errc::format_error, name + ": not a .npy file: bad magic at offset " + std::to_string(i) + " (the file starts with \"" +
                                   printable_bytes(p, have < 8 ? have : 8) + "\", expected \"\\x93NUMPY\")");
  if (file_size < 8)
    fail(errc::format_error, name + ": truncated .npy file: " + std::to_string(file_size) +
                                 " bytes, shorter than the 8-byte magic and version");
  BGTQ_REQUIRE(have >= 8, errc::format_error, name + ": internal: .npy preamble not available");
  major = p[6];
  const int minor = p[7];
  if ((major != 1 && major != 2 && major != 3) || minor != 0)
    fail(errc::format_error, name + ": unsupported .npy format version " + std::to_string(major) + "." + std::to_string(minor) +
                                 " at offset 6 (this reader supports 1.0, 2.0 and 3.0)");
  header_begin = major == 1 ? 10 : 12;
  if (file_size < header_begin)
    fail(errc::format_error, name + ": truncated .npy file: " + std::to_string(file_size) + " bytes, the version " +
                                 std::to_string(major) + ".0 header length field ends at offset " +
                                 std::to_string(header_begin));
  BGTQ_REQUIRE(have >= header_begin, errc::format_error, name + ": internal: .npy preamble not available");
  const std::size_t hlen = major == 1 ? (static_cast<std::size_t>(p[8]) | (static_cast<std::size_t>(p[9]) << 8))
                                      : static_cast<std::size_t>(load_le32(p + 8));
  if (hlen > file_size - header_begin)
    fail(errc::format_error, name + ": header length " + std::to_string(hlen) + " (at offset 8) runs past the end of the file: the header would end at offset " +
                                 std::to_string(header_begin + hlen) + " but the file is " + std::to_string(file_size) + " bytes");
  return header_begin + hlen;
}

//! Recursive-descent parser of the header dict, over bytes [begin, end) of `p`. Every
//! access is bounds-checked; errors report absolute file offsets.
class npy_dict_parser {
 public:
  npy_dict_parser(const unsigned char* p, std::size_t begin, std::size_t end, const std::string& name)
      : p_(p), i_(begin), end_(end), name_(name) {}

  //! Parses the dict into `h.dtype` and `h.shape`.
  void parse(npy_header& h) {
    bool have_descr = false, have_fortran = false, have_shape = false;
    skip_ws();
    expect('{', "the header dict must start with '{'");
    for (;;) {
      skip_ws();
      if (peek_is('}')) {
        ++i_;
        break;
      }
      const std::size_t key_at = i_;
      const std::string key = parse_string("a quoted key or '}'");
      skip_ws();
      expect(':', "expected ':' after key '" + key + "'");
      skip_ws();
      if (key == "descr") {
        if (have_descr) error_at(key_at, "duplicate key 'descr'");
        have_descr = true;
        const std::size_t at = i_;
        if (peek_is('[')) error_at(at, "unsupported dtype: structured dtypes are not supported (expected '<f4' or '<f2')");
        const std::string d = parse_string("a quoted dtype string");
        if (d == "<f4") {
          h.dtype = npy_dtype::f32;
        } else if (d == "<f2") {
          h.dtype = npy_dtype::f16;
        } else {
          error_at(at, "unsupported dtype '" + printable_bytes(reinterpret_cast<const unsigned char*>(d.data()), d.size()) +
                           "' (expected '<f4' float32 or '<f2' float16, little-endian)");
        }
      } else if (key == "fortran_order") {
        if (have_fortran) error_at(key_at, "duplicate key 'fortran_order'");
        have_fortran = true;
        const std::size_t at = i_;
        if (parse_bool()) error_at(at, "fortran_order is True: Fortran-order arrays are not supported (save a C-order array)");
      } else if (key == "shape") {
        if (have_shape) error_at(key_at, "duplicate key 'shape'");
        have_shape = true;
        parse_shape(h.shape);
      } else {
        error_at(key_at, "unexpected key '" + printable_bytes(reinterpret_cast<const unsigned char*>(key.data()), key.size()) +
                             "' (expected exactly 'descr', 'fortran_order' and 'shape')");
      }
      skip_ws();
      if (peek_is(',')) {
        ++i_;
        continue;
      }
      if (peek_is('}')) {
        ++i_;
        break;
      }
      error_here("expected ',' or '}' after the value of '" + key + "'");
    }
    if (!have_descr) error_at(end_, "the header dict has no 'descr' key");
    if (!have_fortran) error_at(end_, "the header dict has no 'fortran_order' key");
    if (!have_shape) error_at(end_, "the header dict has no 'shape' key");
    skip_ws();
    if (i_ < end_) error_here("unexpected text after the header dict");
  }

 private:
  [[noreturn]] void error_at(std::size_t off, const std::string& what) const {
    fail(errc::format_error, name_ + ": bad .npy header at offset " + std::to_string(off) + ": " + what);
  }
  [[noreturn]] void error_here(const std::string& what) const {
    if (i_ >= end_) error_at(i_, what + ", but the header ends");
    error_at(i_, what + ", found '" + printable_bytes(p_ + i_, 1) + "'");
  }
  bool peek_is(char c) const noexcept { return i_ < end_ && p_[i_] == static_cast<unsigned char>(c); }
  void skip_ws() noexcept {
    while (i_ < end_ && (p_[i_] == ' ' || p_[i_] == '\t' || p_[i_] == '\n' || p_[i_] == '\r')) ++i_;
  }
  void expect(char c, const std::string& what) {
    if (!peek_is(c)) error_here(what);
    ++i_;
  }
  //! A Python string literal in single or double quotes, without escapes or prefixes.
  std::string parse_string(const std::string& what) {
    if (!(peek_is('\'') || peek_is('"'))) error_here("expected " + what);
    const unsigned char q = p_[i_];
    const std::size_t start = i_++;
    std::string s;
    for (;;) {
      if (i_ >= end_) error_at(start, "unterminated string");
      const unsigned char c = p_[i_];
      if (c == q) break;
      if (c == '\\') error_at(i_, "escape sequences in strings are not supported");
      if (c == '\n' || c == '\r') error_at(start, "unterminated string");
      s += static_cast<char>(c);
      ++i_;
      if (s.size() > 256) error_at(start, "string longer than 256 bytes");
    }
    ++i_;
    return s;
  }
  bool is_ident_char(std::size_t j) const noexcept {
    if (j >= end_) return false;
    const unsigned char c = p_[j];
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_';
  }
  bool match_word(const char* w) const noexcept {
    const std::size_t n = std::strlen(w);
    if (end_ - i_ < n) return false;
    if (std::memcmp(p_ + i_, w, n) != 0) return false;
    return !is_ident_char(i_ + n);
  }
  bool parse_bool() {
    if (match_word("True")) {
      i_ += 4;
      return true;
    }
    if (match_word("False")) {
      i_ += 5;
      return false;
    }
    error_here("expected True or False for 'fortran_order'");
  }
  //! A tuple of non-negative decimal integers: (), (n,), (a, b), (a, b,).
  void parse_shape(std::vector<std::size_t>& shape) {
    const std::size_t tuple_at = i_;
    expect('(', "expected a tuple '(' for 'shape'");
    shape.clear();
    bool trailing_comma = false;
    for (;;) {
      skip_ws();
      if (peek_is(')')) {
        ++i_;
        break;
      }
      if (!shape.empty() && !trailing_comma) error_here("expected ',' or ')' in the shape tuple");
      const std::size_t at = i_;
      if (peek_is('-')) error_at(at, "negative shape entry");
      if (!(i_ < end_ && p_[i_] >= '0' && p_[i_] <= '9')) error_here("expected a non-negative integer in the shape tuple");
      std::size_t v = 0;
      while (i_ < end_ && p_[i_] >= '0' && p_[i_] <= '9') {
        const std::size_t d = static_cast<std::size_t>(p_[i_] - '0');
        if (v > (std::numeric_limits<std::size_t>::max() - d) / 10)
          error_at(at, "shape entry overflows a " + std::to_string(8 * sizeof(std::size_t)) + "-bit size");
        v = v * 10 + d;
        ++i_;
      }
      if (i_ < end_ && (p_[i_] == '.' || p_[i_] == 'e' || p_[i_] == 'E' || p_[i_] == 'j' || p_[i_] == '_' ||
                        p_[i_] == 'x' || p_[i_] == 'L'))
        error_at(at, "non-integer shape entry '" + printable_bytes(p_ + at, i_ + 1 - at) + "'");
      // Python (numpy.load's literal_eval) reads "064" as a syntax error, "00" as zero
      if (p_[at] == '0' && v != 0)
        error_at(at, "shape entry '" + printable_bytes(p_ + at, i_ - at) + "' has a leading zero (not a Python integer)");
      if (shape.size() >= npy_max_rank) error_at(at, "more than " + std::to_string(npy_max_rank) + " dimensions");
      shape.push_back(v);
      skip_ws();
      trailing_comma = false;
      if (peek_is(',')) {
        ++i_;
        trailing_comma = true;
      }
    }
    if (shape.size() == 1 && !trailing_comma)
      error_at(tuple_at, "shape (" + std::to_string(shape[0]) + ") is not a tuple (a 1-element tuple needs a trailing comma)");
  }

  const unsigned char* p_;
  std::size_t i_;
  std::size_t end_;
  const std::string& name_;
};

//! Parses the header alone: preamble and dict, with count and data_bytes computed (a
//! shape whose element or byte count overflows size_t is refused), without comparing the
//! data size with `file_size`: what a stream's reader needs before it knows the size.
//! `p[0, avail)` must hold at least the whole header (up to the data offset); `file_size`
//! (the file's size, or an upper bound when unknown) only bounds the header length the
//! preamble states.
//! @throws bgtq::error(format_error) naming `name`, the problem and its byte offset.
inline npy_header parse_npy_dict(const unsigned char* p, std::size_t avail, std::size_t file_size, const std::string& name) {
  npy_header h;
  h.data_offset = npy_preamble(p, avail, file_size, name, h.major, h.header_begin);
  BGTQ_REQUIRE(avail >= h.data_offset, errc::format_error, name + ": internal: .npy header not available");
  npy_dict_parser(p, h.header_begin, h.data_offset, name).parse(h);
  if (!checked_count(h.shape, h.count))
    fail(errc::format_error, name + ": shape " + shape_repr(h.shape) + " has more elements than fit in a " +
                                 std::to_string(8 * sizeof(std::size_t)) + "-bit size");
  const std::size_t item = npy_itemsize(h.dtype);
  if (h.count > std::numeric_limits<std::size_t>::max() / item)
    fail(errc::format_error, name + ": shape " + shape_repr(h.shape) + " of " + npy_descr(h.dtype) + " needs more bytes than fit in a " +
                                 std::to_string(8 * sizeof(std::size_t)) + "-bit size");
  h.data_bytes = h.count * item;
  return h;
}

//! parse_npy_dict(), then checks that exactly data_bytes (count * itemsize) data bytes
//! follow the header in a file of `file_size` bytes, before anything is allocated for them.
//! @throws bgtq::error(format_error) naming `name`, the problem and its byte offset.
inline npy_header parse_npy_header(const unsigned char* p, std::size_t avail, std::size_t file_size, const std::string& name) {
  npy_header h = parse_npy_dict(p, avail, file_size, name);
  const std::size_t have = file_size - h.data_offset;
  if (have < h.data_bytes)
    fail(errc::format_error, name + ": data is shorter than the shape says: shape " + shape_repr(h.shape) + " of " +
                                 npy_descr(h.dtype) + " needs " + std::to_string(h.data_bytes) + " bytes from offset " +
                                 std::to_string(h.data_offset) + ", the file has " + std::to_string(have));
  if (have > h.data_bytes)
    fail(errc::format_error, name + ": " + std::to_string(have - h.data_bytes) + " trailing bytes after the array data (data ends at offset " +
                                 std::to_string(h.data_offset + h.data_bytes) + ", the file is " + std::to_string(file_size) +
                                 " bytes)");
  return h;
}

//! Converts `n` stored little-endian elements at `src` to float32.
inline void npy_decode(const unsigned char* src, std::size_t n, npy_dtype dt, float* dst) noexcept {
  if (dt == npy_dtype::f16) {
    for (std::size_t i = 0; i < n; ++i)
      dst[i] = half_bits_to_float(static_cast<std::uint16_t>(src[2 * i] | (src[2 * i + 1] << 8)));
  } else if constexpr (std::endian::native == std::endian::little) {
    if (n) std::memcpy(dst, src, n * 4);
  } else {
    for (std::size_t i = 0; i < n; ++i) {
      const std::uint32_t u = load_le32(src + 4 * i);
      std::memcpy(dst + i, &u, 4);
    }
  }
}

//! Converts `n` floats to stored little-endian elements at `dst` (n * itemsize bytes);
//! f16 rounds to nearest even (values beyond +-65504 become +-Inf).
inline void npy_encode(const float* src, std::size_t n, npy_dtype dt, unsigned char* dst) noexcept {
  for (std::size_t i = 0; i < n; ++i) {
    if (dt == npy_dtype::f16) {
      const std::uint16_t h = float_to_half_bits(src[i]);
      dst[2 * i] = static_cast<unsigned char>(h & 0xFFu);
      dst[2 * i + 1] = static_cast<unsigned char>(h >> 8);
    } else {
      std::uint32_t u;
      std::memcpy(&u, src + i, 4);
      for (unsigned b = 0; b < 4; ++b) dst[4 * i + b] = static_cast<unsigned char>(u >> (8 * b));
    }
  }
}

//! Preamble + padded header of a .npy file, byte for byte what NumPy >= 1.24 writes:
//! the dict ``{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }``, then
//! 21 - len(str(shape[0])) growth spaces (none for 0-d), then spaces and a final '\n'
//! so that the data starts at a multiple of 64 (NumPy adds a full 64 spaces when it
//! would already be aligned). `major` = 0 picks 1.0, or 2.0 if the header needs more
//! than 65535 bytes; 1, 2 or 3 forces that version (3.0 differs from 2.0 only in the
//! version byte: the header is pure ASCII).
//! @throws bgtq::error(invalid_argument) for another `major`, or a header too long for 1.0.
inline std::vector<unsigned char> npy_header_bytes(const std::vector<std::size_t>& shape, npy_dtype dtype, int major = 0) {
  std::string dict = std::string("{'descr': '") + npy_descr(dtype) + "', 'fortran_order': False, 'shape': " + shape_repr(shape) + ", }";
  if (!shape.empty()) dict.append(npy_growth_digits - std::to_string(shape[0]).size(), ' ');
  const std::size_t hlen = dict.size() + 1;  // + '\n'
  auto padded = [&](std::size_t prefix) { return hlen + (npy_align - (prefix + hlen) % npy_align); };
  BGTQ_REQUIRE(major >= 0 && major <= 3, errc::invalid_argument, "npy: format version " + std::to_string(major) + " (allowed 1, 2, 3)");
  if (major == 0) major = padded(10) <= 0xFFFFu ? 1 : 2;
  const std::size_t prefix = major == 1 ? 10 : 12;
  const std::size_t total = padded(prefix);
  BGTQ_REQUIRE(major != 1 || total <= 0xFFFFu, errc::invalid_argument,
               "npy: a header of " + std::to_string(total) + " bytes does not fit format version 1.0");
  // [magic 6][major][minor 0][length: u16 (v1) / u32 (v2, v3)][dict][spaces]['\n']
  std::vector<unsigned char> out(prefix + total, static_cast<unsigned char>(' '));
  std::memcpy(out.data(), npy_magic, 6);
  out[6] = static_cast<unsigned char>(major);
  out[7] = 0;
  for (std::size_t b = 8; b < prefix; ++b) out[b] = static_cast<unsigned char>(total >> (8 * (b - 8)));
  std::memcpy(out.data() + prefix, dict.data(), dict.size());
  out.back() = static_cast<unsigned char>('\n');
  return out;
}

//! Element count of a shape to be written, or invalid_argument.
inline std::size_t npy_write_count(const float* data, const std::vector<std::size_t>& shape, npy_dtype dtype) {
  std::size_t count = 0;
  BGTQ_REQUIRE(checked_count(shape, count) && count <= std::numeric_limits<std::size_t>::max() / npy_itemsize(dtype),
               errc::invalid_argument, "npy: shape " + shape_repr(shape) + " is too large");
  BGTQ_REQUIRE(static_cast<unsigned>(dtype) <= 1u, errc::invalid_argument, "npy: unknown dtype value");
  BGTQ_REQUIRE(data != nullptr || count == 0, errc::invalid_argument, "npy: null data for shape " + shape_repr(shape));
  return count;
}

//! A whole .npy file image in format version `major` (0 = oldest that fits).
inline std::vector<unsigned char> npy_bytes_version(const float* data, const std::vector<std::size_t>& shape, npy_dtype dtype,
                                                    int major) {
  const std::size_t count = npy_write_count(data, shape, dtype);
  std::vector<unsigned char> out = npy_header_bytes(shape, dtype, major);
  const std::size_t h = out.size();
  out.resize(h + count * npy_itemsize(dtype));
  npy_encode(data, count, dtype, out.data() + h);
  return out;
}

}  // namespace detail

//! Parses a whole .npy file image from memory (the fuzzing entry point).
//! @param bytes the file content (may be null when `size` is 0)
//! @param size  its length in bytes: the whole file, nothing may follow the data
//! @param name  used in error messages (normally the file name)
//! @throws bgtq::error(format_error) for a malformed file: bad magic, unsupported
//!         version, header past the end, unparsable dict (missing, duplicate or extra
//!         keys, bad quoting), a dtype other than '<f4'/'<f2' (named), Fortran order,
//!         negative, non-integer or overflowing shape entries, data shorter than the
//!         shape says (expected vs actual bytes), trailing bytes. Never reads outside
//!         [bytes, bytes + size); allocates only after the data size was checked.
inline npy_array parse_npy(const void* bytes, std::size_t size, const std::string& name) {
  BGTQ_REQUIRE(bytes != nullptr || size == 0, errc::invalid_argument, name + ": null buffer");
  const auto* p = static_cast<const unsigned char*>(bytes);
  if (size == 0) fail(errc::format_error, name + ": empty file (0 bytes), not a .npy file");
  const detail::npy_header h = detail::parse_npy_header(p, size, size, name);
  npy_array a;
  a.shape = h.shape;
  a.dtype = h.dtype;
  a.data.resize(h.count);
  detail::npy_decode(p + h.data_offset, h.count, h.dtype, a.data.data());
  return a;
}

//! Reads a .npy file (header first, then the data straight into the result; the file is
//! never held in memory twice). A stream (a pipe, /dev/stdin, `<(zcat q.npy.gz)`: see
//! detail::is_stream) is read in stages, the preamble, the header, then the data its
//! shape declares and one byte more (a trailing byte is an error, as in a file), and
//! parsed from memory (parse_npy); the bytes are then held beside the result.
//! @throws bgtq::error(io_error) if it cannot be opened or read; format_error as parse_npy.
inline npy_array read_npy(const std::string& path) {
  if (detail::is_stream(path)) {
    detail::stream_reader in(path);
    constexpr std::size_t unknown = std::numeric_limits<std::size_t>::max();
    // a short stream: parse_npy names what is missing; a bad magic or version: npy_preamble
    if (in.fill_to(12)) {
      int major = 0;
      std::size_t hb = 0;
      const std::size_t data_offset = detail::npy_preamble(in.bytes().data(), in.bytes().size(), unknown, path, major, hb);
      if (in.fill_to(data_offset)) {
        const detail::npy_header h = detail::parse_npy_dict(in.bytes().data(), in.bytes().size(), unknown, path);
        const std::size_t end = h.data_bytes < unknown - data_offset ? data_offset + h.data_bytes : unknown - 1;
        in.fill_to(end + 1);  // one byte past the data: trailing bytes are reported
      }
    }
    return parse_npy(in.bytes().data(), in.bytes().size(), path);
  }
  std::ifstream in;
  const std::uintmax_t fsz = detail::open_for_reading(path, in);
  BGTQ_REQUIRE(fsz <= std::numeric_limits<std::size_t>::max(), errc::io_error, "'" + path + "' is too large");
  const std::size_t size = static_cast<std::size_t>(fsz);
  if (size == 0) fail(errc::format_error, path + ": empty file (0 bytes), not a .npy file");
  auto read_exact = [&](void* dst, std::size_t n) {
    in.read(static_cast<char*>(dst), static_cast<std::streamsize>(n));
    if (static_cast<std::size_t>(in.gcount()) != n)
      fail(errc::io_error, "read from '" + path + "' failed (file changed or unreadable)");
  };
  std::vector<unsigned char> head(size < 12 ? size : 12);
  read_exact(head.data(), head.size());
  int major = 0;
  std::size_t hb = 0;
  const std::size_t data_offset = detail::npy_preamble(head.data(), head.size(), size, path, major, hb);
  const std::size_t got = head.size();
  head.resize(data_offset);  // <= size: checked by npy_preamble
  if (data_offset > got) read_exact(head.data() + got, data_offset - got);
  const detail::npy_header h = detail::parse_npy_header(head.data(), head.size(), size, path);
  in.seekg(static_cast<std::streamoff>(h.data_offset));
  npy_array a;
  a.shape = h.shape;
  a.dtype = h.dtype;
  a.data.resize(h.count);  // h.count * itemsize == bytes present in the file
  if (h.dtype == npy_dtype::f32 && std::endian::native == std::endian::little) {
    read_exact(a.data.data(), h.data_bytes);
  } else {
    constexpr std::size_t chunk = 1 << 16;
    std::vector<unsigned char> buf(chunk * npy_itemsize(h.dtype));
    for (std::size_t i = 0; i < h.count; i += chunk) {
      const std::size_t n = h.count - i < chunk ? h.count - i : chunk;
      read_exact(buf.data(), n * npy_itemsize(h.dtype));
      detail::npy_decode(buf.data(), n, h.dtype, a.data.data() + i);
    }
  }
  return a;
}

//! The bytes of a .npy file holding `data` (prod(shape) floats, C order) stored as
//! `dtype`: format 1.0 (2.0 only if the header exceeds 65535 bytes), byte-identical to
//! NumPy's np.save. f16 rounds to nearest even via bgtq::float_to_half_bits (magnitudes
//! of 65520 and more become Inf; 65504 < |x| < 65520 rounds to 65504).
//! @throws bgtq::error(invalid_argument) for null data with a non-empty shape or a
//!         shape whose size overflows.
inline std::vector<unsigned char> npy_bytes(const float* data, const std::vector<std::size_t>& shape,
                                            npy_dtype dtype = npy_dtype::f32) {
  return detail::npy_bytes_version(data, shape, dtype, 0);
}

//! The .npy file npy_bytes(data, shape, dtype) as one output of atomic_write_files, for
//! writing several arrays all-or-nothing (e.g. q.npy, k.npy and v.npy together: a failure
//! on the last leaves none of them replaced). The data is converted in chunks when
//! written, not copied whole; `data` must stay valid until then.
//! @throws bgtq::error(invalid_argument) as npy_bytes (here, not when written).
inline output_file npy_output(const std::string& path, const float* data, const std::vector<std::size_t>& shape,
                              npy_dtype dtype = npy_dtype::f32) {
  const std::size_t count = detail::npy_write_count(data, shape, dtype);
  std::vector<unsigned char> header = detail::npy_header_bytes(shape, dtype, 0);
  return output_file{path, [data, count, dtype, header = std::move(header)](std::ostream& os) {
                       os.write(reinterpret_cast<const char*>(header.data()), static_cast<std::streamsize>(header.size()));
                       constexpr std::size_t chunk = 1 << 16;
                       std::vector<unsigned char> buf(chunk * npy_itemsize(dtype));
                       for (std::size_t i = 0; i < count; i += chunk) {
                         const std::size_t n = count - i < chunk ? count - i : chunk;
                         detail::npy_encode(data + i, n, dtype, buf.data());
                         os.write(reinterpret_cast<const char*>(buf.data()), static_cast<std::streamsize>(n * npy_itemsize(dtype)));
                       }
                     }};
}

//! Writes npy_bytes(data, shape, dtype) to `path` atomically (bgtq::atomic_write_file):
//! either the complete file appears (replacing an old one) or `path` is left untouched.
//! The data is converted in chunks, not copied whole.
//! @throws bgtq::error(io_error) if the file cannot be written; invalid_argument as npy_bytes.
inline void write_npy(const std::string& path, const float* data, const std::vector<std::size_t>& shape,
                      npy_dtype dtype = npy_dtype::f32) {
  atomic_write_files({npy_output(path, data, shape, dtype)});
}

//! Checks that every value of `a` is finite.
//! @throws bgtq::error(non_finite) naming the first bad element by multi-index and flat
//!         index, e.g. "k.npy: element [0, 12, 3, 7] (flat 1639) is NaN" for shape (1, 16, 4, 32) (or +Inf/-Inf).
inline void require_finite(const npy_array& a, const std::string& name) {
  const std::size_t n = a.data.size();
  for (std::size_t i = 0; i < n; ++i) {
    const float x = a.data[i];
    if (std::isfinite(x)) continue;
    const char* what = std::isnan(x) ? "NaN" : (x > 0 ? "+Inf" : "-Inf");
    std::string idx;
    if (n == a.size()) {
      std::vector<std::size_t> mi(a.shape.size());
      std::size_t rest = i;
      for (std::size_t d = a.shape.size(); d-- > 0;) {
        mi[d] = rest % a.shape[d];
        rest /= a.shape[d];
      }
      std::string s("[");  // (not idx = "[": GCC 12 warns -Wrestrict on that assignment, bug 105329)
      for (std::size_t d = 0; d < mi.size(); ++d) s += (d ? ", " : "") + std::to_string(mi[d]);
      s += "] ";
      idx = std::move(s);
    }
    fail(errc::non_finite, name + ": element " + idx + "(flat " + std::to_string(i) + ") is " + what);
  }
}

}  // namespace bgtq
