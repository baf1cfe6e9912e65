// TQ-MSE and Block-GTQ flat codecs: measured error against the codebook's MSE and the
// TurboQuant bound, edge cases, errors, and golden bytes.
#include <catch2/catch.hpp>

#include <bgtq/codec/block_gtq.hpp>
#include <bgtq/codec/fp16_codec.hpp>
#include <bgtq/codec/tq_codec.hpp>
#include <bgtq/plan/plan.hpp>

#include <cmath>
#include <limits>
#include <vector>

#include "cache_fixtures.hpp"

namespace {

// Gaussian vectors, or "key-like" ones: a random sparse support (about 30% of the
// channels, never empty) and per-channel scales spread 100x (log-uniform in [1, 100]),
// as in real post-RoPE keys. The scale profile is redrawn every `per_head` vectors, as
// each head of a model has its own.
std::vector<float> make_vectors(int n, int count, bool structured, std::uint64_t seed, int per_head = 50) {
  bgtq::counter_rng r(seed);
  std::vector<float> scale(static_cast<std::size_t>(n), 1.0f);
  std::vector<float> x(static_cast<std::size_t>(n) * count);
  for (int i = 0; i < count; ++i) {
    if (structured && i % per_head == 0)
      for (auto& s : scale) s = static_cast<float>(std::pow(100.0, r.uniform()));
    const int forced = static_cast<int>(r.below(static_cast<std::uint32_t>(n)));
    for (int j = 0; j < n; ++j) {
      const bool on = !structured || r.uniform() < 0.3 || j == forced;
      x[static_cast<std::size_t>(i) * n + j] = on ? scale[static_cast<std::size_t>(j)] * static_cast<float>(r.normal()) : 0.0f;
    }
  }
  return x;
}

// Mean of ||x - x_hat||^2 / ||x||^2 over the vectors [first, first + count).
template <class Codec>
double measured_mse(const Codec& c, const std::vector<float>& x, int first = 0, int count = -1) {
  const int n = c.dim();
  if (count < 0) count = static_cast<int>(x.size()) / n - first;
  std::vector<std::uint8_t> buf(c.bytes());
  std::vector<float> y(static_cast<std::size_t>(n));
  double sum = 0;
  for (int i = first; i < first + count; ++i) {
    const float* xi = x.data() + static_cast<std::size_t>(i) * n;
    REQUIRE(c.encode(xi, buf.data()) == bgtq::errc::ok);
    c.decode(buf.data(), y.data());
    double e = 0, nn = 0;
    for (int j = 0; j < n; ++j) {
      e += (xi[j] - y[static_cast<std::size_t>(j)]) * (xi[j] - y[static_cast<std::size_t>(j)]);
      nn += static_cast<double>(xi[j]) * xi[j];
    }
    sum += e / nn;
  }
  return sum / count;
}

bgtq::tq_mse_codec tq(int n, int b, bgtq::rotation_kind rk, std::uint64_t seed = 1);

// TurboQuant's error law holds in expectation over the random rotation: for vectors
// with a fixed anisotropic structure one fixed P can land above or below it. The
// measurement therefore spreads the vectors over `rotations` independently seeded
// codecs (as a model's many groups and heads do) and averages.
double mse_over_rotations(int n, int b, bgtq::rotation_kind rk, const std::vector<float>& x, int rotations) {
  const int count = static_cast<int>(x.size()) / n;
  const int per = count / rotations;
  double sum = 0;
  for (int r = 0; r < rotations; ++r)
    sum += measured_mse(tq(n, b, rk, 1000 + static_cast<std::uint64_t>(r)), x, r * per, per);
  return sum / rotations;
}

bgtq::tq_mse_codec tq(int n, int b, bgtq::rotation_kind rk, std::uint64_t seed) {
  bgtq::tq_params p;
  p.dim = n;
  p.bits = b;
  p.rotation = rk;
  p.seed = seed;
  return bgtq::tq_mse_codec(p);
}

}  // namespace

TEST_CASE("TQ-MSE error with a Haar rotation matches the codebook MSE within 3%", "[codec]") {
  for (int n : {8, 64, 128}) {
    for (bool structured : {false, true}) {
      const auto x = make_vectors(n, 20000, structured, static_cast<std::uint64_t>(n) * 7 + structured);
      for (int b = 1; b <= 4; ++b) {
        const double m = mse_over_rotations(n, b, bgtq::rotation_kind::haar, x, n <= 16 ? 1000 : 100);
        const double want = bgtq::get_codebook(bgtq::codebook_kind::sphere, n, b).mse();
        INFO("n=" << n << " b=" << b << (structured ? " structured" : " gaussian") << " measured " << m << " codebook " << want);
        CHECK(std::fabs(m / want - 1.0) < 0.03);
        CHECK(m <= std::sqrt(3.0) * M_PI / 2.0 * std::pow(4.0, -b));
      }
    }
  }
}

TEST_CASE("TQ-MSE error with the fast rotations stays within 10% on key-like vectors", "[codec]") {
  // Measured figures (100 seeds, 20k vectors): at n = 64, 96, 128 both fast rotations are
  // within 1% of the codebook MSE. At n = 8 a Walsh-Hadamard family cannot look Haar on
  // sparse inputs (a one-hot input becomes equal-magnitude coordinates): hadamard is
  // +16..34% and structured +6..33% over b = 1..4. The planner therefore never picks a
  // fast rotation below dimension 64 (default_rotation_for); the test asserts 10% where
  // the library uses them and 1.4x at n = 8 (the worst measured +34%) so a regression shows.
  for (int n : {8, 64, 128, 6, 96}) {
    const auto x = make_vectors(n, 20000, true, static_cast<std::uint64_t>(n) * 11);
    for (auto rk : {bgtq::rotation_kind::hadamard, bgtq::rotation_kind::structured}) {
      if (rk == bgtq::rotation_kind::hadamard && (n & (n - 1)) != 0) continue;
      for (int b = 1; b <= 4; ++b) {
        const double m = mse_over_rotations(n, b, rk, x, n <= 16 ? 1000 : 100);
        const double want = bgtq::get_codebook(bgtq::codebook_kind::sphere, n, b).mse();
        INFO("n=" << n << " b=" << b << " rotation " << bgtq::to_string(rk) << " measured " << m << " codebook " << want);
        if (n >= 64 || (rk == bgtq::rotation_kind::structured && n == 6))
          CHECK(std::fabs(m / want - 1.0) < 0.10);
        else
          CHECK(m / want < 1.4);
        CHECK(m <= std::sqrt(3.0) * M_PI / 2.0 * std::pow(4.0, -b));
      }
    }
  }
  REQUIRE(bgtq::default_rotation_for(32) == bgtq::rotation_kind::haar);
  REQUIRE(bgtq::default_rotation_for(64) == bgtq::rotation_kind::haar);
  REQUIRE(bgtq::default_rotation_for(128) == bgtq::rotation_kind::hadamard);
  REQUIRE(bgtq::default_rotation_for(96 + 2) == bgtq::rotation_kind::structured);
}

TEST_CASE("TQ-MSE error falls with every added bit, at n = 2 and n = 6 too", "[codec]") {
  for (int n : {2, 6, 128}) {
    const auto x = make_vectors(n, 4000, false, 17);
    double prev = 2.0;
    for (int b = 1; b <= 8; ++b) {
      const double m = measured_mse(tq(n, b, bgtq::rotation_kind::haar), x);
      INFO("n=" << n << " b=" << b << " mse " << m);
      CHECK(m < prev);
      prev = m;
    }
  }
}

TEST_CASE("zero vectors round-trip to zero and non-finite input is an error", "[codec]") {
  const auto c = tq(16, 3, bgtq::rotation_kind::hadamard);
  std::vector<std::uint8_t> buf(c.bytes(), 0xAB);
  std::vector<float> x(16, 0.0f), y(16, 1.0f);
  REQUIRE(c.encode(x.data(), buf.data()) == bgtq::errc::ok);
  c.decode(buf.data(), y.data());
  for (float f : y) REQUIRE(f == 0.0f);
  for (float bad : {std::numeric_limits<float>::quiet_NaN(), std::numeric_limits<float>::infinity(),
                    -std::numeric_limits<float>::infinity()}) {
    x[5] = bad;
    std::vector<std::uint8_t> before = buf;
    REQUIRE(c.encode(x.data(), buf.data()) == bgtq::errc::non_finite);
    REQUIRE(buf == before);  // nothing written
  }
}

TEST_CASE("all-zero and all-max codes decode to finite vectors of the expected norm", "[codec]") {
  for (int b = 1; b <= 8; ++b) {
    const auto c = tq(32, b, bgtq::rotation_kind::haar);
    const auto& cb = bgtq::get_codebook(bgtq::codebook_kind::sphere, 32, b);
    for (std::uint8_t code : {std::uint8_t{0}, static_cast<std::uint8_t>((1 << b) - 1)}) {
      std::vector<std::uint8_t> codes(32, code), buf(c.bytes(), 0);
      bgtq::bit_tight::pack(codes.data(), 32, b, buf.data());
      bgtq::detail::store_radius(buf.data() + c.code_bytes(), 2.0f, false);
      std::vector<float> y(32);
      c.decode(buf.data(), y.data());
      double nn = 0;
      for (float f : y) {
        REQUIRE(std::isfinite(f));
        nn += static_cast<double>(f) * f;
      }
      const double cj = cb.centroids()[code];
      REQUIRE(std::sqrt(nn) == Approx(2.0 * std::sqrt(32.0) * std::fabs(cj)).epsilon(1e-5));
    }
  }
}

TEST_CASE("fp16 input encodes like its float value, and an fp32 radius never clamps", "[codec]") {
  const auto c = tq(64, 3, bgtq::rotation_kind::hadamard);
  const auto x = make_vectors(64, 1, false, 3);
  std::vector<bgtq::half> h(64);
  std::vector<float> xr(64);
  for (int j = 0; j < 64; ++j) {
    h[static_cast<std::size_t>(j)] = bgtq::half(x[static_cast<std::size_t>(j)]);
    xr[static_cast<std::size_t>(j)] = static_cast<float>(h[static_cast<std::size_t>(j)]);
  }
  std::vector<std::uint8_t> a(c.bytes()), b(c.bytes());
  REQUIRE(c.encode(h.data(), a.data()) == bgtq::errc::ok);
  REQUIRE(c.encode(xr.data(), b.data()) == bgtq::errc::ok);
  REQUIRE(a == b);

  bgtq::tq_params p;
  p.dim = 8;
  p.bits = 4;
  p.radius = bgtq::radius_format::fp32;
  const bgtq::tq_mse_codec big(p);
  std::vector<float> v(8, 1e6f), y(8);
  std::vector<std::uint8_t> buf(big.bytes());
  REQUIRE(big.bytes() == bgtq::bit_tight::bytes(8, 4) + 4);
  REQUIRE(big.encode(v.data(), buf.data()) == bgtq::errc::ok);
  big.decode(buf.data(), y.data());
  // the stored radius is the input's norm itself (fp32, no clamp, no rounding), and the
  // decoded vector is radius x the unit-norm decode (the same codes at radius 1)
  const float r = std::sqrt(bgtq::detail::sum_squares(v.data(), 8));
  REQUIRE(bgtq::detail::load_radius(buf.data() + bgtq::bit_tight::bytes(8, 4), true) == r);
  std::vector<std::uint8_t> unit(buf);
  bgtq::detail::store_radius(unit.data() + bgtq::bit_tight::bytes(8, 4), 1.0f, true);
  std::vector<float> y1(8);
  big.decode(unit.data(), y1.data());
  for (int j = 0; j < 8; ++j) REQUIRE(y[static_cast<std::size_t>(j)] == Approx(r * y1[static_cast<std::size_t>(j)]).margin(1e-6 * r));
}

TEST_CASE("norm correction stores r/||c|| so the decoded norm equals the input norm", "[codec]") {
  bgtq::tq_params p;
  p.dim = 64;
  p.bits = 2;
  p.norm_correction = true;
  p.radius = bgtq::radius_format::fp32;
  const bgtq::tq_mse_codec c(p);
  // the same codec without the correction: norm correction changes the stored radius only,
  // never the codes (a decoded norm equal to the input's alone holds for any codes, so the
  // codes and the radius r/||c|| are checked against the plain codec's)
  p.norm_correction = false;
  const bgtq::tq_mse_codec plain(p);
  REQUIRE(plain.bytes() == c.bytes());
  const std::size_t code_bytes = bgtq::bit_tight::bytes(64, 2);
  const auto& cb = bgtq::get_codebook(bgtq::codebook_kind::sphere, 64, 2);
  const auto x = make_vectors(64, 50, false, 9);
  std::vector<std::uint8_t> buf(c.bytes()), ref(plain.bytes()), codes(64);
  std::vector<float> y(64);
  for (int i = 0; i < 50; ++i) {
    const float* xi = x.data() + i * 64;
    REQUIRE(c.encode(xi, buf.data()) == bgtq::errc::ok);
    REQUIRE(plain.encode(xi, ref.data()) == bgtq::errc::ok);
    REQUIRE(std::equal(buf.begin(), buf.begin() + static_cast<std::ptrdiff_t>(code_bytes), ref.begin()));
    bgtq::bit_tight::unpack(buf.data(), 64, 2, codes.data());
    double cn = 0;
    for (std::uint8_t k : codes) cn += static_cast<double>(cb.centroids()[k]) * cb.centroids()[k];
    const double r = bgtq::detail::load_radius(ref.data() + code_bytes, true);
    REQUIRE(bgtq::detail::load_radius(buf.data() + code_bytes, true) == Approx(r / std::sqrt(cn)).epsilon(1e-6));
    c.decode(buf.data(), y.data());
    double a = 0, b = 0, e = 0;
    for (int j = 0; j < 64; ++j) {
      a += static_cast<double>(xi[j]) * xi[j];
      b += static_cast<double>(y[static_cast<std::size_t>(j)]) * y[static_cast<std::size_t>(j)];
      e += (xi[j] - y[static_cast<std::size_t>(j)]) * (xi[j] - y[static_cast<std::size_t>(j)]);
    }
    REQUIRE(std::sqrt(b) == Approx(std::sqrt(a)).epsilon(1e-5));
    // and the direction is the quantized one: a 2-bit 64-vector's error (codebook MSE ~0.117)
    CHECK(e / a < 0.3);
  }
}

TEST_CASE("Block-GTQ codec: record size, groups and per-group error", "[codec]") {
  const bgtq::rope_layout rope(128, bgtq::rope_pairing::half);
  std::vector<int> w(64);
  for (int i = 0; i < 64; ++i) w[static_cast<std::size_t>(i)] = i < 16 ? 2 : (i < 48 ? 3 : 4);
  const auto hp = bgtq::make_head_plan(w, 42);
  const bgtq::block_gtq_codec c(hp, rope, {});
  REQUIRE(c.groups().size() == 3);
  // codes: 32*2 + 64*3 + 32*4 bits = 48 bytes, 3 fp16 radii
  REQUIRE(c.bytes() == 48 + 3 * 2);
  // group dims follow the RoPE layout: block i = dims (i, i + 64), in the order of the
  // plan's blocks, for every block of every group (a group holding another group's
  // block keeps the size and, on isotropic data, the error: only this sees it)
  REQUIRE(c.groups()[0].dims[0] == 0);
  REQUIRE(c.groups()[0].dims[1] == 64);
  std::vector<int> seen(128, 0);
  for (std::size_t gi = 0; gi < c.groups().size(); ++gi) {
    const auto& g = c.groups()[gi];
    const auto& spec = hp.groups[gi];
    REQUIRE(g.quantizer.bits() == spec.bits);
    REQUIRE(g.dims.size() == 2 * spec.blocks.size());
    for (std::size_t k = 0; k < spec.blocks.size(); ++k) {
      const int b = spec.blocks[k];
      INFO("group " << gi << " block " << b);
      REQUIRE(w[static_cast<std::size_t>(b)] == spec.bits);
      REQUIRE(g.dims[2 * k] == b);
      REQUIRE(g.dims[2 * k + 1] == b + 64);
      ++seen[static_cast<std::size_t>(b)];
      ++seen[static_cast<std::size_t>(b + 64)];
    }
  }
  for (int n : seen) REQUIRE(n == 1);
  const auto x = make_vectors(128, 2000, false, 5);
  const double m = measured_mse(c, x);
  // each group is an independent TQ-MSE vector: the error is the width-weighted mix
  const double want = (32 * bgtq::get_codebook(bgtq::codebook_kind::sphere, 32, 2).mse() +
                       64 * bgtq::get_codebook(bgtq::codebook_kind::sphere, 64, 3).mse() +
                       32 * bgtq::get_codebook(bgtq::codebook_kind::sphere, 32, 4).mse()) / 128.0;
  CHECK(m == Approx(want).epsilon(0.05));
  // a uniform plan is one group over the whole head: uniform TQ-MSE
  const bgtq::block_gtq_codec u(bgtq::uniform_head_plan(64, 3, 1), rope, {});
  REQUIRE(u.groups().size() == 1);
  REQUIRE(u.bytes() == 48 + 2);
  // a width-0 block stores nothing and decodes to zero
  std::vector<int> w0(64, 3);
  w0[5] = 0;
  const bgtq::block_gtq_codec z(bgtq::make_head_plan(w0, 1), rope, {});
  std::vector<std::uint8_t> buf(z.bytes());
  std::vector<float> y(128, NAN);  // poisoned: decode itself must write the zeros
  REQUIRE(z.encode(x.data(), buf.data()) == bgtq::errc::ok);
  z.decode(buf.data(), y.data());
  REQUIRE(y[5] == 0.0f);
  REQUIRE(y[5 + 64] == 0.0f);
  for (float f : y) REQUIRE(std::isfinite(f));
}

TEST_CASE("fp16 codec round-trips halves and rejects values beyond the fp16 range", "[codec]") {
  const bgtq::fp16_codec c(4);
  const float x[4] = {1.0f, -2.5f, 65504.0f, 0.0f};
  std::uint8_t buf[8];
  float y[4];
  REQUIRE(c.encode(x, buf) == bgtq::errc::ok);
  c.decode(buf, y);
  for (int i = 0; i < 4; ++i) REQUIRE(y[i] == x[i]);
  const float big[4] = {1.0f, 70000.0f, 0.0f, 0.0f};
  REQUIRE(c.encode(big, buf) == bgtq::errc::non_finite);
  // the documented edge on both signs: |x| <= 65519 rounds to 65504 and is kept, from
  // 65520 on fp16 rounding gives Inf and encode refuses it, writing nothing
  for (const float sign : {1.0f, -1.0f}) {
    INFO("sign " << sign);
    const float edge[4] = {sign * 65519.0f, sign * 65505.0f, 0.5f, 0.0f};
    REQUIRE(c.encode(edge, buf) == bgtq::errc::ok);
    c.decode(buf, y);
    REQUIRE(y[0] == sign * 65504.0f);
    REQUIRE(y[1] == sign * 65504.0f);
    const std::vector<std::uint8_t> before(buf, buf + 8);
    for (const float beyond : {65520.0f, 70000.0f, 3e38f}) {
      const float bad[4] = {0.5f, 0.0f, sign * beyond, 1.0f};
      REQUIRE(c.encode(bad, buf) == bgtq::errc::non_finite);
      REQUIRE(std::equal(before.begin(), before.end(), buf));
    }
  }
}

TEST_CASE("quantize reports the radius as stored: fp16 saturates at 65504 and is counted", "[codec]") {
  bgtq::tq_params p;
  p.dim = 8;
  p.bits = 3;
  const bgtq::tq_quantizer q(p);
  std::vector<float> x(8, 1e5f);  // norm 2.8e5
  std::uint8_t codes[8];
  float r = 0.0f;
  bgtq::encode_stats st;
  REQUIRE(q.quantize(x.data(), codes, r, &st) == bgtq::errc::ok);
  REQUIRE(r == 65504.0f);
  REQUIRE(st.clamped_radii == 1);
}

TEST_CASE("a finite input whose squared norm overflows float keeps its direction and norm (fp32 radius)", "[codec]") {
  bgtq::tq_params p;
  p.dim = 8;
  p.bits = 4;
  p.radius = bgtq::radius_format::fp32;
  const bgtq::tq_mse_codec c(p);
  std::vector<float> v(8, 1e20f), y(8);  // sum of squares 8e40 > FLT_MAX
  v[3] = -1e20f;
  std::vector<std::uint8_t> buf(c.bytes());
  bgtq::encode_stats st;
  REQUIRE(c.encode(v.data(), buf.data(), &st) == bgtq::errc::ok);
  REQUIRE(st.clamped_radii == 0);
  // the stored radius is the norm, computed without overflow (exact here: sqrt(8) x 1e20)
  REQUIRE(bgtq::detail::load_radius(buf.data() + bgtq::bit_tight::bytes(8, 4), true) ==
          Approx(std::sqrt(8.0) * 1e20).epsilon(1e-6));
  c.decode(buf.data(), y.data());
  double err = 0, nn = 0;
  for (int j = 0; j < 8; ++j) {
    REQUIRE(std::isfinite(y[static_cast<std::size_t>(j)]));
    const double d = static_cast<double>(y[static_cast<std::size_t>(j)]) - v[static_cast<std::size_t>(j)];
    err += d * d;
    nn += static_cast<double>(v[static_cast<std::size_t>(j)]) * v[static_cast<std::size_t>(j)];
  }
  // a 4-bit direction of an 8-vector: relative squared error well under 0.1
  CHECK(err / nn < 0.1);
  CHECK(y[3] < 0.0f);
}

TEST_CASE("tiny inputs keep their norm and direction down to the 1e-30 zero rule (fp32 radius)", "[codec]") {
  // the sum of squares is subnormal below a norm of ~1e-19 and 0 below ~2.6e-23: a norm of
  // 7.4e-25 was stored as a zero vector and norms near 1e-22 were 1% off; the norm and the
  // direction now come from an exact power-of-two copy below 2^-60
  for (const auto rot : {bgtq::rotation_kind::hadamard, bgtq::rotation_kind::haar}) {
    bgtq::tq_params p;
    p.dim = 8;
    p.bits = 4;
    p.rotation = rot;
    p.radius = bgtq::radius_format::fp32;
    const bgtq::tq_mse_codec c(p);
    const float base[8] = {3, 4, 0, 0, -2, 1, 0, 5};
    std::vector<std::uint8_t> ref(c.bytes()), buf(c.bytes());
    REQUIRE(c.encode(base, ref.data()) == bgtq::errc::ok);
    for (const float sc : {1e-29f, 1e-27f, 1e-25f, 1e-23f, 1e-22f, 1e-21f, 1e-19f, 1e-17f}) {
      INFO(bgtq::to_string(rot) << ", scale " << sc);
      float x[8];
      double nn = 0;
      for (int j = 0; j < 8; ++j) {
        x[j] = base[j] * sc;
        nn += static_cast<double>(x[j]) * x[j];
      }
      bgtq::encode_stats st;
      REQUIRE(c.encode(x, buf.data(), &st) == bgtq::errc::ok);
      CHECK(st.zero_vectors == 0);
      const double stored = bgtq::detail::load_radius(buf.data() + bgtq::bit_tight::bytes(8, 4), true);
      CHECK(stored == Approx(std::sqrt(nn)).epsilon(1e-6));
      // the same direction as the unscaled vector: the same codes (x is an exact
      // power-of-ten multiple only up to rounding, so compare the codes, not the bytes)
      CHECK(std::equal(buf.begin(), buf.begin() + bgtq::bit_tight::bytes(8, 4), ref.begin()));
    }
    // below the zero rule (1e-30): a zero vector, as documented
    float z[8];
    for (int j = 0; j < 8; ++j) z[j] = base[j] * 1e-32f;
    bgtq::encode_stats st;
    REQUIRE(c.encode(z, buf.data(), &st) == bgtq::errc::ok);
    CHECK(st.zero_vectors == 1);
  }
}
