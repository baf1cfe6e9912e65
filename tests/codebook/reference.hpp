#pragma once
// Independent reference computations for the codebook tests: integrals over the sphere
// law done numerically in theta (y = cos theta, density ~ sin^(n-2) theta on [0, pi],
// smooth for every n >= 2) with composite Gauss-Legendre, sharing no code with
// include/bgtq/codebook (no incomplete beta, no closed forms).
#include <algorithm>
#include <cmath>
#include <span>
#include <vector>

namespace bgtq_test {

//! Gauss-Legendre nodes and weights on [-1, 1] (Newton on P_q, from scratch).
struct gauss_legendre {
  std::vector<double> x, w;
  explicit gauss_legendre(int q) : x(q), w(q) {
    const double pi = 3.14159265358979323846;
    for (int i = 0; i < q; ++i) {
      double z = std::cos(pi * (i + 0.75) / (q + 0.5));
      double dp = 0.0;
      for (int it = 0; it < 100; ++it) {
        double p0 = 1.0, p1 = z;
        for (int k = 2; k <= q; ++k) {
          const double p2 = ((2.0 * k - 1.0) * z * p1 - (k - 1.0) * p0) / k;
          p0 = p1;
          p1 = p2;
        }
        dp = q * (z * p1 - p0) / (z * z - 1.0);
        const double dz = p1 / dp;
        z -= dz;
        if (std::fabs(dz) < 1e-16) break;
      }
      x[i] = z;
      w[i] = 2.0 / ((1.0 - z * z) * dp * dp);
    }
  }
};

//! Per-cell mass, first moment and squared error about the given centroids, for the
//! codebook (centroids c, thresholds t) under the law of one coordinate of a uniform
//! unit vector in R^n; all normalised by the total mass computed the same way.
struct theta_integrals {
  std::vector<double> mass, mean, sq_err;
  double mse = 0.0;  // E[(y - Q(y))^2], not scaled by n
};

inline theta_integrals integrate_theta(int n, std::span<const double> c, std::span<const double> t) {
  static const gauss_legendre gl(12);
  const std::size_t K = c.size();
  // theta panels no wider than ~ sigma/16 of the theta law (sigma ~ 1/sqrt(n)), split at every threshold
  const double width = std::min(0.05, 1.0 / (16.0 * std::sqrt(static_cast<double>(n))));
  theta_integrals out;
  out.mass.assign(K, 0.0);
  out.mean.assign(K, 0.0);
  out.sq_err.assign(K, 0.0);
  double total = 0.0;
  for (std::size_t k = 0; k < K; ++k) {
    // cell k: y in (t_{k-1}, t_k] <=> theta in [acos t_k, acos t_{k-1})
    const double y_hi = k + 1 == K ? 1.0 : std::fmin(1.0, std::fmax(-1.0, t[k]));
    const double y_lo = k == 0 ? -1.0 : std::fmin(1.0, std::fmax(-1.0, t[k - 1]));
    const double th_a = std::acos(y_hi), th_b = std::acos(y_lo);
    if (!(th_b > th_a)) continue;
    const int panels = std::max(1, static_cast<int>(std::ceil((th_b - th_a) / width)));
    const double h = (th_b - th_a) / panels;
    double m0 = 0.0, m1 = 0.0, e2 = 0.0;
    for (int p = 0; p < panels; ++p) {
      const double a = th_a + p * h;
      for (std::size_t i = 0; i < gl.x.size(); ++i) {
        const double th = a + 0.5 * h * (gl.x[i] + 1.0);
        const double s = std::sin(th);
        const double dens = n == 2 ? 1.0 : std::pow(s, n - 2);
        const double y = std::cos(th);
        const double wt = 0.5 * h * gl.w[i] * dens;
        m0 += wt;
        m1 += wt * y;
        e2 += wt * (y - c[k]) * (y - c[k]);
      }
    }
    out.mass[k] = m0;
    out.mean[k] = m0 > 0 ? m1 / m0 : 0.0;
    out.sq_err[k] = e2;
    total += m0;
  }
  for (std::size_t k = 0; k < K; ++k) {
    out.mass[k] /= total;
    out.sq_err[k] /= total;
    out.mse += out.sq_err[k];
  }
  return out;
}

}  // namespace bgtq_test
