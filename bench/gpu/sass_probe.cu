// bench/gpu/sass_probe.cu - probe kernels for bench/gpu/sass_count.py: the tensor-core
// decode kernel's pieces compiled on their own, so that their SASS instruction counts
// (per warp) can be read off the cubin on a machine without a GPU. Each probe is
// straight-line code (constant sizes, no loops), so its static count is also its
// dynamic count. Never launched; not part of the library.
//
//   probe<1, 0>  baseline: the probes' loads and stores only
//   probe<B, 1>  one key k-tile: 16 coordinates x 64 tokens of B-bit codes (key_dispatch)
//   probe<B, 2>  half a key k-tile: 8 coordinates (the kernel skips a wholly padded upper
//                half at run time; here n is a constant, so the test itself is gone too)
//   probe<B, 3>  one value m-tile: 16 coordinates x 64 tokens (values_dispatch, nmt = 1)
//   probe<B, 4>  one key group of 16 coordinates with its radii (add_group_scores):
//                minus probe<B, 1>, what a key group costs per unit besides its k-tiles
//                (a difference of two probes: the noisiest figure)
//   probe<1, 5>  a full unit's online softmax (unit_softmax)
//   probe<1, 6>  a full unit's value radii, accumulator range and weight transpose
//                (unit_value_weights; its rescale of the accumulator counted, which
//                runs only when a maximum or the radius range grows)
//
// All probes load the same inputs and store the same outputs (every input is folded
// into a checksum, so none is optimised away), so subtracting the baseline leaves the
// piece's own instructions.
#include "decode_mma.cu"

namespace bgtq::cuda {
namespace {

template <int B, int Mode>
__global__ void sass_probe(const unsigned* in, float* out, unsigned* sum) {
  extern __shared__ unsigned long long sm[];
  const std::uint16_t* ht = reinterpret_cast<const std::uint16_t*>(sm + 4096);
  const std::uint32_t* qrow = reinterpret_cast<const std::uint32_t*>(sm + 2048) + (threadIdx.x & 31) / 4 * 72;
  const int lane = threadIdx.x & 31, gid = lane >> 2, tq = lane & 3;
  // ---- the inputs, all folded into check
  unsigned check = 0;
  mma_group g;
  g.n = Mode == 2 ? 8 : 16;
  g.bits = B;
  for (int i = 0; i < 4; ++i) {
    g.lo[i] = in[i];
    g.hi[i] = in[4 + i];
    check ^= g.lo[i] ^ g.hi[i];
  }
  bfrag bw;
  for (int i = 0; i < 8; ++i) check ^= (&bw.r[0][0][0])[i] = in[8 + 32 * i + lane];
  float sc[4][4], acc[mma::max_value_mtiles][4], m2[2], l[2], fac[2];
  for (int mt = 0; mt < 4; ++mt)
    for (int e = 0; e < 4; ++e) check ^= __float_as_uint(sc[mt][e] = __uint_as_float(in[300 + 16 * mt + e]));
  for (int mt = 0; mt < mma::max_value_mtiles; ++mt)
    for (int e = 0; e < 4; ++e) check ^= __float_as_uint(acc[mt][e] = __uint_as_float(in[500 + 4 * mt + e]));
  for (int x = 0; x < 2; ++x) {
    check ^= __float_as_uint(m2[x] = __uint_as_float(in[401 + x]));
    check ^= __float_as_uint(l[x] = __uint_as_float(in[403 + x]));
    check ^= __float_as_uint(fac[x] = __uint_as_float(in[405 + x]));
  }
  // a full unit (all but a split's last): the pieces' partial-unit masking is left out
  const int nvalid = Mode >= 5 ? mma::unit_tokens : static_cast<int>(in[400]);
  const float f0 = __uint_as_float(in[407]), f1 = __uint_as_float(in[408]);
  int E = static_cast<int>(in[409]);
  const std::uint32_t km = in[410];  // the lane's key multiplier, read as the kernel reads it
  check ^= km;
  check ^= static_cast<unsigned>(nvalid) ^ __float_as_uint(f0) ^ __float_as_uint(f1) ^ static_cast<unsigned>(E);
  // ---- the piece
  if constexpr (Mode == 1 || Mode == 2) {
    float a4[4][4] = {};  // zeros, as add_group_scores calls it
    key_dispatch(sm, g, qrow, ht, gid, km, tq, a4);
    for (int mt = 0; mt < 4; ++mt)
      for (int e = 0; e < 4; ++e) acc[mt][e] = a4[mt][e];
  } else if constexpr (Mode == 3) {
    values_dispatch(sm, g, 1, bw, ht, gid, tq, acc);
  } else if constexpr (Mode == 4) {
    add_group_scores(reinterpret_cast<const unsigned char*>(sm), g, qrow, ht, gid, km, tq, sc);
  } else if constexpr (Mode == 5) {
    float w[4][4];
    unit_softmax(sc, nvalid, f0, f1, gid, m2, l, w, fac);
    for (int mt = 0; mt < 4; ++mt)
      for (int e = 0; e < 4; ++e) sc[mt][e] = w[mt][e];
  } else if constexpr (Mode == 6) {
    bw = unit_value_weights(reinterpret_cast<const std::uint16_t*>(sm), nvalid, sc, fac, E, acc,
                            reinterpret_cast<std::uint32_t*>(sm + 1024), gid, tq);
  }
  // ---- the outputs
  for (int mt = 0; mt < mma::max_value_mtiles; ++mt)
    for (int e = 0; e < 4; ++e) out[threadIdx.x * 64 + mt * 4 + e] = acc[mt][e];
  for (int mt = 0; mt < 4; ++mt)
    for (int e = 0; e < 4; ++e) out[threadIdx.x * 64 + 32 + mt * 4 + e] = sc[mt][e];
  for (int x = 0; x < 2; ++x) {
    out[threadIdx.x * 64 + 48 + x] = m2[x];
    out[threadIdx.x * 64 + 50 + x] = l[x];
    out[threadIdx.x * 64 + 52 + x] = fac[x];
  }
  for (int i = 0; i < 8; ++i) check ^= (&bw.r[0][0][0])[i];
  sum[threadIdx.x] = check ^ static_cast<unsigned>(E);
}

#define BGTQ_SASS_PROBES(B)                                                       \
  template __global__ void sass_probe<B, 1>(const unsigned*, float*, unsigned*); \
  template __global__ void sass_probe<B, 2>(const unsigned*, float*, unsigned*); \
  template __global__ void sass_probe<B, 3>(const unsigned*, float*, unsigned*); \
  template __global__ void sass_probe<B, 4>(const unsigned*, float*, unsigned*);
template __global__ void sass_probe<1, 0>(const unsigned*, float*, unsigned*);
template __global__ void sass_probe<1, 5>(const unsigned*, float*, unsigned*);
template __global__ void sass_probe<1, 6>(const unsigned*, float*, unsigned*);
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
