// Tensor-core split kernel of decode attention (decode_path::tensor_cores, sm_80+).
// Same grid, plan and partials as decode_split_kernel (decode_attention.cu): one CTA per
// (split, KV head, chunk of 8 query heads, sequence), writing (m, l, acc) of its token
// range; the query rotation and the merge kernels are shared. docs/gpu.md has the design.
//
// A CTA is 4 independent warps. Each warp scans 64-token units (units w, w+4, ... of the
// split) with its own online-softmax state in registers:
//   stage   cp.async of the unit's codes and radii into a per-warp buffer (a P = 64 page
//           image), double-buffered: the next unit loads while this one is computed;
//   keys    per key group, scores += r * (codes x q): mma m16n8k16 with the tokens as M
//           (4 m-tiles), the group's coordinates as K (16 per k-tile), the 8 heads as N;
//           A fragments come straight from the bit planes (key_selector_pair: each
//           64-bit plane row shifted by multiplies, masked merges put 4 tokens x 2
//           coordinates of codes into the nibbles of each chunk's selector; byte permutes
//           look the fp16 centroids up), B is the fp16 query in shared memory;
//   softmax in log2 units, per head, exact running max (weights <= 1);
//   values  acc += codes^T x (w * r): mma with the value coordinates as M (up to 8
//           m-tiles), the unit's tokens as K (4 k-tiles), heads as N; A from the planes
//           (value_selector, 8 tokens x 1 coordinate per selector), B = fp16 weights x
//           radii written by the score lanes into a per-warp buffer (a transpose);
// and at the end the 4 warps' partials are merged through shared memory.
// Nothing decoded is written to global memory.
#include "decode_common.cuh"

#include <bgtq/cuda/mma_fragments.hpp>

#include <cmath>
#include <cstring>
#include <limits>

namespace bgtq::cuda {
namespace {

using mma::lut16;

// ---------------------------------------------------------------- device primitives

//! d += A B on the tensor cores (fragments: mma_fragments.hpp).
__device__ __forceinline__ void mma16816(float (&d)[4], const std::uint32_t (&a)[4], std::uint32_t b0, std::uint32_t b1) {
#if defined(BGTQ_CUDA_EMULATION)
  bgtq_emu::mma_m16n8k16(d, a, b0, b1);
#elif defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  asm volatile(
      "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, "
      "{%0, %1, %2, %3};\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
#else
  __trap();  // the launcher never selects this path below sm_80
#endif
}

//! 2^x (ex2.approx: relative error ~2^-22; 2^-inf = 0).
__device__ __forceinline__ float fast_exp2(float x) {
#if defined(BGTQ_CUDA_EMULATION)
  return std::exp2(x);
#else
  float y;
  asm("ex2.approx.ftz.f32 %0, %1;" : "=f"(y) : "f"(x));
  return y;
#endif
}

//! Asynchronous global -> shared copies (cp.async, completed by cp_wait).
__device__ __forceinline__ void cp_async16(void* smem, const void* gmem) {
#if defined(BGTQ_CUDA_EMULATION)
  bgtq_emu::cp_async(smem, gmem, 16);
#elif defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  const unsigned s = static_cast<unsigned>(__cvta_generic_to_shared(smem));
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16;\n" ::"r"(s), "l"(gmem) : "memory");
#endif
}
__device__ __forceinline__ void cp_async8(void* smem, const void* gmem) {
#if defined(BGTQ_CUDA_EMULATION)
  bgtq_emu::cp_async(smem, gmem, 8);
#elif defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  const unsigned s = static_cast<unsigned>(__cvta_generic_to_shared(smem));
  asm volatile("cp.async.ca.shared.global [%0], [%1], 8;\n" ::"r"(s), "l"(gmem) : "memory");
#endif
}
__device__ __forceinline__ void cp_commit() {
#if defined(BGTQ_CUDA_EMULATION)
  bgtq_emu::cp_commit();
#elif defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  asm volatile("cp.async.commit_group;\n" ::: "memory");
#endif
}
//! Waits until at most N of this thread's committed copy groups are pending.
template <int N>
__device__ __forceinline__ void cp_wait() {
#if defined(BGTQ_CUDA_EMULATION)
  bgtq_emu::cp_wait(N);
#elif defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  asm volatile("cp.async.wait_group %0;\n" ::"n"(N) : "memory");
#endif
}

__device__ __forceinline__ float warp_max_quad(float v) {  // over the 8 lanes of equal tq
  v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, 4));
  v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, 8));
  return fmaxf(v, __shfl_xor_sync(0xffffffffu, v, 16));
}
__device__ __forceinline__ float warp_sum_quad(float v) {
  v += __shfl_xor_sync(0xffffffffu, v, 4);
  v += __shfl_xor_sync(0xffffffffu, v, 8);
  return v + __shfl_xor_sync(0xffffffffu, v, 16);
}

__device__ __forceinline__ lut16 load_lut(const mma_group& g) {
  lut16 t;
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    t.lo[i] = g.lo[i];
    t.hi[i] = g.hi[i];
  }
  return t;
}

// ---------------------------------------------------------------- keys

//! The B plane rows of coordinates ja and jb (row j*B + k of a part's stage: 8 bytes =
//! plane k of coordinate j for the unit's 64 tokens, chunk 0 in the low word).
template <int B>
__device__ __forceinline__ void load_planes(const unsigned long long* rows, int ja, int jb, unsigned long long (&wa)[B],
                                            unsigned long long (&wb)[B]) {
#pragma unroll
  for (int k = 0; k < B; ++k) {
    wa[k] = rows[ja * B + k];
    wb[k] = rows[jb * B + k];
  }
}

//! The 32-bit plane words of chunk c (tokens 32c .. 32c+31) of both coordinates.
template <int B>
__device__ __forceinline__ void chunk_words(const unsigned long long (&wa)[B], const unsigned long long (&wb)[B], int c,
                                            std::uint32_t (&xa)[B], std::uint32_t (&xb)[B]) {
#pragma unroll
  for (int k = 0; k < B; ++k) {
    xa[k] = static_cast<std::uint32_t>(wa[k] >> (32 * c));
    xb[k] = static_cast<std::uint32_t>(wb[k] >> (32 * c));
  }
}

//! The plane rows of a k-tile half: B rows of each of its two coordinates.
template <int B>
struct plane_pair {
  unsigned long long a[B], b[B];
};

// acc[mt] += A(codes of m-tile mt) x B(q of the group) over the group's k-tiles. A
// k-tile's A registers come in two halves p (k-columns 2tq, 2tq+1 and 2tq+8, 2tq+9):
// build(w, p, a) fills a[mt][2p], a[mt][2p+1] from the plane rows w of the half's two
// coordinates (rows: the group's code rows in the stage). The k-tiles of 16 coordinates
// come first, in a loop without a branch inside and without clamping: a lane's plane rows
// and query words sit at constant offsets from two pointers that advance by a k-tile, so
// the loads take immediate offsets (2026-12-05, SASS of the 3-bit loop: 120 instructions
// per k-tile with the per-row clamps and index arithmetic, bench/gpu/sass_trace.py). A
// last k-tile of 1..15 coordinates clamps rows past n to n - 1 (a real row: finite
// centroids times the zero query padding) and builds its upper half only when it has one.
template <class Build>
__device__ __forceinline__ void key_tiles(const unsigned long long* rows, const mma_group& kg, const std::uint32_t* qrow,
                                          int tq, const Build& build, float (&acc)[4][4]) {
  constexpr int B = Build::bits;
  const int n = kg.n;
  const auto multiply = [&](const std::uint32_t* q, const std::uint32_t (&a)[4][4]) {  // q: the k-tile's query words
    const std::uint32_t b0 = q[0];
    const std::uint32_t b1 = q[4];
#pragma unroll
    for (int mt = 0; mt < 4; ++mt) mma16816(acc[mt], a[mt], b0, b1);
  };
  const unsigned long long* r = rows + 2 * tq * B;    // row of coordinate k0 + 2tq, plane 0
  const std::uint32_t* q = qrow + (kg.qoff >> 1) + tq;  // query word of coordinates k0 + 2tq, k0 + 2tq + 1
  int k0 = 0;
  for (; k0 + 16 <= n; k0 += 16, r += 16 * B, q += 8) {
    plane_pair<B> w[2];
    std::uint32_t a[4][4];
#pragma unroll
    for (int p = 0; p < 2; ++p) load_planes<B>(r + 8 * p * B, 0, 1, w[p].a, w[p].b);
#pragma unroll
    for (int p = 0; p < 2; ++p) build(w[p], p, a);
    multiply(q, a);
  }
  if (k0 < n) {  // warp-uniform: the group's last 1..15 coordinates
    const auto load_half = [&](int j0, plane_pair<B>& w) {  // coordinates j0 + 2tq, j0 + 2tq + 1, clamped
      const int j = j0 + 2 * tq;
      load_planes<B>(rows, min(j, n - 1), min(j + 1, n - 1), w.a, w.b);
    };
    plane_pair<B> w;
    std::uint32_t a[4][4];
    load_half(k0, w);
    build(w, 0, a);
    if (k0 + 8 < n) {
      load_half(k0 + 8, w);
      build(w, 1, a);
    } else {
#pragma unroll
      for (int mt = 0; mt < 4; ++mt) a[mt][2] = a[mt][3] = 0u;
    }
    multiply(q, a);
  }
}

// A halves for codes of B <= 4 bits: the two coordinates' plane rows -> the selector pair
// of both chunks (mma::key_selector_pair: the rows shifted by multiplies, so that the
// selectors' token order is rotated by a byte across the chunks) -> byte-permute lookups,
// each pair of tokens routed to its m-tile row.
template <int B>
struct key_lut_build {
  static constexpr int bits = B;
  lut16 t;
  std::uint32_t km;  // the lane's key multiplier base (mma::key_multiplier), read from shared memory
  __device__ __forceinline__ void operator()(const plane_pair<B>& w, int p, std::uint32_t (&a)[4][4]) const {
    std::uint32_t sa, sb, lo, hi;
    mma::key_selector_pair<B>(w.a, w.b, km, sa, sb);
    // sa bytes 0, 1: tokens g + 56 (m-tile 3, row g + 8) and g (m-tile 0, row g)
    mma::lookup_bytes<B>(sa, t, lo, hi);
    mma::key_pairs(lo, hi, a[3][2 * p + 1], a[0][2 * p]);
    // sa bytes 2, 3: tokens g + 8 (m-tile 0, row g + 8) and g + 16 (m-tile 1, row g)
    mma::lookup_bytes<B>(mma::upper16(sa), t, lo, hi);
    mma::key_pairs(lo, hi, a[0][2 * p + 1], a[1][2 * p]);
    // sb bytes 0, 1: tokens g + 24 (m-tile 1, row g + 8) and g + 32 (m-tile 2, row g)
    mma::lookup_bytes<B>(sb, t, lo, hi);
    mma::key_pairs(lo, hi, a[1][2 * p + 1], a[2][2 * p]);
    // sb bytes 2, 3: tokens g + 40 (m-tile 2, row g + 8) and g + 48 (m-tile 3, row g)
    mma::lookup_bytes<B>(mma::upper16(sb), t, lo, hi);
    mma::key_pairs(lo, hi, a[2][2 * p + 1], a[3][2 * p]);
  }
};

template <int B>
__device__ __forceinline__ void key_group_lut(const unsigned long long* rows, const mma_group& kg, const std::uint32_t* qrow,
                                              std::uint32_t km, int tq, float (&acc)[4][4]) {
  key_tiles(rows, kg, qrow, tq, key_lut_build<B>{load_lut(kg), km}, acc);
}

// Codes wider than 4 bits (rare: at most a few blocks of a Block-GTQ plan): per chunk,
// the selector pair puts the whole codes of four tokens at both coordinates into bytes
// (mma_fragments.hpp key_selectors_wide, wide_code_bytes), each looked up in the group's
// fp16 table ht in shared memory. Inlined like the narrow paths (2026-12-04: a call cost
// ~150 SASS instructions per k-tile and 3-6 registers more; bench/gpu/sass_count.py).
template <int B>
struct key_wide_build {
  static constexpr int bits = B;
  const std::uint16_t* ht;  // the group's fp16 centroids
  int g;
  __device__ __forceinline__ void operator()(const plane_pair<B>& w, int p, std::uint32_t (&a)[4][4]) const {
#pragma unroll
    for (int c = 0; c < 2; ++c) {
      std::uint32_t xa[B], xb[B];
      chunk_words<B>(w.a, w.b, c, xa, xb);
      std::uint32_t lo, hi, ca, cb;
      mma::key_selectors_wide<B>(xa, xb, g, lo, hi);
      mma::wide_code_bytes(lo, hi, ca, cb);  // byte i: token g + 8i at ja (ca), at jb (cb)
#pragma unroll
      for (int i = 0; i < 4; ++i)  // token g + 8i of chunk c: m-tile 2c + i/2, row g + 8 (i % 2)
        a[2 * c + (i >> 1)][2 * p + (i & 1)] =
            static_cast<std::uint32_t>(ht[mma::byte_of(ca, i)]) | (static_cast<std::uint32_t>(ht[mma::byte_of(cb, i)]) << 16);
    }
  }
};

template <int B>
__device__ __forceinline__ void key_group_wide(const unsigned long long* rows, const mma_group& kg, const std::uint32_t* qrow,
                                               const std::uint16_t* ht, int g, int tq, float (&acc)[4][4]) {
  key_tiles(rows, kg, qrow, tq, key_wide_build<B>{ht + kg.half, g}, acc);
}

// ---------------------------------------------------------------- values

//! The plane rows of value m-tile mt's two coordinate rows of lane g, 16mt + g and
//! 16mt + g + 8 (rows past n are clamped: their results are not written out).
template <int B>
__device__ __forceinline__ void load_value_rows(const unsigned long long* rows, int n, int mt, int g, unsigned long long (&w0)[B],
                                                unsigned long long (&w1)[B]) {
  load_planes<B>(rows, min(16 * mt + g, n - 1), min(16 * mt + g + 8, n - 1), w0, w1);
}

//! The lane's B registers (weights x radii) of a unit: [chunk][k-tile][register].
struct bfrag {
  std::uint32_t r[2][2][2];
};

// acc[mt] += A(codes of value coordinates 16mt + (0..15)) x B(weights x radii) for the
// unit's 4 k-tiles; bw.r[c][kap]: the lane's B registers of chunk c, k-tile kap. NMT > 0:
// exactly NMT m-tiles of 16 real rows each (n == 16 NMT), with no branch between them, so
// that ptxas can start an m-tile's loads during the previous one's work (ptxas did not
// start them ahead of a branch: behind the run-time count's exit tests, each m-tile's 2B
// loads waited for the previous m-tile), and without clamping (the rows at immediate
// offsets from the lane's first row); NMT = 0: nmt m-tiles, the count known at run time,
// rows past n clamped.
template <int B, int NMT>
__device__ __forceinline__ void values_lut(const unsigned long long* rows, const mma_group& vg, int nmt,
                                           const bfrag& bw, int g, int tq, float (&acc)[mma::max_value_mtiles][4]) {
  static_assert(NMT >= 0 && NMT <= mma::max_value_mtiles, "values_lut: NMT m-tiles");
  const lut16 t = load_lut(vg);
  const int n = vg.n;
#pragma unroll
  for (int mt = 0; mt < (NMT > 0 ? NMT : mma::max_value_mtiles); ++mt) {
    if (NMT == 0 && mt >= nmt) break;
    unsigned long long w0[B], w1[B];
    if (NMT > 0)
      load_planes<B>(rows + g * B, 16 * mt, 16 * mt + 8, w0, w1);
    else
      load_value_rows<B>(rows, n, mt, g, w0, w1);
#pragma unroll
    for (int c = 0; c < 2; ++c) {
      std::uint32_t x0[B], x1[B];
      chunk_words<B>(w0, w1, c, x0, x1);
      const std::uint32_t s0 = mma::value_selector<B>(x0, tq);
      const std::uint32_t s1 = mma::value_selector<B>(x1, tq);
#pragma unroll
      for (int kap = 0; kap < 2; ++kap) {
        std::uint32_t lo, hi, a[4];
        mma::lookup_bytes<B>(kap ? mma::upper16(s0) : s0, t, lo, hi);
        mma::value_pairs(lo, hi, a[0], a[2]);
        mma::lookup_bytes<B>(kap ? mma::upper16(s1) : s1, t, lo, hi);
        mma::value_pairs(lo, hi, a[1], a[3]);
        mma16816(acc[mt], a, bw.r[c][kap][0], bw.r[c][kap][1]);
      }
    }
  }
}

//! values_lut with the m-tile count as a constant where the value coordinates make it one
//! (128 or 64: 8 or 4 whole m-tiles), else counted at run time.
template <int B>
__device__ __forceinline__ void values_lut_any(const unsigned long long* rows, const mma_group& vg, int nmt,
                                               const bfrag& bw, int g, int tq, float (&acc)[mma::max_value_mtiles][4]) {
  if (vg.n == 128)
    values_lut<B, 8>(rows, vg, nmt, bw, g, tq, acc);
  else if (vg.n == 64)
    values_lut<B, 4>(rows, vg, nmt, bw, g, tq, acc);
  else
    values_lut<B, 0>(rows, vg, nmt, bw, g, tq, acc);
}

//! One value m-tile's accumulators, by value.
struct frag4 {
  float d[4];
};

// One value m-tile of codes wider than 4 bits: per chunk, the selector pairs of its two
// coordinate rows give the eight tokens' whole codes in bytes (value_selectors_wide,
// wide_code_bytes: byte m of the even word = token tq + 8m, of the odd word = tq + 8m + 4),
// looked up in the group's fp16 table ht, in value_pairs' order. Not inlined: the m-tile
// loop would copy it 8 times per width, for value widths that uniform plans never use.
template <int B>
__device__ __noinline__ frag4 values_wide_mtile(const unsigned long long* rows, int n, int mt, const bfrag bw,
                                               const std::uint16_t* ht, int g, int tq, frag4 acc) {  // ht: the group's table
  unsigned long long w0[B], w1[B];
  load_value_rows<B>(rows, n, mt, g, w0, w1);
#pragma unroll
  for (int c = 0; c < 2; ++c) {
    std::uint32_t x0[B], x1[B];
    chunk_words<B>(w0, w1, c, x0, x1);
    std::uint32_t lo, hi, e0, o0, e1, o1;
    mma::value_selectors_wide<B>(x0, tq, lo, hi);
    mma::wide_code_bytes(lo, hi, e0, o0);
    mma::value_selectors_wide<B>(x1, tq, lo, hi);
    mma::wide_code_bytes(lo, hi, e1, o1);
#pragma unroll
    for (int kap = 0; kap < 2; ++kap) {
      // k-tile kap holds nibbles 4kap .. 4kap+3; value_pairs: reg 0 = {4kap, 4kap+2},
      // reg 2 = {4kap+1, 4kap+3} of row j0, regs 1 and 3 the same of row j1
      const auto pair = [ht, kap](std::uint32_t x) {
        return static_cast<std::uint32_t>(ht[mma::byte_of(x, 2 * kap)]) |
               (static_cast<std::uint32_t>(ht[mma::byte_of(x, 2 * kap + 1)]) << 16);
      };
      const std::uint32_t a[4] = {pair(e0), pair(e1), pair(o0), pair(o1)};
      mma16816(acc.d, a, bw.r[c][kap][0], bw.r[c][kap][1]);
    }
  }
  return acc;
}

template <int B>
__device__ __forceinline__ void values_wide(const unsigned long long* rows, const mma_group& vg, int nmt, const bfrag& bw,
                                            const std::uint16_t* ht, int g, int tq, float (&acc)[mma::max_value_mtiles][4]) {
#pragma unroll
  for (int mt = 0; mt < mma::max_value_mtiles; ++mt) {
    if (mt >= nmt) break;
    frag4 f{{acc[mt][0], acc[mt][1], acc[mt][2], acc[mt][3]}};
    f = values_wide_mtile<B>(rows, vg.n, mt, bw, ht + vg.half, g, tq, f);
#pragma unroll
    for (int e = 0; e < 4; ++e) acc[mt][e] = f.d[e];
  }
}

__device__ __forceinline__ void values_dispatch(const unsigned long long* rows, const mma_group& vg, int nmt, const bfrag& bw,
                                                const std::uint16_t* ht, int g, int tq, float (&acc)[mma::max_value_mtiles][4]) {
  switch (vg.bits) {
    case 1: values_lut_any<1>(rows, vg, nmt, bw, g, tq, acc); break;
    case 2: values_lut_any<2>(rows, vg, nmt, bw, g, tq, acc); break;
    case 3: values_lut_any<3>(rows, vg, nmt, bw, g, tq, acc); break;
    case 4: values_lut_any<4>(rows, vg, nmt, bw, g, tq, acc); break;
    case 5: values_wide<5>(rows, vg, nmt, bw, ht, g, tq, acc); break;
    case 6: values_wide<6>(rows, vg, nmt, bw, ht, g, tq, acc); break;
    case 7: values_wide<7>(rows, vg, nmt, bw, ht, g, tq, acc); break;
    default: values_wide<8>(rows, vg, nmt, bw, ht, g, tq, acc); break;
  }
}

__device__ __forceinline__ void key_dispatch(const unsigned long long* rows, const mma_group& kg, const std::uint32_t* qrow,
                                             const std::uint16_t* ht, int g, std::uint32_t km, int tq, float (&acc)[4][4]) {
  switch (kg.bits) {
    case 1: key_group_lut<1>(rows, kg, qrow, km, tq, acc); break;
    case 2: key_group_lut<2>(rows, kg, qrow, km, tq, acc); break;
    case 3: key_group_lut<3>(rows, kg, qrow, km, tq, acc); break;
    case 4: key_group_lut<4>(rows, kg, qrow, km, tq, acc); break;
    case 5: key_group_wide<5>(rows, kg, qrow, ht, g, tq, acc); break;
    case 6: key_group_wide<6>(rows, kg, qrow, ht, g, tq, acc); break;
    case 7: key_group_wide<7>(rows, kg, qrow, ht, g, tq, acc); break;
    default: key_group_wide<8>(rows, kg, qrow, ht, g, tq, acc); break;
  }
}

// ---------------------------------------------------------------- a unit's steps
// (separate functions so that bench/gpu/sass_probe.cu can count each one's instructions)

//! sc += r * (codes x q) for one key group over the unit whose stage image is buf.
__device__ __forceinline__ void add_group_scores(const unsigned char* buf, const mma_group& kg, const std::uint32_t* qrow,
                                                 const std::uint16_t* ht, int gid, std::uint32_t km, int tq, float (&sc)[4][4]) {
  float acc[4][4];
#pragma unroll
  for (int mt = 0; mt < 4; ++mt)
#pragma unroll
    for (int e = 0; e < 4; ++e) acc[mt][e] = 0.0f;
  key_dispatch(reinterpret_cast<const unsigned long long*>(buf + kg.code), kg, qrow, ht, gid, km, tq, acc);
  const std::uint16_t* rad = reinterpret_cast<const std::uint16_t*>(buf + kg.radii);
#pragma unroll
  for (int mt = 0; mt < 4; ++mt)
#pragma unroll
    for (int rr = 0; rr < 2; ++rr) {
      const float r = half_bits_to_float(rad[mma::key_token(mt, gid + 8 * rr)]);
      sc[mt][2 * rr] = fmaf(acc[mt][2 * rr], r, sc[mt][2 * rr]);
      sc[mt][2 * rr + 1] = fmaf(acc[mt][2 * rr + 1], r, sc[mt][2 * rr + 1]);
    }
}

//! Online softmax of a unit's scores sc (log2 units, before the heads' factors f0, f1)
//! for the lane's heads 2tq, 2tq+1: the running maxima m2 (exact, so every weight w is
//! <= 1), the lane's share of the sums l, and fac, the factor the older weights take.
//! Tokens from nvalid on get weight 0. The factors (powers of two) are applied inside the
//! exponent, w = 2^(sc f - m2) in one fmaf: the same rounding as scaling sc first.
__device__ __forceinline__ void unit_softmax(float (&sc)[4][4], int nvalid, float f0, float f1, int gid, float (&m2)[2],
                                             float (&l)[2], float (&w)[4][4], float (&fac)[2]) {
  if (nvalid < mma::unit_tokens) {  // only a split's last unit can be partial (warp-uniform)
#pragma unroll
    for (int mt = 0; mt < 4; ++mt)
#pragma unroll
      for (int e = 0; e < 4; ++e)
        if (mma::key_token(mt, gid + 8 * (e >> 1)) >= nvalid) sc[mt][e] = -INFINITY;
  }
  float umax[2] = {-INFINITY, -INFINITY};
#pragma unroll
  for (int mt = 0; mt < 4; ++mt)
#pragma unroll
    for (int e = 0; e < 4; ++e) umax[e & 1] = fmaxf(umax[e & 1], sc[mt][e]);
  const float f[2] = {f0, f1};
  float off[2];
#pragma unroll
  for (int x = 0; x < 2; ++x) {
    const float mx = warp_max_quad(umax[x]) * f[x];  // f = 2^k > 0: exact, and the maximum commutes with it
    const float mn = fmaxf(m2[x], mx);
    // m2 = -inf: 0 (nothing accumulated yet); an unchanged maximum is exactly 1 without
    // relying on ex2.approx(0) == 1, so the rescale below is skipped for sure
    fac[x] = mn == -INFINITY || mn == m2[x] ? 1.0f : fast_exp2(m2[x] - mn);
    m2[x] = mn;
    off[x] = mn == -INFINITY ? -INFINITY : -mn;  // no score above -inf yet: weights 2^-inf = 0 (NaN stays NaN)
  }
  float lsum[2] = {0.0f, 0.0f};
#pragma unroll
  for (int mt = 0; mt < 4; ++mt)
#pragma unroll
    for (int e = 0; e < 4; ++e) {
      w[mt][e] = fast_exp2(fmaf(sc[mt][e], f[e & 1], off[e & 1]));
      lsum[e & 1] += w[mt][e];
    }
#pragma unroll
  for (int x = 0; x < 2; ++x) l[x] = fmaf(l[x], fac[x], lsum[x]);
}

//! The value radii vrad of a unit: the accumulator's range 2^E grows to cover them (acc_v
//! rescaled by that and by fac), the score lanes write fp16 w x r x 2^-E into the warp's
//! buffer wbuf (a transpose), and each lane reads back its B fragments.
__device__ __forceinline__ bfrag unit_value_weights(const std::uint16_t* vrad, int nvalid, const float (&w)[4][4],
                                                    const float (&fac)[2], int& E,
                                                    float (&acc_v)[mma::max_value_mtiles][4], std::uint32_t* wbuf, int gid,
                                                    int tq) {
  float rv[4][2];
#pragma unroll
  for (int mt = 0; mt < 4; ++mt)
#pragma unroll
    for (int rr = 0; rr < 2; ++rr) rv[mt][rr] = half_bits_to_float(vrad[mma::key_token(mt, gid + 8 * rr)]);
  if (nvalid < mma::unit_tokens) {  // only a split's last unit is partial (warp-uniform): its tail gets radius 0
#pragma unroll
    for (int mt = 0; mt < 4; ++mt)
#pragma unroll
      for (int rr = 0; rr < 2; ++rr)
        if (mma::key_token(mt, gid + 8 * rr) >= nvalid) rv[mt][rr] = 0.0f;
  }
  float rmax = 0.0f;
#pragma unroll
  for (int mt = 0; mt < 4; ++mt)
#pragma unroll
    for (int rr = 0; rr < 2; ++rr) rmax = fmaxf(rmax, rv[mt][rr]);
  const int Eu = exponent_above(warp_max_quad(rmax));
  float rescale[2] = {fac[0], fac[1]};
  if (Eu > E) {  // warp-uniform
    const float f = pow2i(E - Eu);
    rescale[0] *= f;
    rescale[1] *= f;
    E = Eu;
  }
  if (rescale[0] != 1.0f || rescale[1] != 1.0f) {
#pragma unroll
    for (int mt = 0; mt < mma::max_value_mtiles; ++mt) {
      acc_v[mt][0] *= rescale[0];
      acc_v[mt][2] *= rescale[0];
      acc_v[mt][1] *= rescale[1];
      acc_v[mt][3] *= rescale[1];
    }
  }
  const float rs = pow2i(-E);
#pragma unroll
  for (int mt = 0; mt < 4; ++mt)
#pragma unroll
    for (int x = 0; x < 2; ++x) {
      const float wr0 = w[mt][x] * (rv[mt][0] * rs), wr1 = w[mt][2 + x] * (rv[mt][1] * rs);
      wbuf[mma::wbuf_word(2 * tq + x, mt >> 1, mt & 1, gid >> 2, gid & 3)] = mma::half2_bits(wr0, wr1);
    }
  __syncwarp();
  bfrag bw;
#pragma unroll
  for (int c = 0; c < 2; ++c)
#pragma unroll
    for (int kap = 0; kap < 2; ++kap) {
      bw.r[c][kap][0] = wbuf[mma::wbuf_word(gid, c, kap, 0, tq)];
      bw.r[c][kap][1] = wbuf[mma::wbuf_word(gid, c, kap, 1, tq)];
    }
  return bw;
}

// ---------------------------------------------------------------- the kernel

struct mma_kparams {
  mma_smem L;
  int stage_bytes;  // one of the two stage buffers of a warp
  // the per-head rows of build_mma_tables (tables.hpp), and how much of them a CTA copies
  const mma_group* groups;    // [head][gstride]
  const std::uint16_t* half;  // [head][hstride]
  const std::int16_t* cpos;   // [head][cstride]
  const std::uint32_t* zmask; // [head][32]
  const mma_stage* stages;    // [head]
  int gstride, hstride, cstride;
  int ngroups;  // group entries of this layer's shared table (its largest key group count + 1)
  std::uint64_t page_mul;  // mma_page_multiplier(P): unit x of a sequence lies in its page mma_unit_page(x, page_mul)
  int nhalf;    // fp16 halves of this layer's wide centroid table (mma_layer_info::half_table, a multiple of 32)
};

static_assert(decode_tile % mma::unit_tokens == 0, "splits start on a unit");

//! 16 bytes, copied as one (the group rows and half tables are 16-byte aligned).
struct alignas(16) row16 {
  std::uint32_t w[4];
};


//! Copies one part (keys or values) of a unit at P > 64: its `rows` code rows (8 bytes
//! each: the unit's 64 tokens) and 64 fp16 radii per group, into the part's stage image.
__device__ __forceinline__ void stage_part(const decode_kparams& p, const std::uint8_t* part, int rows, int first, int count,
                                           int tok0, unsigned char* dst, int lane) {
  const int P = p.P;
  const int row = P / 8;            // bytes of a code row in the page
  const int off = (tok0 % P) / 8;   // this unit's 8 bytes in each row
  for (int r = lane; r < rows; r += 32) cp_async8(dst + 8 * r, part + static_cast<std::size_t>(r) * row + off);
  for (int i = lane; i < count * 16; i += 32) {
    const group_meta& g = p.groups[first + i / 16];
    cp_async8(dst + mma_stage_offset(g.radii, P) + 8 * (i % 16), part + g.radii + 2 * (tok0 % P) + 8 * (i % 16));
  }
}

//! Issues the copies of the unit of 64 tokens from token tok0 of the sequence, which lies
//! in pool page `page`, into buf (the stage image `st` of head hm).
__device__ __forceinline__ void stage_unit(const decode_kparams& p, const head_meta& hm, const mma_stage& st, int page, int tok0,
                                           unsigned char* buf, int lane) {
  const std::uint8_t* part = p.pool + hm.offset + static_cast<std::size_t>(page) * hm.page_bytes;
  if (p.P == 64) {  // the page part is the image: 16-byte copies, both addresses advanced by pointer
    const int n16 = static_cast<int>(hm.page_bytes) >> 4;
    const std::uint8_t* src = part + 16 * lane;
    unsigned char* dst = buf + 16 * lane;
    for (int i = lane; i < n16; i += 32, src += 512, dst += 512) cp_async16(dst, src);
    return;
  }
  stage_part(p, part, st.key_rows, hm.key_first, hm.key_count, tok0, buf, lane);
  stage_part(p, part + hm.value_offset, st.value_rows, hm.value_first, hm.value_count, tok0, buf + st.value_base, lane);
}

__global__ void __launch_bounds__(128, 3) decode_split_mma_kernel(const decode_kparams p, const mma_kparams mp) {
  unsigned char* smem = dynamic_smem<unsigned char>();
  const mma_smem& L = mp.L;
  std::uint16_t* s_qh = reinterpret_cast<std::uint16_t*>(smem + L.qh);  // [8][qstride]
  float* s_qf = reinterpret_cast<float*>(smem + L.qf);                  // [8] factors 2^e
  std::uint32_t* s_km = reinterpret_cast<std::uint32_t*>(s_qf + mma::heads);  // [8] key multipliers, by lane row
  mma_group* s_g = reinterpret_cast<mma_group*>(smem + L.kg);           // key groups, then the value group
  std::uint16_t* s_ht = reinterpret_cast<std::uint16_t*>(smem + L.ht);

  const int split = blockIdx.x;
  const int h = blockIdx.y / p.hchunks;
  const int g0 = (blockIdx.y % p.hchunks) * mma::heads;
  const int b = blockIdx.z;
  const int tid = threadIdx.x;
  const int lane = tid & 31;
  const int warp = tid >> 5;
  const int gid = lane >> 2, tq = lane & 3;
  const int gcount = min(mma::heads, p.G - g0);
  const int hq0 = h * p.G + g0;
  const int head = p.layer * p.Hkv + h;

  // ---- setup, in two rounds of global loads (docs/gpu.md, "The split kernel's setup").
  // Round 1, loads independent of each other and issued before anything waits for one:
  // the pool pages of the warp's first two units (clamped into the sequence's page-table
  // row, so a unit past the split's end reads a real entry and does not use it; no row at
  // all: no quantized tokens, no units), the head's head_meta and stage image, the
  // sequence length, and the rows build_mma_tables made for the head once on the host:
  // group descriptors and wide-centroid tables (a thread copies at most one 16-byte row
  // of each: 17 groups at most, 68 rows; tables over 2 KB take a loop after), and the
  // query positions of the lane's coordinates with the padding mask of its positions
  const head_meta hm = p.heads[head];
  const mma_stage st = mp.stages[head];
  const int tok_begin = split * p.tiles_per_split * decode_tile;
  const bool have_pages = p.page_table != nullptr && p.mpps > 0;
  // (without a page table the reads go to the sequence length: a branch here would keep
  // them behind the other loads, and what the copies wait for would come last)
  const int* ptab = have_pages ? p.page_table + static_cast<std::size_t>(b) * p.mpps : p.quantized + b;
  const int last_page = have_pages ? p.mpps - 1 : 0;
  const int unit0 = tok_begin / mma::unit_tokens;  // (tok_begin: a multiple of decode_tile)
  const auto page_of = [&](int v) { return ptab + min(mma_unit_page(unit0 + v, mp.page_mul), last_page); };
  const int page0 = load_now(page_of(warp));
  int next_page = *page_of(warp + mma::warps);  // the next unit's, read one unit ahead (below)
  static_assert((max_part_groups + 1) * 4 <= mma::warps * 32, "one descriptor row per thread");
  const row16* gsrc = reinterpret_cast<const row16*>(mp.groups + static_cast<std::size_t>(head) * mp.gstride);
  const row16* hsrc = reinterpret_cast<const row16*>(mp.half + static_cast<std::size_t>(head) * mp.hstride);
  const bool g_row = tid < mp.ngroups * 4, h_row = tid < mp.nhalf / 8;
  row16 grow{}, hrow{};
  if (g_row) grow = gsrc[tid];
  if (h_row) hrow = hsrc[tid];
  constexpr int cslots = max_head_dim / 32;
  int cpos[cslots];  // position in the query row of coordinate lane + 32 i (-1: not a key coordinate)
  const std::int16_t* cps = mp.cpos + static_cast<std::size_t>(head) * mp.cstride;
#pragma unroll
  for (int i = 0; i < cslots; ++i) cpos[i] = lane + 32 * i < p.D ? cps[lane + 32 * i] : -1;
  const std::uint32_t zmask = mp.zmask[static_cast<std::size_t>(head) * 32 + lane];
  const int nq = p.quantized[b];
  loads_issued();  // (else nvcc sinks each load to its first use, one memory latency apiece)

  const int kcount = hm.key_count;
  const int tok_end = min(nq, (split + 1) * p.tiles_per_split * decode_tile);
  const int units = tok_end > tok_begin ? (tok_end - tok_begin + mma::unit_tokens - 1) / mma::unit_tokens : 0;
  unsigned char* wregion = smem + L.warp0 + warp * L.warp_bytes;
  std::uint32_t* wbuf = reinterpret_cast<std::uint32_t*>(wregion);
  unsigned char* stage0 = wregion + L.stage0;
  const int vbase = st.value_base;
  const std::uint32_t* qrow = reinterpret_cast<const std::uint32_t*>(s_qh + gid * L.qstride);  // head gid: the B column

  float m2[2] = {-INFINITY, -INFINITY};  // running max (log2 units) of heads 2tq, 2tq+1
  float l[2] = {0.0f, 0.0f};             // this lane's part of the softmax sums
  int E = -126;                          // acc is in units of 2^E (largest value radius seen)
  float acc_v[mma::max_value_mtiles][4];
#pragma unroll
  for (int mt = 0; mt < mma::max_value_mtiles; ++mt)
#pragma unroll
    for (int e = 0; e < 4; ++e) acc_v[mt][e] = 0.0f;

  // the first unit's copies start, then the rows go to shared memory
  if (warp < units) stage_unit(p, hm, st, page0, tok_begin + warp * mma::unit_tokens, stage0, lane);
  cp_commit();
  if (g_row) reinterpret_cast<row16*>(s_g)[tid] = grow;
  if (h_row) reinterpret_cast<row16*>(s_ht)[tid] = hrow;
  for (int i = tid + mma::warps * 32; i < mp.nhalf / 8; i += mma::warps * 32) reinterpret_cast<row16*>(s_ht)[i] = hsrc[i];
  grid_dependency_wait();  // everything above overlaps rotate_query_kernel; qrot is read below

  // ---- round 2: the query rows of the warp's heads x = 2w, 2w+1, contiguous loads of
  // coordinates lane + 32 i, then written to their positions: in log2 units, q * scale *
  // log2(e), scaled per head by 2^-e so that max |q| < 1, zeros at the padding (rows
  // x >= gcount: all zeros)
  const float qmul = p.scale * 1.4426950408889634f;
  float qv[2][cslots];
#pragma unroll
  for (int x2 = 0; x2 < 2; ++x2) {
    const int x = 2 * warp + x2;
    const float* qr = p.qrot + (static_cast<std::size_t>(b) * p.Hq + hq0 + min(x, gcount - 1)) * p.D;
#pragma unroll
    for (int i = 0; i < cslots; ++i) qv[x2][i] = x < gcount && cpos[i] >= 0 ? qr[lane + 32 * i] : 0.0f;
  }
  loads_issued();
#pragma unroll
  for (int x2 = 0; x2 < 2; ++x2) {
    const int x = 2 * warp + x2;
    float amax = 0.0f;
#pragma unroll
    for (int i = 0; i < cslots; ++i) {
      qv[x2][i] *= qmul;
      amax = fmaxf(amax, fabsf(qv[x2][i]));
    }
    amax = warp_max(amax);
    const float f = amax > 0.0f ? pow2i(exponent_above(amax)) : 1.0f;  // NaN / Inf queries: 1 (their heads give NaN)
    if (lane == 0) s_qf[x] = f;
    const float inv = 1.0f / f;  // exact (f = 2^k, -126 <= k <= 127): v * (1 / f) == v / f for every v
    std::uint16_t* row = s_qh + x * L.qstride;
#pragma unroll
    for (int i = 0; i < cslots; ++i)
      if (cpos[i] >= 0) row[cpos[i]] = float_to_half_bits(qv[x2][i] * inv);
#pragma unroll
    for (int i = 0; i < mma_qrow_slots; ++i)
      if (zmask >> i & 1u) row[lane + 32 * i] = 0;
  }
  if (tid < 8) s_km[tid] = mma::key_multiplier(tid);
  __syncthreads();  // s_g, s_ht, s_qh, s_qf, s_km

  const float f0 = s_qf[2 * tq], f1 = s_qf[2 * tq + 1];  // score factors of the lane's two heads
  const std::uint32_t km = s_km[gid];  // read, not computed: the compiler must not see a power of two
  const mma_group vg = s_g[kcount];
  const int nmt = (vg.n + 15) >> 4;
  int it = 0;
  for (int u = warp; u < units; u += mma::warps, ++it) {
    unsigned char* buf = stage0 + (it & 1) * mp.stage_bytes;
    if (u + mma::warps < units)  // the next unit loads while this one is computed
      stage_unit(p, hm, st, next_page, tok_begin + (u + mma::warps) * mma::unit_tokens,
                 stage0 + ((it + 1) & 1) * mp.stage_bytes, lane);
    // the page of the unit staged next, read one unit ahead of its copies: a page-table
    // read right before the copies kept each unit's copies, and its work, waiting for it
    if (u + 2 * mma::warps < units) next_page = *page_of(u + 2 * mma::warps);
    cp_commit();   // (an empty group when there is none: the count below stays right)
    cp_wait<1>();  // all but the newest group: this unit's copies are done (this lane's)
    __syncwarp();  // ... and every lane's
    const int tok0 = tok_begin + u * mma::unit_tokens;
    const int nvalid = tok_end - tok0;  // tokens of the unit inside the split (>= 1)

    // ---- scores, softmax, weights x radii (the B operand of the values)
    float sc[4][4];
#pragma unroll
    for (int mt = 0; mt < 4; ++mt)
#pragma unroll
      for (int e = 0; e < 4; ++e) sc[mt][e] = 0.0f;
    for (int gi = 0; gi < kcount; ++gi) add_group_scores(buf, s_g[gi], qrow, s_ht, gid, km, tq, sc);
    float w[4][4], fac[2];
    unit_softmax(sc, nvalid, f0, f1, gid, m2, l, w, fac);
    const bfrag bw = unit_value_weights(reinterpret_cast<const std::uint16_t*>(buf + vbase + vg.radii), nvalid, w, fac, E,
                                        acc_v, wbuf, gid, tq);
    // ---- values
    values_dispatch(reinterpret_cast<const unsigned long long*>(buf + vbase + vg.code), vg, nmt, bw, s_ht, gid, tq, acc_v);
    __syncwarp();  // the stage buffer and wbuf are rewritten next
  }
  cp_wait<0>();
  __syncwarp();
  allow_dependent_launch();  // the merge kernel may start its CTAs (it waits for this grid)

  // ---- merge the four warps' partials
#pragma unroll
  for (int x = 0; x < 2; ++x) l[x] = warp_sum_quad(l[x]);
  float* part = reinterpret_cast<float*>(wregion);  // [m: 8][l: 8][acc: 128 coords][8 heads]
  if (gid == 0) {
#pragma unroll
    for (int x = 0; x < 2; ++x) {
      part[2 * tq + x] = m2[x];
      part[8 + 2 * tq + x] = l[x];
    }
  }
  const float up = pow2i(E);
#pragma unroll
  for (int mt = 0; mt < mma::max_value_mtiles; ++mt) {
    if (mt >= nmt) break;
#pragma unroll
    for (int e = 0; e < 4; ++e) part[16 + (16 * mt + gid + 8 * (e >> 1)) * 8 + 2 * tq + (e & 1)] = acc_v[mt][e] * up;
  }
  __syncthreads();
  const float* parts[mma::warps];
#pragma unroll
  for (int w2 = 0; w2 < mma::warps; ++w2) parts[w2] = reinterpret_cast<const float*>(smem + L.warp0 + w2 * L.warp_bytes);
  const std::size_t row0 = (static_cast<std::size_t>(b) * p.Hq + hq0) * p.splits + split;  // (b, hq0, split)
  for (int i = tid; i < gcount * vg.n; i += 128) {
    const int x = i / vg.n, j = i - x * vg.n;
    float M = -INFINITY;
#pragma unroll
    for (int w2 = 0; w2 < mma::warps; ++w2) M = fmaxf(M, parts[w2][x]);
    float a = 0.0f;
    if (M != -INFINITY)
#pragma unroll
      for (int w2 = 0; w2 < mma::warps; ++w2)
        if (parts[w2][x] != -INFINITY) a = fmaf(parts[w2][16 + j * 8 + x], fast_exp2(parts[w2][x] - M), a);
    p.acc[(row0 + static_cast<std::size_t>(x) * p.splits) * p.D + vg.coord_off + j] = a;
  }
  if (tid < gcount) {
    float M = -INFINITY;
#pragma unroll
    for (int w2 = 0; w2 < mma::warps; ++w2) M = fmaxf(M, parts[w2][tid]);
    float ls = 0.0f;
    if (M != -INFINITY)
#pragma unroll
      for (int w2 = 0; w2 < mma::warps; ++w2)
        if (parts[w2][tid] != -INFINITY) ls = fmaf(parts[w2][8 + tid], fast_exp2(parts[w2][tid] - M), ls);
    const std::size_t r = row0 + static_cast<std::size_t>(tid) * p.splits;
    p.ml[2 * r] = M == -INFINITY ? -INFINITY : M * 0.69314718055994531f;  // natural-log units for the merge kernel
    p.ml[2 * r + 1] = ls;
  }
}

}  // namespace

errc mma_prepare(const device_cache::impl& dev, int layer, int hchunks, int batch, long long max_quantized, int requested,
                 const split_plan& standard, split_plan& out) noexcept {
  const mma_layer_info& info = dev.mma[static_cast<std::size_t>(layer)];
  const std::size_t smem = static_cast<std::size_t>(info.smem.bytes);
  if (errc e = raise_max_dynamic_smem<decode_split_mma_kernel>(dev.device, smem); e != errc::ok) return e;
  if (requested > 0) {
    out = standard;
    return errc::ok;
  }
  std::atomic<int>& cached = dev.mma_per_sm[static_cast<std::size_t>(layer)];
  int per_sm = cached.load(std::memory_order_relaxed);
  if (per_sm == 0) {
    BGTQ_CUDA_TRY(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, decode_split_mma_kernel, mma::warps * 32, smem));
    if (per_sm < 1) return detail::arg_fail(errc::unsupported, "tensor-core decode: no CTA fits on an SM (occupancy 0)");
    cached.store(per_sm, std::memory_order_relaxed);
  }
  const split_plan sp = plan_splits_one_wave(batch * dev.desc.kv_heads * hchunks, max_quantized, dev.sms, per_sm);
  out = sp.splits <= standard.splits ? sp : standard;
  return errc::ok;
}

errc launch_split_mma(const decode_kparams& kp, const split_plan& sp, const device_cache::impl& dev, cudaStream_t st) {
  const mma_layer_info& info = dev.mma[static_cast<std::size_t>(kp.layer)];
  const int device = dev.device;
  mma_kparams mp;
  mp.L = info.smem;
  mp.stage_bytes = info.stage_bytes;
  mp.groups = dev.mma_groups;
  mp.half = dev.mma_half;
  mp.cpos = dev.mma_cpos;
  mp.zmask = dev.mma_zmask;
  mp.stages = dev.mma_stages;
  mp.gstride = dev.mma_tables.gstride;
  mp.hstride = dev.mma_tables.hstride;
  mp.cstride = dev.mma_tables.cstride;
  mp.ngroups = info.key_groups + 1;
  mp.page_mul = mma_page_multiplier(kp.P);
  mp.nhalf = info.half_table;
  const std::size_t smem = static_cast<std::size_t>(info.smem.bytes);
  const dim3 grid(static_cast<unsigned>(sp.splits), static_cast<unsigned>(kp.Hkv * kp.hchunks), static_cast<unsigned>(kp.batch));
  const dim3 block(mma::warps * 32);
  BGTQ_CUDA_TRY(BGTQ_LAUNCH_OVERLAP(device, decode_split_mma_kernel, grid, block, smem, st, kp, mp));
  return errc::ok;
}

}  // namespace bgtq::cuda
