#pragma once
// CPU emulator stand-in for cub::DeviceSegmentedReduce::Sum (see ../../cuda_runtime.h):
// sequential sums, same interface (a size query with a null temp pointer).
#include <cuda_runtime.h>

#include <cstddef>

namespace cub {
struct DeviceSegmentedReduce {
  template <class In, class Out, class BeginOff, class EndOff>
  static cudaError_t Sum(void* temp, std::size_t& temp_bytes, In in, Out out, int segments, BeginOff begin, EndOff end,
                         cudaStream_t = nullptr) {
    if (temp == nullptr) {
      temp_bytes = 16;
      return cudaSuccess;
    }
    bgtq_emu::host_sync();  // runs after the launches before it (stream order)
    for (int s = 0; s < segments; ++s) {
      auto acc = decltype(+in[0]){};
      for (auto i = begin[s]; i < end[s]; ++i) acc = acc + in[i];
      out[s] = acc;
    }
    return cudaSuccess;
  }
};
}  // namespace cub
