#pragma once
// Private to kernels/: the device_cache implementation shared by the .cu files, the
// CUDA error plumbing and small device helpers.
#include <cuda_runtime.h>

#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include <bgtq/cuda/device.hpp>
#include <bgtq/cuda/device_cache.hpp>
#include <bgtq/cuda/tables.hpp>

namespace bgtq::cuda {
namespace detail {

//! Records `msg` as this thread's last error message (never throws).
void set_error(const char* msg) noexcept;
//! Records "<what> failed: <CUDA message> (<file>:<line>)"; returns errc::device_error.
//! Also clears the error (clear_pending_error): reported once, by the call that failed.
errc cuda_fail(cudaError_t e, const char* what, const char* file, int line) noexcept;
//! Clears the runtime's last-error state (cudaGetLastError). A failed runtime call leaves
//! its error there, and a non-sticky one (an allocation beyond the device's memory, an
//! attribute refused) would otherwise be reported again by the next launch check, as a
//! failure of a launch that succeeded. cuda_fail calls it for the errors the library
//! reports, and every launch (BGTQ_LAUNCH, BGTQ_LAUNCH_OVERLAP) before it starts, for an
//! error a caller's own failed call left pending (that call returned it to the caller).
//! A sticky error (a crashed kernel) cannot be cleared: the launch check still sees it.
inline void clear_pending_error() noexcept { (void)cudaGetLastError(); }
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

//! Checks the launch that was just enqueued (which began with clear_pending_error, so what
//! this sees is the launch's own error, or a sticky error of earlier work).
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
  const rotation_coord* rot_coords;  //!< [layer * Hkv + h][key, value][D] (decode's rotations)
  int layer, Hkv, D, P;       //!< layer, KV heads, head_dim, page_tokens
};

struct device_cache::impl {
  cache_desc desc;
  int device = 0;
  int sms = 1;
  int cc_major = 0;      // compute capability major (tensor-core decode needs 8+)
  int smem_optin = 0;    // largest dynamic shared memory a CTA may opt into on this device
  device_tables tables;  // host copies of the uploaded tables (tables.hpp)
  std::vector<mma_layer_info> mma;  // per layer: can it take the tensor-core decode path
  std::vector<std::string> mma_why; // per layer: why not ("" when it can)
  std::unique_ptr<std::atomic<int>[]> mma_per_sm;  // per layer: resident tensor-core CTAs per SM (0: not asked yet)
  mma_head_tables mma_tables;       // host copies of the tensor-core kernel's per-head rows (build_mma_tables)
  // device allocations
  std::uint8_t* pool = nullptr;
  std::size_t pool_bytes = 0;
  head_meta* heads = nullptr;
  group_meta* groups = nullptr;
  int* dims = nullptr;
  float* rot = nullptr;
  float* cent = nullptr;
  float* thr = nullptr;
  rotation_coord* rot_coords = nullptr;
  mma_group* mma_groups = nullptr;     // mma_tables' rows, uploaded (tensor-core decode)
  std::uint16_t* mma_half = nullptr;
  std::int16_t* mma_cpos = nullptr;
  std::uint32_t* mma_zmask = nullptr;
  mma_stage* mma_stages = nullptr;

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
    cudaFree(rot_coords);
    cudaFree(mma_groups);
    cudaFree(mma_half);
    cudaFree(mma_cpos);
    cudaFree(mma_zmask);
    cudaFree(mma_stages);
  }
  //! The tables and shape for kernels working on `layer`.
  layer_params layer_view(int layer) const {
    return {pool, heads, groups, dims, rot, cent, thr, rot_coords, layer, desc.kv_heads, desc.head_dim, desc.page_tokens};
  }
  const head_meta& head(int layer, int h) const {
    return tables.heads[static_cast<std::size_t>(layer) * static_cast<std::size_t>(desc.kv_heads) + static_cast<std::size_t>(h)];
  }
};

//! Kernel launch: `kernel<<<grid, block, smem, stream>>>(args...)`, or the CPU
//! emulator's launch when built with BGTQ_CUDA_EMULATION (tests/cuda/emu). Pass grid
//! and block as named dim3 values (a macro argument cannot hold a comma). A statement;
//! it clears a pending error first (clear_pending_error).
#if defined(BGTQ_CUDA_EMULATION)
#define BGTQ_LAUNCH(kernel, grid, block, smem, stream, ...)                   \
  do {                                                                        \
    ::bgtq::cuda::detail::clear_pending_error();                              \
    ::bgtq_emu::stream_launch(false, kernel, grid, block, smem, __VA_ARGS__); \
  } while (0)
#else
#define BGTQ_LAUNCH(kernel, grid, block, smem, stream, ...) \
  do {                                                      \
    ::bgtq::cuda::detail::clear_pending_error();            \
    kernel<<<grid, block, smem, stream>>>(__VA_ARGS__);     \
  } while (0)
#endif

//! Raises Kernel's dynamic shared-memory limit on `device` to at least `bytes`. The
//! limit a kernel starts with is 48 KB minus its static shared memory (read from
//! cudaFuncGetAttributes, not assumed), so a launch needing more must raise it. Never
//! lowers it, and one mutex orders the query/set/record steps, so host threads launching
//! the same kernel with different sizes cannot undo each other. The attribute is set
//! with `device` current (restored afterwards).
template <auto Kernel>
errc raise_max_dynamic_smem(int device, std::size_t bytes) {
  static std::mutex mu;
  static int known[64] = {};  // per device: the limit now in force + 1 (0: not read yet)
  if (device < 0 || device >= 64) return detail::arg_fail(errc::invalid_argument, "device index out of range");
  const int want = static_cast<int>(bytes);
  std::lock_guard<std::mutex> lock(mu);
  if (known[device] > want) return errc::ok;
  int current = 0;
  BGTQ_CUDA_TRY(cudaGetDevice(&current));
  if (current != device) BGTQ_CUDA_TRY(cudaSetDevice(device));
  errc e = errc::ok;
  cudaFuncAttributes fa{};
  if (const cudaError_t ce = cudaFuncGetAttributes(&fa, Kernel); ce != cudaSuccess) {
    e = detail::cuda_fail(ce, "cudaFuncGetAttributes", __FILE__, __LINE__);
  } else if (fa.maxDynamicSharedSizeBytes >= want) {
    known[device] = fa.maxDynamicSharedSizeBytes + 1;
  } else if (const cudaError_t se = cudaFuncSetAttribute(Kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, want);
             se != cudaSuccess) {
    e = detail::cuda_fail(se, "cudaFuncSetAttribute(MaxDynamicSharedMemorySize)", __FILE__, __LINE__);
  } else {
    known[device] = want + 1;
  }
  if (current != device) {
    const cudaError_t re = cudaSetDevice(current);
    if (e == errc::ok && re != cudaSuccess) e = detail::cuda_fail(re, "cudaSetDevice (restore)", __FILE__, __LINE__);
  }
  return e;
}

//! True when the code `device` runs for Kernel was compiled for sm_90 or newer, i.e. it
//! contains grid_dependency_wait's griddepcontrol.wait (a build without an sm_90 target
//! JIT-compiles older PTX on Hopper: such a kernel must not be launched overlapped).
template <auto Kernel>
bool runs_sm90_code(int device) {
#if defined(BGTQ_CUDA_EMULATION)
  (void)device;
  return false;
#else
  static std::atomic<int> known[64];  // per device: 0 not asked yet, 1 yes, 2 no
  if (device < 0 || device >= 64) return false;
  int k = known[device].load(std::memory_order_relaxed);
  if (k == 0) {
    cudaFuncAttributes fa{};
    k = cudaFuncGetAttributes(&fa, Kernel) == cudaSuccess && fa.ptxVersion >= 90 ? 1 : 2;
    (void)cudaGetLastError();
    known[device].store(k, std::memory_order_relaxed);
  }
  return k == 1;
#endif
}

//! Kernel launch that overlaps the previous kernel of the stream (programmatic dependent
//! launch) when the code `device` runs for the kernel was compiled for sm_90+
//! (runs_sm90_code: only that code has grid_dependency_wait's wait, and only an sm_90+
//! device runs it): the kernel starts while its predecessor finishes and must call
//! grid_dependency_wait() before it reads anything that kernel writes (what earlier
//! kernels wrote is visible, since the predecessor itself started after them).
//! Otherwise, with BGTQ_NO_PDL set (pdl_disabled), or if the runtime refuses the
//! attribute, a plain launch. The CPU emulator runs launches one after another; under
//! ThreadSanitizer it leaves an overlapped launch unordered against its predecessor until
//! grid_dependency_wait (tests/cuda/emu/cuda_runtime.h), so reading early is a race.
#if defined(BGTQ_CUDA_EMULATION)
#define BGTQ_LAUNCH_OVERLAP(device, kernel, grid, block, smem, stream, ...) \
  ((void)(device), ::bgtq::cuda::detail::clear_pending_error(),                                                 \
   ::bgtq_emu::stream_launch(!::bgtq::cuda::pdl_disabled(), kernel, grid, block, smem, __VA_ARGS__), cudaGetLastError())
#else
template <class... P, class... A>
cudaError_t launch_overlap(bool overlap, void (*kernel)(P...), dim3 grid, dim3 block, std::size_t smem, cudaStream_t st,
                           const A&... args) {
  detail::clear_pending_error();
  if (overlap && !pdl_disabled()) {
    cudaLaunchConfig_t cfg{};
    cfg.gridDim = grid;
    cfg.blockDim = block;
    cfg.dynamicSmemBytes = smem;
    cfg.stream = st;
    cudaLaunchAttribute attr[1];
    attr[0].id = cudaLaunchAttributeProgrammaticStreamSerialization;
    attr[0].val.programmaticStreamSerializationAllowed = 1;
    cfg.attrs = attr;
    cfg.numAttrs = 1;
    if (cudaLaunchKernelEx(&cfg, kernel, args...) == cudaSuccess) return cudaSuccess;
    (void)cudaGetLastError();  // not supported here: fall back to a plain launch
  }
  kernel<<<grid, block, smem, st>>>(args...);
  return cudaGetLastError();
}
#define BGTQ_LAUNCH_OVERLAP(device, kernel, grid, block, smem, stream, ...) \
  ::bgtq::cuda::launch_overlap(::bgtq::cuda::runs_sm90_code<kernel>(device), kernel, grid, block, smem, stream, __VA_ARGS__)
#endif

//! Waits until the kernel this one overlaps (BGTQ_LAUNCH_OVERLAP) has completed and its
//! writes are visible; returns at once when the launch did not overlap.
__device__ __forceinline__ void grid_dependency_wait() {
#if defined(BGTQ_CUDA_EMULATION)
  ::bgtq_emu::dependency_wait();
#elif defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.wait;\n" ::: "memory");
#endif
}

//! Lets the next overlapping kernel start its CTAs now (it still waits for this whole grid
//! in grid_dependency_wait before reading what this kernel writes).
__device__ __forceinline__ void allow_dependent_launch() {
#if !defined(BGTQ_CUDA_EMULATION) && defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.launch_dependents;\n" ::);
#endif
}

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
