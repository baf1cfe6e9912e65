#pragma once
//! @file cuda/device.hpp
//! Plain C++ declarations of the precompiled CUDA helpers (library blockgtq_cuda).
//! Nothing here includes CUDA headers; every launcher returns a bgtq::errc.
#include "../core/error.hpp"

namespace bgtq::cuda {
//! Number of usable CUDA devices (0 if there is no driver or no device).
int device_count() noexcept;
//! Writes the device's name into buf (NUL-terminated, truncated to buf_len).
errc device_name(int device, char* buf, int buf_len) noexcept;
}  // namespace bgtq::cuda
