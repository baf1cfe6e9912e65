// bench/gpu/sass_probe.cu - probe kernels for bench/gpu/sass_count.sh: the tensor-core
// decode kernel's inner pieces compiled on their own, so that their SASS instruction
// counts (per warp) can be read off the cubin on a machine without a GPU. Each probe is
// straight-line code (constant sizes, no loops), so its static count is also its
// dynamic count. Never launched; not part of the library.
//
//   probe<B, 0>  baseline: the probes' loads and stores only
//   probe<B, 1>  one key k-tile: 16 coordinates x 64 tokens of B-bit codes (key_dispatch)
//   probe<B, 2>  half a key k-tile: 8 coordinates (the upper half is skipped at run time)
//   probe<B, 3>  one value m-tile: 16 coordinates x 64 tokens (values_dispatch, nmt = 1)
//
// All probes load the same inputs (table, B fragments) and store the same outputs (the
// accumulators and a checksum of the inputs), so subtracting the baseline leaves the
// piece's own instructions.
#include "decode_mma.cu"

namespace bgtq::cuda {
namespace {

template <int B, int Mode>
__global__ void sass_probe(const unsigned* in, float* out, unsigned* sum) {
  extern __shared__ unsigned long long sm[];
  const std::uint16_t* ht = reinterpret_cast<const std::uint16_t*>(sm + 4096);
  const int lane = threadIdx.x & 31, gid = lane >> 2, tq = lane & 3;
  mma_group g;
  g.n = Mode == 2 ? 8 : 16;
  g.bits = B;
  for (int i = 0; i < 4; ++i) {
    g.lo[i] = in[i];
    g.hi[i] = in[4 + i];
  }
  bfrag bw;
  for (int i = 0; i < 8; ++i) (&bw.r[0][0][0])[i] = in[8 + 32 * i + lane];
  unsigned check = 0;
  for (int i = 0; i < 4; ++i) check ^= g.lo[i] ^ g.hi[i];
  for (int i = 0; i < 8; ++i) check ^= (&bw.r[0][0][0])[i];
  const std::uint32_t* qrow = reinterpret_cast<const std::uint32_t*>(sm + 2048) + gid * 72;
  float acc[mma::max_value_mtiles][4] = {};
  if constexpr (Mode == 1 || Mode == 2) {
    float a4[4][4] = {};
    key_dispatch(sm, g, qrow, ht, gid, tq, a4);
    for (int mt = 0; mt < 4; ++mt)
      for (int e = 0; e < 4; ++e) acc[mt][e] = a4[mt][e];
  } else if constexpr (Mode == 3) {
    values_dispatch(sm, g, 1, bw, ht, gid, tq, acc);
  }
  for (int mt = 0; mt < 4; ++mt)
    for (int e = 0; e < 4; ++e) out[threadIdx.x * 16 + mt * 4 + e] = acc[mt][e];
  sum[threadIdx.x] = check;
}

#define BGTQ_SASS_PROBES(B)                                                \
  template __global__ void sass_probe<B, 1>(const unsigned*, float*, unsigned*); \
  template __global__ void sass_probe<B, 2>(const unsigned*, float*, unsigned*); \
  template __global__ void sass_probe<B, 3>(const unsigned*, float*, unsigned*);
template __global__ void sass_probe<1, 0>(const unsigned*, float*, unsigned*);
BGTQ_SASS_PROBES(1)
BGTQ_SASS_PROBES(2)
BGTQ_SASS_PROBES(3)
BGTQ_SASS_PROBES(4)
BGTQ_SASS_PROBES(5)
BGTQ_SASS_PROBES(6)
BGTQ_SASS_PROBES(7)
BGTQ_SASS_PROBES(8)
#undef BGTQ_SASS_PROBES

}  // namespace
}  // namespace bgtq::cuda
