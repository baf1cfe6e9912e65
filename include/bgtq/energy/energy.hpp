#pragma once
//! @file energy/energy.hpp
//! Per-block RoPE energy scores from calibration activations (the score of docs/theory.md §1):
//!
//!   s[l][h][i] = 1/2 * mean_{t, g in G(h)} ||q_{g,t}(i)||^2 + 1/2 * mean_t ||k_{h,t}(i)||^2
//!
//! where block i is the pair of dims `rope_layout::block_dims(i)` and
//! G(h) = { g : g / (Hq/Hkv) == h } (grouped-query attention). A RoPE rotation keeps
//! each block's norm, so pre- and post-RoPE activations give the same scores.
//!
//! The estimator streams: `add` may be called any number of times per layer, with any
//! number of tokens. Sums are kept per head dimension in double precision (a block's
//! energy is the sum of its two dims), so the result does not depend on how the tokens
//! were split into calls beyond double rounding.

#include <algorithm>
#include <array>
#include <cmath>
#include <concepts>
#include <cstddef>
#include <cstdint>
#include <new>
#include <string>
#include <type_traits>
#include <vector>

#include "../core/error.hpp"
#include "../core/half.hpp"
#include "../plan/plan.hpp"
#include "../rope/layout.hpp"

namespace bgtq {

//! Element types the estimator reads: float, IEEE half or bfloat16.
template <class T>
concept energy_element = std::same_as<T, float> || std::same_as<T, half> || std::same_as<T, bfloat16>;

//! A read-only view of per-token, per-head vectors: element (t, h, d) is
//! `data[t * token_stride + h * head_stride + d]` (strides in elements; the `dim`
//! values of one head are contiguous). A contiguous [T, H, D] array has
//! token_stride = H*D and head_stride = D; the K part of a fused [T, 3*H, D] QKV
//! buffer has data = base + H*D, token_stride = 3*H*D, head_stride = D.
//! @tparam T float, bgtq::half or bgtq::bfloat16
template <class T>
struct strided_heads {
  const T* data = nullptr;           //!< element (0, 0, 0)
  std::size_t tokens = 0;            //!< number of tokens T
  int heads = 0;                     //!< number of heads H
  int dim = 0;                       //!< head dimension D
  std::ptrdiff_t token_stride = 0;   //!< elements from token t to token t+1
  std::ptrdiff_t head_stride = 0;    //!< elements from head h to head h+1

  //! The contiguous [tokens, heads, dim] view of `p`.
  static strided_heads contiguous(const T* p, std::size_t tokens, int heads, int dim) {
    return {p, tokens, heads, dim, static_cast<std::ptrdiff_t>(heads) * dim, dim};
  }
};

//! Accumulates the energy scores s[layer][kv_head][block] of one model.
//!
//! Thread safety: const member functions may run concurrently; `add` may not run
//! concurrently with anything on the same object (use one estimator per thread and
//! `merge`). Every member that throws leaves the estimator unchanged.
class energy_estimator {
 public:
  //! @param layers   number of layers (>= 1)
  //! @param q_heads  number of query heads Hq (>= 1, a multiple of kv_heads)
  //! @param kv_heads number of KV heads Hkv (>= 1)
  //! @param rope     head geometry (head_dim D, pairing, rotary_dim)
  //! @throws bgtq::error(invalid_argument) naming the offending value (layers and heads
  //!         are limited to what a plan holds, plan/plan.hpp), capacity_exhausted if the
  //!         sums cannot be allocated
  energy_estimator(int layers, int q_heads, int kv_heads, const rope_layout& rope)
      : layers_(layers), q_heads_(q_heads), kv_heads_(kv_heads), rope_(rope) {
    BGTQ_REQUIRE(layers >= 1 && layers <= max_plan_layers, errc::invalid_argument,
                 "energy_estimator: layers must be in 1 .. " + std::to_string(max_plan_layers) + ", got " + std::to_string(layers));
    BGTQ_REQUIRE(kv_heads >= 1 && kv_heads <= max_plan_kv_heads, errc::invalid_argument,
                 "energy_estimator: kv_heads must be in 1 .. " + std::to_string(max_plan_kv_heads) + ", got " +
                     std::to_string(kv_heads));
    BGTQ_REQUIRE(q_heads >= 1 && q_heads % kv_heads == 0 && q_heads <= max_plan_q_heads, errc::invalid_argument,
                 "energy_estimator: q_heads must be a positive multiple of kv_heads=" + std::to_string(kv_heads) +
                     " and at most " + std::to_string(max_plan_q_heads) + ", got " + std::to_string(q_heads));
    rope_.validate();
    const int d = rope_.head_dim;
    dims_.resize(static_cast<std::size_t>(rope_.num_blocks()));
    for (int i = 0; i < rope_.num_blocks(); ++i) dims_[static_cast<std::size_t>(i)] = rope_.block_dims(i);
    const std::size_t per_layer = static_cast<std::size_t>(kv_heads) * static_cast<std::size_t>(d);
    try {
      q_sum_.assign(static_cast<std::size_t>(layers) * per_layer, 0.0);
      k_sum_.assign(static_cast<std::size_t>(layers) * per_layer, 0.0);
      tokens_.assign(static_cast<std::size_t>(layers), 0);
      scratch_q_.assign(per_layer, 0.0);
      scratch_k_.assign(per_layer, 0.0);
    } catch (const std::bad_alloc&) {
      fail(errc::capacity_exhausted, "energy_estimator: cannot allocate the sums of " + std::to_string(layers) + " layers x " +
                                         std::to_string(kv_heads) + " KV heads x head_dim " + std::to_string(d));
    }
  }

  //! Adds `tokens` tokens of one layer from contiguous arrays q [T, Hq, D] and
  //! k [T, Hkv, D]. Null pointers are allowed only with tokens == 0.
  //! @throws bgtq::error(invalid_argument) for a bad layer or null data,
  //!         bgtq::error(non_finite) naming layer, tensor, token, head and dim of the
  //!         first NaN/Inf (the estimator is then unchanged)
  void add(int layer, const float* q, const float* k, std::size_t tokens) {
    add(layer, strided_heads<float>::contiguous(q, tokens, q_heads_, rope_.head_dim),
        strided_heads<float>::contiguous(k, tokens, kv_heads_, rope_.head_dim));
  }
  //! fp16 overload of the contiguous `add`.
  void add(int layer, const half* q, const half* k, std::size_t tokens) {
    add(layer, strided_heads<half>::contiguous(q, tokens, q_heads_, rope_.head_dim),
        strided_heads<half>::contiguous(k, tokens, kv_heads_, rope_.head_dim));
  }

  //! Adds one layer's tokens from strided views (q: Hq heads, k: Hkv heads, both with
  //! dim D and the same token count).
  //! @throws bgtq::error(shape_mismatch) if heads, dim or token counts disagree with
  //!         the estimator or with each other; otherwise as the contiguous `add`
  template <energy_element T>
  void add(int layer, strided_heads<T> q, strided_heads<T> k) {
    check_layer(layer, "add");
    const int d = rope_.head_dim;
    BGTQ_REQUIRE(q.heads == q_heads_ && q.dim == d, errc::shape_mismatch,
                 "energy_estimator::add: q has " + std::to_string(q.heads) + " heads of dim " + std::to_string(q.dim) +
                     ", expected " + std::to_string(q_heads_) + " heads of dim " + std::to_string(d));
    BGTQ_REQUIRE(k.heads == kv_heads_ && k.dim == d, errc::shape_mismatch,
                 "energy_estimator::add: k has " + std::to_string(k.heads) + " heads of dim " + std::to_string(k.dim) +
                     ", expected " + std::to_string(kv_heads_) + " heads of dim " + std::to_string(d));
    BGTQ_REQUIRE(q.tokens == k.tokens, errc::shape_mismatch,
                 "energy_estimator::add: q has " + std::to_string(q.tokens) + " tokens but k has " +
                     std::to_string(k.tokens) + " (layer " + std::to_string(layer) + ")");
    if (q.tokens == 0) return;
    BGTQ_REQUIRE(q.data != nullptr && k.data != nullptr, errc::invalid_argument,
                 "energy_estimator::add: null data with " + std::to_string(q.tokens) + " tokens");

    const std::size_t nt = q.tokens;
    const int group = q_heads_ / kv_heads_;
    std::fill(scratch_q_.begin(), scratch_q_.end(), 0.0);
    std::fill(scratch_k_.begin(), scratch_k_.end(), 0.0);
    // scratch_[h * D + d] = sum over this call's tokens (and, for q, over g in G(h)) of x^2
    for (std::size_t t = 0; t < nt; ++t) {
      for (int g = 0; g < q_heads_; ++g) {
        const T* x = q.data + static_cast<std::ptrdiff_t>(t) * q.token_stride + static_cast<std::ptrdiff_t>(g) * q.head_stride;
        accumulate_squares(x, d, scratch_q_.data() + static_cast<std::size_t>(g / group) * d);
      }
      for (int h = 0; h < kv_heads_; ++h) {
        const T* x = k.data + static_cast<std::ptrdiff_t>(t) * k.token_stride + static_cast<std::ptrdiff_t>(h) * k.head_stride;
        accumulate_squares(x, d, scratch_k_.data() + static_cast<std::size_t>(h) * d);
      }
    }
    // NaN and Inf propagate into the sums (a finite float squared in double never
    // overflows), so one check of the sums finds them; only then locate the first one.
    if (!all_finite(scratch_q_)) locate_non_finite(layer, "q", q);
    if (!all_finite(scratch_k_)) locate_non_finite(layer, "k", k);

    double* qs = q_sum_.data() + layer_offset(layer);
    double* ks = k_sum_.data() + layer_offset(layer);
    for (std::size_t j = 0; j < scratch_q_.size(); ++j) {
      qs[j] += scratch_q_[j];
      ks[j] += scratch_k_[j];
    }
    tokens_[static_cast<std::size_t>(layer)] += static_cast<std::int64_t>(nt);
  }

  //! Adds the sums of another estimator of the same shape (for parallel calibration).
  //! @throws bgtq::error(shape_mismatch) if layers, heads or RoPE layout differ
  void merge(const energy_estimator& o) {
    BGTQ_REQUIRE(o.layers_ == layers_ && o.q_heads_ == q_heads_ && o.kv_heads_ == kv_heads_ && o.rope_ == rope_,
                 errc::shape_mismatch, "energy_estimator::merge: estimators have different shapes");
    for (std::size_t j = 0; j < q_sum_.size(); ++j) {
      q_sum_[j] += o.q_sum_[j];
      k_sum_[j] += o.k_sum_[j];
    }
    for (std::size_t l = 0; l < tokens_.size(); ++l) tokens_[l] += o.tokens_[l];
  }

  //! All scores, flattened [layer][kv_head][block] (size layers * Hkv * D/2).
  //! @throws bgtq::error(invalid_argument) if some layer has no tokens
  std::vector<double> scores() const {
    for (int l = 0; l < layers_; ++l) require_tokens(l);
    const int nb = rope_.num_blocks();
    std::vector<double> out(static_cast<std::size_t>(layers_) * kv_heads_ * nb);
    std::size_t j = 0;
    for (int l = 0; l < layers_; ++l)
      for (int h = 0; h < kv_heads_; ++h)
        for (int i = 0; i < nb; ++i) out[j++] = score_unchecked(l, h, i);
    return out;
  }

  //! Score s[layer][kv_head][block] = (q_energy + k_energy) / 2.
  //! @throws bgtq::error(invalid_argument) for an index out of range or a layer without tokens
  double score(int layer, int kv_head, int block) const {
    check_index(layer, kv_head, block, "score");
    require_tokens(layer);
    return score_unchecked(layer, kv_head, block);
  }

  //! mean over tokens t and g in G(kv_head) of ||q_{g,t}(block)||^2.
  //! @throws as `score`
  double q_energy(int layer, int kv_head, int block) const {
    check_index(layer, kv_head, block, "q_energy");
    require_tokens(layer);
    return q_energy_unchecked(layer, kv_head, block);
  }

  //! mean over tokens t of ||k_{kv_head,t}(block)||^2.
  //! @throws as `score`
  double k_energy(int layer, int kv_head, int block) const {
    check_index(layer, kv_head, block, "k_energy");
    require_tokens(layer);
    return k_energy_unchecked(layer, kv_head, block);
  }

  //! Tokens added so far to `layer`.
  std::int64_t tokens(int layer) const {
    check_layer(layer, "tokens");
    return tokens_[static_cast<std::size_t>(layer)];
  }

  int layers() const noexcept { return layers_; }          //!< number of layers
  int q_heads() const noexcept { return q_heads_; }        //!< Hq
  int kv_heads() const noexcept { return kv_heads_; }      //!< Hkv
  int num_blocks() const noexcept { return rope_.num_blocks(); }  //!< D/2
  const rope_layout& rope() const noexcept { return rope_; }      //!< the head geometry
  //! KV head read by query head g: g / (Hq/Hkv).
  int kv_head_of(int g) const noexcept { return g / (q_heads_ / kv_heads_); }

 private:
  template <class T>
  static void accumulate_squares(const T* x, int d, double* acc) noexcept {
    for (int j = 0; j < d; ++j) {
      const double v = static_cast<double>(to_float(x[j]));
      acc[j] += v * v;
    }
  }

  static bool all_finite(const std::vector<double>& v) noexcept {
    for (double x : v)
      if (!std::isfinite(x)) return false;
    return true;
  }

  template <class T>
  [[noreturn]] void locate_non_finite(int layer, const char* which, const strided_heads<T>& a) const {
    for (std::size_t t = 0; t < a.tokens; ++t)
      for (int h = 0; h < a.heads; ++h)
        for (int j = 0; j < a.dim; ++j) {
          const float v = to_float(a.data[static_cast<std::ptrdiff_t>(t) * a.token_stride +
                                          static_cast<std::ptrdiff_t>(h) * a.head_stride + j]);
          if (!std::isfinite(v)) {
            fail(errc::non_finite, std::string("energy_estimator::add: non-finite value ") +
                                       (std::isnan(v) ? "NaN" : "Inf") + " in " + which + " at layer " +
                                       std::to_string(layer) + ", token " + std::to_string(t) + " of this call (token " +
                                       std::to_string(tokens_[static_cast<std::size_t>(layer)] + static_cast<std::int64_t>(t)) +
                                       " of the layer), head " + std::to_string(h) + ", dim " + std::to_string(j));
          }
        }
    fail(errc::non_finite, std::string("energy_estimator::add: non-finite sum of squares in ") + which + " at layer " +
                               std::to_string(layer));
  }

  std::size_t layer_offset(int layer) const noexcept {
    return static_cast<std::size_t>(layer) * static_cast<std::size_t>(kv_heads_) * static_cast<std::size_t>(rope_.head_dim);
  }

  void check_layer(int layer, const char* fn) const {
    BGTQ_REQUIRE(layer >= 0 && layer < layers_, errc::invalid_argument,
                 std::string("energy_estimator::") + fn + ": layer " + std::to_string(layer) + " out of range [0, " +
                     std::to_string(layers_) + ")");
  }
  void check_index(int layer, int kv_head, int block, const char* fn) const {
    check_layer(layer, fn);
    BGTQ_REQUIRE(kv_head >= 0 && kv_head < kv_heads_, errc::invalid_argument,
                 std::string("energy_estimator::") + fn + ": kv_head " + std::to_string(kv_head) + " out of range [0, " +
                     std::to_string(kv_heads_) + ")");
    BGTQ_REQUIRE(block >= 0 && block < rope_.num_blocks(), errc::invalid_argument,
                 std::string("energy_estimator::") + fn + ": block " + std::to_string(block) + " out of range [0, " +
                     std::to_string(rope_.num_blocks()) + ")");
  }
  void require_tokens(int layer) const {
    BGTQ_REQUIRE(tokens_[static_cast<std::size_t>(layer)] > 0, errc::invalid_argument,
                 "energy_estimator: layer " + std::to_string(layer) + " has no calibration tokens");
  }

  double block_sum(const std::vector<double>& s, int layer, int h, int block) const noexcept {
    const double* p = s.data() + layer_offset(layer) + static_cast<std::size_t>(h) * rope_.head_dim;
    const auto& dd = dims_[static_cast<std::size_t>(block)];
    return p[dd[0]] + p[dd[1]];
  }
  double q_energy_unchecked(int l, int h, int i) const noexcept {
    const double n = static_cast<double>(tokens_[static_cast<std::size_t>(l)]) * (q_heads_ / kv_heads_);
    return block_sum(q_sum_, l, h, i) / n;
  }
  double k_energy_unchecked(int l, int h, int i) const noexcept {
    return block_sum(k_sum_, l, h, i) / static_cast<double>(tokens_[static_cast<std::size_t>(l)]);
  }
  double score_unchecked(int l, int h, int i) const noexcept {
    return 0.5 * q_energy_unchecked(l, h, i) + 0.5 * k_energy_unchecked(l, h, i);
  }

  int layers_, q_heads_, kv_heads_;
  rope_layout rope_;
  std::vector<std::array<int, 2>> dims_;  // dims_[i] = rope_.block_dims(i)
  // [layer][kv_head][dim] sums of squares over tokens (q: also over g in G(h))
  std::vector<double> q_sum_, k_sum_;
  std::vector<std::int64_t> tokens_;  // [layer]
  // per-call sums [kv_head][dim], so a failing add leaves the totals untouched
  std::vector<double> scratch_q_, scratch_k_;
};

}  // namespace bgtq
