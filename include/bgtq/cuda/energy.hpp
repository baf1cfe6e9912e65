#pragma once
//! @file cuda/energy.hpp
//! Device accumulation of the RoPE block energies used by calibration (the score of docs/theory.md §1):
//! per (KV head h, block i) the sums over tokens of ||q_{g,t}(i)||^2 for the query
//! heads g of h's GQA group, and of ||k_{h,t}(i)||^2, in double precision.
//! Plain C++ (no CUDA headers); every function is noexcept and returns a bgtq::errc.
//!
//! The sums equal the CPU energy_estimator's (which keeps per-dim double sums) up to
//! double rounding: every square of a float is exact in double, only the order of the
//! additions differs (per-thread partial sums, then CUB's segmented reduction).

#include <cstdint>
#include <memory>
#include <vector>

#include "../core/error.hpp"
#include "kernel_math.hpp"

namespace bgtq::cuda {

//! Energy sums of one layer on the device. Move-only.
class device_energy {
 public:
  device_energy() noexcept;
  ~device_energy();
  device_energy(device_energy&&) noexcept;
  device_energy& operator=(device_energy&&) noexcept;
  device_energy(const device_energy&) = delete;
  device_energy& operator=(const device_energy&) = delete;

  //! @param q_heads     query heads, a positive multiple of kv_heads
  //! @param kv_heads    KV heads (>= 1); query head g belongs to KV head g / (q_heads / kv_heads)
  //! @param head_dim    dimensions per head, even, 2..256
  //! @param block_dims  [L][2] flattened: the two head dims of block i
  //!                    (rope_layout::block_dims(i)), L = head_dim / 2
  //! @param max_tokens  tokens processed per internal pass (larger calls loop); the device
  //!                    holds 8 bytes per 256 of them for each (q or k, KV head, block)
  //! @param out         receives the new object on success; untouched on an error
  //! Errors: invalid_argument (head counts, an odd head_dim, dims out of range,
  //! max_tokens < 1), shape_mismatch (block_dims not head_dim entries), unsupported
  //! (head_dim > 256, or max_tokens beyond int segment offsets: 256 * floor((2^31 - 1) /
  //! (2 * kv_heads * L))), capacity_exhausted (host allocation), device_error.
  static errc create(int q_heads, int kv_heads, int head_dim, const std::vector<int>& block_dims, long long max_tokens,
                     device_energy& out) noexcept;

  //! Adds `tokens` tokens: q [tokens][q_heads][head_dim] and k [tokens][kv_heads][head_dim]
  //! (device memory, element type `type`). Asynchronous on `stream`.
  errc accumulate(const void* q, const void* k, long long tokens, dtype type, void* stream = nullptr) noexcept;
  //! Zeroes the sums and the token count, and forgets a non-finite element.
  errc reset(void* stream = nullptr) noexcept;
  //! Copies the sums to host arrays of kv_heads * L doubles each, index h * L + i.
  //! Synchronous (waits for `stream`). errc::non_finite, with the outputs untouched, when
  //! an element accumulated since create / reset was NaN or Inf (as energy_estimator::add
  //! refuses them): last_error_message() names the first one, q or k, token (counted since
  //! create / reset), head and dim. reset() clears it.
  errc download(double* q_sums, double* k_sums, void* stream = nullptr) const noexcept;
  //! Tokens accumulated since create / reset.
  long long tokens() const noexcept;
  //! Number of blocks L.
  int blocks() const noexcept;

  struct impl;  //!< private (kernels/energy.cu)

 private:
  std::unique_ptr<impl> p_;
};

}  // namespace bgtq::cuda
