#pragma once
//! @file config.hpp
//! Compile-time configuration shared by host and device code.
//!
//! - `BGTQ_HOST_DEVICE` marks functions used by both the CPU reference and the CUDA
//!   kernels (`__host__ __device__` under nvcc, plain `inline` otherwise).
//! - `BGTQ_SIMD_AVX512`, `BGTQ_SIMD_AVX2` or neither (`BGTQ_SIMD_SCALAR`) is chosen once
//!   from the compiler's own target flags. Define `BGTQ_FORCE_SCALAR` before including
//!   any bgtq header to force the portable scalar path (the tests build both).
//! Macros change annotations and code paths, never data layouts.

#if defined(__CUDACC__)
#define BGTQ_HOST_DEVICE __host__ __device__ inline
#define BGTQ_FORCEINLINE __forceinline__
#else
#define BGTQ_HOST_DEVICE inline
#if defined(__GNUC__) || defined(__clang__)
#define BGTQ_FORCEINLINE inline __attribute__((always_inline))
#else
#define BGTQ_FORCEINLINE inline
#endif
#endif

//! For the width-specialised inner kernels (one instantiation per bit width and head
//! block): each stays its own function whatever the including translation unit, so
//! GCC's unit-wide inlining budget cannot fold one into its dispatcher in one program and
//! not in another (seen: an 8% difference in decode time between two builds of the same
//! kernel, depending on unrelated code in the TU).
#if defined(__GNUC__) || defined(__clang__)
#define BGTQ_NOINLINE __attribute__((noinline))
#else
#define BGTQ_NOINLINE
#endif

//! Full unrolling of the loops over register arrays (they must unroll for the arrays to
//! live in registers: seen in score_group64, where GCC 12 otherwise stored all 16
//! accumulators to the stack on every coordinate). nvcc's device pass gets its own
//! spelling (`#pragma unroll n`, e.g. rotated_coord's batches in kernel_math.hpp); its
//! host pass does not know the GCC spelling: left out there.
#define BGTQ_DETAIL_PRAGMA(x) _Pragma(#x)
#if defined(__CUDA_ARCH__)
#define BGTQ_DETAIL_UNROLL(n) BGTQ_DETAIL_PRAGMA(unroll n)
#elif defined(__CUDACC__) || !(defined(__GNUC__) || defined(__clang__))
#define BGTQ_DETAIL_UNROLL(n)
#else
#define BGTQ_DETAIL_UNROLL(n) BGTQ_DETAIL_PRAGMA(GCC unroll n)
#endif

//! 1 in an AddressSanitizer build (GCC's __SANITIZE_ADDRESS__, clang's feature test):
//! the attention workspace then poisons red zones between its buffers.
#if defined(__SANITIZE_ADDRESS__)
#define BGTQ_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define BGTQ_ASAN 1
#endif
#endif
#ifndef BGTQ_ASAN
#define BGTQ_ASAN 0
#endif

#if defined(__CUDA_ARCH__)
#define BGTQ_DEVICE_PASS 1
#else
#define BGTQ_DEVICE_PASS 0
#endif

#if !defined(BGTQ_FORCE_SCALAR) && !BGTQ_DEVICE_PASS && defined(__AVX512F__) && defined(__AVX512BW__) && \
    defined(__AVX512VL__)
#define BGTQ_SIMD_AVX512 1
#define BGTQ_SIMD_AVX2 1
#elif !defined(BGTQ_FORCE_SCALAR) && !BGTQ_DEVICE_PASS && defined(__AVX2__) && defined(__FMA__)
#define BGTQ_SIMD_AVX2 1
#else
#define BGTQ_SIMD_SCALAR 1
#endif

// AVX-512 with GFNI and VBMI (Ice Lake, Zen 4 and later): bit-plane codes are transposed
// to bytes with one vpermb + one gf2p8affineqb per 64 tokens (see cache/page_layout.hpp).
#if defined(BGTQ_SIMD_AVX512) && defined(__GFNI__) && defined(__AVX512VBMI__)
#define BGTQ_SIMD_GFNI 1
#endif

// AVX2 without AVX-512 (Haswell .. Alder Lake, Zen 1-3): bit-plane codes are expanded to
// bytes 32 tokens at a time with byte shuffles and compares (cache/page_layout.hpp), and
// the packed kernels take the 64-token paths sized for 16 ymm registers.
#if defined(BGTQ_SIMD_AVX2) && !defined(BGTQ_SIMD_AVX512)
#define BGTQ_SIMD_AVX2_ONLY 1
#endif

// BMI2 (pdep/pext) for the bit-tight packer's 8-code words (pack/bit_tight.hpp). Off
// with BGTQ_FORCE_SCALAR too, so the scalar build is portable code throughout.
#if defined(__BMI2__) && !defined(BGTQ_FORCE_SCALAR) && !BGTQ_DEVICE_PASS
#define BGTQ_BMI2 1
#endif

// Every SIMD path: bit-plane codes come 64 tokens at a time as bytes
// (bit_plane_layout::codes64, load64, strided16; without GFNI, b masked byte adds).
#if defined(BGTQ_SIMD_AVX512) || defined(BGTQ_SIMD_AVX2_ONLY)
#define BGTQ_SIMD_CODES64 1
#endif

#define BGTQ_VERSION_MAJOR 0
#define BGTQ_VERSION_MINOR 1
#define BGTQ_VERSION_PATCH 0

namespace bgtq {

//! Name of the SIMD path compiled into this translation unit ("avx512", "avx2", "scalar").
inline constexpr const char* simd_path() noexcept {
#if defined(BGTQ_SIMD_GFNI)
  return "avx512+gfni";
#elif defined(BGTQ_SIMD_AVX512)
  return "avx512";
#elif defined(BGTQ_SIMD_AVX2)
  return "avx2";
#else
  return "scalar";
#endif
}

namespace detail {
template <class...>
inline constexpr bool dependent_false = false;
}  // namespace detail

}  // namespace bgtq
