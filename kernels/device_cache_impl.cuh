#pragma once
// Private to kernels/: the device_cache implementation shared by the .cu files, the
// CUDA error plumbing and small device helpers.
#include <cuda_runtime.h>

#include <cstdint>
#include <string>
#include <vector>

#include <bgtq/cuda/device_cache.hpp>
#include <bgtq/cuda/tables.hpp>

namespace bgtq::cuda {
namespace detail {

//! Records `msg` as this thread's last error message (never throws).
void set_error(const char* msg) noexcept;
//! Records "<what> failed: <CUDA message> (<file>:<line>)"; returns errc::device_error.
errc cuda_fail(cudaError_t e, const char* what, const char* file, int line) noexcept;
//! Records msg; returns code.
errc arg_fail(errc code, const char* msg) noexcept;

}  // namespace detail

//! Returns errc::device_error from the enclosing function when a CUDA call fails.
#define BGTQ_CUDA_TRY(call)                                                             \
  do {                                                                                  \
    const cudaError_t bgtq_e_ = (call);                                                 \
    if (bgtq_e_ != cudaSuccess) return ::bgtq::cuda::detail::cuda_fail(bgtq_e_, #call, __FILE__, __LINE__); \
  } while (0)

//! Returns `code` with a message from the enclosing function unless cond holds.
#define BGTQ_ARG_CHECK(cond, code, msg)                                   \
  do {                                                                    \
    if (!(cond)) return ::bgtq::cuda::detail::arg_fail((code), (msg));    \
  } while (0)

//! Checks the launch that was just enqueued.
#define BGTQ_CUDA_LAUNCHED(name)                                                        \
  do {                                                                                  \
    const cudaError_t bgtq_e_ = cudaGetLastError();                                     \
    if (bgtq_e_ != cudaSuccess) return ::bgtq::cuda::detail::cuda_fail(bgtq_e_, "launch of " name, __FILE__, __LINE__); \
  } while (0)

//! The device tables and the shape that one layer's kernels read: the base of the
//! encode and decode kernels' parameter structs, filled by impl::layer_view.
struct layer_params {
  std::uint8_t* pool;         //!< the page pool
  const head_meta* heads;     //!< [layer * Hkv + h]
  const group_meta* groups;   //!< indexed by head_meta's key_first / value_first
  const int* dims;            //!< group coordinate -> head dim
  const float* rot;           //!< dense rotation matrices
  const float* cent;          //!< centroids
  const float* thr;           //!< thresholds (encode only)
  int layer, Hkv, D, P;       //!< layer, KV heads, head_dim, page_tokens
};

struct device_cache::impl {
  cache_desc desc;
  int device = 0;
  int sms = 1;
  int cc_major = 0;      // compute capability major (tensor-core decode needs 8+)
  device_tables tables;  // host copies of the uploaded tables (tables.hpp)
  std::vector<mma_layer_info> mma;  // per layer: can it take the tensor-core decode path
  std::vector<std::string> mma_why; // per layer: why not ("" when it can)
  // device allocations
  std::uint8_t* pool = nullptr;
  std::size_t pool_bytes = 0;
  head_meta* heads = nullptr;
  group_meta* groups = nullptr;
  int* dims = nullptr;
  float* rot = nullptr;
  float* cent = nullptr;
  float* thr = nullptr;

  impl() = default;
  impl(const impl&) = delete;
  impl& operator=(const impl&) = delete;
  ~impl() {
    // cudaFree(nullptr) is a no-op; errors at teardown cannot be reported
    cudaFree(pool);
    cudaFree(heads);
    cudaFree(groups);
    cudaFree(dims);
    cudaFree(rot);
    cudaFree(cent);
    cudaFree(thr);
  }
  //! The tables and shape for kernels working on `layer`.
  layer_params layer_view(int layer) const {
    return {pool, heads, groups, dims, rot, cent, thr, layer, desc.kv_heads, desc.head_dim, desc.page_tokens};
  }
  const head_meta& head(int layer, int h) const {
    return tables.heads[static_cast<std::size_t>(layer) * static_cast<std::size_t>(desc.kv_heads) + static_cast<std::size_t>(h)];
  }
};

//! Kernel launch: `kernel<<<grid, block, smem, stream>>>(args...)`, or the CPU
//! emulator's launch when built with BGTQ_CUDA_EMULATION (tests/cuda/emu). Pass grid
//! and block as named dim3 values (a macro argument cannot hold a comma).
#if defined(BGTQ_CUDA_EMULATION)
#define BGTQ_LAUNCH(kernel, grid, block, smem, stream, ...) ::bgtq_emu::launch(kernel, grid, block, smem, __VA_ARGS__)
#else
#define BGTQ_LAUNCH(kernel, grid, block, smem, stream, ...) kernel<<<grid, block, smem, stream>>>(__VA_ARGS__)
#endif

//! The CTA's dynamic shared memory (16-byte aligned).
#if defined(BGTQ_CUDA_EMULATION)
template <class T>
inline T* dynamic_smem() {
  return static_cast<T*>(::bgtq_emu::dynamic_smem());
}
#else
template <class T>
__device__ __forceinline__ T* dynamic_smem() {
  extern __shared__ __align__(16) unsigned char bgtq_dynamic_smem_[];
  return reinterpret_cast<T*>(bgtq_dynamic_smem_);
}
#endif

//! cudaStream_t from the opaque handle.
inline cudaStream_t as_stream(void* s) { return static_cast<cudaStream_t>(s); }

}  // namespace bgtq::cuda
