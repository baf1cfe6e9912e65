// Fused paged decode attention over bit-plane codes (flash-decoding), all KV heads of a
// layer per launch. Three kernels on one stream (docs/gpu.md has the full design):
//
//  1. rotate_query_kernel  grid (Hq, B): q_rot = P_g q|g for every key group, once per
//     (sequence, query head) -> workspace qrot [B][Hq][D].
//  2. decode_split_kernel<GM>  grid (splits, Hkv * head_chunks, B), 128 threads: one CTA
//     scans tiles of 128 quantized tokens of one (sequence, KV head) for GM query heads.
//     Per tile: warp w scores chunk w (lane = token; each bit-plane word is one
//     warp-uniform 32-bit load shared by 32 tokens; code -> centroid from a shared
//     table -> FMA with the rotated query, GM heads at once), online softmax
//     (softmax.hpp update_max), then thread = value coordinate accumulates
//     w * r * c(idx) in the value group's rotated domain. Partial (m, l, acc) -> workspace.
//  3. merge_kernel  grid (Hq, B): log-sum-exp merge of the splits (softmax.hpp merge),
//     one rotation back per value group (x = P^T y), the fp16 window in the same
//     softmax, output = acc / l.
// Nothing decoded (no key, no value, no centroid vector) is ever written to memory.
#include "decode_common.cuh"

#include <climits>
#include <cstdint>
#include <bgtq/attention/softmax.hpp>

#include <cmath>
#include <limits>
#include <type_traits>

namespace bgtq::cuda {
namespace {

// ---------------------------------------------------------------- 1. query rotation

// The rotation_coord entries of one head part and the query elements of this thread's
// coordinates c = tid + 128 k, in straight-line code: load() issues every load before
// any store (in a loop ptxas made the first load wait for an earlier one, and a store
// between loads waits for them), store() writes them to shared memory after whatever
// the caller waits for in between. Both rotation kernels start this way.
struct head_coords {
  static constexpr int per_thread = max_head_dim / decode_threads;
  rotation_coord e[per_thread];
  float q[per_thread];
  __device__ __forceinline__ void load(const rotation_coord* rc, const decode_kparams& p, std::size_t qbase, int tid) {
#pragma unroll
    for (int k = 0; k < per_thread; ++k)
      if (tid + k * decode_threads < p.D) {
        e[k] = rc[tid + k * decode_threads];
        q[k] = load_element(p.q, qbase + tid + k * decode_threads, p.q_type);
      }
  }
  __device__ __forceinline__ void store(rotation_coord* s_rc, float* s_q, int D, int tid) const {
#pragma unroll
    for (int k = 0; k < per_thread; ++k)
      if (tid + k * decode_threads < D) {
        s_rc[tid + k * decode_threads] = e[k];
        s_q[tid + k * decode_threads] = q[k];
      }
  }
};

// A query with a NaN or Inf element is not rotated: its qrot row becomes all NaN (the
// merge kernel then writes NaN outputs for it) and it is counted in p.nonfinite. So is a
// finite query whose scores could overflow float (the CPU's check_decode guard: ||q|| above
// max_query_norm of its KV head's key bound and, with a window, the fp16 window's).
// Every qrot element is written on every launch (coordinates past the key groups get 0),
// so the merge kernel's NaN test never reads stale workspace.
__global__ void __launch_bounds__(decode_threads) rotate_query_kernel(const decode_kparams p) {
  allow_dependent_launch();  // the split kernel may start its CTAs (it waits before reading qrot)
  float* s_x = dynamic_smem<float>();  // [D] the query, float
  float* s_g = s_x + p.D;              // [D] the query gathered in key-coordinate order
  __shared__ double s_ss[decode_threads / 32];   // per-warp sums of squares
  __shared__ rotation_coord s_rc[max_head_dim];  // the head's key coordinates (tables.hpp)
  const int hq = blockIdx.x;
  const int b = blockIdx.y;
  const std::size_t head = static_cast<std::size_t>(p.layer) * p.Hkv + hq / p.G;
  const std::size_t base = (static_cast<std::size_t>(b) * p.Hq + hq) * p.D;
  // Each coordinate's group entry is loaded with its query element and the head's key
  // bound, all before the first wait, so the rotation's first batch of matrix loads is
  // the kernel's second round trip to memory (with head_meta -> group rows -> dims it
  // was the fourth; before the groups were rotated side by side, about 20 for a
  // Block-GTQ head of four key groups, read off the SASS).
  const double key_bound = p.heads[head].key_bound;
  const int tid = threadIdx.x;
  head_coords hc;
  hc.load(p.rot_coords + head * 2 * p.D, p, base, tid);  // the key part
  loads_issued();
  hc.store(s_rc, s_x, p.D, tid);
  double ss = 0.0;
  int bad = 0;
#pragma unroll
  for (int k = 0; k < head_coords::per_thread; ++k)
    if (tid + k * decode_threads < p.D) {
      bad |= !(fabsf(hc.q[k]) <= 3.402823466e38f);  // NaN fails every comparison
      ss += static_cast<double>(hc.q[k]) * static_cast<double>(hc.q[k]);
    }
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) ss += __shfl_xor_sync(0xffffffffu, ss, o);
  if ((threadIdx.x & 31) == 0) s_ss[threadIdx.x >> 5] = ss;
  bad = __syncthreads_or(bad);
  double qn2 = 0.0;
  for (int w = 0; w < decode_threads / 32; ++w) qn2 += s_ss[w];
  const double kb = attended_key_norm_bound(key_bound, p.wcap > 0, p.D);
  const bool too_large = sqrt(qn2) > max_query_norm(kb, static_cast<double>(p.scale));  // NaN: false (caught above)
  float* dst = p.qrot + base;
  if (bad != 0 || too_large) {  // CTA-uniform
    for (int d = threadIdx.x; d < p.D; d += blockDim.x) dst[d] = std::numeric_limits<float>::quiet_NaN();
    if (threadIdx.x == 0 && p.nonfinite != nullptr) atomicAdd(p.nonfinite, 1ull);
    return;
  }
  // Thread c takes the key coordinates c, c + 128, ... of whatever group holds them, so
  // the groups are rotated side by side, not one after another.
  for (int c = threadIdx.x; c < p.D; c += blockDim.x)
    if (s_rc[c].n() > 0) s_g[c] = s_x[s_rc[c].dim()];
  __syncthreads();
  for (int c = threadIdx.x; c < p.D; c += blockDim.x) dst[c] = rotate_entry(p.rot, s_rc[c], s_g);
}

// ---------------------------------------------------------------- 2. split scan

// acc[g] += sum_j c(idx_j) * q[j][g] over the group's n coordinates for the token of
// this lane. `words` points at the chunk's word of row 0 (coordinate 0, plane 0); row
// r = j*B + k is `row_bytes` further per row. The load is warp-uniform (broadcast).
template <int B, int GM>
__device__ __forceinline__ void score_group(const std::uint8_t* words, std::size_t row_bytes, int n, const float* cent,
                                            const float* q, int lane, float (&acc)[GM]) {
#pragma unroll 2
  for (int j = 0; j < n; ++j) {
    const std::uint8_t* row = words + static_cast<std::size_t>(j) * B * row_bytes;
    unsigned idx = 0;
#pragma unroll
    for (int k = 0; k < B; ++k) {
      const std::uint32_t w = __ldg(reinterpret_cast<const unsigned*>(row + k * row_bytes));
      idx |= plane_bit_to(w, lane, k);
    }
    const float c = cent[idx];
    const float* qj = q + j * GM;
#pragma unroll
    for (int g = 0; g < GM; ++g) acc[g] = fmaf(c, qj[g], acc[g]);
  }
}

// acc[g] += sum_t c(idx_t) * wr[t][g] over the 32 tokens of a chunk for one value
// coordinate: `row` points at its plane-0 word, planes follow every row_bytes.
template <int B, int GM>
__device__ __forceinline__ void accumulate_chunk(const std::uint8_t* row, std::size_t row_bytes, const float* cent,
                                                 const float* wr, float (&acc)[GM]) {
  std::uint32_t w[B];
#pragma unroll
  for (int k = 0; k < B; ++k) w[k] = __ldg(reinterpret_cast<const unsigned*>(row + k * row_bytes));
#pragma unroll
  for (int t = 0; t < 32; ++t) {
    const unsigned idx = code_from_planes(w, B, t);
    const float c = cent[idx];
    const float* wt = wr + t * GM;
#pragma unroll
    for (int g = 0; g < GM; ++g) acc[g] = fmaf(c, wt[g], acc[g]);
  }
}

template <int GM>
__device__ __forceinline__ void score_dispatch(int bits, const std::uint8_t* words, std::size_t rb, int n, const float* cent,
                                               const float* q, int lane, float (&acc)[GM]) {
  switch (bits) {
    case 1: score_group<1, GM>(words, rb, n, cent, q, lane, acc); break;
    case 2: score_group<2, GM>(words, rb, n, cent, q, lane, acc); break;
    case 3: score_group<3, GM>(words, rb, n, cent, q, lane, acc); break;
    case 4: score_group<4, GM>(words, rb, n, cent, q, lane, acc); break;
    case 5: score_group<5, GM>(words, rb, n, cent, q, lane, acc); break;
    case 6: score_group<6, GM>(words, rb, n, cent, q, lane, acc); break;
    case 7: score_group<7, GM>(words, rb, n, cent, q, lane, acc); break;
    default: score_group<8, GM>(words, rb, n, cent, q, lane, acc); break;
  }
}

template <int GM>
__device__ __forceinline__ void accumulate_dispatch(int bits, const std::uint8_t* row, std::size_t rb, const float* cent,
                                                    const float* wr, float (&acc)[GM]) {
  switch (bits) {
    case 1: accumulate_chunk<1, GM>(row, rb, cent, wr, acc); break;
    case 2: accumulate_chunk<2, GM>(row, rb, cent, wr, acc); break;
    case 3: accumulate_chunk<3, GM>(row, rb, cent, wr, acc); break;
    case 4: accumulate_chunk<4, GM>(row, rb, cent, wr, acc); break;
    case 5: accumulate_chunk<5, GM>(row, rb, cent, wr, acc); break;
    case 6: accumulate_chunk<6, GM>(row, rb, cent, wr, acc); break;
    case 7: accumulate_chunk<7, GM>(row, rb, cent, wr, acc); break;
    default: accumulate_chunk<8, GM>(row, rb, cent, wr, acc); break;
  }
}

template <int GM>
__global__ void __launch_bounds__(decode_threads) decode_split_kernel(const decode_kparams p) {
  grid_dependency_wait();  // rotate_query_kernel's qrot
  float* smem = dynamic_smem<float>();
  const split_smem L = split_smem_layout(GM, p.key_coords, p.key_cent, p.value_cent, p.value_groups);
  float* s_q = smem + L.q;    // [key coord][GM]
  float* s_kc = smem + L.kc;  // key centroid tables
  float* s_vc = smem + L.vc;  // value centroid tables
  float* s_w = smem + L.w;    // [GM][tile]
  float* s_rv = smem + L.rv;  // [VG][tile]
  float* s_wr = smem + L.wr;  // [VG][tile][GM]
  float* s_m = smem + L.st;   // [GM] m, then l, then the rescale factor
  float* s_l = s_m + GM;
  float* s_f = s_l + GM;

  const int split = blockIdx.x;
  const int h = blockIdx.y / p.hchunks;
  const int g0 = (blockIdx.y % p.hchunks) * GM;
  const int b = blockIdx.z;
  const int tid = threadIdx.x;
  const int lane = tid & 31;
  const int warp = tid >> 5;
  const head_meta hm = p.heads[p.layer * p.Hkv + h];
  const int gcount = min(GM, p.G - g0);
  const int hq0 = h * p.G + g0;
  const std::size_t row_bytes = plane_row_bytes(p.P);

  // rotated queries and centroid tables into shared memory
  for (int i = tid; i < hm.key_coords * GM; i += decode_threads) {
    const int c = i / GM;
    const int g = i - c * GM;
    s_q[i] = g < gcount ? p.qrot[(static_cast<std::size_t>(b) * p.Hq + hq0 + g) * p.D + c] : 0.0f;
  }
  for (int gi = 0; gi < hm.key_count; ++gi) {
    const group_meta g = p.groups[hm.key_first + gi];
    for (int v = tid; v < (1 << g.bits); v += decode_threads) s_kc[g.cent_local + v] = p.cent[g.cent + v];
  }
  for (int gi = 0; gi < hm.value_count; ++gi) {
    const group_meta g = p.groups[hm.value_first + gi];
    for (int v = tid; v < (1 << g.bits); v += decode_threads) s_vc[g.cent_local + v] = p.cent[g.cent + v];
  }
  if (tid < GM) {
    s_m[tid] = -__builtin_inff();
    s_l[tid] = 0.0f;
    s_f[tid] = 1.0f;
  }

  // this thread's value coordinates: part `part` of the token chunks, coordinates
  // cl and cl + tpp (at most two: head_dim <= 256)
  const int nvc = hm.value_coords;
  const int parts = value_parts(nvc);
  const int tpp = decode_threads / parts;
  const int part = tid / tpp;
  const int cl = tid - part * tpp;
  int vg[2] = {-1, -1}, vj[2] = {0, 0};
#pragma unroll
  for (int ci = 0; ci < 2; ++ci) {
    const int c = cl + ci * tpp;
    if (c < nvc)
      for (int gi = 0; gi < hm.value_count; ++gi) {
        const group_meta g = p.groups[hm.value_first + gi];
        if (c >= g.coord_off && c < g.coord_off + g.n) {
          vg[ci] = gi;
          vj[ci] = c - g.coord_off;
        }
      }
  }
  float acc[2][GM];
#pragma unroll
  for (int ci = 0; ci < 2; ++ci)
#pragma unroll
    for (int g = 0; g < GM; ++g) acc[ci][g] = 0.0f;

  const int nq = p.quantized[b];
  const int tiles = (nq + decode_tile - 1) / decode_tile;
  const int t_begin = split * p.tiles_per_split;
  const int t_end = min(tiles, t_begin + p.tiles_per_split);
  const int* ptab = p.page_table + static_cast<std::size_t>(b) * p.mpps;
  __syncthreads();

  for (int tile = t_begin; tile < t_end; ++tile) {
    // ---- A. scores: warp w -> chunk w, lane -> token
    {
      const int tok0 = tile * decode_tile + warp * 32;
      const int tok = tok0 + lane;
      const bool valid = tok < nq;
      float sc[GM];
#pragma unroll
      for (int g = 0; g < GM; ++g) sc[g] = -__builtin_inff();
      if (tok0 < nq) {  // warp-uniform
        const std::uint8_t* part_ptr = p.pool + hm.offset + static_cast<std::size_t>(ptab[tok0 / p.P]) * hm.page_bytes;
        const int slot0 = tok0 % p.P;
        const int slot = slot0 + lane;
        float s[GM];
#pragma unroll
        for (int g = 0; g < GM; ++g) s[g] = 0.0f;
        for (int gi = 0; gi < hm.key_count; ++gi) {
          const group_meta g = p.groups[hm.key_first + gi];
          float a[GM];
#pragma unroll
          for (int x = 0; x < GM; ++x) a[x] = 0.0f;
          score_dispatch<GM>(g.bits, part_ptr + g.region + plane_word_offset(0, 0, g.bits, p.P, slot0), row_bytes, g.n,
                             s_kc + g.cent_local, s_q + g.coord_off * GM, lane, a);
          const float r =
              valid ? bgtq::detail::load_radius(part_ptr + g.radii + static_cast<std::size_t>(slot) * (g.fp32_radius ? 4u : 2u),
                                                g.fp32_radius != 0)
                    : 0.0f;
#pragma unroll
          for (int x = 0; x < GM; ++x) s[x] = fmaf(a[x], r, s[x]);
        }
        if (valid) {
#pragma unroll
          for (int g = 0; g < GM; ++g) sc[g] = s[g] * p.scale;
        }
        for (int gi = 0; gi < hm.value_count; ++gi) {
          const group_meta g = p.groups[hm.value_first + gi];
          s_rv[gi * decode_tile + warp * 32 + lane] =
              valid ? bgtq::detail::load_radius(
                          part_ptr + hm.value_offset + g.radii + static_cast<std::size_t>(slot) * (g.fp32_radius ? 4u : 2u),
                          g.fp32_radius != 0)
                    : 0.0f;
        }
      } else {
        for (int gi = 0; gi < hm.value_count; ++gi) s_rv[gi * decode_tile + warp * 32 + lane] = 0.0f;
      }
#pragma unroll
      for (int g = 0; g < GM; ++g) s_w[g * decode_tile + warp * 32 + lane] = sc[g];
    }
    __syncthreads();
    // ---- B. online softmax: warp w -> heads w, w + 4
    for (int g = warp; g < GM; g += decode_threads / 32) {
      float v[decode_tile / 32];
      float mx = -__builtin_inff();
#pragma unroll
      for (int i = 0; i < decode_tile / 32; ++i) {
        v[i] = s_w[g * decode_tile + lane + 32 * i];
        mx = fmaxf(mx, v[i]);
      }
      mx = warp_max(mx);
      softmax_state st{s_m[g], s_l[g]};
      const float f = update_max(st, mx);
      float sum = 0.0f;
#pragma unroll
      for (int i = 0; i < decode_tile / 32; ++i) {
        const float e = v[i] == -__builtin_inff() ? 0.0f : expf(v[i] - st.m);
        s_w[g * decode_tile + lane + 32 * i] = e;
        sum += e;
      }
      sum = warp_sum(sum);
      __syncwarp();
      if (lane == 0) {
        s_m[g] = st.m;
        s_l[g] = st.l + sum;
        s_f[g] = f;
      }
    }
    __syncthreads();
    // ---- C. weights x value radii
    for (int i = tid; i < hm.value_count * decode_tile * GM; i += decode_threads) {
      const int gv = i / (decode_tile * GM);
      const int r = i - gv * decode_tile * GM;
      const int t = r / GM;
      const int g = r - t * GM;
      s_wr[i] = s_w[g * decode_tile + t] * s_rv[gv * decode_tile + t];
    }
    __syncthreads();
    // ---- D. value accumulation: thread -> coordinate(s), its part's chunks
#pragma unroll
    for (int g = 0; g < GM; ++g) {
      const float f = s_f[g];
      if (f != 1.0f) {
        acc[0][g] *= f;
        acc[1][g] *= f;
      }
    }
    for (int ch = part; ch < decode_tile / 32; ch += parts) {
      const int c0 = tile * decode_tile + ch * 32;
      if (c0 >= nq) break;
      const std::uint8_t* vpart =
          p.pool + hm.offset + static_cast<std::size_t>(ptab[c0 / p.P]) * hm.page_bytes + hm.value_offset;
      const int slot0 = c0 % p.P;
#pragma unroll
      for (int ci = 0; ci < 2; ++ci) {
        if (vg[ci] < 0) continue;
        const group_meta g = p.groups[hm.value_first + vg[ci]];
        accumulate_dispatch<GM>(g.bits, vpart + g.region + plane_word_offset(vj[ci], 0, g.bits, p.P, slot0), row_bytes,
                                s_vc + g.cent_local, s_wr + (vg[ci] * decode_tile + ch * 32) * GM, acc[ci]);
      }
    }
    __syncthreads();
  }

  allow_dependent_launch();  // the merge kernel may start its CTAs (it waits for this grid)
  // ---- epilogue: reduce the token parts, write (m, l) and the accumulators
  if (parts > 1) {  // CTA-uniform; then nvc <= 64 < tpp, one coordinate per thread
    float* s_red = s_wr;  // [parts][tpp][GM] <= 128 * GM floats
    if (vg[0] >= 0)
#pragma unroll
      for (int g = 0; g < GM; ++g) s_red[(part * tpp + cl) * GM + g] = acc[0][g];
    __syncthreads();
    if (part == 0 && vg[0] >= 0)
#pragma unroll
      for (int g = 0; g < GM; ++g) {
        float sum = 0.0f;
        for (int pp = 0; pp < parts; ++pp) sum += s_red[(pp * tpp + cl) * GM + g];
        acc[0][g] = sum;
      }
  }
  const std::size_t row0 = (static_cast<std::size_t>(b) * p.Hq + hq0) * p.splits + split;  // (b, hq0, split)
  if (tid < gcount) {
    const std::size_t r = row0 + static_cast<std::size_t>(tid) * p.splits;
    p.ml[2 * r] = s_m[tid];
    p.ml[2 * r + 1] = s_l[tid];
  }
  if (part == 0) {
#pragma unroll
    for (int ci = 0; ci < 2; ++ci) {
      if (vg[ci] < 0) continue;
      const int c = cl + ci * tpp;
#pragma unroll
      for (int g = 0; g < GM; ++g)
        if (g < gcount) p.acc[(row0 + static_cast<std::size_t>(g) * p.splits) * p.D + c] = acc[ci][g];
    }
  }
}

// ---------------------------------------------------------------- 3. merge

struct alignas(8) softmax_pair {  // a split's (m, l) in the workspace (8-byte aligned: decode_workspace)
  float m, l;
};

// On sm_90, 4 CTAs per SM (at most 128 registers): the merge runs Hq * B CTAs, 512 at
// Hq = 32, B = 16, one wave on a 132-SM H100/H200 at 4 per SM and two at 3 (ptxas chose
// 130 registers unbounded). Not on sm_80: 128 registers spill there (72-100 bytes), and
// an A100 (108 SMs) needs two waves at B = 16 either way.
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
#define BGTQ_MERGE_MIN_CTAS 4
#else
#define BGTQ_MERGE_MIN_CTAS 1
#endif
__global__ void __launch_bounds__(decode_threads, BGTQ_MERGE_MIN_CTAS) merge_kernel(const decode_kparams p) {
  float* sm = dynamic_smem<float>();
  float* s_y = sm;             // [D] merged accumulator, rotated value coordinates
  float* s_x = s_y + p.D;      // [D] rotated back to head dims
  float* s_q = s_x + p.D;      // [D] the raw query (window scores)
  float* s_ws = s_q + p.D;     // [window_cap] window scores, then weights
  __shared__ rotation_coord s_rc[max_head_dim];  // the head's value coordinates (tables.hpp)
  const int hq = blockIdx.x;
  const int b = blockIdx.y;
  const int h = hq / p.G;
  const int tid = threadIdx.x;
  const int lane = tid & 31;
  const int warp = tid >> 5;
  const std::size_t head = static_cast<std::size_t>(p.layer) * p.Hkv + h;
  const std::size_t row0 = (static_cast<std::size_t>(b) * p.Hq + hq) * p.splits;
  const std::size_t qbase = (static_cast<std::size_t>(b) * p.Hq + hq) * p.D;
  // What is not the split kernel's output is read before the wait for it (overlapping
  // its tail): the value coordinates' group entries (the rotation back then needs no
  // group row or dims load of its own), head_meta, and the raw query (for the window;
  // the caller's input, complete before rotate_query_kernel started, which the split
  // kernel and so this one follow). All are waited for with the query test, in one
  // round trip (head_coords).
  head_coords hc;
  hc.load(p.rot_coords + (head * 2 + 1) * p.D, p, qbase, tid);
  const int nvc = load_now(&p.heads[head].value_coords);  // volatile: a plain load went behind the stores below
  grid_dependency_wait();  // the split kernel's partials (and, through it, qrot)
  const float q0 = p.qrot[qbase];
  loads_issued();
  hc.store(s_rc, s_q, p.D, tid);
  if (q0 != q0) {  // NaN: a non-finite query (rotate_query_kernel): NaN outputs; CTA-uniform
    for (int d = tid; d < p.D; d += decode_threads) p.out[qbase + d] = q0;
    return;
  }

  // 1. log-sum-exp merge of the splits (every thread folds the states in the same order)
  // The loads of 8 splits are issued before their merges (independent loads in flight,
  // not one partial's latency per split); the fold order is unchanged.
  softmax_state st{-__builtin_inff(), 0.0f};
  float a0 = 0.0f, a1 = 0.0f;
  constexpr int batch = 8;
  const float* ml = p.ml + 2 * row0;
  const float* acc = p.acc + row0 * p.D;
  for (int s0 = 0; s0 < p.splits; s0 += batch) {
    float m[batch], l[batch], x0[batch], x1[batch];
#pragma unroll
    for (int u = 0; u < batch; ++u) {
      const int s = s0 + u < p.splits ? s0 + u : p.splits - 1;  // in bounds; unused past the end
      const softmax_pair v = reinterpret_cast<const softmax_pair*>(ml)[s];  // one 8-byte load (the l of
      m[u] = v.m;                                                           // split 0 alone went behind
      l[u] = v.l;                                                           // the first merge)
      const float* as = acc + static_cast<std::size_t>(s) * p.D;
      x0[u] = tid < nvc ? as[tid] : 0.0f;
      x1[u] = tid + decode_threads < nvc ? as[tid + decode_threads] : 0.0f;
    }
    loads_issued();
#pragma unroll
    for (int u = 0; u < batch; ++u) {
      if (s0 + u >= p.splits) break;
      float fa, fb;
      merge(st, softmax_state{m[u], l[u]}, fa, fb);
      a0 = fmaf(fb, x0[u], fa * a0);
      a1 = fmaf(fb, x1[u], fa * a1);
    }
  }
  if (tid < nvc) s_y[tid] = a0;
  if (tid + decode_threads < nvc) s_y[tid + decode_threads] = a1;
  for (int d = tid; d < p.D; d += decode_threads) s_x[d] = 0.0f;
  __syncthreads();
  // 2. rotate back once per value group, the groups side by side:
  // x[dims_g[i]] = sum_j P_g[j][i] y[coord_off_g + j] for value coordinate c = coord_off_g + i
  for (int c = tid; c < p.D; c += decode_threads) {
    const rotation_coord rc_c = s_rc[c];
    if (rc_c.n() > 0) s_x[rc_c.dim()] = rotate_entry(p.rot, rc_c, s_y);
  }
  // 3. the fp16 window in the same softmax. Nothing here is serial over the window: warp
  // w scores tokens w*4 .. w*4+3, then every 4*NW-th group (four rows of D/32 elements in
  // flight per lane),
  // the max and the sum are block reductions, and warp w accumulates the values of
  // tokens w, w+NW, ... with lane holding dims lane + 32k; the NW partial sums are added
  // in warp order. (Before: one thread looped over the whole window for the max and the
  // values, a chain of dependent loads as long as the window.)
  constexpr int NW = decode_threads / 32;
  int nwin = p.wlen != nullptr ? p.wlen[b] : 0;
  if (nwin > p.wcap) nwin = p.wcap;
  float fa = 1.0f, fb = 0.0f;
  float w0 = 0.0f, w1 = 0.0f;
  if (nwin > 0) {  // CTA-uniform
    float* s_wv = s_ws + p.wcap;  // [NW][D] per-warp value sums
    float* s_red = s_wv + NW * p.D;  // [2][NW] block-reduction slots
    const std::size_t wbase = (static_cast<std::size_t>(b) * p.Hkv + h) * p.wcap * p.D;
    for (int i0 = warp * 4; i0 < nwin; i0 += NW * 4) {
      float sc[4] = {0.0f, 0.0f, 0.0f, 0.0f};
      // a fixed trip count and no branch between the loads, so all of a group's loads
      // are in flight together: rows past the window re-read its last row (their scores
      // are not stored), dims past D are predicated off
#pragma unroll
      for (int k = 0; k < max_head_dim / 32; ++k) {
        const int d = lane + 32 * k;
        if (d < p.D) {
          const float qd = s_q[d];
#pragma unroll
          for (int u = 0; u < 4; ++u) {
            const int row = min(i0 + u, nwin - 1);
            sc[u] = fmaf(qd, half_bits_to_float(p.wk[wbase + static_cast<std::size_t>(row) * p.D + d]), sc[u]);
          }
        }
      }
#pragma unroll
      for (int u = 0; u < 4; ++u) {
        const float s = warp_sum(sc[u]);
        if (lane == 0 && i0 + u < nwin) s_ws[i0 + u] = s * p.scale;
      }
    }
    __syncthreads();
    float mx = -__builtin_inff();
    for (int i = tid; i < nwin; i += decode_threads) mx = fmaxf(mx, s_ws[i]);
    mx = warp_max(mx);
    if (lane == 0) s_red[warp] = mx;
    __syncthreads();
    float mw = s_red[0];
#pragma unroll
    for (int w = 1; w < NW; ++w) mw = fmaxf(mw, s_red[w]);
    // every window score -inf (a score that overflowed): shift by 0, so the weights are
    // exp(-inf) = 0 instead of exp(-inf + inf) = NaN; lw = 0 then makes the merge keep the
    // pages' state, as the CPU's update_max does
    if (mw == -__builtin_inff()) mw = 0.0f;
    float lp = 0.0f;
    for (int i = tid; i < nwin; i += decode_threads) {
      const float e = expf(s_ws[i] - mw);
      s_ws[i] = e;
      lp += e;
    }
    lp = warp_sum(lp);
    if (lane == 0) s_red[NW + warp] = lp;
    __syncthreads();  // the weights and the partial sums
    float lw = 0.0f;
#pragma unroll
    for (int w = 0; w < NW; ++w) lw += s_red[NW + w];
    float va[max_head_dim / 32];
#pragma unroll
    for (int k = 0; k < max_head_dim / 32; ++k) va[k] = 0.0f;
#pragma unroll 4
    for (int i = warp; i < nwin; i += NW) {
      const float e = s_ws[i];
      const std::uint16_t* vr = p.wv + wbase + static_cast<std::size_t>(i) * p.D;
#pragma unroll
      for (int k = 0; k < max_head_dim / 32; ++k)
        if (lane + 32 * k < p.D) va[k] = fmaf(e, half_bits_to_float(vr[lane + 32 * k]), va[k]);
    }
#pragma unroll
    for (int k = 0; k < max_head_dim / 32; ++k)
      if (lane + 32 * k < p.D) s_wv[warp * p.D + lane + 32 * k] = va[k];
    __syncthreads();  // (also orders the rotation back's s_x writes)
#pragma unroll
    for (int w = 0; w < NW; ++w) {
      if (tid < p.D) w0 += s_wv[w * p.D + tid];
      if (tid + decode_threads < p.D) w1 += s_wv[w * p.D + tid + decode_threads];
    }
    merge(st, softmax_state{lw > 0.0f ? mw : -__builtin_inff(), lw}, fa, fb);
  } else {
    __syncthreads();  // the rotation back wrote s_x
  }
  // 4. normalise
  const float inv = st.l > 0.0f ? 1.0f / st.l : 0.0f;
  float* o = p.out + qbase;
  if (tid < p.D) o[tid] = (fa * s_x[tid] + fb * w0) * inv;
  if (tid + decode_threads < p.D) o[tid + decode_threads] = (fa * s_x[tid + decode_threads] + fb * w1) * inv;
}

//! f(std::integral_constant<int, GM>) for the instantiated head counts per CTA.
template <class F>
errc for_gm(int gm, const F& f) {
  switch (gm) {
    case 1: return f(std::integral_constant<int, 1>{});
    case 2: return f(std::integral_constant<int, 2>{});
    case 4: return f(std::integral_constant<int, 4>{});
    default: return f(std::integral_constant<int, 8>{});
  }
}

template <int GM>
errc launch_split(const decode_kparams& kp, const split_plan& sp, std::size_t smem, int device, cudaStream_t st) {
  const dim3 grid(static_cast<unsigned>(sp.splits), static_cast<unsigned>(kp.Hkv * kp.hchunks), static_cast<unsigned>(kp.batch));
  const dim3 block(decode_threads);
  BGTQ_CUDA_TRY(BGTQ_LAUNCH_OVERLAP(device, decode_split_kernel<GM>, grid, block, smem, st, kp));
  return errc::ok;
}

}  // namespace

errc device_cache::decode_attention(const decode_args& a, void* stream) noexcept {
  BGTQ_ARG_CHECK(p_ != nullptr, errc::invalid_argument, "decode_attention: device_cache is empty");
  const cache_desc& d = p_->desc;
  BGTQ_ARG_CHECK(a.layer >= 0 && a.layer < d.layers, errc::not_found, "decode_attention: layer out of range");
  BGTQ_ARG_CHECK(a.batch >= 0 && a.batch <= 65535, errc::invalid_argument, "decode_attention: batch outside [0, 65535]");
  // the arguments that do not depend on the batch are checked also for an empty one
  BGTQ_ARG_CHECK(std::isfinite(a.scale) && a.scale >= 0.0f, errc::invalid_argument,
                 "decode_attention: scale must be finite and >= 0 (0 means 1/sqrt(head_dim))");
  BGTQ_ARG_CHECK(known_dtype(a.q_type), errc::invalid_argument,
                 "decode_attention: unknown q dtype");
  BGTQ_ARG_CHECK(a.path == decode_path::cuda_cores || a.path == decode_path::tensor_cores || a.path == decode_path::automatic,
                 errc::invalid_argument, "decode_attention: unknown decode_path");
  if (a.batch == 0) return errc::ok;
  BGTQ_ARG_CHECK(a.q != nullptr && a.out != nullptr && a.quantized != nullptr, errc::invalid_argument,
                 "decode_attention: null q, out or quantized");
  BGTQ_ARG_CHECK(a.max_quantized >= 0 && a.max_quantized <= static_cast<long long>(a.max_pages_per_seq) * d.page_tokens,
                 errc::invalid_argument, "decode_attention: max_quantized exceeds max_pages_per_seq * page_tokens");
  // quantized[] is int, and the kernels count tiles and tokens in int: a larger bound
  // overflowed split * tiles_per_split (a launch that ran for minutes)
  BGTQ_ARG_CHECK(a.max_quantized <= INT_MAX, errc::invalid_argument,
                 "decode_attention: max_quantized above INT_MAX (quantized[] holds int lengths)");
  BGTQ_ARG_CHECK(reinterpret_cast<std::uintptr_t>(a.workspace) % 256 == 0, errc::invalid_argument,
                 "decode_attention: workspace must be 256-byte aligned (as cudaMalloc returns): its sections are laid "
                 "out at 256-byte offsets and read with 8-byte loads");
  BGTQ_ARG_CHECK(a.max_quantized == 0 || a.page_table != nullptr, errc::invalid_argument, "decode_attention: null page_table");
  const bool window = a.window_len != nullptr;
  BGTQ_ARG_CHECK(!window || (a.window_k != nullptr && a.window_v != nullptr && a.window_cap > 0), errc::invalid_argument,
                 "decode_attention: window_len given without window_k/window_v/window_cap");
  BGTQ_ARG_CHECK(a.window_cap <= 16384, errc::unsupported, "decode_attention: window_cap above 16384");
  const std::string& no_mma = p_->mma_why[static_cast<std::size_t>(a.layer)];
  if (a.path == decode_path::tensor_cores && !no_mma.empty()) return detail::arg_fail(errc::unsupported, no_mma.c_str());
  bool mma = a.path != decode_path::cuda_cores && no_mma.empty();  // may still fall back below (automatic)
  const split_plan sp = decode_plan(a.batch, a.max_quantized, a.splits);
  const decode_workspace_layout wl = decode_workspace(a.batch, d.q_heads, d.head_dim, sp.splits);
  BGTQ_ARG_CHECK(a.workspace != nullptr && a.workspace_bytes >= wl.bytes, errc::invalid_argument,
                 "decode_attention: workspace missing or smaller than decode_workspace_bytes(batch, splits)");

  const std::size_t l = static_cast<std::size_t>(a.layer);
  decode_kparams kp{};
  static_cast<layer_params&>(kp) = p_->layer_view(a.layer);
  kp.Hq = d.q_heads;
  kp.G = d.q_heads / d.kv_heads;
  const int gm = heads_per_cta(kp.G);
  kp.hchunks = (kp.G + gm - 1) / gm;
  kp.batch = a.batch;
  kp.q = a.q;
  kp.q_type = a.q_type;
  kp.out = a.out;
  kp.page_table = a.page_table;
  kp.mpps = a.max_pages_per_seq;
  kp.quantized = a.quantized;
  kp.wk = window ? a.window_k : nullptr;
  kp.wv = window ? a.window_v : nullptr;
  kp.wlen = window ? a.window_len : nullptr;
  kp.wcap = window ? a.window_cap : 0;
  kp.scale = logit_scale(a.scale, d.head_dim);
  // before anything is enqueued: the kernels' shared-memory limits and, for the
  // tensor-core kernel, its own plan (as many CTAs as are resident at once, never more
  // splits than decode_plan sized the workspace for); automatic falls back to the
  // CUDA-core kernel if the tensor-core kernel cannot be prepared
  const int dev = p_->device;
  const split_smem L = split_smem_layout(gm, p_->tables.key_coords[l], p_->tables.key_cent[l], p_->tables.value_cent[l],
                                         p_->tables.value_groups[l]);
  const std::size_t smem = static_cast<std::size_t>(L.floats) * 4u;
  split_plan run = sp;
  if (mma) {
    if (const errc pe = mma_prepare(*p_, a.layer, kp.hchunks, a.batch, a.max_quantized, a.splits, sp, run); pe != errc::ok) {
      if (a.path == decode_path::tensor_cores) return pe;
      mma = false;  // (a CUDA failure there was consumed by its report: cuda_fail)
      run = sp;
    }
  }
  if (!mma)
    if (const errc pe = for_gm(gm, [&](auto c) { return raise_max_dynamic_smem<decode_split_kernel<decltype(c)::value>>(dev, smem); });
        pe != errc::ok)
      return pe;
  // merge: y, x, q [D] each, then with a window its scores [window_cap], per-warp value
  // sums [4][D] and 8 reduction slots
  const std::size_t msmem =
      (3u * static_cast<std::size_t>(d.head_dim) +
       (window ? static_cast<std::size_t>(a.window_cap) + (decode_threads / 32u) * static_cast<std::size_t>(d.head_dim) + 2u * (decode_threads / 32u)
               : 1u)) *
      4u;
  if (const errc pe = raise_max_dynamic_smem<merge_kernel>(dev, msmem); pe != errc::ok) return pe;
  kp.splits = run.splits;
  kp.tiles_per_split = run.tiles_per_split;
  if (a.splits_used != nullptr) *a.splits_used = run.splits;
  if (a.tensor_cores_used != nullptr) *a.tensor_cores_used = mma;
  std::uint8_t* ws = static_cast<std::uint8_t*>(a.workspace);
  kp.qrot = reinterpret_cast<float*>(ws + wl.qrot);
  kp.ml = reinterpret_cast<float*>(ws + wl.ml);
  kp.acc = reinterpret_cast<float*>(ws + wl.acc);
  kp.key_coords = p_->tables.key_coords[l];
  kp.key_cent = p_->tables.key_cent[l];
  kp.value_cent = p_->tables.value_cent[l];
  kp.value_groups = p_->tables.value_groups[l];
  kp.nonfinite = a.nonfinite;
  const cudaStream_t st = as_stream(stream);

  // rotate, split and merge: on sm_90+ the split and merge launches overlap their
  // predecessor's tail (BGTQ_LAUNCH_OVERLAP); rotate waits for the caller's earlier work.
  const dim3 head_grid(static_cast<unsigned>(d.q_heads), static_cast<unsigned>(a.batch));
  const dim3 block(decode_threads);
  BGTQ_LAUNCH(rotate_query_kernel, head_grid, block, static_cast<std::size_t>(2 * d.head_dim) * 4u, st, kp);
  BGTQ_CUDA_LAUNCHED("rotate_query_kernel");

  const errc e = mma ? launch_split_mma(kp, run, *p_, st)
                     : for_gm(gm, [&](auto c) { return launch_split<decltype(c)::value>(kp, sp, smem, dev, st); });  // run == sp
  if (e != errc::ok) return e;
  BGTQ_CUDA_TRY(BGTQ_LAUNCH_OVERLAP(dev, merge_kernel, head_grid, block, msmem, st, kp));
  return errc::ok;
}

}  // namespace bgtq::cuda
