#include <catch2/catch.hpp>

#include <bgtq/codebook/codebook.hpp>
#include <bgtq/core/rng.hpp>

#include <atomic>
#include <cmath>
#include <limits>
#include <thread>
#include <vector>

#include "reference.hpp"

namespace {

using bgtq::codebook;
using bgtq::codebook_kind;

constexpr codebook_kind all_kinds[] = {codebook_kind::sphere, codebook_kind::gaussian, codebook_kind::uniform};

std::vector<double> as_double(std::span<const float> v) { return {v.begin(), v.end()}; }

// Index of the nearest centroid, ties to the lower index, by exhaustive search with an
// exact comparison: for c_i < c_j, y is strictly closer to c_j iff 2y > c_i + c_j. The sum
// is kept exactly as s + e (TwoSum) and 2y - s is exact when it matters (Sterbenz), so
// the test (2y - s) > e is exact. Plain |y - c| in double is not (e.g. y denormal).
bool closer_to_upper(double y, double ci, double cj) {
  const double s = ci + cj;
  const double bv = s - ci;
  const double e = (ci - (s - bv)) + (cj - bv);
  return 2.0 * y - s > e;
}
int nearest(const codebook& cb, float y) {
  const auto c = cb.centroids();
  int best = 0;
  for (int k = 1; k < cb.size(); ++k)
    if (closer_to_upper(y, c[best], c[k])) best = k;
  return best;
}

}  // namespace

// Doc snippet for codebook.hpp (keep in sync with its @code block).
TEST_CASE("codebook usage example", "[codebook]") {
  const bgtq::codebook& cb = bgtq::get_codebook(bgtq::codebook_kind::sphere, 128, 3);
  std::uint8_t idx = cb.quantize(0.05f);  // cell index in [0, 8)
  float level = cb.centroids()[idx];
  double n_mse = cb.mse();  // ~0.03397 = 128 * E[(y - Q(y))^2]
  REQUIRE(idx == 5);
  REQUIRE(level == Approx(0.066586).epsilon(1e-4));
  REQUIRE(n_mse == Approx(0.03397).epsilon(0.005));
}

TEST_CASE("sphere n*MSE matches the reference figures (n = 128, n = 4096 vs Max 1960)", "[codebook]") {
  // tolerance 0.5% as specified; the values agree to ~0.05%
  const double ref128[] = {0.3609, 0.1160, 0.03397, 0.00931};
  const double max1960[] = {0.3634, 0.1175, 0.03455, 0.009497};
  for (int b = 1; b <= 4; ++b) {
    INFO("b = " << b);
    CHECK(bgtq::get_codebook(codebook_kind::sphere, 128, b).mse() == Approx(ref128[b - 1]).epsilon(0.005));
    CHECK(bgtq::get_codebook(codebook_kind::sphere, 4096, b).mse() == Approx(max1960[b - 1]).epsilon(0.005));
    CHECK(bgtq::get_codebook(codebook_kind::sphere, 65536, b).mse() == Approx(max1960[b - 1]).epsilon(0.001));
  }
  // b = 1 in closed form for every n: centroids +-E|y| = +-Gamma(n/2) / (sqrt(pi) Gamma((n+1)/2)),
  // n*MSE = 1 - n E|y|^2
  for (int n : {2, 5, 128, 4096}) {
    const double e_abs = std::exp(std::lgamma(n / 2.0) - std::lgamma((n + 1) / 2.0)) / std::sqrt(3.14159265358979323846);
    INFO("n = " << n);
    CHECK(bgtq::get_codebook(codebook_kind::sphere, n, 1).mse() == Approx(1.0 - n * e_abs * e_abs).epsilon(1e-6));
  }
}

TEST_CASE("n*MSE strictly falls with every added bit", "[codebook]") {
  for (codebook_kind kind : all_kinds)
    for (int n : {2, 3, 4, 6, 8, 16, 64, 128, 1024}) {
      double prev = 1.0;
      for (int b = 1; b <= 8; ++b) {
        const double m = bgtq::get_codebook(kind, n, b).mse();
        INFO("kind " << bgtq::to_string(kind) << " n = " << n << " b = " << b << " mse = " << m);
        REQUIRE(m > 0.0);
        REQUIRE(m < prev);
        // each bit buys between 2x and 6x (4x at high resolution)
        REQUIRE(prev / m > 2.0);
        REQUIRE(prev / m < 6.0);
        prev = m;
      }
    }
}

TEST_CASE("n = 3 (uniform law): the Lloyd-Max codebook is the uniform quantizer, n*MSE = 4^-b", "[codebook]") {
  for (int b = 1; b <= 8; ++b) {
    const codebook& cb = bgtq::get_codebook(codebook_kind::sphere, 3, b);
    const int K = cb.size();
    INFO("b = " << b);
    for (int k = 0; k < K; ++k) REQUIRE(cb.centroids()[k] == Approx(-1.0 + (2.0 * k + 1.0) / K).margin(1e-7));
    REQUIRE(cb.mse() == Approx(std::pow(4.0, -b)).epsilon(1e-6));
    // and the uniform family finds the same step
    REQUIRE(bgtq::get_codebook(codebook_kind::uniform, 3, b).mse() == Approx(cb.mse()).epsilon(1e-7));
  }
}

TEST_CASE("n = 2 (arcsine law): closed form at 1 bit and an independent Lloyd iteration", "[codebook]") {
  const double pi = 3.14159265358979323846;
  // b = 1: centroid +-2/pi, n*MSE = 2 (1/2 - 4/pi^2) = 1 - 8/pi^2
  const codebook& cb1 = bgtq::get_codebook(codebook_kind::sphere, 2, 1);
  REQUIRE(cb1.centroids()[1] == Approx(2.0 / pi).epsilon(1e-7));
  REQUIRE(cb1.mse() == Approx(1.0 - 8.0 / (pi * pi)).epsilon(1e-9));
  // b = 2..5: plain Lloyd iteration in theta (y = cos theta, theta uniform on [0, pi]):
  // E[y | theta in [a, b]] = (sin b - sin a) / (b - a) exactly, started from uniform levels.
  for (int b = 2; b <= 5; ++b) {
    const int K = 1 << b;
    std::vector<double> c(K);
    for (int k = 0; k < K; ++k) c[k] = -1.0 + (2.0 * k + 1.0) / K;
    for (int it = 0; it < 200000; ++it) {
      double change = 0.0;
      std::vector<double> nc(K);
      for (int k = 0; k < K; ++k) {
        const double ylo = k == 0 ? -1.0 : 0.5 * (c[k - 1] + c[k]);
        const double yhi = k == K - 1 ? 1.0 : 0.5 * (c[k] + c[k + 1]);
        const double ta = std::acos(yhi), tb = std::acos(ylo);
        nc[k] = (std::sin(tb) - std::sin(ta)) / (tb - ta);
        change = std::max(change, std::fabs(nc[k] - c[k]));
      }
      c = nc;
      if (change < 1e-15) break;
    }
    double mse = 0.0;  // E[(cos theta - c_k)^2] in closed form per cell
    for (int k = 0; k < K; ++k) {
      const double ylo = k == 0 ? -1.0 : 0.5 * (c[k - 1] + c[k]);
      const double yhi = k == K - 1 ? 1.0 : 0.5 * (c[k] + c[k + 1]);
      const double ta = std::acos(yhi), tb = std::acos(ylo);
      // int cos^2 = th/2 + sin(2 th)/4; int cos = sin
      const double i2 = (tb - ta) / 2 + (std::sin(2 * tb) - std::sin(2 * ta)) / 4;
      const double i1 = std::sin(tb) - std::sin(ta);
      mse += (i2 - 2 * c[k] * i1 + c[k] * c[k] * (tb - ta)) / pi;
    }
    const codebook& cb = bgtq::get_codebook(codebook_kind::sphere, 2, b);
    INFO("b = " << b);
    for (int k = 0; k < K; ++k) REQUIRE(cb.centroids()[k] == Approx(c[k]).margin(1e-6));
    REQUIRE(cb.mse() == Approx(2.0 * mse).epsilon(1e-6));
  }
}

TEST_CASE("mse() agrees with an independent theta-space integration and the centroid condition holds", "[codebook]") {
  for (codebook_kind kind : all_kinds)
    for (int n : {2, 3, 4, 6, 16, 128, 1024, 65536})
      for (int b : {1, 2, 3, 5, 8}) {
        const codebook& cb = bgtq::get_codebook(kind, n, b);
        const auto c = as_double(cb.centroids());
        const auto t = as_double(cb.thresholds());
        const auto ref = bgtq_test::integrate_theta(n, c, t);
        INFO("kind " << bgtq::to_string(kind) << " n = " << n << " b = " << b);
        // closed-form MSE vs quadrature: both ~1e-11; 1e-8 relative leaves margin
        REQUIRE(cb.mse() == Approx(n * ref.mse).epsilon(1e-8));
        if (kind == codebook_kind::sphere) {
          // centroid condition, to 1e-6 sigma (float storage alone is ~2e-7 sigma at the edge)
          const double sigma = 1.0 / std::sqrt(double(n));
          for (int k = 0; k < cb.size(); ++k) {
            INFO("k = " << k << " c = " << c[k] << " E[y|cell] = " << ref.mean[k]);
            REQUIRE(std::fabs(c[k] - ref.mean[k]) < 1e-6 * sigma);
          }
        }
      }
}

TEST_CASE("mse() agrees with a Monte Carlo estimate over uniform random unit vectors", "[codebook]") {
  // Samples x ~ N(0, I_n) with counter_rng, u = x/|x|; per vector s = sum_j (u_j - Q(u_j))^2
  // estimates n*MSE; checked within 5 standard errors of the mean over vectors.
  struct cfg {
    int n, b;
    codebook_kind kind;
  };
  for (const cfg& g : {cfg{2, 1, codebook_kind::sphere}, cfg{2, 3, codebook_kind::sphere}, cfg{3, 2, codebook_kind::sphere},
                       cfg{6, 4, codebook_kind::gaussian}, cfg{7, 2, codebook_kind::uniform}, cfg{128, 3, codebook_kind::sphere}}) {
    const codebook& cb = bgtq::get_codebook(g.kind, g.n, g.b);
    bgtq::counter_rng rng(0xC0DEB00C, static_cast<std::uint64_t>(g.n * 16 + g.b));
    const int vectors = g.n >= 64 ? 4000 : 60000;
    std::vector<double> x(g.n);
    double sum = 0.0, sum2 = 0.0;
    for (int v = 0; v < vectors; ++v) {
      double r2 = 0.0;
      for (int j = 0; j < g.n; ++j) {
        x[j] = rng.normal();
        r2 += x[j] * x[j];
      }
      const double inv = 1.0 / std::sqrt(r2);
      double s = 0.0;
      for (int j = 0; j < g.n; ++j) {
        const float y = static_cast<float>(x[j] * inv);
        const double e = double(y) - double(cb.centroids()[cb.quantize(y)]);
        s += e * e;
      }
      sum += s;
      sum2 += s * s;
    }
    const double mean = sum / vectors;
    const double se = std::sqrt((sum2 / vectors - mean * mean) / vectors);
    INFO("n = " << g.n << " b = " << g.b << " MC " << mean << " +- " << se << " mse() " << cb.mse());
    REQUIRE(std::fabs(mean - cb.mse()) < 5 * se);
    REQUIRE(se < 0.02 * cb.mse());  // the check has teeth
  }
}

TEST_CASE("codebooks are symmetric and thresholds are the rounded-down midpoints", "[codebook]") {
  for (codebook_kind kind : all_kinds)
    for (int n : {2, 3, 5, 64, 65536})
      for (int b = 1; b <= 8; ++b) {
        const codebook& cb = bgtq::get_codebook(kind, n, b);
        const auto c = cb.centroids();
        const auto t = cb.thresholds();
        const int K = cb.size();
        INFO("kind " << bgtq::to_string(kind) << " n = " << n << " b = " << b);
        REQUIRE(cb.kind() == kind);
        REQUIRE(cb.dim() == n);
        REQUIRE(cb.bits() == b);
        REQUIRE(K == (1 << b));
        REQUIRE(int(c.size()) == K);
        REQUIRE(int(t.size()) == K - 1);
        REQUIRE(t[K / 2 - 1] == 0.0f);
        for (int k = 0; k < K; ++k) {
          REQUIRE(c[k] == -c[K - 1 - k]);
          REQUIRE(std::fabs(c[k]) <= 1.0f);
          if (k > 0) REQUIRE(c[k] > c[k - 1]);
        }
        for (int k = 0; k + 1 < K; ++k) {
          const double mid = 0.5 * (double(c[k]) + double(c[k + 1]));
          REQUIRE(double(t[k]) <= mid);
          REQUIRE(double(std::nextafter(t[k], INFINITY)) > mid);
          // symmetric up to the rounding direction (1 ulp)
          REQUIRE(std::fabs(t[k] + t[K - 2 - k]) <= std::fabs(t[k] - std::nextafter(t[k], 0.0f)) * 1.0001f);
          if (k > 0) REQUIRE(t[k] > t[k - 1]);
        }
      }
}

TEST_CASE("thresholds of arbitrary levels are the largest float <= the exact midpoint", "[codebook]") {
  using bgtq::detail::midpoint_round_down;
  // (1e-30 + 0.75)/2 is not a double: the sum needs the TwoSum path
  REQUIRE(midpoint_round_down(1e-30f, 0.75f) == 0.375f);
  REQUIRE(midpoint_round_down(-0.75f, -1e-30f) == std::nextafter(-0.375f, -1.0f));
  REQUIRE(midpoint_round_down(-0.5f, 0.5f) == 0.0f);
  const float a = 0.25f, b = std::nextafter(0.25f, 1.0f);
  REQUIRE(midpoint_round_down(a, b) == a);  // midpoint between two adjacent floats rounds down
  REQUIRE(midpoint_round_down(-b, -a) == -b);
  // a user codebook with very unequal levels still quantizes to the exact nearest level
  const std::vector<double> levels = {-0.9, -1e-30, 1e-20, 0.75};
  const codebook cb(codebook_kind::uniform, 16, 2, levels);
  REQUIRE(cb.thresholds()[1] < 1e-20f);
  for (float y : {-0.45f, -0.450000036f, -1e-30f, 0.0f, 1e-25f, 5e-21f, 0.375f, std::nextafter(0.375f, 1.0f)})
    REQUIRE(int(cb.quantize(y)) == nearest(cb, y));
}

TEST_CASE("quantize() is the nearest centroid (ties to the lower) on a dense grid and at every threshold", "[codebook]") {
  for (codebook_kind kind : all_kinds)
    for (int n : {2, 3, 6, 128, 65536})
      for (int b : {1, 2, 3, 4, 7, 8}) {
        const codebook& cb = bgtq::get_codebook(kind, n, b);
        INFO("kind " << bgtq::to_string(kind) << " n = " << n << " b = " << b);
        std::vector<float> ys;
        const int grid = 20011;
        const float span = 4.0f / std::sqrt(float(n)) < 1.1f ? 4.0f / std::sqrt(float(n)) : 1.1f;
        for (int i = 0; i <= grid; ++i) ys.push_back(-span + 2.0f * span * float(i) / grid);
        for (float t : cb.thresholds()) {
          ys.push_back(t);
          ys.push_back(std::nextafter(t, -INFINITY));
          ys.push_back(std::nextafter(t, INFINITY));
        }
        for (float c : cb.centroids()) ys.push_back(c);
        for (float y : {-1.0f, 1.0f, 0.0f, -0.0f, 2.0f, -2.0f}) ys.push_back(y);
        int mismatches = 0;
        float first_bad = 0.0f;
        for (float y : ys) {
          const int q = cb.quantize(y);
          if (q != nearest(cb, y) || q != int(bgtq::codebook_quantize(cb.thresholds().data(), b, y))) {
            if (mismatches++ == 0) first_bad = y;
          }
        }
        INFO(ys.size() << " points, first mismatch at y = " << first_bad);
        REQUIRE(mismatches == 0);
        // count semantics: y == t goes to the lower cell
        for (int k = 0; k + 1 < cb.size(); ++k) REQUIRE(int(cb.quantize(cb.thresholds()[k])) == k);
        REQUIRE(cb.quantize(-INFINITY) == 0);
        REQUIRE(int(cb.quantize(INFINITY)) == cb.size() - 1);
        REQUIRE(cb.quantize(std::numeric_limits<float>::quiet_NaN()) == 0);
      }
}

TEST_CASE("gaussian and uniform codebooks never beat the sphere Lloyd-Max codebook", "[codebook]") {
  // The sphere codebook is optimal for f_n; the others are evaluated under f_n too.
  // Slack 1e-9 relative covers float rounding of the levels and MSE rounding (~1e-11).
  for (int n : {2, 3, 4, 6, 8, 16, 64, 128, 1024, 4096})
    for (int b = 1; b <= 8; ++b) {
      const double s = bgtq::get_codebook(codebook_kind::sphere, n, b).mse();
      const double g = bgtq::get_codebook(codebook_kind::gaussian, n, b).mse();
      const double u = bgtq::get_codebook(codebook_kind::uniform, n, b).mse();
      INFO("n = " << n << " b = " << b << " sphere " << s << " gaussian " << g << " uniform " << u);
      REQUIRE(g >= s * (1 - 1e-9));
      REQUIRE(u >= s * (1 - 1e-9));
      if (n <= 16 && b >= 3) REQUIRE(g > s * 1.01);  // the Gaussian law is wrong for small groups
      if (b >= 2 && n != 3) REQUIRE(u > s * 1.0001);
    }
  // gaussian at n = 2, b = 1: truncated N(0, 1/2) conditional mean, clearly worse than 2/pi
  REQUIRE(bgtq::get_codebook(codebook_kind::gaussian, 2, 1).mse() > 0.25);
  // for large n, the sphere and Gaussian codebooks converge (O(1/n) apart)
  for (int b = 1; b <= 8; ++b) {
    const auto& s = bgtq::get_codebook(codebook_kind::sphere, 65536, b);
    const auto& g = bgtq::get_codebook(codebook_kind::gaussian, 65536, b);
    for (int k = 0; k < s.size(); ++k) REQUIRE(g.centroids()[k] == Approx(s.centroids()[k]).epsilon(1e-4));
  }
}

TEST_CASE("gaussian and uniform codebooks at large n match Max (1960)'s tables for the normal law", "[codebook]") {
  // Independent of the sphere codebook: at n = 65536 one coordinate is N(0, 1/n) to O(1/n),
  // so sqrt(n) times the levels are J. Max's (IRE Trans. Inf. Theory 6(1), 1960) Table I
  // (Lloyd-Max levels, positive half) and Table II (the optimal uniform quantizer's step),
  // and n*MSE his distortions, each given to 4 significant digits (tolerance 1e-3 relative)
  const int n = 65536;
  const double scale = std::sqrt(static_cast<double>(n));
  const std::vector<std::vector<double>> max_levels = {
      {0.7979}, {0.4528, 1.510}, {0.2451, 0.7560, 1.344, 2.152}, {0.1284, 0.3881, 0.6568, 0.9424, 1.256, 1.618, 2.069, 2.733}};
  const double max_mse[] = {0.3634, 0.1175, 0.03455, 0.009497};
  const double uniform_step[] = {1.596, 0.9957, 0.5860, 0.3352};
  const double uniform_mse[] = {0.3634, 0.1188, 0.03744, 0.01154};
  for (int b = 1; b <= 4; ++b) {
    INFO("b = " << b);
    const codebook& g = bgtq::get_codebook(codebook_kind::gaussian, n, b);
    const int K = g.size();
    for (int k = 0; k < K / 2; ++k) CHECK(scale * g.centroids()[K / 2 + k] == Approx(max_levels[b - 1][k]).epsilon(1e-3));
    CHECK(g.mse() == Approx(max_mse[b - 1]).epsilon(1e-3));
    const codebook& u = bgtq::get_codebook(codebook_kind::uniform, n, b);
    for (int k = 1; k < K; ++k)  // equally spaced, at Max's step
      CHECK(scale * (u.centroids()[k] - u.centroids()[k - 1]) == Approx(uniform_step[b - 1]).epsilon(1e-3));
    CHECK(u.mse() == Approx(uniform_mse[b - 1]).epsilon(1e-3));
  }
}

TEST_CASE("get_codebook memoizes: one object per (kind, dim, bits), also under concurrency", "[codebook]") {
  const codebook* a = &bgtq::get_codebook(codebook_kind::sphere, 96, 4);
  REQUIRE(a == &bgtq::get_codebook(codebook_kind::sphere, 96, 4));
  REQUIRE(a != &bgtq::get_codebook(codebook_kind::sphere, 96, 5));
  REQUIRE(a != &bgtq::get_codebook(codebook_kind::gaussian, 96, 4));
  REQUIRE(a != &bgtq::get_codebook(codebook_kind::sphere, 97, 4));
  // many threads asking for fresh keys at once all get the same object
  std::vector<const codebook*> seen(8 * 6, nullptr);
  std::vector<std::thread> threads;
  for (int th = 0; th < 8; ++th)
    threads.emplace_back([&, th] {
      for (int j = 0; j < 6; ++j) seen[th * 6 + j] = &bgtq::get_codebook(codebook_kind::uniform, 333 + j, 6);
    });
  for (auto& t : threads) t.join();
  for (int th = 0; th < 8; ++th)
    for (int j = 0; j < 6; ++j) REQUIRE(seen[th * 6 + j] == seen[j]);
  // and a fresh build is equal in value to the memoized one
  const codebook fresh = bgtq::sphere_lloyd_max::build(96, 4);
  REQUIRE(std::equal(fresh.centroids().begin(), fresh.centroids().end(), a->centroids().begin()));
  REQUIRE(fresh.mse() == a->mse());
}

TEST_CASE("distortion_table: D[0] = 1, D[b] = codebook MSE, decreasing", "[codebook]") {
  for (codebook_kind kind : all_kinds)
    for (int n : {2, 8, 128}) {
      const auto d = bgtq::codebook_distortion(kind, n);
      REQUIRE(d[0] == 1.0);
      for (int b = 1; b <= 8; ++b) {
        REQUIRE(d[b] == bgtq::get_codebook(kind, n, b).mse());
        REQUIRE(d[b] < d[b - 1]);
      }
    }
}

TEST_CASE("bad arguments throw bgtq::error(invalid_argument)", "[codebook]") {
  auto is_invalid = [](auto&& f) {
    try {
      f();
    } catch (const bgtq::error& e) {
      return e.code() == bgtq::errc::invalid_argument && std::string(e.what()).size() > 10;
    }
    return false;
  };
  for (int dim : {-3, 0, 1, 65537, 1 << 20}) {
    INFO("dim = " << dim);
    REQUIRE(is_invalid([&] { bgtq::get_codebook(codebook_kind::sphere, dim, 3); }));
    REQUIRE(is_invalid([&] { bgtq::codebook_distortion(codebook_kind::sphere, dim); }));
    REQUIRE(is_invalid([&] { bgtq::uniform_levels::build(dim, 3); }));
  }
  for (int bits : {-1, 0, 9, 16}) {
    INFO("bits = " << bits);
    REQUIRE(is_invalid([&] { bgtq::get_codebook(codebook_kind::gaussian, 128, bits); }));
    REQUIRE(is_invalid([&] { bgtq::sphere_lloyd_max::build(128, bits); }));
  }
  REQUIRE(is_invalid([&] { bgtq::get_codebook(static_cast<codebook_kind>(7), 128, 3); }));
  REQUIRE(is_invalid([&] { bgtq::parse_codebook_kind("laplace"); }));
  // the boundary values are accepted
  REQUIRE(bgtq::get_codebook(codebook_kind::sphere, 2, 8).size() == 256);
  REQUIRE(bgtq::get_codebook(codebook_kind::gaussian, 65536, 1).size() == 2);
  // direct construction validates the levels
  const std::vector<double> ok = {-0.5, 0.5};
  REQUIRE(codebook(codebook_kind::uniform, 4, 1, ok).mse() > 0);
  REQUIRE(is_invalid([&] { codebook(codebook_kind::uniform, 4, 2, ok); }));  // wrong count
  const std::vector<double> unsorted = {0.5, -0.5}, outside = {-1.5, 0.5}, nan = {-0.5, std::nan("")}, equal = {0.25, 0.25};
  REQUIRE(is_invalid([&] { codebook(codebook_kind::uniform, 4, 1, unsorted); }));
  REQUIRE(is_invalid([&] { codebook(codebook_kind::uniform, 4, 1, outside); }));
  REQUIRE(is_invalid([&] { codebook(codebook_kind::uniform, 4, 1, nan); }));
  REQUIRE(is_invalid([&] { codebook(codebook_kind::uniform, 4, 1, equal); }));
}

TEST_CASE("concepts: codebook models scalar_codebook, the policies model codebook_family", "[codebook]") {
  STATIC_REQUIRE(bgtq::scalar_codebook<bgtq::codebook>);
  STATIC_REQUIRE(bgtq::codebook_family<bgtq::sphere_lloyd_max>);
  STATIC_REQUIRE(bgtq::codebook_family<bgtq::gaussian_lloyd_max>);
  STATIC_REQUIRE(bgtq::codebook_family<bgtq::uniform_levels>);
  STATIC_REQUIRE(!bgtq::scalar_codebook<int>);
  STATIC_REQUIRE(!bgtq::codebook_family<bgtq::codebook>);
  STATIC_REQUIRE(bgtq::sphere_lloyd_max::kind == codebook_kind::sphere);
  STATIC_REQUIRE(bgtq::gaussian_lloyd_max::kind == codebook_kind::gaussian);
  STATIC_REQUIRE(bgtq::uniform_levels::kind == codebook_kind::uniform);
  // enum values are stored in plans
  STATIC_REQUIRE(static_cast<int>(codebook_kind::sphere) == 0);
  STATIC_REQUIRE(static_cast<int>(codebook_kind::gaussian) == 1);
  STATIC_REQUIRE(static_cast<int>(codebook_kind::uniform) == 2);
}

TEST_CASE("every (dim, bits, kind) builds and is consistent", "[codebook][.long]") {
  // dims 2..300 one by one, then a geometric sweep to 65536
  std::vector<int> dims;
  for (int n = 2; n <= 300; ++n) dims.push_back(n);
  for (double n = 301; n < 65536; n *= 1.07) dims.push_back(static_cast<int>(n));
  dims.push_back(65536);
  for (codebook_kind kind : all_kinds)
    for (int n : dims) {
      double prev = 1.0;
      for (int b = 1; b <= 8; ++b) {
        const codebook cb = bgtq::build_codebook(kind, n, b);
        INFO("kind " << bgtq::to_string(kind) << " n = " << n << " b = " << b);
        REQUIRE(cb.mse() < prev);
        REQUIRE(cb.mse() > 0.0);
        if (kind != codebook_kind::sphere) REQUIRE(cb.mse() >= bgtq::sphere_lloyd_max::build(n, b).mse() * (1 - 1e-9));
        prev = cb.mse();
      }
    }
}
