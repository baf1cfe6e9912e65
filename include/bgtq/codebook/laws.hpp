#pragma once
//! @file codebook/laws.hpp
//! The one-dimensional laws the scalar codebooks are designed for, with the closed
//! forms a Lloyd-Max solver needs: density, interval mass and interval first moment.
//!
//! - `sphere_law`: one coordinate y of a uniformly random unit vector in R^n,
//!   f_n(y) = C_n (1 - y^2)^((n-3)/2) on [-1, 1], C_n = Gamma(n/2) / (sqrt(pi) Gamma((n-1)/2)).
//!   n = 2 is the arcsine law (singular at +-1), n = 3 the uniform law, and for large n
//!   it approaches N(0, 1/n). With alpha = (n-1)/2:
//!     P(|Y| <= y)   = I_{y^2}(1/2, alpha)             (regularized incomplete beta)
//!     int y f_n dy  = -C_n (1 - y^2)^alpha / (2 alpha)  (exact antiderivative)
//!     E[Y^2]        = 1/n.
//! - `truncated_gaussian_law`: N(0, sigma^2) restricted to [-1, 1] and renormalised
//!   (the support of y), the law behind the `gaussian` codebook.
//!
//! Accuracy: masses are computed from whichever of P(|Y| <= y) and P(|Y| > y) is the
//! smaller (each evaluated directly, to a few ulp in relative terms), and first moments
//! from differences written with expm1/log1p, so narrow cells and far tails keep their
//! relative precision. Everything is double; nothing here allocates.

#include <cmath>
#include <utility>

#include "../core/error.hpp"

namespace bgtq {

namespace detail {

//! Gamma(a + 1/2) / Gamma(a) for a > 0: tgamma ratio below 40, else the asymptotic
//! series of its logarithm (truncation error < 1e-17 for a >= 40).
inline double gamma_half_ratio(double a) {
  if (a < 40.0) return std::tgamma(a + 0.5) / std::tgamma(a);
  const double r = 1.0 / a, r2 = r * r;
  const double s = -r / 8.0 + r * r2 / 192.0 - r * r2 * r2 / 640.0 + 17.0 * r * r2 * r2 * r2 / 14336.0;
  return std::sqrt(a) * std::exp(s);
}

//! Continued fraction K of the regularized incomplete beta function (Abramowitz &
//! Stegun 26.5.8), evaluated by the modified Lentz method:
//! I_x(a, b) = x^a (1-x)^b / (a B(a, b)) * K. Converges quickly for x < (a+1)/(a+b+2);
//! callers use the symmetry I_x(a, b) = 1 - I_{1-x}(b, a) otherwise.
inline double incomplete_beta_cf(double a, double b, double x) {
  constexpr double tiny = 1e-300;
  constexpr double eps = 1e-16;
  auto guard = [](double v) { return std::fabs(v) < tiny ? tiny : v; };
  double c = 1.0;
  double d = 1.0 / guard(1.0 - (a + b) * x / (a + 1.0));
  double h = d;
  for (int m = 1; m <= 100000; ++m) {
    const double m2 = 2.0 * m;
    // even step: d_{2m} = m (b - m) x / ((a + 2m - 1)(a + 2m))
    double num = m * (b - m) * x / ((a + m2 - 1.0) * (a + m2));
    d = 1.0 / guard(1.0 + num * d);
    c = guard(1.0 + num / c);
    h *= d * c;
    // odd step: d_{2m+1} = -(a + m)(a + b + m) x / ((a + 2m)(a + 2m + 1))
    num = -(a + m) * (a + b + m) * x / ((a + m2) * (a + m2 + 1.0));
    d = 1.0 / guard(1.0 + num * d);
    c = guard(1.0 + num / c);
    const double delta = d * c;
    h *= delta;
    if (std::fabs(delta - 1.0) < eps) return h;
  }
  fail(errc::unsupported, "incomplete beta continued fraction did not converge (a=" + std::to_string(a) +
                              ", b=" + std::to_string(b) + ", x=" + std::to_string(x) + ")");
}

//! Upper tail P(|Y| > y) of the sphere law for large alpha, from u0 = -log(1 - y^2):
//! I_{1-y^2}(alpha, 1/2) = C int_{u0}^inf e^(-alpha u) (1 - e^-u)^(-1/2) du, and with
//! (1 - e^-u)^(-1/2) = u^(-1/2) h(u), h(u) = sqrt(u / (1 - e^-u)) = sum_k h_k u^k,
//!   = C sum_k h_k alpha^-(k+1/2) Gamma(k + 1/2, alpha u0),
//! with Gamma(1/2, v) = sqrt(pi) erfc(sqrt v) and the stable upward recurrence
//! Gamma(s+1, v) = s Gamma(s, v) + v^s e^-v. Every term is computed without
//! cancellation (unlike the continued fraction at x = 1 - y^2 near 1, which loses
//! log10(1/y^2) digits). h has radius of convergence 2 pi, so the series is used for
//! u0 < 1 and alpha >= 30 (dropped remainder ~ e^(-2 pi alpha)); it stops when a term is
//! below 1e-17 of the sum (a handful of terms).
inline double sphere_tail_series(double alpha, double norm, double u0) {
  static constexpr double h[] = {
      1.0, 2.5e-1, 1.04166666666666666667e-2, -2.60416666666666666667e-3, -9.765625e-5, 5.15407986111111111111e-5,
      1.27560247189153439153e-6, -1.11009708788029100529e-6, -1.96705840041818231922e-8, 2.48363198847156773589e-8,
      3.39666199603867450547e-10, -5.69007183394218764092e-10, -6.33723015566713023799e-12,
      1.32513151558789035801e-11, 1.24683589609968033648e-13, -3.12299937806318878567e-13,
      -2.54698862635689702117e-15, 7.4267023509181585352e-15, 5.34888589003273662703e-17,
      -1.77857926108892199358e-16, -1.1473989542270475501e-18, 4.28347665472612811462e-18,
      2.50303374351802442248e-20, -1.03638629107595443701e-19};
  const double v = alpha * u0;
  double g = std::sqrt(3.14159265358979323846) * std::erfc(std::sqrt(v));  // Gamma(1/2, v)
  double p = std::exp(0.5 * std::log(v) - v);                              // v^(k+1/2) e^-v
  double apow = 1.0 / std::sqrt(alpha);                                    // alpha^-(k+1/2)
  double sum = h[0] * apow * g;
  for (int k = 0; k + 1 < int(sizeof h / sizeof h[0]); ++k) {
    g = (k + 0.5) * g + p;
    p *= v;
    apow /= alpha;
    const double term = h[k + 1] * apow * g;
    sum += term;
    if (std::fabs(term) <= 1e-17 * sum) break;
  }
  return norm * sum;
}

//! Shared derivations for a law symmetric about 0 on [-1, 1]. `Law` provides
//! `central_tail(y)` = {P(|Y| <= y), P(|Y| > y)} for y in [0, 1] and
//! `moment1_half(a, b)` = int_a^b y f(y) dy for 0 <= a <= b <= 1.
template <class Law>
struct symmetric_law_ops {
  //! P(lo < Y <= hi) for -1 <= lo <= hi <= 1.
  double mass(double lo, double hi) const {
    if (!(lo < hi)) return 0.0;
    if (lo >= 0.0) return half_mass(lo, hi);
    if (hi <= 0.0) return half_mass(-hi, -lo);
    return 0.5 * (self().central_tail(-lo).first + self().central_tail(hi).first);
  }
  //! int_lo^hi y f(y) dy for -1 <= lo <= hi <= 1.
  double moment1(double lo, double hi) const {
    if (!(lo < hi)) return 0.0;
    if (lo >= 0.0) return self().moment1_half(lo, hi);
    if (hi <= 0.0) return -self().moment1_half(-hi, -lo);
    return hi >= -lo ? self().moment1_half(-lo, hi) : -self().moment1_half(hi, -lo);
  }
  //! P(Y <= y).
  double cdf(double y) const {
    if (y <= -1.0) return 0.0;
    if (y >= 1.0) return 1.0;
    const auto [c, t] = self().central_tail(std::fabs(y));
    return y < 0.0 ? 0.5 * t : 1.0 - 0.5 * t;
  }

 private:
  const Law& self() const { return static_cast<const Law&>(*this); }
  // P(a < Y <= b) for 0 <= a <= b <= 1, from the representation with the smaller values.
  double half_mass(double a, double b) const {
    const auto [ca, ta] = self().central_tail(a);
    const auto [cb, tb] = self().central_tail(b);
    return cb <= ta ? 0.5 * (cb - ca) : 0.5 * (ta - tb);
  }
};

}  // namespace detail

//! Law of one coordinate of a uniformly random unit vector in R^n (see the file
//! comment). `n` may be any real > 1 (non-integer n is used for the compander law
//! f_n^(1/3), itself of this family); the codebooks use integer n >= 2.
class sphere_law : public detail::symmetric_law_ops<sphere_law> {
 public:
  //! @throws bgtq::error(invalid_argument) unless n > 1 and finite.
  explicit sphere_law(double n) : n_(n), alpha_(0.5 * (n - 1.0)) {
    BGTQ_REQUIRE(std::isfinite(n) && n > 1.0, errc::invalid_argument,
                 "sphere_law: dimension must be > 1, got " + std::to_string(n));
    c_ = detail::gamma_half_ratio(alpha_) / std::sqrt(3.14159265358979323846);
  }
  //! The dimension n.
  double dim() const noexcept { return n_; }
  //! alpha = (n - 1)/2: the density is C (1 - y^2)^(alpha - 1).
  double alpha() const noexcept { return alpha_; }
  //! Normalising constant C_n.
  double norm() const noexcept { return c_; }
  //! E[Y^2] = 1/n.
  double second_moment() const noexcept { return 1.0 / n_; }
  //! Standard deviation 1/sqrt(n).
  double sigma() const noexcept { return 1.0 / std::sqrt(n_); }
  //! Density f_n(y); 0 outside [-1, 1]; +inf at +-1 when n < 3.
  double pdf(double y) const noexcept {
    const double a = std::fabs(y);
    if (a > 1.0) return 0.0;
    if (a == 1.0) return alpha_ < 1.0 ? INFINITY : (alpha_ == 1.0 ? c_ : 0.0);
    return c_ * std::exp((alpha_ - 1.0) * log_one_minus_sq(a));
  }
  //! {P(|Y| <= y), P(|Y| > y)} for y in [0, 1]; the smaller one is accurate in
  //! relative terms, the other is 1 minus it.
  std::pair<double, double> central_tail(double y) const {
    if (y <= 0.0) return {0.0, 1.0};
    if (y >= 1.0) return {1.0, 0.0};
    const double x = y * y;
    if (alpha_ >= 30.0 && x * alpha_ >= 1.0) {
      const double u0 = -log_one_minus_sq(y);
      if (u0 < 1.0) {
        const double t = detail::sphere_tail_series(alpha_, c_, u0);
        return {1.0 - t, t};
      }
    }
    const double g = std::exp(alpha_ * log_one_minus_sq(y));  // (1 - y^2)^alpha
    if (x < 1.5 / (alpha_ + 2.5)) {
      // I_{y^2}(1/2, alpha) = 2 y (1-y^2)^alpha C * K
      const double c = 2.0 * y * g * c_ * detail::incomplete_beta_cf(0.5, alpha_, x);
      return {c, 1.0 - c};
    }
    // I_{1-y^2}(alpha, 1/2) = y (1-y^2)^alpha C / alpha * K
    const double t = y * g * c_ / alpha_ * detail::incomplete_beta_cf(alpha_, 0.5, one_minus_sq(y));
    return {1.0 - t, t};
  }
  //! int_a^b y f_n(y) dy for 0 <= a <= b <= 1: C/(2 alpha) ((1-a^2)^alpha - (1-b^2)^alpha).
  double moment1_half(double a, double b) const {
    if (!(a < b)) return 0.0;
    const double k = c_ / (2.0 * alpha_);
    const double ga = std::exp(alpha_ * log_one_minus_sq(a));
    if (b >= 1.0) return k * ga;
    // (1-b^2)/(1-a^2) = 1 - (b-a)(b+a)/(1-a^2)
    const double q = (b - a) * (b + a) / one_minus_sq(a);
    if (q >= 1.0) return k * ga;
    return k * ga * -std::expm1(alpha_ * std::log1p(-q));
  }

 private:
  static double one_minus_sq(double y) noexcept { return (1.0 - y) * (1.0 + y); }
  static double log_one_minus_sq(double y) noexcept {
    return y * y < 0.5 ? std::log1p(-y * y) : std::log((1.0 - y) * (1.0 + y));
  }
  double n_, alpha_, c_;
};

//! N(0, sigma^2) truncated to [-1, 1] (renormalised to mass 1).
class truncated_gaussian_law : public detail::symmetric_law_ops<truncated_gaussian_law> {
 public:
  //! @throws bgtq::error(invalid_argument) unless sigma > 0 and finite.
  explicit truncated_gaussian_law(double sigma) : s_(sigma) {
    BGTQ_REQUIRE(std::isfinite(sigma) && sigma > 0.0, errc::invalid_argument,
                 "truncated_gaussian_law: sigma must be > 0, got " + std::to_string(sigma));
    u1_ = 1.0 / (s_ * std::sqrt(2.0));
    z_ = std::erf(u1_);
    ec1_ = std::erfc(u1_);
  }
  double sigma() const noexcept { return s_; }
  //! E[Y^2] = s^2 (1 - (2/s) phi(1/s) / Z), phi the standard normal density, Z the kept mass.
  double second_moment() const noexcept {
    const double v = 1.0 / s_;
    return s_ * s_ * (1.0 - 2.0 * v * std::exp(-0.5 * v * v) / std::sqrt(2.0 * 3.14159265358979323846) / z_);
  }
  //! Density on [-1, 1].
  double pdf(double y) const noexcept {
    if (std::fabs(y) > 1.0) return 0.0;
    const double u = y / s_;
    return std::exp(-0.5 * u * u) / (s_ * std::sqrt(2.0 * 3.14159265358979323846) * z_);
  }
  //! {P(|Y| <= y), P(|Y| > y)} for y in [0, 1].
  std::pair<double, double> central_tail(double y) const {
    if (y <= 0.0) return {0.0, 1.0};
    if (y >= 1.0) return {1.0, 0.0};
    const double u = y / (s_ * std::sqrt(2.0));
    const double c = std::erf(u) / z_;
    if (c <= 0.5) return {c, 1.0 - c};
    const double t = (std::erfc(u) - ec1_) / z_;
    return {1.0 - t, t};
  }
  //! int_a^b y f(y) dy for 0 <= a <= b <= 1.
  double moment1_half(double a, double b) const {
    if (!(a < b)) return 0.0;
    const double k = s_ / (std::sqrt(2.0 * 3.14159265358979323846) * z_);
    const double ea = std::exp(-0.5 * (a / s_) * (a / s_));
    return k * ea * -std::expm1(-0.5 * (b - a) * (b + a) / (s_ * s_));
  }

 private:
  double s_, u1_, z_, ec1_;
};

}  // namespace bgtq
