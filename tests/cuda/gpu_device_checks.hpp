#pragma once
// Device-side checks (need a CUDA device): encode_append against the CPU cache's bytes,
// decode_attention against CPU decode_attention, device_energy against double sums on
// the CPU. Each returns a report; the Catch2 tests REQUIRE report.ok, and
// bench/gpu/bench_decode --check prints them (for machines without Catch2).
// Every output buffer is poisoned (0xFF bytes: NaN floats) before each run and every
// CUDA call and launcher return code is checked.
#include <cuda_runtime.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

#include <bgtq/cuda/device.hpp>
#include <bgtq/cuda/device_cache.hpp>
#include <bgtq/cuda/energy.hpp>
#include <bgtq/cuda/upload.hpp>
#include <bgtq/core/rng.hpp>
#include <bgtq/rope/layout.hpp>

#if __has_include(<bgtq/energy/energy.hpp>)
#include <bgtq/energy/energy.hpp>
#define BGTQ_GPU_CHECKS_HAVE_ESTIMATOR 1
#endif

#include "gpu_checks.hpp"

namespace bgtq_gpu {

//! Outcome of one device check.
struct check_report {
  bool ok = false;
  std::string what;    //!< what was checked and, on failure, why it failed
  double value = 0.0;  //!< the measured error (relative), where meaningful
  code_diff diff;      //!< encode checks: code statistics
};

//! Owning device allocation.
struct dev_buf {
  void* p = nullptr;
  std::size_t bytes = 0;
  dev_buf() = default;
  dev_buf(const dev_buf&) = delete;
  dev_buf& operator=(const dev_buf&) = delete;
  ~dev_buf() {
    if (p) cudaFree(p);
  }
  cudaError_t alloc(std::size_t n) {
    bytes = n;
    return cudaMalloc(&p, n > 0 ? n : 1);
  }
  template <class T>
  T* as() const {
    return static_cast<T*>(p);
  }
};

#define BGTQ_CHECK_CUDA(call)                                                                       \
  do {                                                                                              \
    const cudaError_t e_ = (call);                                                                  \
    if (e_ != cudaSuccess) {                                                                        \
      rep.what += std::string(" | ") + #call + " failed: " + cudaGetErrorString(e_);                 \
      return rep;                                                                                   \
    }                                                                                               \
  } while (0)
#define BGTQ_CHECK_ERRC(call)                                                                                   \
  do {                                                                                                          \
    const ::bgtq::errc e_ = (call);                                                                             \
    if (e_ != ::bgtq::errc::ok) {                                                                               \
      rep.what += std::string(" | ") + #call + " returned " + ::bgtq::to_string(e_) + ": " +                   \
                  ::bgtq::cuda::last_error_message();                                                           \
      return rep;                                                                                               \
    }                                                                                                           \
  } while (0)

template <class T>
cudaError_t upload_vec(dev_buf& b, const std::vector<T>& v) {
  if (cudaError_t e = b.alloc(v.size() * sizeof(T)); e != cudaSuccess) return e;
  if (v.empty()) return cudaSuccess;
  return cudaMemcpy(b.p, v.data(), v.size() * sizeof(T), cudaMemcpyHostToDevice);
}

inline const char* dtype_name(cuda::dtype t) { return t == cuda::dtype::f32 ? "f32" : t == cuda::dtype::f16 ? "f16" : "bf16"; }

//! encode_append of `lengths` tokens per sequence vs the CPU cache: every code equal
//! except near-threshold flips (CPU and GPU rotations may round a coordinate within
//! ~1e-6 of a threshold to different sides), radii within one ulp, all other bytes
//! equal. `interleave`: tokens in decode-step order (round robin over the sequences,
//! unaligned slots: the atomic path; every fifth token a padding token of slot -1 with
//! NaN / Inf elements, neither written nor counted), else sequence by sequence (aligned
//! plane words where possible). `with_nonfinite`: a NaN key row and an Inf value row,
//! stored as zero vectors by both and counted (2). `calls`: the tokens are split into this many launches. The slots
//! are first filled with other random tokens (stale pages must be overwritten).
//! `extreme`: token rows rescaled by scale_extreme_rows (f32/bf16 only). The clamp
//! counter must equal the CPU cache's clamped_radii.
inline check_report gpu_check_encode(shape s, const method& m, const std::vector<int>& lengths, cuda::dtype type,
                                     bool interleave, int calls, std::uint64_t seed, bool with_nonfinite = false,
                                     bool extreme = false) {
  check_report rep;
  char head[256];
  std::snprintf(head, sizeof head, "encode %s D=%d Hkv=%d %s %s calls=%d%s%s", m.name.c_str(), s.head_dim, s.kv_heads,
                dtype_name(type), interleave ? "interleaved" : "prefill", calls, with_nonfinite ? " nonfinite" : "",
                extreme ? " extreme rows" : "");
  rep.what = head;
  s.sink = 0;
  s.recent = 0;
  s.nonfinite_zero = true;
  auto c = make_cache(s, m, seed);
  const int B = static_cast<int>(lengths.size());
  const std::size_t row = static_cast<std::size_t>(s.kv_heads) * s.head_dim;
  // the data (rounded through `type`), one NaN key row if requested
  std::vector<std::vector<float>> K(static_cast<std::size_t>(B)), V(static_cast<std::size_t>(B));
  for (int b = 0; b < B; ++b) {
    K[static_cast<std::size_t>(b)] = normal_floats(static_cast<std::size_t>(lengths[static_cast<std::size_t>(b)]) * row, seed + 1, mix(static_cast<std::uint64_t>(b), 1), 1.5f);
    V[static_cast<std::size_t>(b)] = normal_floats(static_cast<std::size_t>(lengths[static_cast<std::size_t>(b)]) * row, seed + 1, mix(static_cast<std::uint64_t>(b), 2));
    if (extreme) {
      scale_extreme_rows(K[static_cast<std::size_t>(b)], row);
      scale_extreme_rows(V[static_cast<std::size_t>(b)], row);
    }
    round_to(K[static_cast<std::size_t>(b)], type);
    round_to(V[static_cast<std::size_t>(b)], type);
  }
  // a NaN in a key row (token 3) and an Inf in a value row (token 4, the last head): each
  // part is checked on its own, each counted
  const bool plant = with_nonfinite && B > 0 && lengths[0] > 4;
  if (plant) {
    K[0][3 * row + 1] = NAN;
    V[0][4 * row + row - 1] = INFINITY;
  }
  std::vector<int> seqs;
  for (int b = 0; b < B; ++b) {
    seqs.push_back(c.add_sequence());
    if (lengths[static_cast<std::size_t>(b)] > 0)
      c.append(seqs.back(), 0, K[static_cast<std::size_t>(b)].data(), V[static_cast<std::size_t>(b)].data(), lengths[static_cast<std::size_t>(b)]);
  }
  // token order and slots
  std::vector<std::pair<int, int>> order;  // (sequence index, token)
  if (interleave) {
    int maxlen = 0;
    for (int L : lengths) maxlen = std::max(maxlen, L);
    for (int i = 0; i < maxlen; ++i)
      for (int b = 0; b < B; ++b)
        if (i < lengths[static_cast<std::size_t>(b)]) order.emplace_back(b, i);
  } else {
    for (int b = 0; b < B; ++b)
      for (int i = 0; i < lengths[static_cast<std::size_t>(b)]; ++i) order.emplace_back(b, i);
  }
  const int P = s.page_tokens;
  std::size_t N = order.size();
  std::vector<std::int64_t> slots(N);
  std::vector<float> kin(N * row), vin(N * row);
  for (std::size_t n = 0; n < N; ++n) {
    const auto [b, i] = order[n];
    const auto view = c.view(seqs[static_cast<std::size_t>(b)], 0);
    slots[n] = static_cast<std::int64_t>(view.pages[i / P]) * P + i % P;
    std::memcpy(&kin[n * row], &K[static_cast<std::size_t>(b)][static_cast<std::size_t>(i) * row], row * 4);
    std::memcpy(&vin[n * row], &V[static_cast<std::size_t>(b)][static_cast<std::size_t>(i) * row], row * 4);
  }
  if (interleave) {  // decode-step order: padding tokens (slot -1) as an engine's batch holds
    // them, every fifth, with random rows holding a NaN key and an Inf value element:
    // nothing may be written for them, and they must not be counted as non-finite rows
    std::vector<std::int64_t> s2;
    std::vector<float> k2, v2;
    for (std::size_t n = 0; n < N; ++n) {
      if (n % 5 == 2) {
        std::vector<float> pk = normal_floats(row, seed + 9, 2 * n, 3.0f), pv = normal_floats(row, seed + 9, 2 * n + 1);
        round_to(pk, type);  // the other rows were rounded above
        round_to(pv, type);
        pk[n % row] = NAN;
        pv[(n + 1) % row] = -INFINITY;
        s2.push_back(-1);
        k2.insert(k2.end(), pk.begin(), pk.end());
        v2.insert(v2.end(), pv.begin(), pv.end());
      }
      s2.push_back(slots[n]);
      k2.insert(k2.end(), kin.begin() + static_cast<std::ptrdiff_t>(n * row), kin.begin() + static_cast<std::ptrdiff_t>((n + 1) * row));
      v2.insert(v2.end(), vin.begin() + static_cast<std::ptrdiff_t>(n * row), vin.begin() + static_cast<std::ptrdiff_t>((n + 1) * row));
    }
    slots = std::move(s2);
    kin = std::move(k2);
    vin = std::move(v2);
    N = slots.size();
  }
  auto pack = [&](const std::vector<float>& x, std::vector<std::uint8_t>& out) {
    const std::size_t es = type == cuda::dtype::f32 ? 4 : 2;
    out.resize(x.size() * es);
    for (std::size_t i = 0; i < x.size(); ++i) {
      if (type == cuda::dtype::f32) {
        std::memcpy(&out[i * 4], &x[i], 4);
      } else {
        const std::uint16_t h = type == cuda::dtype::f16 ? float_to_half_bits(x[i]) : float_to_bf16_bits(x[i]);
        std::memcpy(&out[i * 2], &h, 2);
      }
    }
  };
  std::vector<std::uint8_t> kbytes, vbytes, gk, gv;
  pack(kin, kbytes);
  pack(vin, vbytes);
  std::vector<float> garbage_k = normal_floats(N * row, seed + 7, 3, 4.0f), garbage_v = normal_floats(N * row, seed + 7, 4, 0.1f);
  pack(garbage_k, gk);
  pack(garbage_v, gv);

  cuda::device_cache dev;
  BGTQ_CHECK_ERRC(cuda::device_cache::create(cuda::describe(c), dev));
  dev_buf dk, dv, dgk, dgv, dslots, dbad, dclamp;
  BGTQ_CHECK_CUDA(upload_vec(dk, kbytes));
  BGTQ_CHECK_CUDA(upload_vec(dv, vbytes));
  BGTQ_CHECK_CUDA(upload_vec(dgk, gk));
  BGTQ_CHECK_CUDA(upload_vec(dgv, gv));
  BGTQ_CHECK_CUDA(upload_vec(dslots, slots));
  BGTQ_CHECK_CUDA(dbad.alloc(8));
  BGTQ_CHECK_CUDA(cudaMemset(dbad.p, 0, 8));
  BGTQ_CHECK_CUDA(dclamp.alloc(8));
  BGTQ_CHECK_CUDA(cudaMemset(dclamp.p, 0, 8));
  const std::size_t es = type == cuda::dtype::f32 ? 4 : 2;
  for (int pass = 0; pass < 2; ++pass) {  // pass 0: garbage into the same slots; pass 1: the data
    const int ncalls = std::max(1, calls);
    for (int ci = 0; ci < ncalls; ++ci) {
      const std::size_t lo = N * static_cast<std::size_t>(ci) / ncalls, hi = N * static_cast<std::size_t>(ci + 1) / ncalls;
      cuda::encode_args a;
      a.layer = 0;
      a.tokens = static_cast<int>(hi - lo);
      a.type = type;
      a.k = (pass == 0 ? dgk.as<std::uint8_t>() : dk.as<std::uint8_t>()) + lo * row * es;
      a.v = (pass == 0 ? dgv.as<std::uint8_t>() : dv.as<std::uint8_t>()) + lo * row * es;
      a.slot_mapping = dslots.as<std::int64_t>() + lo;
      a.nonfinite = pass == 1 ? dbad.as<unsigned long long>() : nullptr;
      a.clamped = pass == 1 ? dclamp.as<unsigned long long>() : nullptr;
      BGTQ_CHECK_ERRC(dev.encode_append(a));
    }
  }
  BGTQ_CHECK_CUDA(cudaDeviceSynchronize());
  unsigned long long bad = 0;
  BGTQ_CHECK_CUDA(cudaMemcpy(&bad, dbad.p, 8, cudaMemcpyDeviceToHost));
  const unsigned long long want_bad = plant ? 2 : 0;
  if (bad != want_bad) {
    rep.what += " | nonfinite counter " + std::to_string(bad) + ", expected " + std::to_string(want_bad);
    return rep;
  }
  unsigned long long clamped = 0;
  BGTQ_CHECK_CUDA(cudaMemcpy(&clamped, dclamp.p, 8, cudaMemcpyDeviceToHost));
  if (clamped != c.stats().clamped_radii || (extreme && clamped == 0)) {
    rep.what += " | clamp counter " + std::to_string(clamped) + ", the CPU cache counted " +
                std::to_string(c.stats().clamped_radii);
    return rep;
  }
  for (int h = 0; h < s.kv_heads; ++h)
    for (int b = 0; b < B; ++b) {
      const auto view = c.view(seqs[static_cast<std::size_t>(b)], 0);
      const int L = lengths[static_cast<std::size_t>(b)];
      for (int pi = 0; pi * P < L; ++pi) {
        const int used = std::min(P, L - pi * P);
        std::vector<std::uint8_t> got(c.head_page_bytes(0, h));
        BGTQ_CHECK_ERRC(dev.download_page_part(view.pages[pi], 0, h, got.data()));
        std::vector<const float*> kr, vr;
        for (int t = 0; t < used; ++t) {
          const std::size_t ro = (static_cast<std::size_t>(pi * P + t) * s.kv_heads + h) * s.head_dim;
          kr.push_back(&K[static_cast<std::size_t>(b)][ro]);
          vr.push_back(&V[static_cast<std::size_t>(b)][ro]);
        }
        rep.diff += compare_page_part(c, 0, h, c.page_ptr(view.pages[pi], 0, h), got.data(), used, kr, vr);
      }
    }
  char tail[256];
  std::snprintf(tail, sizeof tail, ": %lld of %lld codes differ (%lld near a threshold), %lld radii far, %lld other bytes%s%s",
                rep.diff.mismatches, rep.diff.codes, rep.diff.near_threshold, rep.diff.radius_far, rep.diff.other_bytes,
                rep.diff.first.empty() ? "" : "; first: ", rep.diff.first.c_str());
  rep.what += tail;
  rep.value = rep.diff.codes > 0 ? static_cast<double>(rep.diff.mismatches) / static_cast<double>(rep.diff.codes) : 0.0;
  rep.ok = rep.diff.ok() && rep.diff.near_threshold * 1000 <= rep.diff.codes;
  return rep;
}

//! The tolerance of decode_attention against the CPU's, relative to max |out|: 1e-4 on
//! the CUDA cores (fp32 throughout), 3e-3 on the tensor cores (docs/gpu.md derives it:
//! fp16 rounding is 2^-11 relative per operand; the 2-4-bit codes themselves are ~1e-1).
inline double path_tol(bool tensor_cores) { return tensor_cores ? 3e-3 : 1e-4; }

//! What a gpu_check_decode run varies besides the shape, the method and the lengths.
//! Callers name what they set, in this order (designated initializers):
//! `gpu_check_decode(s, m, lengths, {.splits = 3, .seed = 7, .path = cuda::decode_path::tensor_cores})`.
struct decode_check {
  cuda::dtype q_type = cuda::dtype::f32;  //!< the queries' type on the device
  int splits = 0;                         //!< a forced split count; 0: the device's plan
  int seed = 1;                           //!< the cache's keys, values and the queries
  cuda::decode_path path = cuda::decode_path::cuda_cores;
  //! relative to max |out|; < 0: path_tol of the kernel that must run (see expect_tc)
  double tol = -1.0;
  //! this many (sequence, query head) pairs get one NaN, +Inf, -Inf or 3e38 (finite,
  //! beyond the overflow guard) query element on the device; their outputs must be all
  //! NaN, the others must still match the CPU (computed from the finite queries), and
  //! a.nonfinite must count them on each run
  int nonfinite = 0;
  //! (needs a window) every window key row gets -Inf in dim 0 and every query a positive
  //! dim 0, so every window score is -Inf (as an overflowed score would be); the output
  //! must then be finite and bit-identical to the same launch without the window (the
  //! CPU cache cannot hold such rows, so the device is its own reference)
  bool inf_window = false;
  //! (f32 queries, G >= 2; replaces `nonfinite`) per (sequence, KV head h) query head h G
  //! points along a stored key of h with norm 0.999 max_query_norm (the CPU's bound:
  //! key_norm_bound and, with a window, the window's), which both must serve alike
  //! (logits near 2^125: nearly one-hot), and query head h G + 1 the same at 1.01
  //! max_query_norm, which the device must refuse (NaN outputs, counted): a device bound
  //! looser or tighter than the CPU's by 1% fails
  bool guard_edge = false;
  //! after the upload, the last page of every sequence whose length is not a multiple of
  //! P gets, at every token slot past its length, +Inf radii (fp16 or fp32) and random
  //! code bits in every group of both parts, as stale data of a freed sequence could
  //! leave there: the outputs must not change (an Inf radius times a zero weight is NaN,
  //! so any use of one shows)
  bool poison_tail = false;
  //! every sequence's first 256 tokens (a CPU span of 4 pages of 64, two CUDA-core
  //! tiles) get zero keys (scores 0) and values along e1; the rest keys along the
  //! sequence's query head h G (KV head h) scoring 15.75 for it (below 16 still once
  //! quantized at 8 bits), and one common value row of norm 1.2e30 (below the
  //! fp32 radius clamp 2^100: stored exactly). Those weights reach e^15.75 unless the
  //! running max is raised as soon as a score beats it, and then the value sums
  //! overflow float (NaN outputs; errors.md row 18)
  bool score_jump = false;
  //! the kernel the launch must report it ran, 1 tensor or 0 CUDA cores, for a fallback
  //! the caller provoked; -1: what `path` and the layer decide (automatic takes the
  //! tensor cores wherever the layer allows)
  int expect_tc = -1;
};

//! decode_attention vs CPU decode_attention (tolerance: decode_check::tol) for sequences
//! of the given lengths, with the cache's sink/recent window; runs twice (poisoned
//! buffers both times) and requires bit-identical results and the kernel and split
//! count the launch reports to be the expected ones. decode_check says what else varies.
inline check_report gpu_check_decode(const shape& s, const method& m, const std::vector<int>& lengths, const decode_check& o = {}) {
  const cuda::dtype q_type = o.q_type;
  const int splits = o.splits;
  const auto seed = static_cast<std::uint64_t>(o.seed);
  const cuda::decode_path path = o.path;
  const int nonfinite = o.nonfinite;
  const bool inf_window = o.inf_window, guard_edge = o.guard_edge, poison_tail = o.poison_tail;
  const int expect_tc = o.expect_tc;
  check_report rep;
  char head[256];
  std::snprintf(head, sizeof head, "decode%s %s D=%d Hkv=%d G=%d P=%d B=%zu window=%d+%d q=%s splits=%d",
                path == cuda::decode_path::tensor_cores ? "[tensor cores]" : "", m.name.c_str(), s.head_dim, s.kv_heads,
                s.q_heads / s.kv_heads, s.page_tokens, lengths.size(), s.sink, s.recent, dtype_name(q_type), splits);
  rep.what = head;
  auto c = make_cache(s, m, seed);
  const int B = static_cast<int>(lengths.size());
  const int G = s.q_heads / s.kv_heads;
  const double sc = bgtq::logit_scale(s.scale, s.head_dim);
  std::vector<float> q = normal_floats(static_cast<std::size_t>(B) * s.q_heads * s.head_dim, seed + 2, 0, 0.8f);
  row_edit jump;
  if (o.score_jump) {
    rep.what += " score jump";
    jump = [&](std::size_t b, int, std::vector<float>& k, std::vector<float>& v) {
      const std::size_t D = static_cast<std::size_t>(s.head_dim), row = static_cast<std::size_t>(s.kv_heads) * D;
      const std::size_t len = k.size() / row, first = std::min<std::size_t>(len, 256);
      for (std::size_t h = 0; h < static_cast<std::size_t>(s.kv_heads); ++h) {
        const float* qh = q.data() + (b * static_cast<std::size_t>(s.q_heads) + h * static_cast<std::size_t>(G)) * D;
        const double qq = bgtq::detail::norm_sq_double(qh, D);
        std::vector<float> common(D);
        if (first < len) {
          const float* v0 = v.data() + first * row + h * D;
          const double vn = std::sqrt(bgtq::detail::norm_sq_double(v0, D));
          for (std::size_t j = 0; j < D; ++j) common[j] = static_cast<float>(v0[j] * (1.2e30 / vn));
        }
        for (std::size_t t = 0; t < len; ++t) {
          float* kt = k.data() + t * row + h * D;
          float* vt = v.data() + t * row + h * D;
          for (std::size_t j = 0; j < D; ++j) {
            kt[j] = t < first ? 0.0f : static_cast<float>(qh[j] * (15.75 / (sc * qq)));
            vt[j] = t < first ? (j == 1 ? 1.0f : 0.0f) : common[j];
          }
        }
      }
    };
  }
  const filled_cache f = fill_cache(c, lengths, seed + 1, cuda::dtype::f32, m.value_scale, jump);
  if (inf_window) {
    rep.what += " window scores -inf";
    for (std::size_t i = 0; i < q.size(); i += static_cast<std::size_t>(s.head_dim)) q[i] = std::fabs(q[i]) + 0.25f;
  }
  // guard_edge: aim query head (b, h G + x) along a stored key of KV head h at `frac` of the largest accepted norm
  auto aim = [&](int b, int h, int x, double frac) {
    std::vector<float> dir(static_cast<std::size_t>(s.head_dim));
    const int seq = f.seqs[static_cast<std::size_t>(b)];
    c.decode_key(seq, 0, h, c.length(seq, 0) / 2, dir.data());
    const double dn = std::sqrt(bgtq::detail::norm_sq_double(dir.data(), dir.size()));
    const double qn = frac * bgtq::max_query_norm(bgtq::detail::key_norm_bound(c, 0, h), sc);
    float* qh = q.data() + (static_cast<std::size_t>(b) * s.q_heads + static_cast<std::size_t>(h * G + x)) * s.head_dim;
    for (int j = 0; j < s.head_dim; ++j) qh[j] = static_cast<float>(dir[static_cast<std::size_t>(j)] / dn * qn);
  };
  if (guard_edge) {
    rep.what += " guard edge";
    if (q_type != cuda::dtype::f32 || G < 2 || nonfinite != 0) {
      rep.what += " | guard_edge needs f32 queries, G >= 2 and nonfinite = 0";
      return rep;
    }
    // the other heads: logits as sharp as at the default scale (a scale of 4 on these
    // queries would make the softmax so sharp that the tensor cores' fp16 queries alone
    // move the outputs by ~1%)
    const float flat = static_cast<float>(std::min(1.0, 1.0 / (std::sqrt(static_cast<double>(s.head_dim)) * sc)));
    for (float& x : q) x *= flat;
    for (int b = 0; b < B; ++b)
      for (int h = 0; h < s.kv_heads; ++h) aim(b, h, 0, 0.999);
  }
  std::vector<std::uint16_t> qbits;
  round_to(q, q_type, &qbits);
  std::vector<float> want(q.size()), got(q.size()), got2(q.size());
  bgtq::attention_workspace ws(c);
  bgtq::decode_attention(c, 0, f.seqs, q.data(), want.data(), ws, s.scale);
  if (s.scale != 0.0f) rep.what += " scale=" + std::to_string(s.scale);
  std::vector<int> bad;  // query heads b * Hq + hq given a non-finite element (or, guard_edge, too large a norm)
  if (guard_edge) {  // after the CPU reference, which would refuse the whole call
    for (int b = 0; b < B; ++b)
      for (int h = 0; h < s.kv_heads; ++h) {
        aim(b, h, 1, 1.01);
        bad.push_back(b * s.q_heads + h * G + 1);
      }
  } else {
    bgtq::counter_rng r(seed + 3);
    const int heads = B * s.q_heads;
    while (static_cast<int>(bad.size()) < std::min(nonfinite, heads)) {
      const int x = static_cast<int>(r.below(static_cast<std::uint32_t>(heads)));
      if (std::find(bad.begin(), bad.end(), x) != bad.end()) continue;
      // NaN, +Inf, -Inf, and a finite 3e38 (beyond the overflow guard's max_query_norm;
      // Inf once rounded to fp16)
      const std::size_t kind = bad.size() % 4;
      const float v = kind == 0 ? NAN : kind == 1 ? INFINITY : kind == 2 ? -INFINITY : 3e38f;
      const std::size_t i = static_cast<std::size_t>(x) * s.head_dim + r.below(static_cast<std::uint32_t>(s.head_dim));
      q[i] = v;
      if (q_type != cuda::dtype::f32) qbits[i] = q_type == cuda::dtype::f16 ? float_to_half_bits(v) : float_to_bf16_bits(v);
      bad.push_back(x);
    }
    if (!bad.empty()) rep.what += " non-finite queries=" + std::to_string(bad.size());
  }

  cuda::device_cache dev;
  BGTQ_CHECK_ERRC(cuda::device_cache::create(cuda::describe(c), dev));
  BGTQ_CHECK_ERRC(cuda::upload_all_pages(c, dev));
  cuda::batch_tables bt = cuda::gather_batch(c, 0, f.seqs);
  if (poison_tail) {
    const cuda::cache_desc d = cuda::describe(c);
    const int P = s.page_tokens;
    bgtq::counter_rng pr(seed + 4);
    int poisoned = 0;
    for (int b = 0; b < B; ++b) {
      const int nq = bt.quantized[static_cast<std::size_t>(b)];
      if (nq % P == 0) continue;
      const int page = bt.page_table[static_cast<std::size_t>(b) * bt.max_pages_per_seq + static_cast<std::size_t>(nq / P)];
      for (int h = 0; h < s.kv_heads; ++h) {
        std::vector<std::uint8_t> part(dev.page_part_bytes(0, h));
        std::uint8_t* at = static_cast<std::uint8_t*>(dev.pool()) + dev.arena_offset(0, h) + static_cast<std::size_t>(page) * part.size();
        BGTQ_CHECK_CUDA(cudaMemcpy(part.data(), at, part.size(), cudaMemcpyDeviceToHost));
        for (int kv = 0; kv < 2; ++kv) {
          const std::size_t base = kv == 0 ? 0u : dev.value_offset(0, h);
          for (const cuda::group_desc& g : (kv == 0 ? d.keys : d.values)[static_cast<std::size_t>(h)].groups)
            for (int t = nq % P; t < P; ++t) {
              const std::size_t r = base + g.radii + static_cast<std::size_t>(t) * (g.fp32_radius ? 4u : 2u);
              if (g.fp32_radius) {
                const float inf = INFINITY;
                std::memcpy(&part[r], &inf, 4);
              } else {
                const std::uint16_t inf = 0x7C00u;
                std::memcpy(&part[r], &inf, 2);
              }
              for (int row = 0; row < g.dim * g.bits; ++row) {  // plane rows, token t in bit t
                std::uint8_t& byte = part[base + g.region + static_cast<std::size_t>(row) * cuda::plane_row_bytes(P) + static_cast<std::size_t>(t / 8)];
                byte = static_cast<std::uint8_t>((byte & ~(1u << (t % 8))) | ((pr.next_u32() & 1u) << (t % 8)));
              }
            }
        }
        BGTQ_CHECK_CUDA(cudaMemcpy(at, part.data(), part.size(), cudaMemcpyHostToDevice));
        ++poisoned;
      }
    }
    if (poisoned == 0) {
      rep.what += " | poison_tail needs a sequence whose length is not a multiple of P";
      return rep;
    }
    rep.what += " page tails poisoned";
  }
  bool any_window = false;
  for (int w : bt.window_len) any_window = any_window || w > 0;
  if (inf_window) {
    if (!any_window) {
      rep.what += " | inf_window needs a shape with a window";
      return rep;
    }
    for (int b = 0; b < B; ++b)
      for (int h = 0; h < s.kv_heads; ++h)
        for (int row = 0; row < bt.window_len[static_cast<std::size_t>(b)]; ++row)
          bt.window_k[((static_cast<std::size_t>(b) * s.kv_heads + h) * bt.window_cap + row) * s.head_dim] = float_to_half_bits(-INFINITY);
  }
  dev_buf dq, dout, dpt, dqn, dwl, dwk, dwv, dws, dnf;
  if (q_type == cuda::dtype::f32)
    BGTQ_CHECK_CUDA(upload_vec(dq, q));
  else
    BGTQ_CHECK_CUDA(upload_vec(dq, qbits));
  BGTQ_CHECK_CUDA(dout.alloc(q.size() * 4));
  BGTQ_CHECK_CUDA(upload_vec(dpt, bt.page_table));
  BGTQ_CHECK_CUDA(upload_vec(dqn, bt.quantized));
  BGTQ_CHECK_CUDA(upload_vec(dwl, bt.window_len));
  BGTQ_CHECK_CUDA(upload_vec(dwk, bt.window_k));
  BGTQ_CHECK_CUDA(upload_vec(dwv, bt.window_v));
  const cuda::split_plan sp = dev.decode_plan(B, bt.max_quantized, splits);
  BGTQ_CHECK_CUDA(dws.alloc(dev.decode_workspace_bytes(B, sp.splits)));
  cuda::decode_args a;
  a.layer = 0;
  a.batch = B;
  a.q_type = q_type;
  a.q = dq.p;
  a.out = dout.as<float>();
  // nothing quantized in the whole batch: no page table at all (null, 0 pages per
  // sequence), as an engine calls it before its first page
  a.page_table = bt.max_quantized > 0 ? dpt.as<int>() : nullptr;
  a.max_pages_per_seq = bt.max_quantized > 0 ? bt.max_pages_per_seq : 0;
  a.quantized = dqn.as<int>();
  a.max_quantized = bt.max_quantized;
  if (any_window) {  // without a window, exercise the null-window path
    a.window_k = dwk.as<std::uint16_t>();
    a.window_v = dwv.as<std::uint16_t>();
    a.window_len = dwl.as<int>();
    a.window_cap = bt.window_cap;
  }
  a.splits = splits;
  a.scale = s.scale;
  a.path = path;
  a.workspace = dws.p;
  a.workspace_bytes = dws.bytes;
  if (nonfinite > 0 || guard_edge) {  // otherwise the null-counter path
    BGTQ_CHECK_CUDA(dnf.alloc(sizeof(unsigned long long)));
    BGTQ_CHECK_CUDA(cudaMemset(dnf.p, 0, dnf.bytes));
    a.nonfinite = dnf.as<unsigned long long>();
  }
  // the kernel that must run: automatic takes the tensor cores wherever the layer allows
  // (expect_tc >= 0: the caller knows better, e.g. a run-time fallback it provoked)
  const bool tc_want = expect_tc >= 0 ? expect_tc != 0
                                      : path == cuda::decode_path::tensor_cores ||
                                            (path == cuda::decode_path::automatic && dev.tensor_core_decode(0, nullptr));
  double tol = o.tol >= 0.0 ? o.tol : path_tol(tc_want);
  int splits_run = -1;
  bool tc_run = !tc_want;  // (the opposite of what must come back)
  a.splits_used = &splits_run;
  a.tensor_cores_used = &tc_run;
  if (inf_window) {  // the reference: the same launch without the window
    cuda::decode_args nw = a;
    nw.window_k = nw.window_v = nullptr;
    nw.window_len = nullptr;
    nw.window_cap = 0;
    BGTQ_CHECK_CUDA(cudaMemset(dout.p, 0xFF, dout.bytes));
    BGTQ_CHECK_CUDA(cudaMemset(dws.p, 0xFF, dws.bytes));
    BGTQ_CHECK_ERRC(dev.decode_attention(nw));
    BGTQ_CHECK_CUDA(cudaDeviceSynchronize());
    BGTQ_CHECK_CUDA(cudaMemcpy(want.data(), dout.p, dout.bytes, cudaMemcpyDeviceToHost));
  }
  for (int run = 0; run < 2; ++run) {
    BGTQ_CHECK_CUDA(cudaMemset(dout.p, 0xFF, dout.bytes));
    BGTQ_CHECK_CUDA(cudaMemset(dws.p, 0xFF, dws.bytes));
    BGTQ_CHECK_ERRC(dev.decode_attention(a));
    if (tc_run != tc_want || splits_run < 1 || splits_run > sp.splits ||
        (splits > 0 && splits_run != sp.splits)) {
      rep.what += " | the launch reports " + std::string(tc_run ? "tensor" : "CUDA") + " cores and " +
                  std::to_string(splits_run) + " splits (plan: " + std::to_string(sp.splits) + ")";
      return rep;
    }
    BGTQ_CHECK_CUDA(cudaDeviceSynchronize());
    BGTQ_CHECK_CUDA(cudaMemcpy(run == 0 ? got.data() : got2.data(), dout.p, dout.bytes, cudaMemcpyDeviceToHost));
  }
  if (nonfinite > 0 || guard_edge) {
    unsigned long long counted = 0;
    BGTQ_CHECK_CUDA(cudaMemcpy(&counted, dnf.p, sizeof counted, cudaMemcpyDeviceToHost));
    if (counted != 2u * bad.size()) {
      rep.what += " | nonfinite counter " + std::to_string(counted) + " after two runs, want " + std::to_string(2u * bad.size());
      return rep;
    }
  }
  for (int x : bad)
    for (int d = 0; d < s.head_dim; ++d) {
      const std::size_t i = static_cast<std::size_t>(x) * s.head_dim + static_cast<std::size_t>(d);
      if (!std::isnan(got[i]) || !std::isnan(got2[i])) {
        rep.what += " | query head " + std::to_string(x) + " has a refused query but output[" + std::to_string(d) +
                    "] = " + std::to_string(got[i]) + " (want NaN)";
        return rep;
      }
      got[i] = got2[i] = want[i];  // the rest of the comparison is over the finite heads
    }
  if (inf_window) {
    for (float x : got)
      if (!std::isfinite(x)) {
        rep.what += " | a non-finite output";
        return rep;
      }
    tol = 0.0;  // bit-identical to the launch without the window
    rep.value = std::memcmp(got.data(), want.data(), got.size() * 4) == 0 ? 0.0 : 1.0;
  } else {
    rep.value = rel_max_error(got, want);
  }
  char tail[160];
  std::snprintf(tail, sizeof tail, " (%d split(s)): rel err %.3g (tol %.1g)%s", splits_run, rep.value, tol,
                std::memcmp(got.data(), got2.data(), got.size() * 4) == 0 ? "" : ", NOT deterministic");
  rep.what += tail;
  rep.ok = rep.value <= tol && std::memcmp(got.data(), got2.data(), got.size() * 4) == 0;
  if (std::getenv("BGTQ_PRINT_CHECKS")) std::fprintf(stderr, "%s\n", rep.what.c_str());  // every result, not only failures
  return rep;
}

//! cuda::to_float (the kernels' load_element) over all 65536 bit patterns of fp16 and of
//! bf16 against the host conversions: equal bits, or NaN for NaN. The output is poisoned
//! with 0x7F bytes (a finite float no pattern converts to) before the run.
inline check_report gpu_check_conversions() {
  check_report rep;
  rep.what = "to_float: every fp16 and bf16 bit pattern";
  std::vector<std::uint16_t> all(65536);
  for (std::size_t i = 0; i < all.size(); ++i) all[i] = static_cast<std::uint16_t>(i);
  dev_buf src, dst;
  BGTQ_CHECK_CUDA(upload_vec(src, all));
  BGTQ_CHECK_CUDA(dst.alloc(all.size() * 4));
  for (const cuda::dtype t : {cuda::dtype::f16, cuda::dtype::bf16}) {
    BGTQ_CHECK_CUDA(cudaMemset(dst.p, 0x7F, dst.bytes));
    BGTQ_CHECK_ERRC(cuda::to_float(src.p, all.size(), t, dst.as<float>()));
    std::vector<float> got(all.size());
    BGTQ_CHECK_CUDA(cudaMemcpy(got.data(), dst.p, dst.bytes, cudaMemcpyDeviceToHost));
    for (std::size_t i = 0; i < all.size(); ++i) {
      const float want = t == cuda::dtype::f16 ? half_bits_to_float(all[i]) : bf16_bits_to_float(all[i]);
      std::uint32_t gb, wb;
      std::memcpy(&gb, &got[i], 4);
      std::memcpy(&wb, &want, 4);
      if (std::isnan(want) ? !std::isnan(got[i]) : gb != wb) {
        char buf[160];
        std::snprintf(buf, sizeof buf, " | %s pattern 0x%04zx: device 0x%08x, host 0x%08x", dtype_name(t), i,
                      static_cast<unsigned>(gb), static_cast<unsigned>(wb));
        rep.what += buf;
        return rep;
      }
    }
  }
  rep.ok = true;
  return rep;
}

//! cuda::from_float (the kernels' float_to_half_bits / float_to_bf16_bits) against the
//! host conversions: for every pair of adjacent finite fp16 values (either sign) the
//! lower one, their midpoint (a tie) and the floats just below and above it, the overflow
//! boundary 65520, zeros, infinities, NaNs, float subnormals and extremes, and 2^20
//! random bit patterns; equal bits, or a NaN for a NaN. Two runs, the output poisoned
//! with 0x55 and 0xAA bytes, so an unwritten element cannot pass.
inline check_report gpu_check_narrowing() {
  check_report rep;
  rep.what = "from_float: fp16 rounding ties and neighbours, specials, random floats";
  std::vector<float> in;
  for (std::uint32_t h = 0; h < 0x7C00u; ++h) {
    const float a = half_bits_to_float(static_cast<std::uint16_t>(h));
    const float b = h + 1 < 0x7C00u ? half_bits_to_float(static_cast<std::uint16_t>(h + 1)) : 65536.0f;
    const float m = static_cast<float>((static_cast<double>(a) + static_cast<double>(b)) / 2.0);  // exact
    for (const float x : {a, m, std::nextafter(m, -1.0f), std::nextafter(m, 1e30f)}) {
      in.push_back(x);
      in.push_back(-x);
    }
  }
  const float inf = std::numeric_limits<float>::infinity();
  for (const float x : {0.0f, -0.0f, inf, -inf, std::numeric_limits<float>::quiet_NaN(), -std::numeric_limits<float>::quiet_NaN(),
                        std::numeric_limits<float>::signaling_NaN(), std::numeric_limits<float>::denorm_min(),
                        -std::numeric_limits<float>::denorm_min(), std::numeric_limits<float>::min(), std::numeric_limits<float>::max(),
                        -std::numeric_limits<float>::max(), 65519.996f, 65520.0f, 5.96e-8f, 2.98e-8f, 2.9802322e-8f})
    in.push_back(x);
  counter_rng r(2026, 12);
  for (int i = 0; i < (1 << 20); ++i) {
    const std::uint32_t u = static_cast<std::uint32_t>(r.next_u64());
    float x;
    std::memcpy(&x, &u, 4);
    in.push_back(x);
  }
  dev_buf src, dst;
  BGTQ_CHECK_CUDA(upload_vec(src, in));
  BGTQ_CHECK_CUDA(dst.alloc(in.size() * 2));
  for (const cuda::dtype t : {cuda::dtype::f16, cuda::dtype::bf16})
    for (const int poison : {0x55, 0xAA}) {
      BGTQ_CHECK_CUDA(cudaMemset(dst.p, poison, dst.bytes));
      BGTQ_CHECK_ERRC(cuda::from_float(src.as<float>(), in.size(), t, dst.p));
      std::vector<std::uint16_t> got(in.size());
      BGTQ_CHECK_CUDA(cudaMemcpy(got.data(), dst.p, dst.bytes, cudaMemcpyDeviceToHost));
      const bool f16 = t == cuda::dtype::f16;
      for (std::size_t i = 0; i < in.size(); ++i) {
        const std::uint16_t want = f16 ? float_to_half_bits(in[i]) : float_to_bf16_bits(in[i]);
        const std::uint16_t exp_mask = f16 ? 0x7C00u : 0x7F80u;
        const bool nan_got = (got[i] & exp_mask) == exp_mask && (got[i] & (f16 ? 0x03FFu : 0x007Fu)) != 0;
        if (std::isnan(in[i]) ? !nan_got : got[i] != want) {
          std::uint32_t u;
          std::memcpy(&u, &in[i], 4);
          char buf[200];
          std::snprintf(buf, sizeof buf, " | %s, input %.9g (0x%08x), poison 0x%02x: device 0x%04x, host 0x%04x", dtype_name(t),
                        static_cast<double>(in[i]), static_cast<unsigned>(u), poison, static_cast<unsigned>(got[i]),
                        static_cast<unsigned>(want));
          rep.what += buf;
          return rep;
        }
      }
    }
  rep.what += " (" + std::to_string(in.size()) + " inputs)";
  rep.ok = true;
  return rep;
}

//! cuda::fill_uniform (the benchmarks' inputs) against its definition computed on the
//! host: element i is lo + (hi - lo) * u, u = (word i % 4 of Philox4x32-10 at counter
//! (i / 4, 0) and key (seed, seed >> 32)) >> 8 times 2^-24, rounded to the element type
//! like every kernel store; equal bits. n = 1003 (a partial last quad), three poisoned
//! elements past n must stay untouched; every value in [lo, hi] (hi only by fp16/bf16
//! rounding) and, as a sanity check of the host formula itself, the f32 mean within 0.2
//! of (lo + hi) / 2 (about 5 standard deviations); another seed changes most elements.
inline check_report gpu_check_fill() {
  check_report rep;
  rep.what = "fill_uniform: n = 1003, [-2, 3), f32/f16/bf16, against the host Philox formula";
  constexpr std::size_t n = 1003, tail = 3;
  constexpr float lo = -2.0f, hi = 3.0f;
  dev_buf dst;
  BGTQ_CHECK_CUDA(dst.alloc((n + tail) * 4));
  auto expect = [&](std::uint64_t seed, std::size_t i) {
    const u32x4 r = philox4x32(u32x4{{static_cast<std::uint32_t>(i / 4), static_cast<std::uint32_t>(i / 4 >> 32), 0u, 0u}},
                               static_cast<std::uint32_t>(seed), static_cast<std::uint32_t>(seed >> 32));
    const float u = static_cast<float>(r.v[i % 4] >> 8) * (1.0f / 16777216.0f);
    return lo + (hi - lo) * u;
  };
  for (const cuda::dtype t : {cuda::dtype::f32, cuda::dtype::f16, cuda::dtype::bf16}) {
    const std::size_t es = t == cuda::dtype::f32 ? 4 : 2;
    std::vector<std::vector<std::uint8_t>> runs;
    for (const std::uint64_t seed : {0x1234567890abcdefull, 0x1234567890abcdefull, 99ull}) {
      BGTQ_CHECK_CUDA(cudaMemset(dst.p, 0xA5, dst.bytes));
      BGTQ_CHECK_ERRC(cuda::fill_uniform(dst.p, n, t, seed, lo, hi));
      std::vector<std::uint8_t> got(dst.bytes);
      BGTQ_CHECK_CUDA(cudaMemcpy(got.data(), dst.p, dst.bytes, cudaMemcpyDeviceToHost));
      double sum = 0.0;
      for (std::size_t i = 0; i < n; ++i) {
        const float want = expect(seed, i);
        float v;
        bool same;
        if (es == 4) {
          std::memcpy(&v, got.data() + 4 * i, 4);
          same = std::memcmp(&v, &want, 4) == 0;
        } else {
          std::uint16_t b;
          std::memcpy(&b, got.data() + 2 * i, 2);
          const bool f16 = t == cuda::dtype::f16;
          v = f16 ? half_bits_to_float(b) : bf16_bits_to_float(b);
          same = b == (f16 ? float_to_half_bits(want) : float_to_bf16_bits(want));
        }
        if (!same || !(v >= lo && v <= hi)) {
          char buf[160];
          std::snprintf(buf, sizeof buf, " | %s seed %llu element %zu: device %.9g, host %.9g", dtype_name(t),
                        static_cast<unsigned long long>(seed), i, static_cast<double>(v), static_cast<double>(want));
          rep.what += buf;
          return rep;
        }
        sum += v;
      }
      for (std::size_t i = n * es; i < got.size(); ++i)
        if (got[i] != 0xA5) {
          rep.what += std::string(" | ") + dtype_name(t) + ": a byte past element n - 1 was written";
          return rep;
        }
      if (std::fabs(sum / n - 0.5 * (lo + hi)) > 0.2) {
        rep.what += std::string(" | ") + dtype_name(t) + ": mean " + std::to_string(sum / n) + " far from 0.5";
        return rep;
      }
      runs.push_back(std::move(got));
    }
    std::size_t same = 0;
    for (std::size_t i = 0; i < n; ++i) same += std::memcmp(runs[1].data() + es * i, runs[2].data() + es * i, es) == 0;
    if (runs[0] != runs[1] || same > n / 10) {
      rep.what += std::string(" | ") + dtype_name(t) + ": the same seed gave different values or another seed the same (" +
                  std::to_string(same) + " of 1003 equal)";
      return rep;
    }
  }
  rep.ok = true;
  return rep;
}

//! device_energy::create's block_dims of a layout: [L][2] flattened.
inline std::vector<int> energy_block_dims(const rope_layout& rope) {
  std::vector<int> bd;
  for (int i = 0; i < rope.num_blocks(); ++i) {
    bd.push_back(rope.block_dims(i)[0]);
    bd.push_back(rope.block_dims(i)[1]);
  }
  return bd;
}

//! Uploads a tensor as `type`: the floats for f32, else their f16 / bf16 bits (round_to).
inline cudaError_t upload_typed(dev_buf& d, const std::vector<float>& f, const std::vector<std::uint16_t>& bits, cuda::dtype type) {
  return type == cuda::dtype::f32 ? upload_vec(d, f) : upload_vec(d, bits);
}

//! device_energy vs double sums on the CPU (and vs energy_estimator when present):
//! relative 1e-12 per (head, block). The tokens go in two accumulate calls, the
//! second larger than max_tokens (internal passes), after a first pass over a few
//! tokens and a reset, which must leave zero sums and a token count of 0.
inline check_report gpu_check_energy(int Hq, int Hkv, int D, rope_pairing pairing, long long T, cuda::dtype type,
                                     long long max_tokens, std::uint64_t seed) {
  check_report rep;
  char head[200];
  std::snprintf(head, sizeof head, "energy Hq=%d Hkv=%d D=%d %s T=%lld %s max_tokens=%lld", Hq, Hkv, D,
                pairing == rope_pairing::half ? "half" : "interleaved", T, dtype_name(type), max_tokens);
  rep.what = head;
  const rope_layout rope(D, pairing);
  const int L = rope.num_blocks(), G = Hq / Hkv;
  std::vector<float> q = normal_floats(static_cast<std::size_t>(T) * Hq * D, seed, 1, 2.0f);
  std::vector<float> k = normal_floats(static_cast<std::size_t>(T) * Hkv * D, seed, 2, 0.5f);
  std::vector<std::uint16_t> qb, kb;
  round_to(q, type, &qb);
  round_to(k, type, &kb);
  std::vector<double> wq(static_cast<std::size_t>(Hkv) * L, 0.0), wk(wq.size(), 0.0);
  for (long long t = 0; t < T; ++t)
    for (int h = 0; h < Hkv; ++h)
      for (int i = 0; i < L; ++i) {
        const auto d = rope.block_dims(i);
        for (int dd : d) {
          for (int g = 0; g < G; ++g) {
            const double x = q[(static_cast<std::size_t>(t) * Hq + h * G + g) * D + dd];
            wq[static_cast<std::size_t>(h * L + i)] += x * x;
          }
          const double y = k[(static_cast<std::size_t>(t) * Hkv + h) * D + dd];
          wk[static_cast<std::size_t>(h * L + i)] += y * y;
        }
      }
  cuda::device_energy e;
  BGTQ_CHECK_ERRC(cuda::device_energy::create(Hq, Hkv, D, energy_block_dims(rope), max_tokens, e));
  dev_buf dq, dk;
  BGTQ_CHECK_CUDA(upload_typed(dq, q, qb, type));
  BGTQ_CHECK_CUDA(upload_typed(dk, k, kb, type));
  const std::size_t es = type == cuda::dtype::f32 ? 4 : 2;
  {  // reset after a first pass over a few tokens: zero sums, no tokens
    BGTQ_CHECK_ERRC(e.accumulate(dq.p, dk.p, std::min<long long>(T, 7), type));
    BGTQ_CHECK_ERRC(e.reset());
    std::vector<double> zq(wq.size(), NAN), zk(wk.size(), NAN);
    BGTQ_CHECK_ERRC(e.download(zq.data(), zk.data()));
    for (std::size_t i = 0; i < zq.size(); ++i)
      if (zq[i] != 0.0 || zk[i] != 0.0 || e.tokens() != 0) {
        rep.what += " | after reset: sums " + std::to_string(zq[i]) + ", " + std::to_string(zk[i]) + " at " + std::to_string(i) +
                    ", tokens " + std::to_string(e.tokens());
        return rep;
      }
  }
  const long long t1 = T / 3;
  BGTQ_CHECK_ERRC(e.accumulate(dq.p, dk.p, t1, type));
  BGTQ_CHECK_ERRC(e.accumulate(dq.as<std::uint8_t>() + static_cast<std::size_t>(t1) * Hq * D * es,
                               dk.as<std::uint8_t>() + static_cast<std::size_t>(t1) * Hkv * D * es, T - t1, type));
  std::vector<double> gq(wq.size(), NAN), gk(wk.size(), NAN);
  BGTQ_CHECK_ERRC(e.download(gq.data(), gk.data()));
  double worst = 0.0;
  for (std::size_t i = 0; i < wq.size(); ++i) {
    worst = std::max(worst, std::fabs(gq[i] - wq[i]) / std::max(1e-300, std::fabs(wq[i])));
    worst = std::max(worst, std::fabs(gk[i] - wk[i]) / std::max(1e-300, std::fabs(wk[i])));
    if (!std::isfinite(gq[i]) || !std::isfinite(gk[i])) worst = INFINITY;
  }
#if defined(BGTQ_GPU_CHECKS_HAVE_ESTIMATOR)
  {
    energy_estimator est(1, Hq, Hkv, rope);
    est.add(0, q.data(), k.data(), static_cast<std::size_t>(T));
    for (int h = 0; h < Hkv; ++h)
      for (int i = 0; i < L; ++i) {
        const double eq = est.q_energy(0, h, i) * static_cast<double>(T) * G;
        const double ek = est.k_energy(0, h, i) * static_cast<double>(T);
        worst = std::max(worst, std::fabs(gq[static_cast<std::size_t>(h * L + i)] - eq) / std::max(1e-300, std::fabs(eq)));
        worst = std::max(worst, std::fabs(gk[static_cast<std::size_t>(h * L + i)] - ek) / std::max(1e-300, std::fabs(ek)));
      }
    rep.what += " (also vs energy_estimator)";
  }
#endif
  rep.value = worst;
  rep.ok = worst <= 1e-12 && e.tokens() == T;
  char tail[96];
  std::snprintf(tail, sizeof tail, ": max rel diff %.3g (tol 1e-12), tokens %lld", worst, e.tokens());
  rep.what += tail;
  return rep;
}

//! device_energy with NaN / Inf elements planted: download() must return non_finite,
//! leave its outputs untouched and name the first planted element (token order, counted
//! across accumulate calls and internal passes; q's heads before k's at one token); after
//! reset() clean tokens give finite sums again. Each plant is {in_k, token, head, dim, value}.
struct energy_plant {
  bool in_k;
  long long token;
  int head, dim;
  float value;
};
inline check_report gpu_check_energy_nonfinite(int Hq, int Hkv, int D, long long T, cuda::dtype type, long long max_tokens,
                                               long long first_call, const std::vector<energy_plant>& plants,
                                               const std::string& expect, std::uint64_t seed) {
  check_report rep;
  char head[160];
  std::snprintf(head, sizeof head, "energy non-finite Hq=%d Hkv=%d D=%d T=%lld %s max_tokens=%lld first call %lld", Hq, Hkv,
                D, T, dtype_name(type), max_tokens, first_call);
  rep.what = head;
  const rope_layout rope(D, rope_pairing::half);
  const int L = rope.num_blocks();
  std::vector<float> q = normal_floats(static_cast<std::size_t>(T) * Hq * D, seed, 1, 1.0f);
  std::vector<float> k = normal_floats(static_cast<std::size_t>(T) * Hkv * D, seed, 2, 1.0f);
  for (const energy_plant& e : plants)
    (e.in_k ? k : q)[(static_cast<std::size_t>(e.token) * (e.in_k ? Hkv : Hq) + e.head) * D + e.dim] = e.value;
  std::vector<std::uint16_t> qb, kb;
  round_to(q, type, &qb);
  round_to(k, type, &kb);
  cuda::device_energy e;
  BGTQ_CHECK_ERRC(cuda::device_energy::create(Hq, Hkv, D, energy_block_dims(rope), max_tokens, e));
  dev_buf dq, dk;
  BGTQ_CHECK_CUDA(upload_typed(dq, q, qb, type));
  BGTQ_CHECK_CUDA(upload_typed(dk, k, kb, type));
  const std::size_t es = type == cuda::dtype::f32 ? 4 : 2;
  BGTQ_CHECK_ERRC(e.accumulate(dq.p, dk.p, first_call, type));
  BGTQ_CHECK_ERRC(e.accumulate(dq.as<std::uint8_t>() + static_cast<std::size_t>(first_call) * Hq * D * es,
                               dk.as<std::uint8_t>() + static_cast<std::size_t>(first_call) * Hkv * D * es, T - first_call,
                               type));
  const std::size_t n = static_cast<std::size_t>(Hkv) * L;
  std::vector<double> gq(n, 7.0), gk(n, 7.0);
  const bgtq::errc got = e.download(gq.data(), gk.data());
  const std::string msg = cuda::last_error_message();
  rep.what += " | download: " + std::string(bgtq::to_string(got)) + ": " + msg;
  if (got != bgtq::errc::non_finite || msg.find(expect) == std::string::npos) {
    rep.what += " | expected non_finite naming '" + expect + "'";
    return rep;
  }
  for (std::size_t i = 0; i < n; ++i)
    if (gq[i] != 7.0 || gk[i] != 7.0) {
      rep.what += " | the outputs were written";
      return rep;
    }
  // reset forgets it: the tokens before the first plant give finite sums
  long long clean = T;
  for (const energy_plant& p : plants) clean = std::min(clean, p.token);
  BGTQ_CHECK_ERRC(e.reset());
  BGTQ_CHECK_ERRC(e.accumulate(dq.p, dk.p, clean, type));
  BGTQ_CHECK_ERRC(e.download(gq.data(), gk.data()));
  for (std::size_t i = 0; i < n; ++i)
    if (!std::isfinite(gq[i]) || !std::isfinite(gk[i]) || (clean > 0 && (gq[i] <= 0.0 || gk[i] <= 0.0))) {
      rep.what += " | after reset, sum " + std::to_string(i) + " is " + std::to_string(gq[i]) + ", " + std::to_string(gk[i]);
      return rep;
    }
  rep.ok = true;
  return rep;
}

#undef BGTQ_CHECK_CUDA
#undef BGTQ_CHECK_ERRC

}  // namespace bgtq_gpu
