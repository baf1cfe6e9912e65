// Bad-input contract (docs/errors.md), input files and allocation rows: one TEST_CASE per
// table row, named "errors row N: ...".
#include <bgtq/allocate/allocate.hpp>
#include <bgtq/io/npy.hpp>
#include <bgtq/plan/build.hpp>
#include <bgtq/plan/plan.hpp>
#include <bgtq/plan/plan_io.hpp>

#include <cmath>
#include <fstream>
#include <limits>
#include <string>
#include <vector>

#include "errors_util.hpp"

using errors_test::require_error;

namespace {

std::vector<unsigned char> npy_of(const std::vector<float>& x, std::vector<std::size_t> shape,
                                  bgtq::npy_dtype dt = bgtq::npy_dtype::f32) {
  return bgtq::npy_bytes(x.data(), shape, dt);
}

void write_file(const std::filesystem::path& p, const std::vector<unsigned char>& b) {
  std::ofstream out(p, std::ios::binary | std::ios::trunc);
  out.write(reinterpret_cast<const char*>(b.data()), static_cast<std::streamsize>(b.size()));
  REQUIRE(out.good());
}

//! A small valid plan: 2 layers, 2 KV heads, D = 8 (4 blocks), widths {3, 1, 2, 3}.
bgtq::plan small_plan() {
  bgtq::plan p;
  p.layers = 2;
  p.kv_heads = 2;
  p.q_heads = 4;
  p.rope = bgtq::rope_layout(8, bgtq::rope_pairing::half);
  p.avg_bits = 2.25;
  p.b_min = 1;
  p.b_max = 3;
  p.seed = 42;
  p.value_bits = 3;
  p.value_rotation = bgtq::rotation_kind::hadamard;
  for (int i = 0; i < 4; ++i) {
    p.heads.push_back(bgtq::make_head_plan({3, 1, 2, 3}, bgtq::mix_seed(42, static_cast<std::uint64_t>(i))));
    p.value_seeds.push_back(bgtq::mix_seed(43, static_cast<std::uint64_t>(i)));
    for (int b = 0; b < 4; ++b) p.scores.push_back(1.0 + b);
  }
  bgtq::validate(p);
  return p;
}

}  // namespace

TEST_CASE("errors row 1: a truncated .npy is a format_error naming the needed and present bytes", "[errors]") {
  const std::vector<float> x(24, 1.5f);
  auto b = npy_of(x, {2, 3, 4});
  const std::size_t full = b.size();
  b.resize(full - 5);
  const auto msg = require_error([&] { (void)bgtq::parse_npy(b.data(), b.size(), "k.npy"); }, bgtq::errc::format_error,
                                 {"k.npy", "shorter than the shape says", "(2, 3, 4)", "needs 96 bytes", "has 91"});
  // truncated inside the header: the offset is named
  require_error([&] { (void)bgtq::parse_npy(b.data(), 40, "k.npy"); }, bgtq::errc::format_error, {"k.npy", "offset"});
  // the same through a file
  const auto dir = errors_test::scratch_dir("row1");
  write_file(dir / "k.npy", b);
  require_error([&] { (void)bgtq::read_npy((dir / "k.npy").string()); }, bgtq::errc::format_error, {"k.npy", "needs 96 bytes"});
  (void)msg;
}

TEST_CASE("errors row 2: an oversized .npy (trailing bytes or a huge shape) is a format_error, nothing allocated",
          "[errors]") {
  const std::vector<float> x(6, 2.0f);
  auto b = npy_of(x, {2, 3});
  b.push_back(0);
  b.push_back(0);
  require_error([&] { (void)bgtq::parse_npy(b.data(), b.size(), "q.npy"); }, bgtq::errc::format_error,
                {"q.npy", "2 trailing bytes"});
  // a header that claims 2^40 * 2^30 floats over 24 bytes of data: checked before allocation
  auto huge = bgtq::detail::npy_header_bytes({std::size_t{1} << 40, std::size_t{1} << 30}, bgtq::npy_dtype::f32);
  huge.resize(huge.size() + 24, 0);
  require_error([&] { (void)bgtq::parse_npy(huge.data(), huge.size(), "q.npy"); }, bgtq::errc::format_error,
                {"q.npy", "(1099511627776, 1073741824)"});
  // a shape whose element count overflows 64 bits
  auto over = bgtq::detail::npy_header_bytes({std::size_t{1} << 40, std::size_t{1} << 40}, bgtq::npy_dtype::f16);
  require_error([&] { (void)bgtq::parse_npy(over.data(), over.size(), "q.npy"); }, bgtq::errc::format_error,
                {"q.npy", "64-bit size"});
}

TEST_CASE("errors row 3: a NaN-laden .npy parses, and require_finite names the first bad element", "[errors]") {
  std::vector<float> x(2 * 3 * 4, 0.25f);
  x[1 * 12 + 1 * 4 + 2] = std::numeric_limits<float>::quiet_NaN();  // [1, 1, 2], flat 18
  x[23] = std::numeric_limits<float>::infinity();
  for (const auto dt : {bgtq::npy_dtype::f32, bgtq::npy_dtype::f16}) {
    const auto b = npy_of(x, {2, 3, 4}, dt);
    const bgtq::npy_array a = bgtq::parse_npy(b.data(), b.size(), "k.npy");  // the reader keeps raw values
    REQUIRE(std::isnan(a.data[18]));
    REQUIRE(std::isinf(a.data[23]));
    require_error([&] { bgtq::require_finite(a, "k.npy"); }, bgtq::errc::non_finite, {"k.npy", "[1, 1, 2]", "(flat 18)", "NaN"});
  }
  // values beyond 65504 written as f16 become Inf and are caught the same way
  std::vector<float> big(4, 1.0f);
  big[2] = 1e6f;
  const auto b = npy_of(big, {4}, bgtq::npy_dtype::f16);
  const auto a = bgtq::parse_npy(b.data(), b.size(), "v.npy");
  require_error([&] { bgtq::require_finite(a, "v.npy"); }, bgtq::errc::non_finite, {"v.npy", "[2]", "+Inf"});
}

TEST_CASE("errors row 6: a bit width outside 0..8 is an invalid_argument naming the value", "[errors]") {
  require_error([] { (void)bgtq::make_head_plan({3, 2, 9, 1}, 7); }, bgtq::errc::invalid_argument, {"block 2", "width 9", "0..8"});
  require_error([] { (void)bgtq::make_head_plan({-1, 2}, 7); }, bgtq::errc::invalid_argument, {"block 0", "width -1"});
  // a plan whose group claims 9 bits
  bgtq::plan p = small_plan();
  p.heads[3].groups[0].bits = 9;
  require_error([&] { bgtq::validate(p); }, bgtq::errc::invalid_argument, {"layer 1 kv_head 1 group 0", "bits = 9"});
  p = small_plan();
  p.value_bits = 12;
  require_error([&] { bgtq::validate(p); }, bgtq::errc::invalid_argument, {"value_bits = 12"});
  // build_plan's value_bits: -1 means round(avg_bits); anything else outside 0..8 is refused
  const bgtq::rope_layout rope(8, bgtq::rope_pairing::half);
  for (const int vb : {-2, -100, 9}) {
    bgtq::plan_options o;
    o.value_bits = vb;
    const std::string needle = "value_bits = " + std::to_string(vb);
    require_error([&] { (void)bgtq::build_plan(1, 1, 1, rope, std::vector<double>(4, 1.0), o); }, bgtq::errc::invalid_argument,
                  {needle.c_str(), "0 .. 8, or -1"});
  }
  // the allocators' width range
  const std::vector<double> s = {1, 2, 3};
  require_error([&] { (void)bgtq::greedy_allocator::allocate({.scores = s, .budget = 9, .b_min = 1, .b_max = 9}); },
                bgtq::errc::invalid_argument, {"b_max = 9", "0..8"});
  require_error([&] { (void)bgtq::greedy_allocator::allocate({.scores = s, .budget = 9, .b_min = -1, .b_max = 8}); },
                bgtq::errc::invalid_argument, {"b_min = -1", "0..8"});
}

TEST_CASE("errors row 7: avg_bits below b_min is infeasible, naming B, L and b_min", "[errors]") {
  const std::vector<double> s = {4, 3, 2, 1, 1};
  const std::int64_t B = bgtq::budget_for(1.5, 5);  // 7 < 5 * 2
  for (auto run : {+[](const bgtq::allocation_request& r) { return bgtq::greedy_allocator::allocate(r); },
                   +[](const bgtq::allocation_request& r) { return bgtq::dp_allocator::allocate(r); },
                   +[](const bgtq::allocation_request& r) { return bgtq::uniform_allocator::allocate(r); }})
    require_error([&] { (void)run({.scores = s, .budget = B, .b_min = 2, .b_max = 8}); }, bgtq::errc::infeasible,
                  {"B = 7", "L = 5", "b_min = 2", "at least L * b_min = 10"});
}

TEST_CASE("errors row 8: a non-finite or negative avg_bits is an invalid_argument", "[errors]") {
  for (const double a : {std::numeric_limits<double>::quiet_NaN(), std::numeric_limits<double>::infinity(),
                         -std::numeric_limits<double>::infinity(), -1.0})
    require_error([&] { (void)bgtq::budget_for(a, 64); }, bgtq::errc::invalid_argument, {"avg_bits", "must be finite and >= 0"});
  // a non-finite score is named too
  const std::vector<double> s = {1, std::numeric_limits<double>::quiet_NaN()};
  require_error([&] { (void)bgtq::greedy_allocator::allocate({.scores = s, .budget = 4}); }, bgtq::errc::non_finite,
                {"score 1"});
  // finite scores whose objective overflows double: every allocator refuses them (the
  // DP's costs were all +Inf, and it returned eight zero widths for a budget of 8)
  const std::vector<double> huge(8, 1.7e308);
  for (auto run : {+[](const bgtq::allocation_request& r) { return bgtq::greedy_allocator::allocate(r); },
                   +[](const bgtq::allocation_request& r) { return bgtq::dp_allocator::allocate(r); },
                   +[](const bgtq::allocation_request& r) { return bgtq::uniform_allocator::allocate(r); }})
    require_error([&] { (void)run({.scores = huge, .budget = 8, .b_min = 0, .b_max = 1}); }, bgtq::errc::invalid_argument,
                  {"scores are too large", "overflows double", "1.7e+308"});
  const std::vector<double> one = {1.0};
  const std::vector<std::span<const double>> pools = {one, huge};
  require_error([&] { (void)bgtq::allocate_pooled(pools, 9, 0, 1, bgtq::distortion_table::rate4()); },
                bgtq::errc::invalid_argument, {"pool 1: ", "scores are too large"});
  // the same scores divided by a common factor allocate (every block at its one bit)
  std::vector<double> scaled = huge;
  for (double& x : scaled) x /= 1e10;
  const auto a = bgtq::dp_allocator::allocate({.scores = scaled, .budget = 8, .b_min = 0, .b_max = 1});
  REQUIRE(a.total_bits == 8);
  REQUIRE(std::isfinite(a.objective));
}

TEST_CASE("errors row 9: avg_bits above b_max caps the budget with a warning", "[errors]") {
  const std::vector<double> s = {5, 1, 0.5, 2};
  const auto a = bgtq::greedy_allocator::allocate({.scores = s, .budget = bgtq::budget_for(7.5, 4), .b_min = 1, .b_max = 6});
  REQUIRE(a.capped);
  REQUIRE(a.total_bits == 24);
  REQUIRE(a.bits == std::vector<int>{6, 6, 6, 6});
  REQUIRE(a.warning.find("B = 30 exceeds L * b_max = 4 * 6 = 24") != std::string::npos);
  REQUIRE(a.warning.find("capped to 24") != std::string::npos);
  // exactly at the cap: no warning
  const auto b = bgtq::greedy_allocator::allocate({.scores = s, .budget = 24, .b_min = 1, .b_max = 6});
  REQUIRE_FALSE(b.capped);
  REQUIRE(b.warning.empty());
  // an avg_bits whose budget passes 2^53 is capped the same way, not refused
  const auto c = bgtq::greedy_allocator::allocate({.scores = s, .budget = bgtq::budget_for(1e300, 4), .b_min = 1, .b_max = 6});
  REQUIRE(c.capped);
  REQUIRE(c.bits == std::vector<int>{6, 6, 6, 6});
}

TEST_CASE("errors row 10: a plan file with a bad checksum is a checksum_mismatch", "[errors]") {
  auto b = bgtq::serialize_plan(small_plan());
  REQUIRE(bgtq::deserialize_plan(b.data(), b.size(), "plan.bin") == small_plan());
  b[100] ^= 0x10;  // a payload byte: the CRC catches it before any field is trusted
  require_error([&] { (void)bgtq::deserialize_plan(b.data(), b.size(), "plan.bin"); }, bgtq::errc::checksum_mismatch,
                {"plan.bin", "checksum mismatch at offset", "stored CRC-32C 0x", "computed 0x", "corrupted"});
  b[100] ^= 0x10;
  b[b.size() - 1] ^= 0x01;  // the stored CRC itself
  require_error([&] { (void)bgtq::deserialize_plan(b.data(), b.size(), "plan.bin"); }, bgtq::errc::checksum_mismatch);
  // through load_plan, naming the path
  const auto dir = errors_test::scratch_dir("row10");
  write_file(dir / "bad.plan", b);
  require_error([&] { (void)bgtq::load_plan((dir / "bad.plan").string()); }, bgtq::errc::checksum_mismatch, {"bad.plan"});
}

TEST_CASE("errors row 11: a plan file from a newer format version is version_unsupported", "[errors]") {
  auto b = bgtq::serialize_plan(small_plan());
  const std::uint32_t v = bgtq::plan::format_version + 1;
  for (int k = 0; k < 4; ++k) b[8 + static_cast<std::size_t>(k)] = static_cast<unsigned char>(v >> (8 * k));
  // reported before the checksum (which the version change also breaks): the cause, not a symptom
  require_error([&] { (void)bgtq::deserialize_plan(b.data(), b.size(), "new.plan"); }, bgtq::errc::version_unsupported,
                {"new.plan", "format version 2", "reads up to 1"});
}
