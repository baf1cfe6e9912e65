#pragma once
//! @file core/intrinsics.hpp
//! <immintrin.h> for the SIMD paths, included with GCC's uninitialized-value warnings
//! off for the intrinsic headers' own text. GCC 12 reports -Wuninitialized (at -O2) and
//! -Wmaybe-uninitialized in avx512fintrin.h / avxintrin.h wherever their
//! `_mm*_undefined_*` helpers are inlined (GCC bug 105593), e.g. into Eigen's AVX-512
//! kernels that eval/metrics.hpp instantiates; the diagnostic state that applies there is
//! the one in effect where the header text was first included, so every library header
//! includes the intrinsics through this file, and eval/metrics.hpp includes it before
//! Eigen. The user's own code keeps its warnings (push / pop around the include only).

#if defined(__x86_64__) || defined(_M_X64) || defined(__i386__)
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif
#include <immintrin.h>
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic pop
#endif
#endif
