#pragma once
// Private to kernels/: what the decode-attention translation units share: the kernel
// parameter struct (filled once by device_cache::decode_attention), warp reductions and
// the launcher of the tensor-core split kernel (decode_mma.cu).
#include "device_cache_impl.cuh"

namespace bgtq::cuda {

//! Parameters of the decode kernels (rotate, split scan, merge): one layer, one batch.
struct decode_kparams : layer_params {
  int Hq, G, hchunks, batch;
  const void* q;
  dtype q_type;
  float* out;
  const int* page_table;
  int mpps;
  const int* quantized;
  const std::uint16_t* wk;
  const std::uint16_t* wv;
  const int* wlen;
  int wcap;
  float scale;
  int splits, tiles_per_split;
  float* qrot;  // [B][Hq][D]
  float* ml;    // [B][Hq][S][2]
  float* acc;   // [B][Hq][S][D]
  int key_coords, key_cent, value_cent, value_groups;  // layer maxima (shared-memory sizing)
  unsigned long long* nonfinite;  // optional: count of non-finite queries
};

//! *p read where it is written: a volatile load, which ptxas neither drops nor sinks into
//! the branch that uses it (decode_mma.cu: a plain load of the first unit's page went behind the
//! `warp < units` test, after the other setup loads had been waited for).
__device__ __forceinline__ int load_now(const int* p) {
#if defined(BGTQ_CUDA_EMULATION)
  return *p;
#else
  int v;
  asm volatile("ld.volatile.global.s32 %0, [%1];" : "=r"(v) : "l"(p) : "memory");
  return v;
#endif
}

__device__ __forceinline__ float warp_max(float v) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
  return v;
}
__device__ __forceinline__ float warp_sum(float v) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  return v;
}

//! Gets the tensor-core split kernel ready for `layer` on dev's device (raises its
//! shared-memory limit, asks the occupancy API once per layer) and sets `out` to its
//! split plan: `requested` > 0 keeps `standard`; 0 plans one full wave of resident CTAs,
//! at most `standard.splits` (the plan the workspace was sized for). An error leaves
//! `out` unchanged (automatic decode then falls back to the CUDA-core kernel).
errc mma_prepare(const device_cache::impl& dev, int layer, int hchunks, int batch, long long max_quantized, int requested,
                 const split_plan& standard, split_plan& out) noexcept;

//! Launches the tensor-core split kernel (kernels/decode_mma.cu) for the plan `sp` after
//! mma_prepare, overlapping rotate_query_kernel's tail where it can (BGTQ_LAUNCH_OVERLAP).
//! Writes the same per-split partials (m, l, acc) as the CUDA-core split kernel, so the
//! merge kernel is shared.
errc launch_split_mma(const decode_kparams& kp, const split_plan& sp, const device_cache::impl& dev, cudaStream_t st);

}  // namespace bgtq::cuda
