#include <catch2/catch.hpp>

#include <bgtq/io/checksum.hpp>
#include <bgtq/plan/plan_io.hpp>

#include <cctype>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <limits>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "common.hpp"
#include "io/io_util.hpp"
#include "plan/plan_gen.hpp"

#include <sys/stat.h>

using bgtq::errc;
using bgtq_test::require_error;

namespace {

using bytes_t = std::vector<unsigned char>;

bgtq::plan load(const bytes_t& b, const std::string& name = "plan.bin") { return bgtq::deserialize_plan(b.data(), b.size(), name); }

// Absolute offsets of the fixed fields (docs/formats.md).
constexpr std::size_t off_version = 8, off_flags = 12, off_payload = 16, off_layers = 24, off_kv_heads = 28,
                      off_q_heads = 32, off_head_dim = 36, off_rotary_dim = 40, off_base = 44, off_codebook = 53,
                      off_norm_corr = 56, off_value_rot = 59, off_avg_bits = 60, off_b_max = 72, off_calib = 88,
                      off_first_head = 96;

void put_le(bytes_t& b, std::size_t at, std::uint64_t v, int n) {
  for (int i = 0; i < n; ++i) b[at + static_cast<std::size_t>(i)] = static_cast<unsigned char>(v >> (8 * i));
}
//! Recomputes the trailing CRC-32C so that a patched field is reached by the field checks.
void reseal(bytes_t& b) { put_le(b, b.size() - 4, bgtq::crc32c(b.data(), b.size() - 4), 4); }
bytes_t patched(bytes_t b, std::size_t at, std::uint64_t v, int n) {
  put_le(b, at, v, n);
  reseal(b);
  return b;
}

bgtq::plan small_plan() {
  bgtq::plan p;
  p.layers = 1;
  p.kv_heads = 2;
  p.q_heads = 4;
  p.rope = bgtq::rope_layout(8, bgtq::rope_pairing::half);
  p.avg_bits = 3.0;
  p.b_min = 1;
  p.b_max = 6;
  p.seed = 0x0123456789ABCDEFull;
  p.calib_tokens = 66;
  p.value_bits = 3;
  p.value_rotation = bgtq::rotation_kind::hadamard;
  p.heads.push_back(bgtq::make_head_plan({2, 4, 2, 4}, bgtq::mix_seed(p.seed, 0)));
  p.heads.push_back(bgtq::make_head_plan({1, 3, 3, 5}, bgtq::mix_seed(p.seed, 1)));
  p.value_seeds = {11, 22};
  p.scores = {0.5, 2.0, 0.25, 8.0, 1.0, 1.5, 3.5, 0.0};
  return p;
}

// ---- a tiny validating JSON parser (DOM with raw number text) ----
struct json_value {
  // declared: an aggregate's members (a vector of pairs holding this still incomplete
  // type) would be checked too early for clang 14 with libstdc++ 12 (Debian 12's clang)
  json_value() = default;
  enum kind_t { null_v, bool_v, number_v, string_v, array_v, object_v } kind = null_v;
  std::string text;  // number text or string content
  bool b = false;
  std::vector<json_value> items;
  std::vector<std::pair<std::string, json_value>> members;
  const json_value& at(const std::string& k) const {
    for (const auto& m : members)
      if (m.first == k) return m.second;
    FAIL("JSON object has no key '" << k << "'");
    return *this;
  }
  bool has(const std::string& k) const {
    for (const auto& m : members)
      if (m.first == k) return true;
    return false;
  }
  long long as_int() const {
    REQUIRE(kind == number_v);
    return std::stoll(text);
  }
};

class json_parser {
 public:
  explicit json_parser(const std::string& s) : s_(s) {}
  json_value parse_document() {
    json_value v = value();
    ws();
    if (i_ != s_.size()) bad("trailing text");
    return v;
  }

 private:
  [[noreturn]] void bad(const std::string& what) {
    FAIL("invalid JSON at " << i_ << ": " << what);
    throw 0;
  }
  void ws() {
    while (i_ < s_.size() && (s_[i_] == ' ' || s_[i_] == '\n' || s_[i_] == '\t' || s_[i_] == '\r')) ++i_;
  }
  bool eat(char c) {
    ws();
    if (i_ < s_.size() && s_[i_] == c) {
      ++i_;
      return true;
    }
    return false;
  }
  std::string str() {
    if (!eat('"')) bad("expected string");
    std::string out;
    for (;;) {
      if (i_ >= s_.size()) bad("unterminated string");
      const char c = s_[i_++];
      if (c == '"') return out;
      if (static_cast<unsigned char>(c) < 0x20) bad("control character in string");
      if (c == '\\') {
        if (i_ >= s_.size()) bad("bad escape");
        const char e = s_[i_++];
        if (e == 'u') {
          for (int k = 0; k < 4; ++k)
            if (i_ >= s_.size() || !std::isxdigit(static_cast<unsigned char>(s_[i_++]))) bad("bad \\u escape");
          out += '?';
        } else if (std::string("\"\\/bfnrt").find(e) != std::string::npos) {
          out += e;
        } else {
          bad("bad escape");
        }
      } else {
        out += c;
      }
    }
  }
  json_value value() {
    ws();
    json_value v;
    if (i_ >= s_.size()) bad("unexpected end");
    const char c = s_[i_];
    if (c == '{') {
      ++i_;
      v.kind = json_value::object_v;
      if (eat('}')) return v;
      do {
        std::string k = str();
        if (!eat(':')) bad("expected ':'");
        v.members.emplace_back(k, value());
      } while (eat(','));
      if (!eat('}')) bad("expected '}'");
    } else if (c == '[') {
      ++i_;
      v.kind = json_value::array_v;
      if (eat(']')) return v;
      do v.items.push_back(value());
      while (eat(','));
      if (!eat(']')) bad("expected ']'");
    } else if (c == '"') {
      v.kind = json_value::string_v;
      v.text = str();
    } else if (s_.compare(i_, 4, "true") == 0 || s_.compare(i_, 5, "false") == 0) {
      v.kind = json_value::bool_v;
      v.b = s_[i_] == 't';
      i_ += v.b ? 4 : 5;
    } else if (s_.compare(i_, 4, "null") == 0) {
      i_ += 4;
    } else {
      // number: -?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?
      const std::size_t st = i_;
      if (s_[i_] == '-') ++i_;
      auto digits = [&] {
        const std::size_t d0 = i_;
        while (i_ < s_.size() && std::isdigit(static_cast<unsigned char>(s_[i_]))) ++i_;
        if (i_ == d0) bad("expected digits");
        return i_ - d0;
      };
      const std::size_t d0 = i_;
      const std::size_t n = digits();
      if (n > 1 && s_[d0] == '0') bad("leading zero");
      if (i_ < s_.size() && s_[i_] == '.') {
        ++i_;
        digits();
      }
      if (i_ < s_.size() && (s_[i_] == 'e' || s_[i_] == 'E')) {
        ++i_;
        if (i_ < s_.size() && (s_[i_] == '+' || s_[i_] == '-')) ++i_;
        digits();
      }
      v.kind = json_value::number_v;
      v.text = s_.substr(st, i_ - st);
    }
    return v;
  }

  const std::string& s_;
  std::size_t i_ = 0;
};

}  // namespace

TEST_CASE("plan binary round trip of random valid plans", "[plan][plan_io]") {
  for (std::uint64_t s = 0; s < 60; ++s) {
    const bgtq::plan p = bgtq_test::random_plan(1000 + s);
    REQUIRE_NOTHROW(bgtq::validate(p));
    const bytes_t b = bgtq::serialize_plan(p);
    INFO("seed " << s << " bytes " << b.size());
    CHECK(bgtq::serialize_plan(p) == b);  // deterministic
    const bgtq::plan q = load(b);
    REQUIRE(q == p);
    CHECK(bgtq::serialize_plan(q) == b);
  }
  // a model-sized plan: 32 layers x 8 KV heads x 64 blocks
  const bgtq::plan big = bgtq_test::random_plan(7, {32, 8, 128});
  const bytes_t b = bgtq::serialize_plan(big);
  CHECK(load(b) == big);
  // size formula: header, fixed fields, per head 8 + L + per group (12 + 2 * blocks),
  // value seeds, scores, CRC
  std::size_t expect = 24 + 72 + 8 + 8 + 4;
  for (const auto& hp : big.heads) {
    expect += 8 + hp.widths.size();
    for (const auto& g : hp.groups) expect += 12 + 2 * g.blocks.size();
  }
  expect += 8 * big.value_seeds.size() + 8 * big.scores.size();
  CHECK(b.size() == expect);
}

TEST_CASE("plan files: save_plan / load_plan, atomic replacement", "[plan][plan_io]") {
  bgtq_test::temp_dir dir("plan_files");
  const bgtq::plan p = bgtq_test::random_plan(5);
  const std::string path = dir.file("plan.bin");
  bgtq::save_plan(path, p);
  CHECK(bgtq::load_plan(path) == p);
  CHECK(bgtq_test::read_bytes(path) == bgtq::serialize_plan(p));
  const bgtq::plan p2 = bgtq_test::random_plan(6);
  bgtq::save_plan(path, p2);
  CHECK(bgtq::load_plan(path) == p2);
  CHECK(dir.entries() == std::vector<std::string>{"plan.bin"});
  // an invalid plan is rejected before anything is written
  bgtq::plan bad = p2;
  bad.heads.pop_back();
  require_error([&] { bgtq::save_plan(path, bad); }, errc::invalid_argument, "head plans");
  CHECK(bgtq::load_plan(path) == p2);
  require_error([&] { bgtq::save_plan(dir.file("nodir/plan.bin"), p); }, errc::io_error, "nodir");
  CHECK(dir.entries() == std::vector<std::string>{"plan.bin"});
  require_error([&] { bgtq::load_plan(dir.file("missing.bin")); }, errc::io_error, "missing.bin");
  require_error([&] { bgtq::load_plan(dir.path.string()); }, errc::io_error, "is a directory");
  // a stream (a FIFO, as /dev/stdin would be): read whole, then checked like a file
  const std::string fifo = dir.file("pipe");
  REQUIRE(::mkfifo(fifo.c_str(), 0600) == 0);
  for (const bool cut : {false, true}) {
    bytes_t bytes = bgtq::serialize_plan(p2);
    if (cut) bytes.resize(bytes.size() - 1);
    std::thread writer([&] {  // no Catch2 macros on this thread
      std::ofstream out(fifo, std::ios::binary);
      out.write(reinterpret_cast<const char*>(bytes.data()), static_cast<std::streamsize>(bytes.size()));
    });
    bgtq::plan got;
    std::string error;
    try {
      got = bgtq::load_plan(fifo);
    } catch (const bgtq::error& e) {
      error = e.what();
    }
    writer.join();
    INFO(error);
    if (cut) {
      CHECK(error.find("pipe") != std::string::npos);
      CHECK(error.find("truncated plan file") != std::string::npos);
    } else {
      CHECK(error.empty());
      CHECK(got == p2);
    }
  }
  // a device that never ends fails on its magic (read in stages), not when memory runs out
  require_error([&] { bgtq::load_plan("/dev/zero"); }, errc::format_error, "bad magic at offset 0");
}

TEST_CASE("plan layout: header fields at their documented offsets", "[plan][plan_io]") {
  const bgtq::plan p = small_plan();
  const bytes_t b = bgtq::serialize_plan(p);
  CHECK(std::string(b.begin(), b.begin() + 8) == "BGTQPLAN");
  auto le = [&](std::size_t at, int n) {
    std::uint64_t v = 0;
    for (int i = 0; i < n; ++i) v |= static_cast<std::uint64_t>(b[at + static_cast<std::size_t>(i)]) << (8 * i);
    return v;
  };
  CHECK(le(off_version, 4) == 1);
  CHECK(le(off_flags, 4) == 0);
  CHECK(le(off_payload, 8) == b.size() - 28);
  CHECK(le(off_layers, 4) == 1);
  CHECK(le(off_kv_heads, 4) == 2);
  CHECK(le(off_q_heads, 4) == 4);
  CHECK(le(off_head_dim, 4) == 8);
  CHECK(le(off_rotary_dim, 4) == 8);
  CHECK(le(off_base, 8) == 0x40C3880000000000ull);  // 10000.0
  CHECK(b[52] == 1);                                 // half pairing
  CHECK(b[off_value_rot] == 2);                      // hadamard
  CHECK(le(off_avg_bits, 8) == 0x4008000000000000ull);  // 3.0
  CHECK(le(80, 8) == 0x0123456789ABCDEFull);
  CHECK(le(off_calib, 8) == 66);
  CHECK(le(off_first_head, 4) == 4);      // widths
  CHECK(le(off_first_head + 4, 4) == 2);  // groups {0,2} at 2 bits, {1,3} at 4 bits
  CHECK(b[off_first_head + 8] == 2);
  CHECK(b[off_first_head + 9] == 4);
  CHECK(b[off_first_head + 12] == 2);           // group 0 bits
  CHECK(b[off_first_head + 13] == 1);           // haar
  CHECK(le(off_first_head + 14, 2) == 2);       // 2 blocks
  CHECK(le(off_first_head + 24, 2) == 0);       // block 0
  CHECK(le(off_first_head + 26, 2) == 2);       // block 2
  CHECK(le(b.size() - 4, 4) == bgtq::crc32c(b.data(), b.size() - 4));
  CHECK(b.size() < 400);
}

TEST_CASE("plan file: every single-byte corruption is detected, in file order", "[plan][plan_io]") {
  const bytes_t good = bgtq::serialize_plan(small_plan());
  const std::size_t n = good.size();
  int caught = 0;
  for (std::size_t i = 0; i < n; ++i) {
    for (unsigned x : {0x01u, 0x80u, 0xFFu, 0x24u}) {
      bytes_t b = good;
      b[i] ^= static_cast<unsigned char>(x);
      INFO("byte " << i << " xor " << x);
      try {
        (void)load(b);
        FAIL("corruption at byte " << i << " was not detected");
      } catch (const bgtq::error& e) {
        ++caught;
        const std::string m = e.what();
        INFO(m);
        if (i < 8) {
          CHECK(e.code() == errc::format_error);
          CHECK_THAT(m, Catch::Contains("bad magic at offset " + std::to_string(i)));
        } else if (i < 12) {
          const bool zero = i == 8 && x == 0x01u;
          CHECK(e.code() == (zero ? errc::format_error : errc::version_unsupported));
          if (!zero) CHECK_THAT(m, Catch::Contains("plan.bin was written by format version"));
        } else if (i >= 16 && i < 24) {
          CHECK(e.code() == errc::format_error);
          CHECK_THAT(m, Catch::Contains("truncated") || Catch::Contains("trailing bytes"));
        } else {
          CHECK(e.code() == errc::checksum_mismatch);
          CHECK_THAT(m, Catch::Contains("plan.bin: checksum mismatch at offset " + std::to_string(n - 4)));
        }
      }
    }
  }
  CHECK(caught == static_cast<int>(4 * n));
}

TEST_CASE("plan file: truncation at every length and trailing bytes", "[plan][plan_io]") {
  const bytes_t good = bgtq::serialize_plan(bgtq_test::random_plan(42));
  for (std::size_t len = 0; len < good.size(); ++len) {
    INFO("length " << len);
    require_error([&] { load(bytes_t(good.begin(), good.begin() + static_cast<long>(len))); }, errc::format_error,
                  "truncated plan file");
  }
  bytes_t longer = good;
  longer.push_back(0);
  longer.push_back(0);
  require_error([&] { load(longer); }, errc::format_error, "2 trailing bytes after the checksum");
  require_error([&] { load(bytes_t{'B', 'G', 'T', 'X'}); }, errc::format_error, "bad magic at offset 3");
  require_error([&] { load(bytes_t{0x93, 'N', 'U', 'M', 'P', 'Y', 1, 0, 0, 0}); }, errc::format_error,
                "not a blockgtq plan file: bad magic at offset 0");
  // the JSON export given where the binary plan belongs: said so
  const std::string js = "\n  {\"layers\": 2}";
  require_error([&] { load(bytes_t(js.begin(), js.end())); }, errc::format_error,
                "it looks like JSON: the JSON export (calibrate --json-out) is for reading");
  try {
    load(bytes_t{'B', 'G', 'T', 'X'});
  } catch (const bgtq::error& e) {
    CHECK_THAT(std::string(e.what()), !Catch::Contains("JSON"));
  }
}

TEST_CASE("plan file: newer version, checksum and flags messages", "[plan][plan_io]") {
  const bytes_t good = bgtq::serialize_plan(small_plan());
  {
    bytes_t b = good;
    put_le(b, off_version, 7, 4);  // checksum not updated: the version is checked first
    try {
      load(b);
      FAIL("no error");
    } catch (const bgtq::error& e) {
      CHECK(e.code() == errc::version_unsupported);
      CHECK(std::string(e.what()) == "plan.bin was written by format version 7; this build reads up to 1");
    }
    require_error([&] { load(patched(good, off_version, 0, 4)); }, errc::format_error, "at offset 8: format version 0 is invalid");
  }
  {
    bytes_t b = good;
    b[off_first_head + 8] ^= 0x10;
    char expect[128];
    std::snprintf(expect, sizeof expect, "p.bin: checksum mismatch at offset %zu: stored CRC-32C 0x%08x, computed 0x%08x",
                  good.size() - 4, static_cast<unsigned>(bgtq::crc32c(good.data(), good.size() - 4)),
                  static_cast<unsigned>(bgtq::crc32c(b.data(), b.size() - 4)));
    require_error([&] { load(b, "p.bin"); }, errc::checksum_mismatch, expect);
  }
  require_error([&] { load(patched(good, off_flags, 4, 4)); }, errc::format_error, "at offset 12: unknown flags 0x00000004");
}

TEST_CASE("plan file: out-of-range fields behind a valid checksum are named with their offset", "[plan][plan_io]") {
  const bytes_t good = bgtq::serialize_plan(small_plan());
  struct field_case {
    std::size_t at;
    std::uint64_t v;
    int n;
    errc code;
    std::string needle;
  };
  const double nan = std::numeric_limits<double>::quiet_NaN();
  const std::vector<field_case> cases = {
      {off_layers, 0, 4, errc::format_error, "at offset 24: layers = 0 (allowed 1..4096)"},
      {off_layers, 0xFFFFFFFF, 4, errc::format_error, "layers = -1"},
      {off_kv_heads, 5000, 4, errc::format_error, "at offset 28: kv_heads = 5000"},
      {off_q_heads, 3, 4, errc::format_error, "invalid plan: plan: q_heads = 3 is not a multiple of kv_heads = 2"},
      {off_head_dim, 7, 4, errc::format_error, "at offset 36: head_dim = 7 is odd"},
      {off_head_dim, 2048, 4, errc::format_error, "head_dim = 2048 (allowed 2..1024)"},
      {off_rotary_dim, 10, 4, errc::format_error, "at offset 40: rotary_dim = 10 (allowed 0..8)"},
      {off_base, 0x3FF0000000000000ull, 8, errc::format_error, "at offset 44: rope base = 1.0"},
      {off_base, std::bit_cast<std::uint64_t>(nan), 8, errc::format_error, "rope base = nan"},
      {off_codebook, 3, 1, errc::format_error, "at offset 53: codebook kind = 3 is not a valid value (0..2)"},
      // every other one-byte enum, one past its largest value, named by the reader (with
      // its offset), not only by validate afterwards
      {52, 2, 1, errc::format_error, "at offset 52: rope pairing = 2"},
      {54, 2, 1, errc::format_error, "at offset 54: key radius format = 2"},
      {55, 2, 1, errc::format_error, "at offset 55: value radius format = 2"},
      {57, 3, 1, errc::format_error, "at offset 57: alloc scope = 3"},
      {58, 2, 1, errc::format_error, "at offset 58: distortion kind = 2"},
      {off_norm_corr, 2, 1, errc::format_error, "norm_correction = 2 is not a valid value"},
      {off_value_rot, 9, 1, errc::format_error, "value rotation kind = 9"},
      {off_avg_bits, std::bit_cast<std::uint64_t>(-1.0), 8, errc::format_error, "at offset 60: avg_bits = -1.0"},
      {off_b_max, 9, 4, errc::format_error, "at offset 72: b_max = 9 (allowed 0..8)"},
      {68, 7, 4, errc::format_error, "invalid plan: plan: b_min/b_max = 7/6"},
      {off_calib, std::uint64_t(-5), 8, errc::format_error, "at offset 88: calib_tokens = -5 is negative"},
      {off_first_head, 5, 4, errc::format_error, "at offset 96: head record 0 (layer 0 kv_head 0): width count 5 differs"},
      {off_first_head + 4, 0xFFFFFFFF, 4, errc::format_error, "group count 4294967295 (allowed 1..4)"},
      {off_first_head + 4, 3, 4, errc::format_error, "at offset"},
      {off_first_head + 9, 9, 1, errc::format_error, "at offset 105: head record 0 (layer 0 kv_head 0): block 1 width 9"},
      {off_first_head + 13, 4, 1, errc::format_error, "group 0: rotation kind 4 is not a valid value"},
      {off_first_head + 14, 0xFFFF, 2, errc::format_error, "group 0: block count 65535 (allowed 1..4)"},
      {off_first_head + 14, 0, 2, errc::format_error, "block count 0"},
      {off_first_head + 26, 4, 2, errc::format_error, "at offset 122: head record 0 (layer 0 kv_head 0) group 0: block index 4"},
      {off_first_head + 26, 1, 2, errc::format_error, "invalid plan: plan: layer 0 kv_head 0 group 0 block 1 has width 4"},
      {off_first_head + 12, 3, 1, errc::format_error, "but the group has 3"},
  };
  for (const auto& c : cases) {
    INFO("patch offset " << c.at << " value " << c.v);
    require_error([&] { load(patched(good, c.at, c.v, c.n)); }, c.code, c.needle);
    require_error([&] { load(patched(good, c.at, c.v, c.n)); }, c.code, "plan.bin: ");
  }
  // counts at the end: value seeds and scores
  const std::size_t n = good.size();
  const std::size_t off_scores_count = n - 4 - 8 * 8 - 8;
  const std::size_t off_seeds_count = off_scores_count - 2 * 8 - 8;
  require_error([&] { load(patched(good, off_seeds_count, 1ull << 60, 8)); }, errc::format_error,
                "at offset " + std::to_string(off_seeds_count) + ": value seed count 1152921504606846976 differs");
  require_error([&] { load(patched(good, off_scores_count, 9, 8)); }, errc::format_error, "score count 9 differs");
  require_error([&] { load(patched(good, off_scores_count + 8 + 8 * 3, std::bit_cast<std::uint64_t>(-2.0), 8)); },
                errc::format_error, "score 3 = -2.0");
  require_error([&] { load(patched(good, off_scores_count + 8, std::bit_cast<std::uint64_t>(std::numeric_limits<double>::infinity()), 8)); },
                errc::format_error, "score 0 = inf");
}

TEST_CASE("plan file: corrupted counts never cause huge allocations", "[plan][plan_io]") {
  // 4096 x 4096 heads declared by a 400-byte file: rejected by the bytes-left check
  bytes_t b = bgtq::serialize_plan(small_plan());
  put_le(b, off_layers, 4096, 4);
  put_le(b, off_kv_heads, 4096, 4);
  put_le(b, off_q_heads, 4096, 4);
  reseal(b);
  require_error([&] { load(b); }, errc::format_error,
                "head records (layers * kv_heads) = 16777216 needs at least 23 bytes each, but only");
  // a payload that ends in the middle of a record (payload length and CRC consistent)
  bytes_t good = bgtq::serialize_plan(small_plan());
  auto cut_at = [&](std::size_t len) {
    bytes_t cut(good.begin(), good.begin() + static_cast<long>(len));
    put_le(cut, off_payload, cut.size() - 24, 8);
    cut.resize(cut.size() + 4);
    reseal(cut);
    return cut;
  };
  require_error([&] { load(cut_at(64)); }, errc::format_error, "at offset 60: payload ends inside 'avg_bits' (needs 8 bytes, 4 left)");
  require_error([&] { load(cut_at(110)); }, errc::format_error,
                "at offset 96: head records (layers * kv_heads) = 2 needs at least 23 bytes each, but only 14 payload bytes are left");
  require_error([&] { load(cut_at(160)); }, errc::format_error,
                "at offset 152: group count = 3 needs at least 14 bytes each, but only 8 payload bytes are left");
  // unused payload bytes
  bytes_t extra(good.begin(), good.end() - 4);
  extra.push_back(0);
  put_le(extra, off_payload, extra.size() - 24, 8);
  extra.resize(extra.size() + 4);
  reseal(extra);
  require_error([&] { load(extra); }, errc::format_error, "1 unused payload bytes");
}

TEST_CASE("serialize_plan rejects plans it could not store exactly", "[plan][plan_io]") {
  bgtq::plan p = small_plan();
  p.scores[3] = std::numeric_limits<double>::quiet_NaN();
  require_error([&] { bgtq::serialize_plan(p); }, errc::invalid_argument, "scores[3]");
  p = small_plan();
  p.avg_bits = std::numeric_limits<double>::infinity();
  require_error([&] { bgtq::serialize_plan(p); }, errc::invalid_argument, "avg_bits");
  p = small_plan();
  p.codebook = static_cast<bgtq::codebook_kind>(7);
  require_error([&] { bgtq::serialize_plan(p); }, errc::invalid_argument, "codebook kind");
  p = small_plan();
  p.value_rotation = static_cast<bgtq::rotation_kind>(5);
  require_error([&] { bgtq::serialize_plan(p); }, errc::invalid_argument, "value rotation");
  p = small_plan();
  p.heads[1].groups[0].blocks = {0, 1};
  require_error([&] { bgtq::serialize_plan(p); }, errc::invalid_argument, "plan: layer 0 kv_head 1");
}

TEST_CASE("plan JSON export is valid JSON with every field", "[plan][plan_io]") {
  for (std::uint64_t s = 0; s < 10; ++s) {
    const bgtq::plan p = bgtq_test::random_plan(300 + s);
    std::ostringstream os;
    bgtq::write_plan_json(os, p);
    const std::string text = os.str();
    INFO(text.substr(0, 400));
    const json_value j = json_parser(text).parse_document();
    REQUIRE(j.kind == json_value::object_v);
    for (const char* k : {"format_version", "layers", "kv_heads", "q_heads", "rope", "codebook", "key_radius", "value_radius",
                          "norm_correction", "avg_bits", "b_min", "b_max", "scope", "distortion", "seed", "calib_tokens",
                          "value_bits", "value_rotation", "heads"})
      CHECK(j.has(k));
    CHECK(j.members.size() == 19);
    CHECK(j.at("format_version").as_int() == 1);
    CHECK(j.at("layers").as_int() == p.layers);
    CHECK(j.at("kv_heads").as_int() == p.kv_heads);
    CHECK(j.at("q_heads").as_int() == p.q_heads);
    CHECK(j.at("rope").at("head_dim").as_int() == p.rope.head_dim);
    CHECK(j.at("rope").at("rotary_dim").as_int() == p.rope.rotary_dim);
    CHECK(j.at("rope").at("pairing").text == bgtq::to_string(p.rope.pairing));
    CHECK(std::stod(j.at("rope").at("base").text) == p.rope.base);
    CHECK(j.at("codebook").text == bgtq::to_string(p.codebook));
    CHECK(j.at("key_radius").text == bgtq::to_string(p.key_radius));
    CHECK(j.at("value_radius").text == bgtq::to_string(p.value_radius));
    CHECK(j.at("norm_correction").b == p.norm_correction);
    CHECK(std::stod(j.at("avg_bits").text) == p.avg_bits);
    CHECK(j.at("scope").text == bgtq::to_string(p.scope));
    CHECK(j.at("distortion").text == bgtq::to_string(p.distortion));
    CHECK(j.at("seed").text == std::to_string(p.seed));  // exact 64-bit integer
    CHECK(j.at("calib_tokens").as_int() == p.calib_tokens);
    CHECK(j.at("value_bits").as_int() == p.value_bits);
    CHECK(j.at("value_rotation").text == bgtq::to_string(p.value_rotation));
    const auto& heads = j.at("heads").items;
    REQUIRE(heads.size() == p.heads.size());
    const std::size_t L = static_cast<std::size_t>(p.num_blocks());
    for (std::size_t i = 0; i < heads.size(); ++i) {
      const auto& h = heads[i];
      CHECK(static_cast<std::size_t>(h.at("layer").as_int()) == i / static_cast<std::size_t>(p.kv_heads));
      CHECK(static_cast<std::size_t>(h.at("kv_head").as_int()) == i % static_cast<std::size_t>(p.kv_heads));
      CHECK(h.at("value_seed").text == std::to_string(p.value_seeds[i]));
      REQUIRE(h.at("widths").items.size() == L);
      REQUIRE(h.at("scores").items.size() == L);
      for (std::size_t k = 0; k < L; ++k) {
        CHECK(h.at("widths").items[k].as_int() == p.heads[i].widths[k]);
        CHECK(std::stod(h.at("scores").items[k].text) == p.scores[i * L + k]);  // 17 digits: exact
      }
      const auto& groups = h.at("groups").items;
      REQUIRE(groups.size() == p.heads[i].groups.size());
      for (std::size_t g = 0; g < groups.size(); ++g) {
        const auto& gs = p.heads[i].groups[g];
        CHECK(groups[g].at("bits").as_int() == gs.bits);
        CHECK(groups[g].at("rotation").text == bgtq::to_string(gs.rotation));
        CHECK(groups[g].at("seed").text == std::to_string(gs.seed));
        REQUIRE(groups[g].at("blocks").items.size() == gs.blocks.size());
        for (std::size_t k = 0; k < gs.blocks.size(); ++k) CHECK(groups[g].at("blocks").items[k].as_int() == gs.blocks[k]);
      }
    }
  }
}

TEST_CASE("plan fuzz seed corpus is current and loads", "[plan][plan_io][corpus]") {
  struct seed {
    const char* file;
    bgtq::plan p;
  };
  bgtq::plan partial = bgtq_test::random_plan(77, {2, 2, 6});
  partial.rope = bgtq::rope_layout(6, bgtq::rope_pairing::interleaved, 4);
  const std::vector<seed> seeds = {
      {"small_1x2_d8.seed", small_plan()},
      {"partial_2x2_d6.seed", partial},
      {"random_1x3_d16.seed", bgtq_test::random_plan(78, {1, 3, 16})},
  };
  for (const auto& s : seeds) {
    const bytes_t b = bgtq::serialize_plan(s.p);
    CHECK(b.size() < 2048);
    CHECK(load(b) == s.p);
    bgtq_test::check_or_write_corpus("plan", s.file, b);
  }
}
