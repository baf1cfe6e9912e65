// Encode-append: new tokens' K and V (fp32/fp16/bf16 [tokens][Hkv][D]) -> packed
// bit-plane pages, the same bytes as the CPU encoder (gtq_pages::encode_block with
// bit_plane_layout) for the same float values.
//
// Grid (ceil(tokens/32), Hkv, 2: keys | values), 128 threads. A CTA owns 32 consecutive
// entries of the slot mapping for one head and one part. Per group:
//  1. gather the group's sub-vectors into shared memory, token-minor `s_sub[j][32]`;
//  2. thread t < 32: the radius r = ||x|| (canonical order, kernel_math.hpp
//     tq_norm_parts); above 2^100 (or overflowed) the thread scales its token's column
//     by the CPU's power of two, so the rotation below cannot overflow;
//  3. thread o (coordinate): y_o = (P x)_o for all 32 tokens (FMA chain over i, the CPU's
//     order), times 1/dir_norm, quantize_sorted -> 32 codes in registers; then per plane k the
//     32-bit word of the 32 tokens: one plain store when the CTA's 32 slots are one
//     aligned plane word (prefill), else one atomicOr/atomicAnd per bit (decode steps,
//     ragged batches);
//  4. thread t: the stored radius (fp16/fp32, optional norm correction), a clamp counted
//     in the optional counter as the CPU counts encode_stats::clamped_radii.
#include "device_cache_impl.cuh"

namespace bgtq::cuda {
namespace {

struct encode_kparams : layer_params {
  int tokens;
  long long max_slot;
  dtype type;
  const void* k;
  const void* v;
  const std::int64_t* slots;
  unsigned long long* nonfinite;
  unsigned long long* clamped;
};

__global__ void __launch_bounds__(encode_threads) encode_kernel(const encode_kparams p) {
  float* smem = dynamic_smem<float>();
  __shared__ long long s_slot[encode_tile];
  __shared__ float s_r[encode_tile], s_inv[encode_tile];
  __shared__ int s_zero[encode_tile];
  __shared__ float s_thr[256];
  __shared__ int s_aligned;

  const int D = p.D;
  float* s_x = smem;                        // [32][D] input rows (float)
  float* s_sub = smem + encode_tile * D;    // [n][32] gathered sub-vectors, token-minor
  float* s_cv = s_sub + encode_tile * D;    // [n][32] centroids of the codes (norm correction only)
  const int tid = threadIdx.x;
  const int i0 = blockIdx.x * encode_tile;
  const int h = blockIdx.y;
  const int which = blockIdx.z;
  const int nt = min(encode_tile, p.tokens - i0);
  const head_meta hm = p.heads[p.layer * p.Hkv + h];
  const int first = which ? hm.value_first : hm.key_first;
  const int count = which ? hm.value_count : hm.key_count;
  if (count == 0) return;  // uniform over the CTA
  const void* src = which ? p.v : p.k;
  const std::uint32_t part_off = which ? hm.value_offset : 0u;

  if (tid < encode_tile) {
    long long s = tid < nt ? static_cast<long long>(p.slots[i0 + tid]) : -1;
    if (s >= p.max_slot) s = -1;  // outside the pool: ignored
    s_slot[tid] = s;
  }
  for (int idx = tid; idx < encode_tile * D; idx += blockDim.x) {
    const int t = idx / D;
    const int d = idx - t * D;
    s_x[idx] = t < nt ? load_element(src, (static_cast<std::size_t>(i0 + t) * p.Hkv + h) * D + d, p.type) : 0.0f;
  }
  __syncthreads();
  if (tid < encode_tile) {
    bool ok = true;
    for (int d = 0; d < D; ++d) ok = ok && finite_bits(s_x[tid * D + d]);
    if (!ok) {  // non-finite row: stored as a zero vector (kv_cache's nonfinite_policy::zero)
      for (int d = 0; d < D; ++d) s_x[tid * D + d] = 0.0f;
      if (s_slot[tid] >= 0 && p.nonfinite != nullptr) atomicAdd(p.nonfinite, 1ull);
    }
  }
  if (tid == 0) {
    const long long s0 = s_slot[0];
    bool a = nt == encode_tile && s0 >= 0 && (s0 & 31) == 0;
    for (int t = 1; t < encode_tile && a; ++t) a = s_slot[t] == s0 + t;
    s_aligned = a ? 1 : 0;
  }
  __syncthreads();
  const bool aligned = s_aligned != 0;

  for (int gi = 0; gi < count; ++gi) {
    const group_meta g = p.groups[first + gi];
    const int n = g.n;
    const int B = g.bits;
    const int* dims = p.dims + g.dims;
    const float* fwd = p.rot + g.rot;
    const bool fp32 = g.fp32_radius != 0;
    for (int v = tid; v < (1 << B); v += blockDim.x) s_thr[v] = p.thr[g.cent + v];
    for (int idx = tid; idx < n * encode_tile; idx += blockDim.x) {
      const int j = idx >> 5;
      const int t = idx & 31;
      s_sub[idx] = s_x[t * D + dims[j]];
    }
    __syncthreads();
    if (tid < encode_tile) {
      const tq_norms nm = tq_norm_parts(token_minor_get{s_sub, tid}, n);
      const bool zero = tq_radius_is_zero(nm.r, fp32);
      if (nm.scale != 1.0f)  // this thread's own column: the CPU's exact scaled copy
        for (int j = 0; j < n; ++j) s_sub[j * encode_tile + tid] *= nm.scale;
      s_r[tid] = nm.r;
      s_zero[tid] = zero ? 1 : 0;
      s_inv[tid] = zero ? 0.0f : 1.0f / nm.dir_norm;
    }
    __syncthreads();
    const unsigned zero_code = static_cast<unsigned>(bgtq::detail::quantize_sorted(0.0f, s_thr, B));
    for (int o = tid; o < n; o += blockDim.x) {
      float acc[encode_tile];
#pragma unroll
      for (int t = 0; t < encode_tile; ++t) acc[t] = 0.0f;
      for (int i = 0; i < n; ++i) {
        const float pv = __ldg(fwd + static_cast<std::size_t>(i) * n + o);
        const float4* xs = reinterpret_cast<const float4*>(s_sub + i * encode_tile);
#pragma unroll
        for (int q = 0; q < encode_tile / 4; ++q) {
          const float4 x4 = xs[q];
          acc[4 * q + 0] = fmaf(x4.x, pv, acc[4 * q + 0]);
          acc[4 * q + 1] = fmaf(x4.y, pv, acc[4 * q + 1]);
          acc[4 * q + 2] = fmaf(x4.z, pv, acc[4 * q + 2]);
          acc[4 * q + 3] = fmaf(x4.w, pv, acc[4 * q + 3]);
        }
      }
      unsigned code[encode_tile];
#pragma unroll
      for (int t = 0; t < encode_tile; ++t)
        code[t] = s_zero[t] ? zero_code : static_cast<unsigned>(bgtq::detail::quantize_sorted(acc[t] * s_inv[t], s_thr, B));
      if (g.norm_correction) {
#pragma unroll
        for (int t = 0; t < encode_tile; ++t) s_cv[o * encode_tile + t] = __ldg(p.cent + g.cent + code[t]);
      }
      if (aligned) {
        const long long s0 = s_slot[0];
        std::uint8_t* part = p.pool + hm.offset + static_cast<std::size_t>(s0 / p.P) * hm.page_bytes + part_off + g.region;
        const int sl = static_cast<int>(s0 % p.P);
        for (int k = 0; k < B; ++k)
          *reinterpret_cast<std::uint32_t*>(part + plane_word_offset(o, k, B, p.P, sl)) = plane_word(code, k);
      } else {
#pragma unroll
        for (int t = 0; t < encode_tile; ++t) {
          const long long s = s_slot[t];
          if (s < 0) continue;
          std::uint8_t* part = p.pool + hm.offset + static_cast<std::size_t>(s / p.P) * hm.page_bytes + part_off + g.region;
          const int sl = static_cast<int>(s % p.P);
          const unsigned bit = 1u << (sl & 31);
          for (int k = 0; k < B; ++k) {
            unsigned* w = reinterpret_cast<unsigned*>(part + plane_word_offset(o, k, B, p.P, sl));
            if ((code[t] >> k) & 1u)
              atomicOr(w, bit);
            else
              atomicAnd(w, ~bit);
          }
        }
      }
    }
    __syncthreads();
    if (tid < encode_tile && s_slot[tid] >= 0) {
      float radius = 0.0f;
      if (!s_zero[tid]) {
        const float cn = g.norm_correction ? sqrtf(canonical_sum_squares(token_minor_get{s_cv, tid}, n)) : 0.0f;
        const float rs = bgtq::detail::tq_corrected_radius(s_r[tid], cn, g.norm_correction != 0);
        radius = bgtq::detail::round_radius(rs, fp32);
        if (p.clamped != nullptr && bgtq::detail::radius_clamped(rs, fp32)) atomicAdd(p.clamped, 1ull);
      }
      const long long s = s_slot[tid];
      std::uint8_t* part = p.pool + hm.offset + static_cast<std::size_t>(s / p.P) * hm.page_bytes + part_off;
      bgtq::detail::store_radius(part + g.radii + static_cast<std::size_t>(s % p.P) * (fp32 ? 4u : 2u), radius, fp32);
    }
    __syncthreads();
  }
}

}  // namespace

errc device_cache::encode_append(const encode_args& a, void* stream) noexcept {
  BGTQ_ARG_CHECK(p_ != nullptr, errc::invalid_argument, "encode_append: device_cache is empty");
  const cache_desc& d = p_->desc;
  BGTQ_ARG_CHECK(a.layer >= 0 && a.layer < d.layers, errc::not_found, "encode_append: layer out of range");
  BGTQ_ARG_CHECK(a.tokens >= 0, errc::invalid_argument, "encode_append: negative token count");
  BGTQ_ARG_CHECK(known_dtype(a.type), errc::invalid_argument,
                 "encode_append: unknown dtype");
  if (a.tokens == 0) return errc::ok;
  BGTQ_ARG_CHECK(a.k != nullptr && a.v != nullptr && a.slot_mapping != nullptr, errc::invalid_argument,
                 "encode_append: null k, v or slot_mapping");
  const std::size_t l = static_cast<std::size_t>(a.layer);
  const std::size_t smem =
      static_cast<std::size_t>(encode_tile) * static_cast<std::size_t>(d.head_dim) * 4u * (p_->tables.norm_corr[l] ? 3u : 2u);
  // (48 KB of dynamic shared memory at D = 128 with norm correction: above the default
  // limit, which is 48 KB minus the kernel's static shared memory)
  if (const errc e = raise_max_dynamic_smem<encode_kernel>(p_->device, smem); e != errc::ok) return e;
  encode_kparams kp{};
  static_cast<layer_params&>(kp) = p_->layer_view(a.layer);
  kp.tokens = a.tokens;
  kp.max_slot = static_cast<long long>(d.max_pages) * d.page_tokens;
  kp.type = a.type;
  kp.k = a.k;
  kp.v = a.v;
  kp.slots = a.slot_mapping;
  kp.nonfinite = a.nonfinite;
  kp.clamped = a.clamped;
  const dim3 grid(static_cast<unsigned>((a.tokens + encode_tile - 1) / encode_tile), static_cast<unsigned>(d.kv_heads), 2u);
  const dim3 block(encode_threads);
  BGTQ_LAUNCH(encode_kernel, grid, block, smem, as_stream(stream), kp);
  BGTQ_CUDA_LAUNCHED("encode_kernel");
  return errc::ok;
}

}  // namespace bgtq::cuda
