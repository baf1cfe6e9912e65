#include <catch2/catch.hpp>

#include <bgtq/codebook/laws.hpp>
#include <bgtq/core/rng.hpp>

#include <cmath>
#include <vector>

#include "reference.hpp"

namespace {

// int_{th_a}^{th_b} sin^(n-2)(theta) * g(cos theta) dtheta by composite Gauss-Legendre
template <class G>
double theta_integral(int n, double th_a, double th_b, G g) {
  static const bgtq_test::gauss_legendre gl(16);
  const double width = std::min(0.02, 1.0 / (32.0 * std::sqrt(double(n))));
  const int panels = std::max(1, int(std::ceil((th_b - th_a) / width)));
  const double h = (th_b - th_a) / panels;
  double s = 0.0;
  for (int p = 0; p < panels; ++p)
    for (std::size_t i = 0; i < gl.x.size(); ++i) {
      const double th = th_a + p * h + 0.5 * h * (gl.x[i] + 1.0);
      s += 0.5 * h * gl.w[i] * (n == 2 ? 1.0 : std::pow(std::sin(th), n - 2)) * g(std::cos(th));
    }
  return s;
}

}  // namespace

TEST_CASE("sphere_law: tails, masses and moments match theta-space quadrature", "[codebook][laws]") {
  const double pi = 3.14159265358979323846;
  for (int n : {2, 3, 4, 7, 20, 59, 61, 128, 1000, 4096, 65536}) {
    const bgtq::sphere_law law(n);
    const double sigma = 1.0 / std::sqrt(double(n));
    // normalisation computed by quadrature: only near the centre for large n
    const double z_total = theta_integral(n, 0.0, pi, [](double) { return 1.0; });
    INFO("n = " << n);
    REQUIRE(law.norm() == Approx(1.0 / z_total).epsilon(1e-13));  // C_n = 1 / int sin^(n-2)
    for (double z : {0.05, 0.3, 0.9, 1.2, 1.5, 1.8, 2.0, 2.5, 3.0, 4.0, 5.0, 6.0}) {
      const double y = z * sigma;
      if (y >= 1.0) continue;
      const double tail = 2.0 * theta_integral(n, 0.0, std::acos(y), [](double) { return 1.0; }) / z_total;
      const auto [c, t] = law.central_tail(y);
      INFO("z = " << z << " y = " << y << " tail " << t << " vs " << tail);
      // the smaller of the two is accurate in relative terms
      if (t < 0.5)
        REQUIRE(t == Approx(tail).epsilon(1e-12));
      else
        REQUIRE(c == Approx(2.0 * theta_integral(n, std::acos(y), pi / 2, [](double) { return 1.0; }) / z_total).epsilon(1e-12));
      REQUIRE(c + t == Approx(1.0).epsilon(1e-15));
      REQUIRE(law.cdf(y) == Approx(1.0 - 0.5 * tail).epsilon(1e-13));
      REQUIRE(law.cdf(-y) == Approx(0.5 * tail).epsilon(1e-11));
    }
    // mass and first moment of intervals, some crossing 0, some narrow, some to the edge
    bgtq::counter_rng rng(7, n);
    for (int i = 0; i < 40; ++i) {
      double a = std::fmax(-1.0, std::fmin(1.0, 3.0 * sigma * (2.0 * rng.uniform() - 1.0)));
      double b = std::fmax(-1.0, std::fmin(1.0, a + sigma * (i % 3 == 0 ? 1e-3 : 1.0) * rng.uniform()));
      if (i % 10 == 9) b = 1.0;
      if (i % 10 == 8) a = -1.0;
      double m_ref, s1_ref;
      if (b - a < 0.01 * sigma && std::fmax(std::fabs(a), std::fabs(b)) < 0.9) {
        // narrow: Gauss-Legendre in y itself (acos would blur the width by ~1e-16 / (b - a))
        static const bgtq_test::gauss_legendre gl(16);
        m_ref = s1_ref = 0.0;
        for (std::size_t q = 0; q < gl.x.size(); ++q) {
          const double y = a + 0.5 * (b - a) * (gl.x[q] + 1.0);
          const double w = 0.5 * (b - a) * gl.w[q] * std::pow(1.0 - y * y, 0.5 * (n - 3)) / z_total;
          m_ref += w;
          s1_ref += w * y;
        }
      } else {
        m_ref = theta_integral(n, std::acos(b), std::acos(a), [](double) { return 1.0; }) / z_total;
        s1_ref = theta_integral(n, std::acos(b), std::acos(a), [](double y) { return y; }) / z_total;
      }
      INFO("[" << a << ", " << b << "]");
      // masses come from differences of P(|Y| <= y) or P(|Y| > y) (absolute error ~1e-16);
      // the reference integrates over [acos b, acos a], whose width carries ~1e-16 * pi
      REQUIRE(law.mass(a, b) == Approx(m_ref).epsilon(1e-11).margin(1e-15));
      REQUIRE(law.moment1(a, b) == Approx(s1_ref).epsilon(1e-10).margin(1e-16 * sigma));
    }
    // second moment 1/n and total mass 1 from the same quadrature
    REQUIRE(theta_integral(n, 0.0, pi, [](double y) { return y * y; }) / z_total == Approx(law.second_moment()).epsilon(1e-12));
    REQUIRE(law.mass(-1.0, 1.0) == Approx(1.0).epsilon(1e-15));
    REQUIRE(law.moment1(-1.0, 1.0) == Approx(0.0).margin(1e-16));
    // density
    const double y3 = 0.3 * sigma;
    REQUIRE(law.pdf(y3) == Approx(law.norm() * std::exp(0.5 * (n - 3) * std::log1p(-y3 * y3))).epsilon(1e-13));
  }
  // special laws: n = 2 arcsine, n = 3 uniform
  const bgtq::sphere_law arcsine(2), uniform(3);
  for (double y : {-0.9, -0.3, 0.0, 0.2, 0.7, 0.999}) {
    REQUIRE(arcsine.cdf(y) == Approx(0.5 + std::asin(y) / pi).epsilon(1e-13));
    REQUIRE(uniform.cdf(y) == Approx(0.5 * (1.0 + y)).epsilon(1e-13));
    REQUIRE(arcsine.pdf(y) == Approx(1.0 / (pi * std::sqrt(1.0 - y * y))).epsilon(1e-13));
  }
  REQUIRE(std::isinf(arcsine.pdf(1.0)));
  REQUIRE(uniform.pdf(1.0) == Approx(0.5));
  REQUIRE(bgtq::sphere_law(5).pdf(1.0) == 0.0);
  REQUIRE(arcsine.pdf(1.5) == 0.0);
}

TEST_CASE("gamma_half_ratio is Gamma(a + 1/2) / Gamma(a) on both sides of its switch", "[codebook][laws]") {
  for (double a : {0.5, 1.0, 2.5, 10.0, 39.5, 40.0, 41.5, 100.0, 1000.5, 32767.5}) {
    const long double ref = std::exp(std::lgamma((long double)a + 0.5L) - std::lgamma((long double)a));
    INFO("a = " << a);
    REQUIRE(bgtq::detail::gamma_half_ratio(a) == Approx(double(ref)).epsilon(a < 1000 ? 1e-14 : 1e-12));
  }
  // the two branches agree: r(a + 1) = r(a) (a + 1/2) / a across the switch at 40
  for (double a : {39.0, 39.25, 39.5, 39.99})
    REQUIRE(bgtq::detail::gamma_half_ratio(a + 1.0) == Approx(bgtq::detail::gamma_half_ratio(a) * (a + 0.5) / a).epsilon(1e-14));
}

TEST_CASE("truncated_gaussian_law: mass, moments and second moment", "[codebook][laws]") {
  const double pi = 3.14159265358979323846;
  for (double sigma : {0.05, 0.3, 1.0 / std::sqrt(2.0), 2.0}) {
    const bgtq::truncated_gaussian_law law(sigma);
    // Simpson on [-1, 1] with a fine grid (the density is smooth)
    const int N = 200000;
    double m0 = 0, m2 = 0;
    for (int i = 0; i <= N; ++i) {
      const double y = -1.0 + 2.0 * i / N;
      const double w = (i == 0 || i == N) ? 1 : (i % 2 ? 4 : 2);
      m0 += w * law.pdf(y);
      m2 += w * law.pdf(y) * y * y;
    }
    m0 *= 2.0 / N / 3.0;
    m2 *= 2.0 / N / 3.0;
    INFO("sigma = " << sigma);
    REQUIRE(m0 == Approx(1.0).epsilon(1e-10));
    REQUIRE(law.second_moment() == Approx(m2).epsilon(1e-10));
    REQUIRE(law.mass(-1.0, 1.0) == Approx(1.0).epsilon(1e-15));
    const double z = std::erf(1.0 / (sigma * std::sqrt(2.0)));
    for (double y : {0.01, 0.2, 0.6, 0.95}) {
      REQUIRE(law.cdf(y) == Approx(0.5 + 0.5 * std::erf(y / (sigma * std::sqrt(2.0))) / z).epsilon(1e-14));
      const double s1 = sigma / std::sqrt(2 * pi) / z * (std::exp(-0.5 * y * y / (sigma * sigma)) - std::exp(-0.5 / (sigma * sigma)));
      REQUIRE(law.moment1(y, 1.0) == Approx(s1).epsilon(1e-13));
    }
  }
}

TEST_CASE("laws reject bad parameters", "[codebook][laws]") {
  REQUIRE_THROWS_AS(bgtq::sphere_law(1.0), bgtq::error);
  REQUIRE_THROWS_AS(bgtq::sphere_law(std::nan("")), bgtq::error);
  REQUIRE_THROWS_AS(bgtq::truncated_gaussian_law(0.0), bgtq::error);
  REQUIRE_THROWS_AS(bgtq::truncated_gaussian_law(-1.0), bgtq::error);
}
