// fill_uniform: Philox-driven uniform fill of a device tensor (benchmark inputs);
// to_float / from_float: the kernels' fp16/bf16 conversions over a tensor, for tests.
#include <bgtq/core/rng.hpp>

#include "device_cache_impl.cuh"

namespace bgtq::cuda {
namespace {

__global__ void fill_kernel(void* dst, std::size_t n, dtype type, std::uint32_t k0, std::uint32_t k1, float lo, float span) {
  const std::size_t quad = static_cast<std::size_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  const std::size_t i0 = quad * 4u;
  if (i0 >= n) return;
  const u32x4 r = philox4x32(u32x4{{static_cast<std::uint32_t>(quad), static_cast<std::uint32_t>(quad >> 32), 0u, 0u}}, k0, k1);
  for (int j = 0; j < 4 && i0 + j < n; ++j) {
    const float u = static_cast<float>(r.v[j] >> 8) * (1.0f / 16777216.0f);  // [0, 1), 24 bits
    store_element(dst, i0 + j, type, lo + span * u);
  }
}

__global__ void to_float_kernel(const void* src, std::size_t n, dtype type, float* dst) {
  const std::size_t i = static_cast<std::size_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i < n) dst[i] = load_element(src, i, type);
}

__global__ void from_float_kernel(const float* src, std::size_t n, dtype type, void* dst) {
  const std::size_t i = static_cast<std::size_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i < n) store_element(dst, i, type, src[i]);
}

//! The grid of 256-thread blocks over `threads` threads; false past 2^31 - 1 blocks.
bool grid_for(std::size_t threads, dim3& grid) {
  const std::size_t blocks = (threads + 255) / 256;
  if (blocks >= (1ull << 31)) return false;
  grid = dim3(static_cast<unsigned>(blocks));
  return true;
}

}  // namespace

errc fill_uniform(void* dst, std::size_t n, dtype type, std::uint64_t seed, float lo, float hi, void* stream) noexcept {
  BGTQ_ARG_CHECK(dst != nullptr || n == 0, errc::invalid_argument, "fill_uniform: null destination");
  BGTQ_ARG_CHECK(known_dtype(type), errc::invalid_argument, "fill_uniform: unknown dtype");
  if (n == 0) return errc::ok;
  dim3 grid;
  BGTQ_ARG_CHECK(grid_for((n + 3) / 4, grid), errc::invalid_argument, "fill_uniform: too many elements");  // a thread per 4
  BGTQ_LAUNCH(fill_kernel, grid, dim3(256), 0, as_stream(stream), dst, n, type, static_cast<std::uint32_t>(seed),
              static_cast<std::uint32_t>(seed >> 32), lo, hi - lo);
  BGTQ_CUDA_LAUNCHED("fill_kernel");
  return errc::ok;
}

errc to_float(const void* src, std::size_t n, dtype type, float* dst, void* stream) noexcept {
  BGTQ_ARG_CHECK((src != nullptr && dst != nullptr) || n == 0, errc::invalid_argument, "to_float: null source or destination");
  BGTQ_ARG_CHECK(known_dtype(type), errc::invalid_argument, "to_float: unknown dtype");
  if (n == 0) return errc::ok;
  dim3 grid;
  BGTQ_ARG_CHECK(grid_for(n, grid), errc::invalid_argument, "to_float: too many elements");
  BGTQ_LAUNCH(to_float_kernel, grid, dim3(256), 0, as_stream(stream), src, n, type, dst);
  BGTQ_CUDA_LAUNCHED("to_float_kernel");
  return errc::ok;
}

errc from_float(const float* src, std::size_t n, dtype type, void* dst, void* stream) noexcept {
  BGTQ_ARG_CHECK((src != nullptr && dst != nullptr) || n == 0, errc::invalid_argument, "from_float: null source or destination");
  BGTQ_ARG_CHECK(type == dtype::f16 || type == dtype::bf16, errc::invalid_argument, "from_float: dtype must be f16 or bf16");
  if (n == 0) return errc::ok;
  dim3 grid;
  BGTQ_ARG_CHECK(grid_for(n, grid), errc::invalid_argument, "from_float: too many elements");
  BGTQ_LAUNCH(from_float_kernel, grid, dim3(256), 0, as_stream(stream), src, n, type, dst);
  BGTQ_CUDA_LAUNCHED("from_float_kernel");
  return errc::ok;
}

}  // namespace bgtq::cuda
