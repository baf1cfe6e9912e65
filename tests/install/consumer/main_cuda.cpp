// A downstream program that links the installed kernel library blockgtq::blockgtq_cuda and
// calls host functions that need no GPU (they report an error code where there is none).
#include <bgtq/cuda/device.hpp>
#include <bgtq/cuda/device_cache.hpp>

#include <cstdio>
#include <cstring>

int main() {
  const int n = bgtq::cuda::device_count();  // 0 without a driver or a device
  if (n < 0) return 1;
  char name[64] = "unchanged";
  // Device -1 exists nowhere: device_error, and last_error_message names the CUDA call.
  const bgtq::errc e = bgtq::cuda::device_name(-1, name, static_cast<int>(sizeof name));
  const char* msg = bgtq::cuda::last_error_message();
  if (e != bgtq::errc::device_error || msg == nullptr || std::strlen(msg) == 0) {
    std::printf("device_name(-1): %s, message '%s'\n", bgtq::to_string(e), msg ? msg : "(null)");
    return 2;
  }
  std::printf("blockgtq_cuda: %d device(s); device_name(-1): %s (%s)\n", n, bgtq::to_string(e), msg);
  return 0;
}
