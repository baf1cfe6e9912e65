#pragma once
//! @file cuda/kernel_math.hpp
//! The scalar steps and index math of the CUDA kernels (kernels/*.cu), written once as
//! `BGTQ_HOST_DEVICE` functions so that the host model of the kernels
//! (tests/cuda/host_model.hpp) runs the very same code on the CPU and can be compared
//! with the CPU cache without a GPU. No CUDA headers, no allocation, no exceptions.
//!
//! What lives here:
//! - the POD metadata the kernels read (`group_meta`, `head_meta`), uploaded as is;
//! - bit-plane addressing of `bit_plane_layout` pages for 32-token words;
//! - the TQ-MSE encode steps in the CPU's exact arithmetic order (canonical norm,
//!   FMA-chain rotation, `quantize_sorted`, radius rounding);
//! - the decode attention decomposition: split plan, workspace and shared-memory layouts.

#include <cmath>
#include <cstddef>
#include <cstdint>

#include "../codec/tq_math.hpp"
#include "../config.hpp"
#include "../core/half.hpp"
#include "../core/simd.hpp"
#include "mma_fragments.hpp"

namespace bgtq::cuda {

//! Largest head dimension the kernels accept.
inline constexpr int max_head_dim = 256;
//! Largest number of TQ-MSE groups in one codec part (keys or values) of a head.
inline constexpr int max_part_groups = 16;
//! Threads of a decode-attention CTA (4 warps).
inline constexpr int decode_threads = 128;
//! Tokens a decode CTA scores per step: one 32-token chunk per warp.
inline constexpr int decode_tile = 128;
//! Most query heads one decode CTA serves (larger GQA groups use several CTAs).
inline constexpr int max_heads_per_cta = 8;
//! Tokens one encode CTA handles (one 32-bit plane word).
inline constexpr int encode_tile = 32;
//! Threads of an encode CTA.
inline constexpr int encode_threads = 128;

//! Element type of a device tensor (queries, new keys/values, calibration inputs).
enum class dtype : int {
  f32 = 0,   //!< IEEE float
  f16 = 1,   //!< IEEE half (bits)
  bf16 = 2,  //!< bfloat16 (bits)
};

//! True for the three dtype values (a launcher's argument check).
BGTQ_HOST_DEVICE constexpr bool known_dtype(dtype t) { return t == dtype::f32 || t == dtype::f16 || t == dtype::bf16; }

//! One TQ-MSE group as the kernels see it (plain data, uploaded verbatim).
//! Tables it points into (all device arrays of the cache):
//! `// dims[dims + j]            head dim of group coordinate j (j < n)`
//! `// rot[rot + i*n + o]        P^T row-major = P[o][i] (apply: y = P x)`
//! `// rot[rot + n*n + j*n + i]  P row-major   = P[j][i] (apply_transpose: x = P^T y)`
//! `// cent[cent + v], thr[cent + v]  centroid v and threshold v (v < 2^bits; thr[2^bits-1] = +inf)`
struct group_meta {
  int n = 0;                   //!< coordinates (sub-vector dimension, even)
  int bits = 0;                //!< code width, 1..8
  int coord_off = 0;           //!< offset of the group's coordinates in the part's rotated coordinate space
  int fp32_radius = 0;         //!< 1: radii are fp32 (4 bytes), 0: fp16
  int norm_correction = 0;     //!< 1: stored radius is r / ||c(idx)||
  int dims = 0;                //!< offset into the dims table
  int cent = 0;                //!< offset into the centroid / threshold tables
  int cent_local = 0;          //!< offset of the centroids in the head part's compact table (shared memory)
  std::uint32_t region = 0;    //!< byte offset of the code region in the codec part of a page
  std::uint32_t radii = 0;     //!< byte offset of this group's radii ([P] entries) in the codec part
  std::uint64_t rot = 0;       //!< float offset into the rotation table
};

//! One rotated coordinate c of a head's key or value part, flattened from its group so
//! that the rotation kernels reach the matrix in one load instead of three dependent ones
//! (head_meta -> group_meta -> dims; device_tables::rot_coords, built by build_tables).
//! Coordinate c lies in the group whose coordinates are [first, first + n), at local
//! index o = c - first:
//! `// keys   (y = P x):   y[c]      = rotated_coord(rot + col, n, 0, x_g), x_g[j] = q[dims_g[j]], dim = dims_g[o]`
//! `// values (x = P^T y): x[dim]    = rotated_coord(rot + col, n, 0, y + first)`
//! col = the group's rot (keys) or rot + n*n (values), plus o. n = 0: c is past the
//! part's groups (its rotated coordinate is 0).
struct alignas(16) rotation_coord {
  std::uint64_t col = 0;   //!< float offset into the rotation table of column o of the group's matrix
  std::uint64_t meta = 0;  //!< n | first << 16 | dim << 32 (make_rotation_coord): two plain words, so a
                           //!< kernel copies an entry without touching its fields
  //! The group's coordinates; 0: no group holds c.
  BGTQ_HOST_DEVICE int n() const { return static_cast<int>(meta & 0xFFFFu); }
  //! The group's coord_off.
  BGTQ_HOST_DEVICE int first() const { return static_cast<int>((meta >> 16) & 0xFFFFu); }
  //! Head dim of group coordinate o (dims_g[o]): the key element gathered, the value element written.
  BGTQ_HOST_DEVICE int dim() const { return static_cast<int>((meta >> 32) & 0xFFFFu); }
};

//! The entry of a coordinate of a group of n coordinates from `first`, column `col`,
//! head dim `dim` (all of n, first, dim below 2^16: head_dim <= max_head_dim).
BGTQ_HOST_DEVICE constexpr rotation_coord make_rotation_coord(std::uint64_t col, int n, int first, int dim) {
  rotation_coord e;
  e.col = col;
  e.meta = static_cast<std::uint64_t>(n) | static_cast<std::uint64_t>(first) << 16 | static_cast<std::uint64_t>(dim) << 32;
  return e;
}

//! One (layer, KV head) as the kernels see it.
//! `// pool + offset + page * page_bytes = page part; [key part (key bytes)][value part at value_offset]`
struct head_meta {
  std::uint64_t offset = 0;        //!< byte offset of the (layer, head) arena in the pool
  std::uint32_t page_bytes = 0;    //!< bytes of one page part (keys + values)
  std::uint32_t value_offset = 0;  //!< offset of the value part inside a page part
  int key_first = 0, key_count = 0;      //!< key groups: [key_first, key_first + key_count) of the group table
  int value_first = 0, value_count = 0;  //!< value groups
  int key_coords = 0, value_coords = 0;  //!< sum of n over the key / value groups
  int key_cent = 0, value_cent = 0;      //!< sum of 2^bits over the key / value groups (compact table sizes)
  double key_bound = 0.0;  //!< the largest norm of a decoded key (gtq_pages::key_norm_bound; the overflow guard)
};

// ------------------------------------------------------------------ bit planes

//! Bytes of one bit-plane row (one coordinate, one plane, P tokens).
BGTQ_HOST_DEVICE constexpr std::size_t plane_row_bytes(int P) { return static_cast<std::size_t>(P / 8); }

//! Bytes of a bit-plane code region: n coordinates of `bits` bits for P tokens
//! (bit_plane_layout::bytes).
BGTQ_HOST_DEVICE constexpr std::size_t bit_plane_bytes(int n, int bits, int P) {
  return static_cast<std::size_t>(n) * static_cast<std::size_t>(bits) * plane_row_bytes(P);
}

//! Byte offset, inside a group's code region, of the little-endian 32-bit word that
//! holds bit k of the codes of coordinate j for the 32 tokens [slot & ~31, +32):
//! bit (slot & 31) of that word belongs to `slot`.
BGTQ_HOST_DEVICE constexpr std::size_t plane_word_offset(int j, int k, int bits, int P, int slot) {
  return (static_cast<std::size_t>(j) * static_cast<std::size_t>(bits) + static_cast<std::size_t>(k)) * plane_row_bytes(P) +
         static_cast<std::size_t>(slot >> 5) * 4u;
}

//! Code of the token at bit position t (0..31) of the plane words w[0..bits).
BGTQ_HOST_DEVICE unsigned code_from_planes(const std::uint32_t* w, int bits, int t) {
  unsigned idx = 0;
#if defined(__CUDACC__)
#pragma unroll
#endif
  for (int k = 0; k < bits; ++k) idx |= ((w[k] >> t) & 1u) << k;
  return idx;
}

//! ((w >> t) & 1) << k, i.e. bit t of a plane word moved to bit k of a code, as one
//! rotate (SHF.R.W on the device) and one mask; the key-scoring loop ORs B of these.
BGTQ_HOST_DEVICE std::uint32_t plane_bit_to(std::uint32_t w, int t, int k) {
  const unsigned s = static_cast<unsigned>(t - k) & 31u;
#if defined(__CUDA_ARCH__)
  const std::uint32_t r = __funnelshift_r(w, w, s);
#else
  const std::uint32_t r = s == 0 ? w : ((w >> s) | (w << (32u - s)));
#endif
  return r & (1u << k);
}

//! Plane word k of 32 codes (bit t = bit k of codes[t]).
BGTQ_HOST_DEVICE std::uint32_t plane_word(const unsigned* codes, int k) {
  std::uint32_t w = 0;
#if defined(__CUDACC__)
#pragma unroll
#endif
  for (int t = 0; t < 32; ++t) w |= ((codes[t] >> k) & 1u) << t;
  return w;
}

//! Reads a little-endian 32-bit word (host model; the kernels load it directly).
BGTQ_HOST_DEVICE std::uint32_t load_word_le(const std::uint8_t* p) {
  return static_cast<std::uint32_t>(p[0]) | (static_cast<std::uint32_t>(p[1]) << 8) |
         (static_cast<std::uint32_t>(p[2]) << 16) | (static_cast<std::uint32_t>(p[3]) << 24);
}

// ------------------------------------------------------------------ encode steps (CPU order)

//! sum_j x(j)^2 over j < n in the canonical order of core/simd.hpp (sixteen stripes
//! s[j % 16] in ascending j, then the pairwise tree): bit-identical to
//! detail::sum_squares_scalar / sum_squares on any contiguous copy of the values, as
//! long as the translation unit does not contract multiply-adds (the kernels are
//! built with -fmad=false, the host with -ffp-contract=off).
//! @tparam Get callable int -> float
template <class Get>
BGTQ_HOST_DEVICE float canonical_sum_squares(const Get& x, int n) {
  float s[16] = {0.f, 0.f, 0.f, 0.f, 0.f, 0.f, 0.f, 0.f, 0.f, 0.f, 0.f, 0.f, 0.f, 0.f, 0.f, 0.f};
  for (int j0 = 0; j0 < n; j0 += 16) {
#if defined(__CUDACC__)
#pragma unroll
#endif
    for (int l = 0; l < 16; ++l) {
      if (j0 + l < n) {
        const float v = x(j0 + l);
        const float p = v * v;
        s[l] = s[l] + p;
      }
    }
  }
  return ::bgtq::detail::tree_reduce16(s);
}

//! Getter over a token-minor tile `// base[j * 32 + t]`: coordinate j of token t.
struct token_minor_get {
  const float* base;
  int t;
  BGTQ_HOST_DEVICE float operator()(int j) const { return base[j * 32 + t]; }
};

//! Scales a getter by a constant (used by tq_norm_parts' rescue).
template <class Get>
struct scaled_get {
  const Get& g;
  float s;
  BGTQ_HOST_DEVICE float operator()(int j) const { return g(j) * s; }
};

//! The norms tq_quantizer::quantize takes of a finite sub-vector x.
struct tq_norms {
  float r;         //!< ||x|| (+inf when it exceeds float's range)
  float dir_norm;  //!< the norm of the vector whose direction is quantized, x * scale
  float scale;     //!< 1, or the power of two tq_prescale gave when tq_prescaled(r)
};

//! ||x|| of a finite sub-vector exactly as tq_quantizer::quantize computes it: the
//! canonical sum of squares, and when that norm overflows or exceeds fp32_radius_max,
//! the same power-of-two rescue. The caller quantizes the direction of x * scale
//! (P (x * scale) / dir_norm), as the CPU does.
template <class Get>
BGTQ_HOST_DEVICE tq_norms tq_norm_parts(const Get& x, int n) {
  const float r = sqrtf(canonical_sum_squares(x, n));
  if (!::bgtq::detail::tq_prescaled(r)) return {r, r, 1.0f};
  float big = 0.0f;
  for (int j = 0; j < n; ++j) big = fmaxf(big, fabsf(x(j)));
  const float s = ::bgtq::detail::tq_prescale(big);
  const float dn = sqrtf(canonical_sum_squares(scaled_get<Get>{x, s}, n));
  return {dn / s, dn, s};
}

//! ||x|| alone (tq_norm_parts(x, n).r).
template <class Get>
BGTQ_HOST_DEVICE float tq_norm(const Get& x, int n) {
  return tq_norm_parts(x, n).r;
}

//! True when tq_quantizer stores this sub-vector as zero codes with radius 0.
BGTQ_HOST_DEVICE bool tq_radius_is_zero(float r, bool fp32) { return !(::bgtq::detail::round_radius(r, fp32) > 0.0f) || r < 1e-30f; }

//! A compiler barrier for memory on the device, nothing on the host: the loads written
//! above it are issued above it. nvcc's front end otherwise sinks each load of a batch to
//! the multiply-add that uses it, and the batch is again one memory latency per term.
BGTQ_HOST_DEVICE void loads_issued() {
#if defined(__CUDA_ARCH__)
  asm volatile("" ::: "memory");
#endif
}

//! Coordinate o of P·x as a fused multiply-add chain over i = 0..n-1 from 0, with
//! fwd = P^T row-major (fwd[i*n + o] = P[o][i]). This is the order of the CPU's
//! AVX2/AVX-512 dense product (rotation/kernels.hpp axpy_block), so Haar rotations
//! give bit-identical coordinates; other rotations (and the scalar CPU path) differ
//! in the last bits.
//! The matrix entries are read in batches of `rotation_batch` (64) before their
//! multiply-adds, every batch whole: past the group's end the loads repeat its last row
//! and the multiply-adds add (-0)·(+0), which leaves the sum as it was. So a GPU thread
//! waits one memory latency per 64 coordinates, whatever n is (a lone CTA per head otherwise waits one per coordinate:
//! measured on an H200 with one load per link of the chain, rotate_query_kernel took
//! 25-29 us for 32 heads; with batches of 16 and a serial tail, a 62-coordinate group
//! still took about 7 round trips, read off the SASS). The order of the multiply-adds,
//! and so every bit of the result, is unchanged. The rotation back (merge_kernel) calls
//! it with P row-major for coordinate o of P^T y: fmaf is symmetric in its factors.
inline constexpr int rotation_batch = 64;  // the unroll pragmas below spell it out

template <class Get>
BGTQ_HOST_DEVICE float rotated_coord(const float* fwd, int n, int o, const Get& x) {
  float acc = 0.0f;
  const float* col = fwd + o;  // fwd[i*n + o]: row i of column o
  for (int i = 0; i < n; i += rotation_batch) {
    // in registers only if both loops unroll (asked for on each compiler; on sm_90 the
    // 64 loads are issued before the first multiply-add, 128 registers in all)
    float m[rotation_batch];
    const float* row = col + static_cast<std::size_t>(i) * static_cast<std::size_t>(n);
    BGTQ_DETAIL_UNROLL(64)
    for (int u = 0; u < rotation_batch; ++u) {
      m[u] = *row;
      if (i + u + 1 < n) row += n;  // past the end the batch re-reads the last row
    }
    loads_issued();
    BGTQ_DETAIL_UNROLL(64)
    for (int u = 0; u < rotation_batch; ++u) {
      // past the end: (-0) * (+0) = -0, and acc + (-0) is acc bit for bit (also for
      // acc = -0); a predicated multiply-add instead made ptxas sink the loads again
      const bool in = i + u < n;
      acc = fmaf(in ? x(i + u) : -0.0f, in ? m[u] : 0.0f, acc);
    }
  }
  return acc;
}

//! Rotated coordinate of entry e (rotation_coord): x is the part's input in group order
//! (keys: the query gathered through the entries' dims; values: the merged accumulator),
//! so the group's inputs start at x + e.first(); 0 where no group holds the coordinate.
//! The rotation kernels and the host model (tests/cuda/host_model.hpp) both rotate
//! through it.
BGTQ_HOST_DEVICE float rotate_entry(const float* rot, const rotation_coord& e, const float* x) {
  const float* xg = x + e.first();
  return e.n() > 0 ? rotated_coord(rot + e.col, e.n(), 0, [xg](int j) { return xg[j]; }) : 0.0f;
}

//! Stored radius from the norm r (not zero) and, with norm correction, the centroid
//! norm cn = ||c(idx)|| (pass 0 without): exactly tq_quantizer's rounding.
BGTQ_HOST_DEVICE float tq_stored_radius(float r, float cn, bool norm_correction, bool fp32) {
  return ::bgtq::detail::round_radius(::bgtq::detail::tq_corrected_radius(r, cn, norm_correction), fp32);
}

//! True if x is finite (NaN and Inf have an all-ones exponent).
BGTQ_HOST_DEVICE bool finite_bits(float x) { return (::bgtq::detail::float_as_bits(x) & 0x7f800000u) != 0x7f800000u; }

//! Element i of a tensor of the given type as float (exact).
BGTQ_HOST_DEVICE float load_element(const void* p, std::size_t i, dtype t) {
  if (t == dtype::f32) return static_cast<const float*>(p)[i];
  const std::uint16_t h = static_cast<const std::uint16_t*>(p)[i];
  return t == dtype::f16 ? half_bits_to_float(h) : bf16_bits_to_float(h);
}

//! Stores x as element i of a tensor of the given type (load_element's inverse: f16 and
//! bf16 round to nearest even).
BGTQ_HOST_DEVICE void store_element(void* p, std::size_t i, dtype t, float x) {
  if (t == dtype::f32)
    static_cast<float*>(p)[i] = x;
  else
    static_cast<std::uint16_t*>(p)[i] = t == dtype::f16 ? float_to_half_bits(x) : float_to_bf16_bits(x);
}

// ------------------------------------------------------------------ decode decomposition

//! How a decode launch divides each sequence's quantized tokens.
struct split_plan {
  int splits = 1;           //!< CTAs per (sequence, KV head, head chunk) along the token axis
  int tiles_per_split = 1;  //!< decode_tile-token tiles each split scans (the last may scan fewer)
};

//! Chooses the split count: enough CTAs to give every SM `ctas_per_sm` of them
//! (latency hiding for a memory-bound loop), at least `min_tiles` tiles per split (so
//! per-CTA setup is amortised), never more splits than tiles, at most `max_splits`.
//! `requested` > 0 forces a count (still capped by the tiles).
inline split_plan plan_splits(int ctas_per_split, long long max_quantized, int sms, int requested = 0,
                              int ctas_per_sm = 4, int min_tiles = 2, int max_splits = 1024) {
  split_plan sp;
  const long long tiles = max_quantized > 0 ? (max_quantized + decode_tile - 1) / decode_tile : 0;
  if (tiles <= 0) return sp;
  long long s = 1;
  if (requested > 0) {
    s = requested;
  } else {
    const long long target = static_cast<long long>(sms > 0 ? sms : 1) * ctas_per_sm;
    const long long per = ctas_per_split > 0 ? ctas_per_split : 1;
    s = (target + per - 1) / per;
    const long long by_work = (tiles + min_tiles - 1) / min_tiles;
    if (s > by_work) s = by_work;
  }
  if (s > tiles) s = tiles;
  if (s > max_splits) s = max_splits;
  if (s < 1) s = 1;
  const long long tps = (tiles + s - 1) / s;
  sp.tiles_per_split = static_cast<int>(tps);
  sp.splits = static_cast<int>((tiles + tps - 1) / tps);  // no split left empty
  return sp;
}

//! The split count for a kernel whose CTAs all fit on the machine at once: as many
//! splits as keep `ctas_per_split * splits` within one wave of `sms * ctas_per_sm` CTAs
//! (rounded down: a partial second wave would leave most SMs idle while it runs, up to
//! twice the time), at least `min_tiles` tiles per split, at least one split.
inline split_plan plan_splits_one_wave(int ctas_per_split, long long max_quantized, int sms, int ctas_per_sm,
                                       int min_tiles = 2, int max_splits = 1024) {
  const long long wave = static_cast<long long>(sms > 0 ? sms : 1) * (ctas_per_sm > 0 ? ctas_per_sm : 1);
  const long long per = ctas_per_split > 0 ? ctas_per_split : 1;
  const long long tiles = max_quantized > 0 ? (max_quantized + decode_tile - 1) / decode_tile : 0;
  long long s = wave / per;
  const long long by_work = (tiles + min_tiles - 1) / min_tiles;
  if (s > by_work) s = by_work;
  if (s > max_splits) s = max_splits;
  if (s < 1) s = 1;
  return plan_splits(ctas_per_split, max_quantized, sms, static_cast<int>(s));  // the tile bookkeeping
}

//! Byte layout of the decode workspace (all float):
//! `// [qrot: B][Hq][D]  rotated queries (key-group coordinate order)`
//! `// [ml:   B][Hq][S][2] per-split softmax state (m, l)`
//! `// [acc:  B][Hq][S][D] per-split value accumulators in the rotated value coordinates`
struct decode_workspace_layout {
  std::size_t qrot = 0, ml = 0, acc = 0, bytes = 0;  //!< byte offsets and total
};

//! The workspace layout for a batch, head count, head_dim and split count.
inline decode_workspace_layout decode_workspace(int batch, int q_heads, int head_dim, int splits) {
  auto up = [](std::size_t x) { return (x + 255u) & ~static_cast<std::size_t>(255u); };
  const std::size_t bh = static_cast<std::size_t>(batch) * static_cast<std::size_t>(q_heads);
  decode_workspace_layout w;
  w.qrot = 0;
  w.ml = up(bh * static_cast<std::size_t>(head_dim) * 4u);
  w.acc = w.ml + up(bh * static_cast<std::size_t>(splits) * 8u);
  w.bytes = w.acc + up(bh * static_cast<std::size_t>(splits) * static_cast<std::size_t>(head_dim) * 4u);
  return w;
}

//! Query heads per decode CTA for a GQA group of G heads (a power of two <= 8; a
//! template argument of the kernel, so only 1, 2, 4 and 8 are instantiated).
BGTQ_HOST_DEVICE constexpr int heads_per_cta(int G) { return G <= 1 ? 1 : G <= 2 ? 2 : G <= 4 ? 4 : 8; }

//! Token parts of the value pass: with few value coordinates the CTA's threads split
//! the tile's four 32-token chunks between 2 or 4 parts (reduced at the end).
BGTQ_HOST_DEVICE constexpr int value_parts(int value_coords) {
  return value_coords <= 32 ? 4 : value_coords <= 64 ? 2 : 1;
}

//! Shared-memory layout of the split kernel, in floats (16-byte aligned pieces):
//! `// q  [key coords][GM]   rotated queries of the CTA's heads`
//! `// kc [key_cent]         compact key centroid tables;  vc [value_cent] value tables`
//! `// w  [GM][tile]         scores, then softmax weights exp(s - m)`
//! `// rv [VG][tile]         value radii of the tile's tokens (0 past the end)`
//! `// wr [max(VG,1)][tile][GM] weights x value radius (also the end-of-split reduction buffer)`
//! `// st [3][GM]            m, l and the rescale factor of each head`
struct split_smem {
  int q = 0, kc = 0, vc = 0, w = 0, rv = 0, wr = 0, st = 0, floats = 0;
};

//! x rounded up to a multiple of 4 (16 bytes of floats).
BGTQ_HOST_DEVICE constexpr int align4(int x) { return (x + 3) & ~3; }

//! The split kernel's shared-memory layout.
BGTQ_HOST_DEVICE constexpr split_smem split_smem_layout(int gm, int key_coords, int key_cent, int value_cent, int vgroups) {
  split_smem s;
  int o = 0;
  s.q = o;
  o = align4(o + key_coords * gm);
  s.kc = o;
  o = align4(o + key_cent);
  s.vc = o;
  o = align4(o + value_cent);
  s.w = o;
  o = align4(o + gm * decode_tile);
  s.rv = o;
  o = align4(o + vgroups * decode_tile);
  s.wr = o;
  o = align4(o + (vgroups > 0 ? vgroups : 1) * decode_tile * gm);
  s.st = o;
  o = align4(o + 3 * gm);
  s.floats = o;
  return s;
}

// ------------------------------------------------------------------ tensor-core decode

//! 2^k as a float for k in [-126, 127] (exact; built from the exponent bits).
BGTQ_HOST_DEVICE float pow2i(int k) {
  k = k < -126 ? -126 : (k > 127 ? 127 : k);
  return ::bgtq::detail::bits_as_float(static_cast<std::uint32_t>(k + 127) << 23);
}

//! The smallest k with 2^k > |x| for a finite non-zero normal x (its binary exponent
//! plus one); -126 for zero and subnormals, 0 for NaN and Inf.
BGTQ_HOST_DEVICE int exponent_above(float x) {
  const std::uint32_t e = (::bgtq::detail::float_as_bits(x) >> 23) & 0xFFu;
  if (e == 0xFFu) return 0;
  if (e == 0u) return -126;
  return static_cast<int>(e) - 126;
}

//! The multiplier of mma_unit_page for pages of P tokens: ceil(2^32 / (P / 64)).
BGTQ_HOST_DEVICE constexpr std::uint64_t mma_page_multiplier(int P) {
  const std::uint64_t upp = static_cast<std::uint64_t>(P / 64);
  return ((std::uint64_t{1} << 32) + upp - 1) / upp;
}

//! The page index (x / (P / 64)) of the 64-token unit x of a sequence, as a multiply and a
//! shift (mul = mma_page_multiplier(P)) instead of a division by a run-time P (~30
//! instructions per unit on sm_90). Exact for x < 2^26: with e = mul (P / 64) - 2^32 <
//! P / 64, x mul / 2^32 = x / (P / 64) + x e / (2^32 (P / 64)), and x e < 2^32 keeps the
//! excess below 1 / (P / 64). A sequence's units stay below 2^25 (int tokens).
BGTQ_HOST_DEVICE constexpr int mma_unit_page(int x, std::uint64_t mul) {
  return static_cast<int>((static_cast<std::uint64_t>(x) * mul) >> 32);
}

//! Byte offset, in a unit's stage image (a P = 64 page part), of a byte that sits at
//! `part_offset` in a page part of P tokens: code regions and radii scale with P.
//! A 32-bit division wherever the product fits (page parts below 64 MiB): on the device a
//! 64-bit division is a subroutine of ~70 instructions, and the P > 64 copies run it per unit.
BGTQ_HOST_DEVICE constexpr int mma_stage_offset(std::uint32_t part_offset, int P) {
  return part_offset < (1u << 26)
             ? static_cast<int>(part_offset * 64u / static_cast<std::uint32_t>(P))
             : static_cast<int>(static_cast<std::uint64_t>(part_offset) * 64u / static_cast<std::uint64_t>(P));
}

//! The stage image of one 64-token unit of a (layer, head): the tokens' codes and radii
//! of both parts, laid out as a P = 64 page part (P = 64: the page part itself).
//! `// [key part: code rows of 8 bytes][key radii [group][64]] | value part at value_base`
struct mma_stage {
  int value_base = 0;  //!< byte offset of the value part image
  int bytes = 0;       //!< image bytes (16-byte multiple)
  int key_rows = 0, value_rows = 0;  //!< code rows of each part (P > 64: copied 8 bytes per row)
};

//! The stage image of head hm (groups: the layer's group table).
BGTQ_HOST_DEVICE mma_stage mma_stage_of(const head_meta& hm, const group_meta* groups, int P) {
  mma_stage s;
  // the first group's radii start where the part's code rows end
  s.key_rows = hm.key_count > 0 ? mma_stage_offset(groups[hm.key_first].radii, P) / 8 : 0;
  s.value_rows = hm.value_count > 0 ? mma_stage_offset(groups[hm.value_first].radii, P) / 8 : 0;
  if (P == 64) {
    s.value_base = static_cast<int>(hm.value_offset);
    s.bytes = static_cast<int>(hm.page_bytes);
    return s;
  }
  const int kb = hm.key_count > 0 ? 8 * s.key_rows + hm.key_count * 128 : 0;
  const int vb = hm.value_count > 0 ? 8 * s.value_rows + hm.value_count * 128 : 0;
  s.value_base = (kb + 15) & ~15;
  s.bytes = s.value_base + ((vb + 15) & ~15);
  return s;
}

//! One group as the tensor-core kernel keeps it in shared memory (64 bytes, copied there
//! with 16-byte loads from build_mma_tables' rows, tables.hpp): stage offsets of its codes
//! and radii, its q offset (keys) and its centroids as byte tables (widths <= 4) or the
//! offset of its fp16 table (wider).
struct mma_group {
  int n = 0, bits = 0;
  int code = 0;   //!< stage offset of the code rows (row j*bits + k: 8 bytes, tokens 0..63)
  int radii = 0;  //!< stage offset of the 64 fp16 radii
  int qoff = 0;   //!< keys: offset of the group in the fp16 query rows (16-aligned)
  int half = 0;   //!< widths > 4: offset of the fp16 centroids in the head's half table
  int coord_off = 0;
  int unused = 0;  //!< (keeps the size a multiple of 16 bytes)
  std::uint32_t lo[4] = {0u, 0u, 0u, 0u}, hi[4] = {0u, 0u, 0u, 0u};  //!< lut16 of the fp16 centroids
};
static_assert(sizeof(mma_group) == 64, "mma_group: 16-byte copies");

//! x rounded up to a multiple of 16.
BGTQ_HOST_DEVICE constexpr int align16(int x) { return (x + 15) & ~15; }

//! 32-position slots of an fp16 query row (its padded key coordinates: at most
//! max_head_dim + 15 per group), one bit per slot in mma_head_tables::zmask.
inline constexpr int mma_qrow_slots = 16;
static_assert(max_head_dim + 15 * max_part_groups <= 32 * mma_qrow_slots, "mma_qrow_slots: query rows");

//! Shared-memory layout of the tensor-core split kernel, in bytes (16-byte aligned):
//! \verbatim
//! // qh [8 heads][qstride] fp16   scaled rotated queries, each key group 16-aligned, zero padded
//! // qf [8] float                 per-head score factor 2^e (the queries are scaled by 2^-e),
//! //    then [8] uint32            the lanes' key multipliers 2^(8 - g) (mma::key_multiplier)
//! // kg [key groups + 1] mma_group   key groups, then the value group
//! // ht [half_table] fp16         centroids of groups wider than 4 bits
//! // warp w at warp0 + w * warp_bytes: [wbuf: 8 x 36 words][two stage buffers of stage_bytes]
//! //   (after the scan the same bytes hold the warp's partial: m[8], l[8], acc[128][8] floats)
//! \endverbatim
struct mma_smem {
  int qstride = 0;  //!< halves per query row: padded key coordinates + 8 (conflict-free B loads)
  int qh = 0, qf = 0, kg = 0, ht = 0, warp0 = 0, warp_bytes = 0, stage0 = 0, bytes = 0;
};

//! The layout for a layer whose heads need at most key_padded padded key coordinates,
//! key_groups key groups, half_table wide-centroid halves and stage_bytes per stage.
BGTQ_HOST_DEVICE constexpr mma_smem mma_smem_layout(int key_padded, int key_groups, int half_table, int stage_bytes) {
  mma_smem s;
  s.qstride = key_padded + 8;
  int o = 0;
  s.qh = o;
  o = align16(o + mma::heads * s.qstride * 2);
  s.qf = o;
  o = align16(o + 2 * mma::heads * 4);  // factors 2^e, key multipliers
  s.kg = o;
  o = align16(o + (key_groups + 1) * static_cast<int>(sizeof(mma_group)));
  s.ht = o;
  o = align16(o + half_table * 2);
  s.warp0 = o;
  s.stage0 = mma::wbuf_words * 4;  // after the weight buffer
  const int scan = s.stage0 + 2 * stage_bytes;
  const int partial = (2 * mma::heads + 16 * mma::max_value_mtiles * mma::heads) * 4;  // m, l, acc
  s.warp_bytes = align16(scan > partial ? scan : partial);
  s.bytes = o + 4 * s.warp_bytes;
  return s;
}

}  // namespace bgtq::cuda
