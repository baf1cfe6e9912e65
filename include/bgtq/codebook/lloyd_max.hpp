#pragma once
//! @file codebook/lloyd_max.hpp
//! Numerical design of symmetric scalar quantizers for the laws of laws.hpp.
//!
//! Method (Lloyd-Max by Newton's method):
//! 1. By symmetry only the m = 2^(b-1) positive centroids d_0 < ... < d_{m-1} are
//!    unknown; the cells are [s_j, s_{j+1}] with s_0 = 0, s_m = 1 and
//!    s_j = (d_{j-1} + d_j)/2 (nearest-neighbour thresholds).
//! 2. Start from the high-resolution (compander) solution: d_j is the
//!    ((2j+1)/(2^b))-quantile of |Y| under the law proportional to f^(1/3), which for the
//!    sphere law is again a sphere law (alpha' = (alpha+2)/3) and for N(0, s^2) is
//!    N(0, 3 s^2). This start is within a few percent of the optimum at every b.
//! 3. Solve the centroid condition r_j(d) = d_j - E[Y | Y in cell j] = 0 by Newton's
//!    method. The Jacobian is tridiagonal and exact (d E[Y|cell]/d s = f(s) |s - E| / mass),
//!    so each step is O(m). A step is halved until the centroids stay ordered inside
//!    (0, 1) and max|r| falls; if that fails 10 times a plain Lloyd step is taken.
//! 4. Stop when the centroid condition holds to max_j |r_j| < 2e-12 sigma (sigma = the
//!    law's standard deviation) and the last update was below 1e-10 sigma. Newton
//!    converges quadratically: the update falls below 1e-9 sigma within 4 steps at every
//!    n in [2, 65536] and b <= 8, and the next step lands on the rounding floor
//!    (|r| ~ 1e-13 sigma; updates wander by up to ~3e-12 sigma at 8 bits because the
//!    Jacobian is nearly singular in smooth directions). The MSE is stationary at the
//!    optimum, so a centroid error of e sigma moves n*MSE by O(e^2 4^b) ~ 1e-15 relative;
//!    the MSE itself is evaluated to ~1e-11 relative at 8 bits (rounding in the sum
//!    below), ~1e-13 at 4 bits. Centroids are far more precise than the float they are
//!    stored in. Typically 5-6 steps.
//!
//! MSE of any codebook (centroids c_k, thresholds t_k) under a law with E[Y^2] known
//! exactly: MSE = E[Y^2] - sum_k (2 c_k S1_k - c_k^2 M_k), M_k and S1_k the mass and first
//! moment of cell k. This form has no per-cell cancellation (E[Y^2] is exact); its
//! rounding floor is ~1e-11 relative at 8 bits (the MSE is ~4^-b E[Y^2]), ~1e-13 at 4.

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <span>
#include <string>
#include <vector>

#include "../core/error.hpp"
#include "laws.hpp"

namespace bgtq::detail {

//! Smallest y in [0, 1] with P(|Y| <= y) >= p, by bisection to `tol` (absolute).
template <class Law>
double central_quantile(const Law& law, double p, double tol) {
  double lo = 0.0, hi = 1.0;
  while (hi - lo > tol) {
    const double mid = 0.5 * (lo + hi);
    if (law.central_tail(mid).first < p)
      lo = mid;
    else
      hi = mid;
  }
  return 0.5 * (lo + hi);
}

//! Diagnostics of one Lloyd-Max solve.
struct lloyd_max_report {
  int newton_steps = 0;
  int lloyd_steps = 0;
  double last_update = 0.0;  //!< max |centroid change| of the last step, in units of sigma
  double mse = 0.0;          //!< E[(Y - Q(Y))^2] under the design law (not scaled by n)
};

//! Symmetric Lloyd-Max quantizer with 2^bits levels for `law`, started from the
//! quantiles of `compander` (the law proportional to law^(1/3)). `sigma` sets the scale
//! of the tolerances. Returns all 2^bits centroids in ascending order (exactly
//! antisymmetric). @throws bgtq::error(unsupported) if Newton/Lloyd fails to converge
//! within 400 steps (not observed for any n in [2, 65536], b in [1, 8]).
template <class Law, class CompanderLaw>
std::vector<double> lloyd_max_symmetric(const Law& law, const CompanderLaw& compander, int bits, double sigma,
                                        lloyd_max_report* report = nullptr) {
  BGTQ_REQUIRE(bits >= 1 && bits <= 16, errc::invalid_argument, "lloyd_max: bits must be in [1, 16], got " + std::to_string(bits));
  const int K = 1 << bits;
  const int m = K / 2;
  std::vector<double> d(m), s(m + 1), mass(m), chat(m), r(m);
  lloyd_max_report rep;

  for (int j = 0; j < m; ++j) d[j] = central_quantile(compander, (2.0 * j + 1.0) / K, 1e-9 * sigma);

  // Evaluates thresholds, cell masses, conditional means, residuals at `x`; returns
  // max |residual| and the design MSE (valid near the fixed point), or -1 if a cell is empty.
  auto evaluate = [&](const std::vector<double>& x, double& mse) {
    s[0] = 0.0;
    s[m] = 1.0;
    for (int j = 1; j < m; ++j) s[j] = 0.5 * (x[j - 1] + x[j]);
    double rmax = 0.0, sum = 0.0;
    for (int j = 0; j < m; ++j) {
      mass[j] = law.mass(s[j], s[j + 1]);
      if (!(mass[j] > 0.0)) return -1.0;
      const double s1 = law.moment1(s[j], s[j + 1]);
      chat[j] = s1 / mass[j];
      r[j] = x[j] - chat[j];
      rmax = std::max(rmax, std::fabs(r[j]));
      sum += 2.0 * x[j] * s1 - x[j] * x[j] * mass[j];
    }
    mse = law.second_moment() - 2.0 * sum;
    return rmax;
  };
  auto ordered = [&](const std::vector<double>& x) {
    if (!(x[0] > 0.0) || !(x[m - 1] < 1.0)) return false;
    for (int j = 1; j < m; ++j)
      if (!(x[j] > x[j - 1])) return false;
    return true;
  };

  double mse = 0.0;
  double rmax = evaluate(d, mse);
  BGTQ_REQUIRE(rmax >= 0.0, errc::unsupported, "lloyd_max: empty cell in the initial codebook (bits " + std::to_string(bits) + ")");
  if (m == 1) {  // one free centroid: the conditional mean of [0, 1]
    d[0] = chat[0];
    evaluate(d, mse);
    rep.mse = mse;
    if (report) *report = rep;
    return {-d[0], d[0]};
  }

  std::vector<double> lower(m), diag(m), upper(m), step(m), trial(m), cprime(m);
  bool converged = false;
  for (int iter = 0; iter < 400 && !converged; ++iter) {
    // Jacobian of r: tridiagonal, from d chat_j / d s_j and d chat_j / d s_{j+1}.
    for (int j = 0; j < m; ++j) {
      const double dl = j >= 1 ? law.pdf(s[j]) * (chat[j] - s[j]) / mass[j] : 0.0;
      const double du = j + 1 <= m - 1 ? law.pdf(s[j + 1]) * (s[j + 1] - chat[j]) / mass[j] : 0.0;
      lower[j] = -0.5 * dl;
      upper[j] = -0.5 * du;
      diag[j] = 1.0 - 0.5 * dl - 0.5 * du;
    }
    // Thomas algorithm for J step = -r.
    bool solvable = true;
    double denom = diag[0];
    if (!(std::fabs(denom) > 0.0)) solvable = false;
    if (solvable) {
      cprime[0] = upper[0] / denom;
      step[0] = -r[0] / denom;
      for (int j = 1; j < m && solvable; ++j) {
        denom = diag[j] - lower[j] * cprime[j - 1];
        if (!(std::fabs(denom) > 0.0) || !std::isfinite(denom)) solvable = false;
        cprime[j] = upper[j] / denom;
        step[j] = (-r[j] - lower[j] * step[j - 1]) / denom;
      }
      for (int j = m - 2; j >= 0 && solvable; --j) step[j] -= cprime[j] * step[j + 1];
    }
    double lambda = 1.0;
    bool accepted = false;
    std::vector<double> prev = d;
    for (int halving = 0; solvable && halving < 10; ++halving, lambda *= 0.5) {
      for (int j = 0; j < m; ++j) trial[j] = d[j] + lambda * step[j];
      if (!ordered(trial)) continue;
      double tmse = 0.0;
      const double tr = evaluate(trial, tmse);
      if (tr >= 0.0 && tr < rmax) {
        d = trial;
        rmax = tr;
        mse = tmse;
        accepted = true;
        break;
      }
    }
    if (accepted) {
      ++rep.newton_steps;
    } else {
      // Lloyd step: re-evaluate at d (the line search moved the state), move to the means.
      evaluate(d, mse);
      d = chat;
      rmax = evaluate(d, mse);
      BGTQ_REQUIRE(rmax >= 0.0, errc::unsupported, "lloyd_max: empty cell after a Lloyd step");
      ++rep.lloyd_steps;
    }
    double update = 0.0;
    for (int j = 0; j < m; ++j) update = std::max(update, std::fabs(d[j] - prev[j]));
    rep.last_update = update / sigma;
    converged = rmax < 2e-12 * sigma && rep.last_update < 1e-10;
  }
  BGTQ_REQUIRE(converged, errc::unsupported,
               "lloyd_max: no convergence after 400 steps (bits " + std::to_string(bits) + ", last update " +
                   std::to_string(rep.last_update) + " sigma)");
  rep.mse = mse;
  if (report) *report = rep;
  std::vector<double> out(K);
  for (int j = 0; j < m; ++j) {
    out[m + j] = d[j];
    out[m - 1 - j] = -d[j];
  }
  return out;
}

//! E[(Y - Q(Y))^2] under `law` for the quantizer with ascending centroids c (K values)
//! and thresholds t (K - 1 values): cell k is (t_{k-1}, t_k] with t_{-1} = -1, t_{K-1} = 1.
template <class Law>
double quantizer_mse(const Law& law, std::span<const double> c, std::span<const double> t) {
  const std::size_t K = c.size();
  double sum = 0.0;
  for (std::size_t k = 0; k < K; ++k) {
    const double lo = k == 0 ? -1.0 : std::clamp(t[k - 1], -1.0, 1.0);
    const double hi = k + 1 == K ? 1.0 : std::clamp(t[k], -1.0, 1.0);
    if (!(lo < hi)) continue;
    sum += 2.0 * c[k] * law.moment1(lo, hi) - c[k] * c[k] * law.mass(lo, hi);
  }
  return law.second_moment() - sum;
}

//! Step of the symmetric uniform quantizer (levels (k - (K-1)/2) * step, midpoint
//! thresholds) that minimises the MSE under `law`, with the outer levels kept inside
//! [-1, 1] (step <= 2/(K-1)). Method: a 96-point logarithmic scan of step/sigma over
//! [0.25/K, 16/K] (capped at 2/(K-1)) finds the best grid point; the sign change of
//! dMSE/dstep = 2 sum_k w_k (c_k M_k - S1_k), w_k = k - (K-1)/2, in the neighbouring
//! interval is then bisected to a relative width of 1e-13.
template <class Law>
double best_uniform_step(const Law& law, int bits, double sigma) {
  const int K = 1 << bits;
  const int m = K / 2;
  const double step_max = 2.0 / (K - 1);
  // MSE and its derivative for the symmetric uniform quantizer (by halves).
  auto eval = [&](double step, double* deriv) {
    double sum = 0.0, der = 0.0;
    for (int j = 0; j < m; ++j) {
      const double w = j + 0.5;
      const double c = w * step;
      const double lo = j * step;
      const double hi = j + 1 == m ? 1.0 : std::min(1.0, (j + 1) * step);
      if (!(lo < hi)) continue;
      const double M = law.mass(lo, hi), S1 = law.moment1(lo, hi);
      sum += 2.0 * c * S1 - c * c * M;
      der += w * (c * M - S1);
    }
    if (deriv) *deriv = 4.0 * der;
    return law.second_moment() - 2.0 * sum;
  };
  constexpr int grid = 96;
  const double g_lo = 0.25 / K * sigma, g_hi = std::min(16.0 / K * sigma, step_max);
  std::vector<double> steps(grid), mses(grid);
  int best = 0;
  for (int i = 0; i < grid; ++i) {
    steps[i] = g_lo * std::pow(g_hi / g_lo, double(i) / (grid - 1));
    mses[i] = eval(steps[i], nullptr);
    if (mses[i] < mses[best]) best = i;
  }
  double a = steps[std::max(best - 1, 0)], b = steps[std::min(best + 1, grid - 1)];
  double da = 0.0, db = 0.0;
  eval(a, &da);
  eval(b, &db);
  if (!(da < 0.0) || !(db > 0.0)) return steps[best];  // at an end of the scan (e.g. the cap step_max)
  while (b - a > 1e-13 * b) {
    const double mid = 0.5 * (a + b);
    double dm = 0.0;
    eval(mid, &dm);
    if (dm < 0.0)
      a = mid;
    else
      b = mid;
  }
  return 0.5 * (a + b);
}

}  // namespace bgtq::detail
