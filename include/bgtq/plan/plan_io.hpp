#pragma once
//! @file plan/plan_io.hpp
//! Plan files: a versioned, checksummed little-endian binary format (load/save) and a
//! JSON export with every field. The byte layout is documented in docs/formats.md:
//! @code
//! offset 0          8 bytes  magic "BGTQPLAN"
//! offset 8          u32      format version (plan::format_version = 1)
//! offset 12         u32      flags, must be 0
//! offset 16         u64      payload length P
//! offset 24         P bytes  payload (fixed-width little-endian fields, see docs/formats.md)
//! offset 24 + P     u32      CRC-32C of bytes [0, 24 + P)
//! @endcode
//! Loading checks, in file order, and reports the first problem with its byte offset:
//! truncation / bad magic, newer version (version_unsupported), payload length against
//! the file size (truncated or trailing bytes), checksum (checksum_mismatch), then every
//! field (format_error; counts are checked against the bytes left before anything is
//! allocated), then bgtq::validate. serialize_plan and deserialize_plan are exact
//! inverses: deserialize_plan(serialize_plan(p)) == p.

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>
#include <ostream>
#include <string>
#include <system_error>
#include <vector>

#include "../core/error.hpp"
#include "../io/atomic_file.hpp"
#include "../io/checksum.hpp"
#include "../io/json.hpp"
#include "plan.hpp"

namespace bgtq {

namespace detail {

inline constexpr unsigned char plan_magic[8] = {'B', 'G', 'T', 'Q', 'P', 'L', 'A', 'N'};
inline constexpr std::size_t plan_header_bytes = 24;   //!< magic + version + flags + payload length
inline constexpr std::size_t plan_trailer_bytes = 4;   //!< CRC-32C
inline constexpr std::size_t plan_fixed_bytes = 72;    //!< fixed part of the payload (see docs/formats.md)
//! Smallest encoded head record: two u32 counts, one width byte, one group of one block.
inline constexpr std::size_t plan_min_head_bytes = 8 + 1 + 12 + 2;

//! Little-endian u32 at p (4 readable bytes).
inline std::uint32_t plan_le32(const unsigned char* p) noexcept {
  return static_cast<std::uint32_t>(p[0]) | (static_cast<std::uint32_t>(p[1]) << 8) |
         (static_cast<std::uint32_t>(p[2]) << 16) | (static_cast<std::uint32_t>(p[3]) << 24);
}
//! The payload length a plan header declares (8 bytes at offset 16; `b` holds the header).
inline std::uint64_t plan_payload_length(const unsigned char* b) {
  return static_cast<std::uint64_t>(plan_le32(b + 16)) | (static_cast<std::uint64_t>(plan_le32(b + 20)) << 32);
}

//! Checks beyond bgtq::validate that a plan must pass to be stored exactly: enum values
//! in range, finite avg_bits >= 0, calib_tokens >= 0, finite scores >= 0.
//! @throws bgtq::error(invalid_argument) naming the field.
inline void check_plan_storable(const plan& p) {
  BGTQ_REQUIRE(static_cast<unsigned>(p.rope.pairing) <= 1u, errc::invalid_argument, "plan: rope pairing value out of range");
  BGTQ_REQUIRE(static_cast<unsigned>(p.codebook) <= 2u, errc::invalid_argument, "plan: codebook kind out of range");
  BGTQ_REQUIRE(static_cast<unsigned>(p.key_radius) <= 1u, errc::invalid_argument, "plan: key_radius format out of range");
  BGTQ_REQUIRE(static_cast<unsigned>(p.value_radius) <= 1u, errc::invalid_argument, "plan: value_radius format out of range");
  BGTQ_REQUIRE(static_cast<unsigned>(p.scope) <= 2u, errc::invalid_argument, "plan: alloc scope out of range");
  BGTQ_REQUIRE(static_cast<unsigned>(p.distortion) <= 1u, errc::invalid_argument, "plan: distortion kind out of range");
  BGTQ_REQUIRE(static_cast<unsigned>(p.value_rotation) <= 3u, errc::invalid_argument, "plan: value rotation kind out of range");
  BGTQ_REQUIRE(std::isfinite(p.avg_bits) && p.avg_bits >= 0.0, errc::invalid_argument,
               "plan: avg_bits = " + std::to_string(p.avg_bits) + " (must be finite and >= 0)");
  BGTQ_REQUIRE(p.calib_tokens >= 0, errc::invalid_argument, "plan: calib_tokens = " + std::to_string(p.calib_tokens));
  for (std::size_t i = 0; i < p.scores.size(); ++i)
    BGTQ_REQUIRE(std::isfinite(p.scores[i]) && p.scores[i] >= 0.0, errc::invalid_argument,
                 "plan: scores[" + std::to_string(i) + "] = " + std::to_string(p.scores[i]) + " (must be finite and >= 0)");
}

//! Little-endian byte sink.
struct le_writer {
  std::vector<unsigned char> out;
  void u8(unsigned v) { out.push_back(static_cast<unsigned char>(v)); }
  void u16(std::uint32_t v) {
    for (int b = 0; b < 2; ++b) out.push_back(static_cast<unsigned char>(v >> (8 * b)));
  }
  void u32(std::uint32_t v) {
    for (int b = 0; b < 4; ++b) out.push_back(static_cast<unsigned char>(v >> (8 * b)));
  }
  void u64(std::uint64_t v) {
    for (int b = 0; b < 8; ++b) out.push_back(static_cast<unsigned char>(v >> (8 * b)));
  }
  void i32(std::int32_t v) { u32(static_cast<std::uint32_t>(v)); }
  void i64(std::int64_t v) { u64(static_cast<std::uint64_t>(v)); }
  void f64(double v) { u64(std::bit_cast<std::uint64_t>(v)); }
  void put_u32_at(std::size_t at, std::uint32_t v) {
    for (int b = 0; b < 4; ++b) out[at + static_cast<std::size_t>(b)] = static_cast<unsigned char>(v >> (8 * b));
  }
  void put_u64_at(std::size_t at, std::uint64_t v) {
    for (int b = 0; b < 8; ++b) out[at + static_cast<std::size_t>(b)] = static_cast<unsigned char>(v >> (8 * b));
  }
};

//! Bounds-checked little-endian reader over [pos, end) of a buffer; every error names
//! the file and the absolute byte offset of the offending field.
class le_reader {
 public:
  le_reader(const unsigned char* p, std::size_t pos, std::size_t end, const std::string& name)
      : p_(p), pos_(pos), end_(end), name_(name) {}

  std::size_t pos() const noexcept { return pos_; }
  std::size_t left() const noexcept { return end_ - pos_; }
  //! Offset at which the last field read started.
  std::size_t field_at() const noexcept { return at_; }

  [[noreturn]] void error_at(std::size_t off, const std::string& what) const {
    fail(errc::format_error, name_ + ": at offset " + std::to_string(off) + ": " + what);
  }
  //! Error about the field read last.
  [[noreturn]] void bad(const std::string& what) const { error_at(at_, what); }

  std::uint64_t uint(int n, const char* field) {
    if (left() < static_cast<std::size_t>(n))
      error_at(pos_, std::string("payload ends inside '") + field + "' (needs " + std::to_string(n) + " bytes, " +
                         std::to_string(left()) + " left)");
    at_ = pos_;
    std::uint64_t v = 0;
    for (int b = 0; b < n; ++b) v |= static_cast<std::uint64_t>(p_[pos_ + static_cast<std::size_t>(b)]) << (8 * b);
    pos_ += static_cast<std::size_t>(n);
    return v;
  }
  unsigned u8(const char* f) { return static_cast<unsigned>(uint(1, f)); }
  std::uint32_t u16(const char* f) { return static_cast<std::uint32_t>(uint(2, f)); }
  std::uint32_t u32(const char* f) { return static_cast<std::uint32_t>(uint(4, f)); }
  std::uint64_t u64(const char* f) { return uint(8, f); }
  std::int32_t i32(const char* f) { return static_cast<std::int32_t>(u32(f)); }
  std::int64_t i64(const char* f) { return static_cast<std::int64_t>(u64(f)); }
  double f64(const char* f) { return std::bit_cast<double>(u64(f)); }

  //! An i32 in [lo, hi].
  int i32_in(const char* f, int lo, int hi) {
    const std::int32_t v = i32(f);
    if (v < lo || v > hi)
      bad(std::string(f) + " = " + std::to_string(v) + " (allowed " + std::to_string(lo) + ".." + std::to_string(hi) + ")");
    return v;
  }
  //! A u8 enum value in [0, max].
  unsigned enum8(const char* f, unsigned max) {
    const unsigned v = u8(f);
    if (v > max) bad(std::string(f) + " = " + std::to_string(v) + " is not a valid value (0.." + std::to_string(max) + ")");
    return v;
  }
  //! Fails unless `count` records of at least `each` bytes fit in what is left.
  void need(std::uint64_t count, std::size_t each, const char* what) const {
    if (count > left() / each)
      error_at(pos_, std::string(what) + " = " + std::to_string(count) + " needs at least " + std::to_string(each) +
          " bytes each, but only " + std::to_string(left()) + " payload bytes are left");
  }

 private:
  const unsigned char* p_;
  std::size_t pos_;
  std::size_t end_;
  std::size_t at_ = 0;
  const std::string& name_;
};

}  // namespace detail

//! The plan file image of `p` (layout in docs/formats.md).
//! @throws bgtq::error(invalid_argument) if validate(p) fails or a field cannot be stored
//!         exactly (enum out of range, non-finite avg_bits or score, negative
//!         calib_tokens or score).
inline std::vector<unsigned char> serialize_plan(const plan& p) {
  validate(p);
  detail::check_plan_storable(p);
  detail::le_writer w;
  w.out.reserve(detail::plan_header_bytes + detail::plan_fixed_bytes + p.heads.size() * 64 + p.scores.size() * 8 +
                p.value_seeds.size() * 8 + 32);
  w.out.insert(w.out.end(), detail::plan_magic, detail::plan_magic + 8);
  w.u32(plan::format_version);
  w.u32(0);  // flags
  w.u64(0);  // payload length, patched below
  // fixed part (72 bytes)
  w.i32(p.layers);
  w.i32(p.kv_heads);
  w.i32(p.q_heads);
  w.i32(p.rope.head_dim);
  w.i32(p.rope.rotary_dim);
  w.f64(p.rope.base);
  w.u8(static_cast<unsigned>(p.rope.pairing));
  w.u8(static_cast<unsigned>(p.codebook));
  w.u8(static_cast<unsigned>(p.key_radius));
  w.u8(static_cast<unsigned>(p.value_radius));
  w.u8(p.norm_correction ? 1u : 0u);
  w.u8(static_cast<unsigned>(p.scope));
  w.u8(static_cast<unsigned>(p.distortion));
  w.u8(static_cast<unsigned>(p.value_rotation));
  w.f64(p.avg_bits);
  w.i32(p.b_min);
  w.i32(p.b_max);
  w.i32(p.value_bits);
  w.u64(p.seed);
  w.i64(p.calib_tokens);
  // head records
  for (const head_plan& hp : p.heads) {
    w.u32(static_cast<std::uint32_t>(hp.widths.size()));
    w.u32(static_cast<std::uint32_t>(hp.groups.size()));
    for (int b : hp.widths) w.u8(static_cast<unsigned>(b));
    for (const group_spec& g : hp.groups) {
      w.u8(static_cast<unsigned>(g.bits));
      w.u8(static_cast<unsigned>(g.rotation));
      w.u16(static_cast<std::uint32_t>(g.blocks.size()));
      w.u64(g.seed);
      for (int b : g.blocks) w.u16(static_cast<std::uint32_t>(b));
    }
  }
  w.u64(p.value_seeds.size());
  for (std::uint64_t s : p.value_seeds) w.u64(s);
  w.u64(p.scores.size());
  for (double s : p.scores) w.f64(s);
  const std::size_t payload = w.out.size() - detail::plan_header_bytes;
  w.put_u64_at(16, payload);
  w.u32(crc32c(w.out.data(), w.out.size()));
  return w.out;
}

//! Parses and fully validates a plan file image (the fuzzing entry point).
//! @param bytes the file content (may be null when `size` is 0)
//! @param size  its length in bytes: the whole file, ending with its CRC-32C
//! @param name  used in error messages (normally the file name)
//! @throws bgtq::error with the file name, the first problem in file order and its byte
//!         offset: format_error (truncated, bad magic, version 0, payload length
//!         disagreeing with the file size, unknown flags, a field or count out of range,
//!         payload too short for its counts, unused payload bytes, or a plan that fails
//!         bgtq::validate); version_unsupported (written by a newer format version);
//!         checksum_mismatch. Never reads outside [bytes, bytes + size); every count is
//!         checked against the bytes present before anything is allocated for it.
inline plan deserialize_plan(const void* bytes, std::size_t size, const std::string& name) {
  BGTQ_REQUIRE(bytes != nullptr || size == 0, errc::invalid_argument, name + ": null buffer");
  const auto* b = static_cast<const unsigned char*>(bytes);
  auto trunc = [&](std::size_t need, const char* what) {
    fail(errc::format_error, name + ": truncated plan file: " + std::to_string(size) + " bytes, but the " + what +
                                 " ends at offset " + std::to_string(need));
  };
  // magic, offset 0
  for (std::size_t i = 0; i < 8 && i < size; ++i)
    if (b[i] != detail::plan_magic[i]) {
      std::size_t first = 0;  // a JSON export (calibrate --json-out) starts with '{' after any blanks
      while (first < size && first < 64 && (b[first] == ' ' || b[first] == '\t' || b[first] == '\n' || b[first] == '\r')) ++first;
      const bool json = first < size && b[first] == '{';
      fail(errc::format_error, name + ": not a blockgtq plan file: bad magic at offset " + std::to_string(i) +
                                   " (the file starts with \"" + detail::printable_bytes(b, size < 8 ? size : 8) +
                                   "\", expected \"BGTQPLAN\")" +
                                   (json ? "; it looks like JSON: the JSON export (calibrate --json-out) is for reading, "
                                           "plans load from the binary file (calibrate -o)"
                                         : ""));
    }
  if (size < 8) trunc(8, "magic");
  // version, offset 8
  if (size < 12) trunc(12, "format version field");
  const std::uint32_t version = detail::plan_le32(b + 8);
  if (version == 0) fail(errc::format_error, name + ": at offset 8: format version 0 is invalid");
  if (version > plan::format_version)
    fail(errc::version_unsupported, name + " was written by format version " + std::to_string(version) +
                                        "; this build reads up to " + std::to_string(plan::format_version));
  // payload length, offset 16
  if (size < detail::plan_header_bytes) trunc(detail::plan_header_bytes, "header");
  const std::uint64_t payload = detail::plan_payload_length(b);
  const std::size_t room = size - detail::plan_header_bytes;
  if (room < detail::plan_trailer_bytes || payload > room - detail::plan_trailer_bytes)
    fail(errc::format_error, name + ": truncated plan file: the header (offset 16) declares a payload of " +
                                 std::to_string(payload) + " bytes, so the file should be " +
                                 (payload > std::numeric_limits<std::uint64_t>::max() - 28
                                      ? std::string("larger than 2^64")
                                      : std::to_string(payload + detail::plan_header_bytes + detail::plan_trailer_bytes)) +
                                 " bytes, but it is " + std::to_string(size));
  const std::size_t end = detail::plan_header_bytes + static_cast<std::size_t>(payload);
  if (room - detail::plan_trailer_bytes > payload)
    fail(errc::format_error, name + ": " + std::to_string(size - end - detail::plan_trailer_bytes) +
                                 " trailing bytes after the checksum (which ends at offset " +
                                 std::to_string(end + detail::plan_trailer_bytes) + ")");
  // checksum, offset 24 + P
  const std::uint32_t stored = detail::plan_le32(b + end);
  const std::uint32_t computed = crc32c(b, end);
  if (stored != computed) {
    char buf[96];
    std::snprintf(buf, sizeof buf, "stored CRC-32C 0x%08x, computed 0x%08x", static_cast<unsigned>(stored),
                  static_cast<unsigned>(computed));
    fail(errc::checksum_mismatch, name + ": checksum mismatch at offset " + std::to_string(end) + ": " + buf +
                                      " (the file is corrupted)");
  }
  // flags, offset 12
  const std::uint32_t flags = detail::plan_le32(b + 12);
  if (flags != 0)
    fail(errc::format_error, name + ": at offset 12: unknown flags 0x" + [&] {
      char fb[16];
      std::snprintf(fb, sizeof fb, "%08x", static_cast<unsigned>(flags));
      return std::string(fb);
    }() + " (this build knows none)");

  detail::le_reader r(b, detail::plan_header_bytes, end, name);
  plan p;
  p.layers = r.i32_in("layers", 1, max_plan_layers);
  p.kv_heads = r.i32_in("kv_heads", 1, max_plan_kv_heads);
  p.q_heads = r.i32_in("q_heads", 1, max_plan_q_heads);
  p.rope.head_dim = r.i32_in("head_dim", 2, 1024);
  if (p.rope.head_dim % 2 != 0) r.bad("head_dim = " + std::to_string(p.rope.head_dim) + " is odd");
  p.rope.rotary_dim = r.i32_in("rotary_dim", 0, p.rope.head_dim);
  if (p.rope.rotary_dim % 2 != 0) r.bad("rotary_dim = " + std::to_string(p.rope.rotary_dim) + " is odd");
  p.rope.base = r.f64("rope base");
  if (!(std::isfinite(p.rope.base) && p.rope.base > 1.0)) r.bad("rope base = " + std::to_string(p.rope.base) + " (must be finite and > 1)");
  p.rope.pairing = static_cast<rope_pairing>(r.enum8("rope pairing", 1));
  p.codebook = static_cast<codebook_kind>(r.enum8("codebook kind", 2));
  p.key_radius = static_cast<radius_format>(r.enum8("key radius format", 1));
  p.value_radius = static_cast<radius_format>(r.enum8("value radius format", 1));
  p.norm_correction = r.enum8("norm_correction", 1) != 0;
  p.scope = static_cast<alloc_scope>(r.enum8("alloc scope", 2));
  p.distortion = static_cast<distortion_kind>(r.enum8("distortion kind", 1));
  p.value_rotation = static_cast<rotation_kind>(r.enum8("value rotation kind", 3));
  p.avg_bits = r.f64("avg_bits");
  if (!(std::isfinite(p.avg_bits) && p.avg_bits >= 0.0)) r.bad("avg_bits = " + std::to_string(p.avg_bits) + " (must be finite and >= 0)");
  p.b_min = r.i32_in("b_min", 0, 8);
  p.b_max = r.i32_in("b_max", 0, 8);
  p.value_bits = r.i32_in("value_bits", 0, 8);
  p.seed = r.u64("seed");
  p.calib_tokens = r.i64("calib_tokens");
  if (p.calib_tokens < 0) r.bad("calib_tokens = " + std::to_string(p.calib_tokens) + " is negative");

  const int L = p.rope.head_dim / 2;
  const std::uint64_t nh = static_cast<std::uint64_t>(p.layers) * static_cast<std::uint64_t>(p.kv_heads);
  r.need(nh, detail::plan_min_head_bytes, "head records (layers * kv_heads)");
  p.heads.reserve(static_cast<std::size_t>(nh));
  for (std::uint64_t hi = 0; hi < nh; ++hi) {
    auto hw = [&] {
      return "head record " + std::to_string(hi) + " (layer " + std::to_string(hi / static_cast<std::uint64_t>(p.kv_heads)) +
             " kv_head " + std::to_string(hi % static_cast<std::uint64_t>(p.kv_heads)) + ")";
    };
    head_plan hp;
    const std::uint32_t nw = r.u32("width count");
    if (nw != static_cast<std::uint32_t>(L))
      r.bad(hw() + ": width count " + std::to_string(nw) + " differs from head_dim / 2 = " + std::to_string(L));
    const std::uint32_t ng = r.u32("group count");
    if (ng < 1 || ng > static_cast<std::uint32_t>(L))
      r.bad(hw() + ": group count " + std::to_string(ng) + " (allowed 1.." + std::to_string(L) + ")");
    r.need(nw, 1, "width count");
    hp.widths.resize(nw);
    for (std::uint32_t i = 0; i < nw; ++i) {
      const unsigned v = r.u8("width");
      if (v > 8) r.bad(hw() + ": block " + std::to_string(i) + " width " + std::to_string(v) + " (allowed 0..8)");
      hp.widths[i] = static_cast<int>(v);
    }
    r.need(ng, 14, "group count");
    hp.groups.resize(ng);
    for (std::uint32_t gi = 0; gi < ng; ++gi) {
      group_spec& g = hp.groups[gi];
      auto gw = [&] { return hw() + " group " + std::to_string(gi); };
      const unsigned bits = r.u8("group bits");
      if (bits > 8) r.bad(gw() + ": bits " + std::to_string(bits) + " (allowed 0..8)");
      g.bits = static_cast<int>(bits);
      const unsigned rot = r.u8("group rotation kind");
      if (rot > 3) r.bad(gw() + ": rotation kind " + std::to_string(rot) + " is not a valid value (0..3)");
      g.rotation = static_cast<rotation_kind>(rot);
      const std::uint32_t nb = r.u16("group block count");
      if (nb < 1 || nb > static_cast<std::uint32_t>(L))
        r.bad(gw() + ": block count " + std::to_string(nb) + " (allowed 1.." + std::to_string(L) + ")");
      g.seed = r.u64("group seed");
      r.need(nb, 2, "group block count");
      g.blocks.resize(nb);
      for (std::uint32_t k = 0; k < nb; ++k) {
        const std::uint32_t blk = r.u16("group block index");
        if (blk >= static_cast<std::uint32_t>(L))
          r.bad(gw() + ": block index " + std::to_string(blk) + " (allowed 0.." + std::to_string(L - 1) + ")");
        g.blocks[k] = static_cast<int>(blk);
      }
    }
    p.heads.push_back(std::move(hp));
  }
  const std::uint64_t nv = r.u64("value seed count");
  if (nv != nh) r.bad("value seed count " + std::to_string(nv) + " differs from layers * kv_heads = " + std::to_string(nh));
  r.need(nv, 8, "value seed count");
  p.value_seeds.resize(static_cast<std::size_t>(nv));
  for (auto& s : p.value_seeds) s = r.u64("value seed");
  const std::uint64_t ns = r.u64("score count");
  if (ns != nh * static_cast<std::uint64_t>(L))
    r.bad("score count " + std::to_string(ns) + " differs from layers * kv_heads * head_dim / 2 = " +
          std::to_string(nh * static_cast<std::uint64_t>(L)));
  r.need(ns, 8, "score count");
  p.scores.resize(static_cast<std::size_t>(ns));
  for (std::size_t i = 0; i < p.scores.size(); ++i) {
    const double s = r.f64("score");
    if (!(std::isfinite(s) && s >= 0.0)) r.bad("score " + std::to_string(i) + " = " + std::to_string(s) + " (must be finite and >= 0)");
    p.scores[i] = s;
  }
  if (r.left() != 0)
    r.error_at(r.pos(), std::to_string(r.left()) + " unused payload bytes (the payload should end here)");
  try {
    validate(p);
  } catch (const error& e) {
    fail(errc::format_error, name + ": invalid plan: " + e.what());
  }
  return p;
}

//! The plan file of `p` as one output of bgtq::atomic_write_files (with other files
//! that must be written together, e.g. its JSON twin). Serializes now.
//! @throws bgtq::error(invalid_argument) as serialize_plan
inline output_file plan_output(const std::string& path, const plan& p) {
  return {path, [bytes = serialize_plan(p)](std::ostream& os) {
            os.write(reinterpret_cast<const char*>(bytes.data()), static_cast<std::streamsize>(bytes.size()));
          }};
}

//! Writes serialize_plan(p) to `path` atomically (bgtq::atomic_write_file).
//! @throws bgtq::error(invalid_argument) as serialize_plan (nothing is written then),
//!         io_error if the file cannot be written; `path` is untouched on any failure.
inline void save_plan(const std::string& path, const plan& p) { atomic_write_files({plan_output(path, p)}); }

//! Reads and validates a plan file, or a stream holding one (detail::is_stream: read in
//! stages, the magic, the header, then the payload it declares and one byte more).
//! @throws bgtq::error(io_error) if it cannot be read; otherwise as deserialize_plan.
inline plan load_plan(const std::string& path) {
  if (detail::is_stream(path)) {
    detail::stream_reader in(path);
    if (in.fill_to(8) && std::equal(in.bytes().begin(), in.bytes().begin() + 8, detail::plan_magic) &&
        in.fill_to(detail::plan_header_bytes)) {
      const std::uint64_t payload = detail::plan_payload_length(in.bytes().data());
      if (payload <= (std::uint64_t{1} << 40))  // larger: deserialize_plan reports it from the header
        in.fill_to(detail::plan_header_bytes + static_cast<std::size_t>(payload) + detail::plan_trailer_bytes + 1);
    }
    return deserialize_plan(in.bytes().data(), in.bytes().size(), path);
  }
  std::ifstream in;
  const std::uintmax_t fsz = detail::open_for_reading(path, in);
  BGTQ_REQUIRE(fsz <= (std::uintmax_t{1} << 40), errc::format_error, path + ": " + std::to_string(fsz) + " bytes is too large for a plan file");
  // the magic first: another file passed as a plan (a large .npy) fails before the rest
  // of it is read into memory, with deserialize_plan's message
  const std::size_t head = static_cast<std::size_t>(std::min<std::uintmax_t>(fsz, 8));
  std::vector<unsigned char> bytes(head);
  in.read(reinterpret_cast<char*>(bytes.data()), static_cast<std::streamsize>(head));
  if (static_cast<std::size_t>(in.gcount()) != head) fail(errc::io_error, "read from '" + path + "' failed");
  if (!std::equal(bytes.begin(), bytes.end(), detail::plan_magic)) (void)deserialize_plan(bytes.data(), head, path);
  bytes.resize(static_cast<std::size_t>(fsz));
  const std::size_t rest = bytes.size() - head;
  in.read(reinterpret_cast<char*>(bytes.data() + head), static_cast<std::streamsize>(rest));
  if (static_cast<std::size_t>(in.gcount()) != rest) fail(errc::io_error, "read from '" + path + "' failed");
  return deserialize_plan(bytes.data(), bytes.size(), path);
}

//! Writes `p` as one JSON object with every field (enums by name, seeds as exact
//! integers, doubles with 17 significant digits):
//! @code
//! {"format_version":1,"layers":..,"kv_heads":..,"q_heads":..,
//!  "rope":{"head_dim":..,"pairing":"half","rotary_dim":..,"base":..},
//!  "codebook":"sphere","key_radius":"fp16","value_radius":"fp16","norm_correction":false,
//!  "avg_bits":..,"b_min":..,"b_max":..,"scope":"head","distortion":"rate4","seed":..,
//!  "calib_tokens":..,"value_bits":..,"value_rotation":"hadamard",
//!  "heads":[{"layer":0,"kv_head":0,"widths":[..],"value_seed":..,"scores":[..],
//!            "groups":[{"bits":..,"rotation":"haar","seed":..,"blocks":[..]},..]},..]}
//! @endcode
//! Does not validate `p`; heads, value seeds and scores beyond the plan's own sizes are
//! written only as far as they exist.
inline void write_plan_json(std::ostream& os, const plan& p) {
  json_writer w(os);
  w.begin_object();
  w.key("format_version").value(plan::format_version);
  w.key("layers").value(p.layers);
  w.key("kv_heads").value(p.kv_heads);
  w.key("q_heads").value(p.q_heads);
  w.key("rope").begin_object();
  w.key("head_dim").value(p.rope.head_dim);
  w.key("pairing").value(to_string(p.rope.pairing));
  w.key("rotary_dim").value(p.rope.rotary_dim);
  w.key("base").value(p.rope.base);
  w.end_object();
  w.key("codebook").value(to_string(p.codebook));
  w.key("key_radius").value(to_string(p.key_radius));
  w.key("value_radius").value(to_string(p.value_radius));
  w.key("norm_correction").value(p.norm_correction);
  w.key("avg_bits").value(p.avg_bits);
  w.key("b_min").value(p.b_min);
  w.key("b_max").value(p.b_max);
  w.key("scope").value(to_string(p.scope));
  w.key("distortion").value(to_string(p.distortion));
  w.key("seed").value(p.seed);
  w.key("calib_tokens").value(p.calib_tokens);
  w.key("value_bits").value(p.value_bits);
  w.key("value_rotation").value(to_string(p.value_rotation));
  w.key("heads").begin_array();
  const std::size_t L = p.rope.head_dim > 0 ? static_cast<std::size_t>(p.rope.head_dim / 2) : 0;
  for (std::size_t i = 0; i < p.heads.size(); ++i) {
    const head_plan& hp = p.heads[i];
    w.begin_object();
    if (p.kv_heads > 0) {
      w.key("layer").value(i / static_cast<std::size_t>(p.kv_heads));
      w.key("kv_head").value(i % static_cast<std::size_t>(p.kv_heads));
    }
    w.key("widths").array(hp.widths);
    if (i < p.value_seeds.size()) w.key("value_seed").value(p.value_seeds[i]);
    w.key("scores").begin_array();
    for (std::size_t k = 0; k < L && i * L + k < p.scores.size(); ++k) w.value(p.scores[i * L + k]);
    w.end_array();
    w.key("groups").begin_array();
    for (const group_spec& g : hp.groups) {
      w.begin_object();
      w.key("bits").value(g.bits);
      w.key("rotation").value(to_string(g.rotation));
      w.key("seed").value(g.seed);
      w.key("blocks").array(g.blocks);
      w.end_object();
    }
    w.end_array();
    w.end_object();
  }
  w.end_array();
  w.end_object();
}

}  // namespace bgtq
