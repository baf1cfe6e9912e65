#pragma once
//! @file cuda/device.hpp
//! Plain C++ declarations of the precompiled CUDA helpers (library blockgtq_cuda).
//! Nothing here includes CUDA headers; every launcher returns a bgtq::errc.
#include <cstdlib>

#include "../core/error.hpp"

namespace bgtq::cuda {
//! True when the environment variable BGTQ_NO_PDL is set to anything but "" or "0". The
//! decode launchers then start the split and merge kernels with plain launches instead of
//! overlapping their predecessors (programmatic dependent launch, sm_90 and newer), which
//! tells a launch-overlap fault from a kernel fault on a device (bench/gpu/run.sh reruns a
//! failed check so). Read at every launch; results are the same either way.
inline bool pdl_disabled() noexcept {
  const char* e = std::getenv("BGTQ_NO_PDL");
  return e != nullptr && e[0] != '\0' && !(e[0] == '0' && e[1] == '\0');
}
//! Number of usable CUDA devices (0 if there is no driver or no device).
int device_count() noexcept;
//! Writes the device's name into buf (NUL-terminated, truncated to buf_len).
//! Errors: invalid_argument (null buf with buf_len > 0), device_error (no such device;
//! last_error_message names the CUDA error).
errc device_name(int device, char* buf, int buf_len) noexcept;
}  // namespace bgtq::cuda
