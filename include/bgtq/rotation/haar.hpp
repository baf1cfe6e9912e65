#pragma once
//! @file rotation/haar.hpp
//! `haar_rotation`: a dense Haar-distributed orthogonal matrix, any n. The reference
//! rotation of TurboQuant-MSE: P·u is exactly a uniformly random point of the sphere.

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "../core/error.hpp"
#include "../core/rng.hpp"
#include "concepts.hpp"
#include "kernels.hpp"
#include "kind.hpp"

// Construction arithmetic must not be contracted into FMAs (that would change the
// matrix bits between builds). GCC takes a per-function optimize attribute, clang a
// pragma at the top of the function body.
#if defined(__clang__)
#define BGTQ_DETAIL_NO_CONTRACT_ATTR
#define BGTQ_DETAIL_NO_CONTRACT_BODY _Pragma("clang fp contract(off)")
#elif defined(__GNUC__)
#define BGTQ_DETAIL_NO_CONTRACT_ATTR __attribute__((optimize("fp-contract=off")))
#define BGTQ_DETAIL_NO_CONTRACT_BODY
#else
#define BGTQ_DETAIL_NO_CONTRACT_ATTR
#define BGTQ_DETAIL_NO_CONTRACT_BODY
#endif

namespace bgtq {

namespace detail {

//! Haar-random orthogonal n x n matrix, row-major double:
//! 1. G (n x n) filled row by row with counter_rng(seed, rotation_rng_stream(haar)).normal();
//! 2. Householder QR of G, G = Q R, reflector k chosen with alpha_k = -sign(G'_kk)·||x_k||
//!    (sign(0) = +1), Q accumulated backwards from I; all sums strictly sequential;
//! 3. column j of Q multiplied by sign(R_jj), so that R has a positive diagonal: the
//!    QR factor is then unique and Q is Haar-distributed (Mezzadri 2007).
//! Every step uses + - * / sqrt in double in a fixed order with no contraction, so the
//! result is bit-identical across IEEE compilers and platforms. O(n^3) time, 2 n^2 doubles.
BGTQ_DETAIL_NO_CONTRACT_ATTR inline std::vector<double> haar_matrix(int n, std::uint64_t seed) {
  BGTQ_DETAIL_NO_CONTRACT_BODY
  const std::size_t un = static_cast<std::size_t>(n);
  counter_rng rng(seed, rotation_rng_stream(rotation_kind::haar));
  // a: column-major working copy of G (a[i + j*n] = G_ij)
  std::vector<double> a(un * un);
  for (std::size_t i = 0; i < un; ++i)
    for (std::size_t j = 0; j < un; ++j) a[i + j * un] = rng.normal();
  std::vector<double> beta(un, 0.0), rdiag(un, 0.0);
  for (std::size_t k = 0; k < un; ++k) {
    double* v = &a[k + k * un];  // reflector k overwrites column k from row k down
    const std::size_t len = un - k;
    double norm2 = 0.0;
    for (std::size_t i = 0; i < len; ++i) norm2 += v[i] * v[i];
    if (norm2 == 0.0) {  // zero column: no reflection, R_kk = 0
      beta[k] = 0.0;
      rdiag[k] = 0.0;
      continue;
    }
    const double x0 = v[0];
    const double alpha = x0 >= 0.0 ? -std::sqrt(norm2) : std::sqrt(norm2);
    v[0] = x0 - alpha;
    double vnorm2 = 0.0;
    for (std::size_t i = 0; i < len; ++i) vnorm2 += v[i] * v[i];
    beta[k] = 2.0 / vnorm2;
    rdiag[k] = alpha;
    for (std::size_t j = k + 1; j < un; ++j) {  // A[k:, j] -= beta v (v . A[k:, j])
      double* col = &a[k + j * un];
      double dot = 0.0;
      for (std::size_t i = 0; i < len; ++i) dot += v[i] * col[i];
      const double f = beta[k] * dot;
      for (std::size_t i = 0; i < len; ++i) col[i] -= f * v[i];
    }
  }
  // Q = H_0 H_1 ... H_{n-1} I, accumulated from the last reflector; q column-major.
  std::vector<double> q(un * un, 0.0);
  for (std::size_t i = 0; i < un; ++i) q[i + i * un] = 1.0;
  for (std::size_t kk = un; kk-- > 0;) {
    if (beta[kk] == 0.0) continue;
    const double* v = &a[kk + kk * un];
    const std::size_t len = un - kk;
    for (std::size_t j = kk; j < un; ++j) {  // columns j < kk are still e_j: untouched
      double* col = &q[kk + j * un];
      double dot = 0.0;
      for (std::size_t i = 0; i < len; ++i) dot += v[i] * col[i];
      const double f = beta[kk] * dot;
      for (std::size_t i = 0; i < len; ++i) col[i] -= f * v[i];
    }
  }
  std::vector<double> p(un * un);
  for (std::size_t j = 0; j < un; ++j) {
    const double s = rdiag[j] < 0.0 ? -1.0 : 1.0;
    for (std::size_t i = 0; i < un; ++i) p[i * un + j] = s * q[i + j * un];
  }
  return p;
}

}  // namespace detail

//! Dense Haar-random orthogonal P of any dimension n in [1, max_rotation_dim].
//!
//! Construction (see detail::haar_matrix): Householder QR of an n x n standard normal
//! matrix drawn from counter_rng, columns sign-fixed by sign(R_jj), so P is exactly
//! Haar-distributed; computed in double, stored as float. O(n^3) construction, single
//! threaded (measured 2 ms at n = 128, 15 ms at 256, 0.8 s at 1024); 3 n^2 floats of
//! storage, shared between copies (immutable).
//!
//! apply / apply_transpose: O(n^2) dense mat-vec, the output block held in SIMD
//! registers while the matrix streams through once (a padded copy of Pᵀ serves apply,
//! a padded copy of P serves apply_transpose). In place uses a stack copy of the input.
//! FMA-bound (about 0.6 us at n = 128 with AVX-512); apply_batch is a plain loop, as
//! sharing matrix loads between vectors measured no worthwhile gain.
//! Note: apply results differ in the last bits between the SIMD (FMA) and scalar
//! paths; the matrix itself is bit-identical everywhere.
class haar_rotation {
 public:
  //! Builds P from (n, seed).
  //! @throws bgtq::error(invalid_argument) unless 1 <= n <= max_rotation_dim
  haar_rotation(int n, std::uint64_t seed) : n_(n), seed_(seed) {
    BGTQ_REQUIRE(n >= 1 && n <= max_rotation_dim, errc::invalid_argument,
                 "haar_rotation: dimension n = " + std::to_string(n) + " is outside [1, " +
                     std::to_string(max_rotation_dim) + "]");
    const std::vector<double> p = detail::haar_matrix(n, seed);
    const std::size_t un = static_cast<std::size_t>(n), ld = static_cast<std::size_t>(detail::dense_ld(n));
    auto s = std::make_shared<storage>();
    s->p.resize(un * un);
    s->fwd.assign(un * ld, 0.0f);
    s->bwd.assign(un * ld, 0.0f);
    for (std::size_t i = 0; i < un; ++i)
      for (std::size_t j = 0; j < un; ++j) {
        const float v = static_cast<float>(p[i * un + j]);
        s->p[i * un + j] = v;
        s->bwd[i * ld + j] = v;  // row i of P
        s->fwd[j * ld + i] = v;  // row j of Pᵀ
      }
    s_ = std::move(s);
  }
  //! The run-time kind of this policy.
  static constexpr rotation_kind kind() noexcept { return rotation_kind::haar; }
  //! The dimension n.
  int dim() const noexcept { return n_; }
  //! The seed P was built from.
  std::uint64_t seed() const noexcept { return seed_; }
  //! P, row-major n x n: matrix()[i*n + j] = P_ij. Valid while any copy of *this lives.
  const float* matrix() const noexcept { return s_->p.data(); }
  //! out = P·in. O(n^2).
  void apply(const float* in, float* out) const noexcept { product(s_->fwd.data(), in, out); }
  //! out = Pᵀ·in. O(n^2).
  void apply_transpose(const float* in, float* out) const noexcept { product(s_->bwd.data(), in, out); }
  //! apply() on `count` contiguous vectors of n floats (in == out allowed).
  void apply_batch(const float* in, float* out, std::size_t count) const noexcept {
    for (std::size_t v = 0; v < count; ++v) apply(in + v * n_, out + v * n_);
  }
  //! apply_transpose() on `count` contiguous vectors of n floats (in == out allowed).
  void apply_transpose_batch(const float* in, float* out, std::size_t count) const noexcept {
    for (std::size_t v = 0; v < count; ++v) apply_transpose(in + v * n_, out + v * n_);
  }

 private:
  // Layout: p   = P row-major n x n (unpadded, what matrix() returns);
  //         fwd = Pᵀ row-major, n rows of dense_ld(n) floats, zero padding (apply);
  //         bwd = P  row-major, n rows of dense_ld(n) floats, zero padding (apply_transpose).
  struct storage {
    std::vector<float> p, fwd, bwd;
  };
  void product(const float* m, const float* in, float* out) const noexcept {
    const int ld = detail::dense_ld(n_);
    if (in == out) {
      alignas(64) float buf[max_rotation_dim];
      std::memcpy(buf, in, sizeof(float) * static_cast<std::size_t>(n_));
      detail::axpy_matvec(m, ld, n_, buf, out);
    } else {
      detail::axpy_matvec(m, ld, n_, in, out);
    }
  }
  int n_;
  std::uint64_t seed_;
  std::shared_ptr<const storage> s_;
};

}  // namespace bgtq
