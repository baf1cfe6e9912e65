#pragma once
//! @file attention/softmax.hpp
//! Online-softmax state shared by the CPU attention and the CUDA kernels.
//! A state (m, l) stands for weights exp(s - m) with l = sum of them. `merge`
//! combines two partial states (flash-decoding's log-sum-exp merge); `update_max`
//! raises the reference max whenever a block's max beats it, so every weight
//! exp(s - m) is at most 1.

#include <cmath>

#include "../config.hpp"

namespace bgtq {

// ------------------------------------------------------------------ overflow guard

//! Scores are float: decode attention (CPU check_decode, GPU rotate_query_kernel)
//! refuses a query head whose |scale * q.k| or |q.k| could exceed this for some key the
//! cache can hold. 2^126 (about 8.5e37) leaves room below FLT_MAX (about 2^128) for the
//! difference of two scores and for the GPU tensor-core path, which keeps its scores in
//! log2 units (scale * log2(e) * q.k, so up to 1.443 * 2^126 < 2^127).
inline constexpr double max_score_bound = 0x1p126;

//! The largest query norm the guard accepts for keys of norm up to key_bound and logit
//! scale `scale`: max_score_bound / (max(1, scale) * key_bound).
BGTQ_HOST_DEVICE double max_query_norm(double key_bound, double scale) {
  return max_score_bound / ((scale > 1.0 ? scale : 1.0) * key_bound);
}

//! The largest norm of an fp16 window key of D components (each at most 65504).
BGTQ_HOST_DEVICE double window_key_norm_bound(int D) { return 65504.0 * sqrt(static_cast<double>(D)); }

//! The key norm bound a query head is checked against: its key codec's (`codec_bound`)
//! and, when fp16 keys (a window) are attended too, the window's. The CPU
//! (detail::key_norm_bound) and the GPU (rotate_query_kernel) both take it from here.
BGTQ_HOST_DEVICE double attended_key_norm_bound(double codec_bound, bool fp16_keys, int D) {
  const double w = fp16_keys ? window_key_norm_bound(D) : 0.0;
  return codec_bound > w ? codec_bound : w;
}

//! Decode attention's logit scale: `scale`, or 1/sqrt(D) when it is 0 (the default).
BGTQ_HOST_DEVICE float logit_scale(float scale, int D) {
  return scale == 0.0f ? 1.0f / sqrtf(static_cast<float>(D)) : scale;
}

//! Running max and sum of an online softmax.
struct softmax_state {
  float m;  //!< reference max (-inf when empty)
  float l;  //!< sum of exp(s - m)
};

//! Returns the factor by which existing accumulators must be multiplied when a block
//! whose max score is `block_max` arrives, and updates st.m (st.l is scaled too).
//! The factor is 1 when the block does not beat the reference max (no rescale).
//!
//! The max is raised as soon as a block beats it, so every weight is at most 1 and the
//! value sums are bounded by tokens x the largest value norm: 2^24 tokens of fp32 radii
//! at their 2^100 clamp (tq_math.hpp fp32_radius_max) stay finite. (Raising it only past
//! a margin, to rescale less often, let weights reach e^margin: at a margin of 16, about
//! 100 such tokens scoring 15.5 above earlier ones overflowed float, docs/errors.md row
//! 18.) A rescale costs one multiply per accumulator, once per block of scores.
BGTQ_HOST_DEVICE float update_max(softmax_state& st, float block_max) {
  if (st.m == -__builtin_inff()) {
    if (block_max == -__builtin_inff()) return 1.0f;
    st.m = block_max;  // first block: accumulators are still zero
    st.l = 0.0f;
    return 0.0f;
  }
  if (!(block_max > st.m)) return 1.0f;
  const float f = __builtin_expf(st.m - block_max);
  st.l *= f;
  st.m = block_max;
  return f;
}

//! Merges partial state b into a; returns the factors to apply to a's and b's
//! accumulators (fa, fb) so that acc = fa*acc_a + fb*acc_b.
BGTQ_HOST_DEVICE void merge(softmax_state& a, const softmax_state& b, float& fa, float& fb) {
  const float m = a.m > b.m ? a.m : b.m;
  if (m == -__builtin_inff()) {
    fa = 1.0f;
    fb = 0.0f;
    return;
  }
  fa = a.m == -__builtin_inff() ? 0.0f : __builtin_expf(a.m - m);
  fb = b.m == -__builtin_inff() ? 0.0f : __builtin_expf(b.m - m);
  a.l = a.l * fa + b.l * fb;
  a.m = m;
}

}  // namespace bgtq
