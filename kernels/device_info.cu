// Device discovery used by the GPU tests and benchmarks.
#include <cuda_runtime.h>

#include <bgtq/cuda/device.hpp>

#include "device_cache_impl.cuh"

namespace bgtq::cuda {

int device_count() noexcept {
  int n = 0;
  if (cudaGetDeviceCount(&n) != cudaSuccess) {
    (void)cudaGetLastError();
    return 0;
  }
  return n;
}

errc device_name(int device, char* buf, int buf_len) noexcept {
  BGTQ_ARG_CHECK(buf != nullptr || buf_len <= 0, errc::invalid_argument, "device_name: null buffer");
  cudaDeviceProp p{};
  BGTQ_CUDA_TRY(cudaGetDeviceProperties(&p, device));  // a device number out of range: device_error, named
  int i = 0;
  for (; i + 1 < buf_len && p.name[i]; ++i) buf[i] = p.name[i];
  if (buf_len > 0) buf[i] = '\0';
  return errc::ok;
}

}  // namespace bgtq::cuda
