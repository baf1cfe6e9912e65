// Calibration energies on the device: per (KV head, RoPE block) double sums of the
// squared block norms of q (over the head's GQA group) and of k.
//
//  1. energy_partial_kernel  grid (chunks of 256 tokens, Hkv), 256 threads: thread
//     (r, d) sums x^2 in double over the chunk's tokens t = r (mod R) for head dim d
//     (R = 256 / D rows); rows are added in order in shared memory, then the block sums
//     `// partial[part][h][i][chunk] = e[d0(i)] + e[d1(i)]   (part 0 = q, 1 = k)`
//  2. cub::DeviceSegmentedReduce::Sum over the chunks of each (part, h, i) segment;
//  3. sums += reduced (a tiny kernel), so calls accumulate like energy_estimator::add.
// A thread whose double sum is not finite (only a NaN or Inf element makes it so: a
// float's square is at most ~1.2e77) scans its elements again and records the first
// non-finite one's place with atomicMin in `first_bad`, which download() reports.
#include <cub/device/device_segmented_reduce.cuh>

#include <climits>
#include <cstdio>
#include <string>

#include <bgtq/cuda/energy.hpp>

#include "device_cache_impl.cuh"

namespace bgtq::cuda {

namespace {
constexpr int energy_threads = 256;
constexpr int energy_chunk = 256;  // tokens per CTA
//! first_bad's value while every element accumulated since create / reset was finite;
//! otherwise it holds token * (Hq + Hkv) * D + (head of q, or Hq + head of k) * D + dim,
//! token counted since create / reset (the smallest such place: the first in token order).
constexpr unsigned long long no_bad = ~0ull;
}  // namespace

struct device_energy::impl {
  int Hq = 0, Hkv = 0, D = 0, L = 0;
  long long max_tokens = 0, tokens = 0;
  int max_chunks = 0;
  int* block_dims = nullptr;    // [L][2]
  double* partial = nullptr;    // [2][Hkv][L][max_chunks]
  double* reduced = nullptr;    // [2][Hkv][L]
  double* sums = nullptr;       // [2][Hkv][L]
  unsigned long long* first_bad = nullptr;  // the first non-finite element's place, or no_bad (see there)
  int* offsets = nullptr;       // [2*Hkv*L + 1] segment starts
  void* temp = nullptr;
  std::size_t temp_bytes = 0;
  impl() = default;
  impl(const impl&) = delete;
  impl& operator=(const impl&) = delete;
  ~impl() {
    cudaFree(block_dims);
    cudaFree(partial);
    cudaFree(reduced);
    cudaFree(sums);
    cudaFree(offsets);
    cudaFree(temp);
    cudaFree(first_bad);
  }
  int segments() const { return 2 * Hkv * L; }
  //! Elements of one token: q's Hq heads, then k's Hkv heads, D each.
  unsigned long long row() const { return static_cast<unsigned long long>(Hq + Hkv) * static_cast<unsigned long long>(D); }
};

namespace {

struct energy_kparams {
  const void* q;
  const void* k;
  dtype type;
  long long tokens;
  int Hq, Hkv, G, D, L, max_chunks;
  const int* block_dims;
  double* partial;
  unsigned long long* first_bad;
  long long token_base;  // tokens accumulated since create / reset before this pass
};

//! Thread (r, d)'s second look at its elements, once its sums are not finite: records
//! the place of its first non-finite one (token order, q's heads before k's).
__device__ void record_first_bad(const energy_kparams& p, int h, int d, long long t0, long long t1, int R) {
  const unsigned long long row = static_cast<unsigned long long>(p.Hq + p.Hkv) * static_cast<unsigned long long>(p.D);
  for (long long t = t0; t < t1; t += R) {
    const unsigned long long base = static_cast<unsigned long long>(p.token_base + t) * row;
    for (int g = 0; g < p.G; ++g) {
      if (!finite_bits(load_element(p.q, (static_cast<std::size_t>(t) * p.Hq + h * p.G + g) * p.D + d, p.type))) {
        atomicMin(p.first_bad, base + static_cast<unsigned long long>(h * p.G + g) * p.D + d);
        return;
      }
    }
    if (!finite_bits(load_element(p.k, (static_cast<std::size_t>(t) * p.Hkv + h) * p.D + d, p.type))) {
      atomicMin(p.first_bad, base + static_cast<unsigned long long>(p.Hq + h) * p.D + d);
      return;
    }
  }
}

__global__ void __launch_bounds__(energy_threads) energy_partial_kernel(const energy_kparams p) {
  __shared__ double s_q[energy_threads], s_k[energy_threads];
  const int chunk = blockIdx.x;
  const int h = blockIdx.y;
  const int tid = threadIdx.x;
  const int R = energy_threads / p.D;
  const int r = tid / p.D;
  const int d = tid - r * p.D;
  double aq = 0.0, ak = 0.0;
  if (r < R) {
    const long long t0 = static_cast<long long>(chunk) * energy_chunk;
    const long long t1 = min(p.tokens, t0 + energy_chunk);
    for (long long t = t0 + r; t < t1; t += R) {
      for (int g = 0; g < p.G; ++g) {
        const double x = load_element(p.q, (static_cast<std::size_t>(t) * p.Hq + h * p.G + g) * p.D + d, p.type);
        aq += x * x;
      }
      const double y = load_element(p.k, (static_cast<std::size_t>(t) * p.Hkv + h) * p.D + d, p.type);
      ak += y * y;
    }
    constexpr double dbl_max = 1.7976931348623157e308;
    if (!(aq <= dbl_max && ak <= dbl_max)) record_first_bad(p, h, d, t0 + r, t1, R);  // NaN or +Inf
  }
  s_q[tid] = aq;
  s_k[tid] = ak;
  __syncthreads();
  if (tid < p.D) {  // rows in order
    double q = 0.0, k = 0.0;
    for (int rr = 0; rr < R; ++rr) {
      q += s_q[rr * p.D + tid];
      k += s_k[rr * p.D + tid];
    }
    s_q[tid] = q;  // row 0 of thread tid: only thread tid reads/writes index tid here
    s_k[tid] = k;
  }
  __syncthreads();
  for (int i = tid; i < p.L; i += energy_threads) {
    const int d0 = p.block_dims[2 * i], d1 = p.block_dims[2 * i + 1];
    const std::size_t qi = (static_cast<std::size_t>(h) * p.L + i) * p.max_chunks + chunk;
    const std::size_t ki = (static_cast<std::size_t>(p.Hkv + h) * p.L + i) * p.max_chunks + chunk;
    p.partial[qi] = s_q[d0] + s_q[d1];
    p.partial[ki] = s_k[d0] + s_k[d1];
  }
}

__global__ void add_kernel(double* sums, const double* reduced, int n) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) sums[i] += reduced[i];
}

}  // namespace

device_energy::device_energy() noexcept = default;
device_energy::~device_energy() = default;
device_energy::device_energy(device_energy&&) noexcept = default;
device_energy& device_energy::operator=(device_energy&&) noexcept = default;

errc device_energy::create(int q_heads, int kv_heads, int head_dim, const std::vector<int>& block_dims, long long max_tokens,
                           device_energy& out) noexcept {
  try {
    BGTQ_ARG_CHECK(kv_heads >= 1 && q_heads >= kv_heads && q_heads % kv_heads == 0, errc::invalid_argument,
                   "device_energy: q_heads must be a positive multiple of kv_heads");
    BGTQ_ARG_CHECK(head_dim >= 2 && head_dim % 2 == 0, errc::invalid_argument, "device_energy: head_dim must be even and >= 2");
    BGTQ_ARG_CHECK(head_dim <= max_head_dim, errc::unsupported, "device_energy: head_dim above 256");
    BGTQ_ARG_CHECK(block_dims.size() == static_cast<std::size_t>(head_dim), errc::shape_mismatch,
                   "device_energy: block_dims must hold head_dim/2 pairs");
    for (int x : block_dims) BGTQ_ARG_CHECK(x >= 0 && x < head_dim, errc::invalid_argument, "device_energy: block dim out of range");
    BGTQ_ARG_CHECK(max_tokens >= 1, errc::invalid_argument, "device_energy: max_tokens must be >= 1");
    auto m = std::make_unique<impl>();
    m->Hq = q_heads;
    m->Hkv = kv_heads;
    m->D = head_dim;
    m->L = head_dim / 2;
    m->max_tokens = max_tokens;
    const std::size_t nseg = static_cast<std::size_t>(m->segments());
    // the chunks of one pass, counted without overflow (max_tokens may be up to LLONG_MAX)
    // and checked before they narrow to int: CUB's segment offsets are int
    const long long chunks = max_tokens / energy_chunk + (max_tokens % energy_chunk != 0 ? 1 : 0);
    const long long chunk_limit = static_cast<long long>(INT_MAX / nseg);
    if (chunks > chunk_limit) {
      const std::string msg = "device_energy: max_tokens " + std::to_string(max_tokens) + " is beyond the " +
                              std::to_string(chunk_limit * energy_chunk) + " tokens per pass that " +
                              std::to_string(nseg / 2) +
                              " (KV head, block) pairs allow (int segment offsets); pass a smaller max_tokens (larger calls loop)";
      return detail::arg_fail(errc::unsupported, msg.c_str());
    }
    m->max_chunks = static_cast<int>(chunks);
    std::vector<int> offs(nseg + 1);
    for (std::size_t s = 0; s <= nseg; ++s) offs[s] = static_cast<int>(s * static_cast<std::size_t>(m->max_chunks));
    BGTQ_CUDA_TRY(cudaMalloc(reinterpret_cast<void**>(&m->block_dims), block_dims.size() * sizeof(int)));
    BGTQ_CUDA_TRY(cudaMemcpy(m->block_dims, block_dims.data(), block_dims.size() * sizeof(int), cudaMemcpyHostToDevice));
    BGTQ_CUDA_TRY(cudaMalloc(reinterpret_cast<void**>(&m->partial), nseg * m->max_chunks * sizeof(double)));
    BGTQ_CUDA_TRY(cudaMalloc(reinterpret_cast<void**>(&m->reduced), nseg * sizeof(double)));
    BGTQ_CUDA_TRY(cudaMalloc(reinterpret_cast<void**>(&m->sums), nseg * sizeof(double)));
    BGTQ_CUDA_TRY(cudaMemset(m->sums, 0, nseg * sizeof(double)));
    BGTQ_CUDA_TRY(cudaMalloc(reinterpret_cast<void**>(&m->first_bad), sizeof(unsigned long long)));
    BGTQ_CUDA_TRY(cudaMemset(m->first_bad, 0xff, sizeof(unsigned long long)));  // no_bad
    BGTQ_CUDA_TRY(cudaMalloc(reinterpret_cast<void**>(&m->offsets), offs.size() * sizeof(int)));
    BGTQ_CUDA_TRY(cudaMemcpy(m->offsets, offs.data(), offs.size() * sizeof(int), cudaMemcpyHostToDevice));
    BGTQ_CUDA_TRY(cub::DeviceSegmentedReduce::Sum(nullptr, m->temp_bytes, m->partial, m->reduced, static_cast<int>(nseg),
                                                  m->offsets, m->offsets + 1));
    BGTQ_CUDA_TRY(cudaMalloc(&m->temp, m->temp_bytes > 0 ? m->temp_bytes : 1));
    out.p_ = std::move(m);
    return errc::ok;
  } catch (...) {
    return detail::arg_fail(errc::capacity_exhausted, "device_energy::create: host allocation failed");
  }
}

errc device_energy::accumulate(const void* q, const void* k, long long tokens, dtype type, void* stream) noexcept {
  BGTQ_ARG_CHECK(p_ != nullptr, errc::invalid_argument, "device_energy::accumulate: empty object");
  BGTQ_ARG_CHECK(tokens >= 0, errc::invalid_argument, "device_energy::accumulate: negative token count");
  BGTQ_ARG_CHECK(known_dtype(type), errc::invalid_argument,
                 "device_energy::accumulate: unknown dtype");
  if (tokens == 0) return errc::ok;
  BGTQ_ARG_CHECK(q != nullptr && k != nullptr, errc::invalid_argument, "device_energy::accumulate: null q or k");
  impl& m = *p_;
  const cudaStream_t st = as_stream(stream);
  const std::size_t esz = type == dtype::f32 ? 4u : 2u;
  const int nseg = m.segments();
  for (long long t0 = 0; t0 < tokens; t0 += m.max_tokens) {
    const long long nt = tokens - t0 < m.max_tokens ? tokens - t0 : m.max_tokens;
    const int chunks = static_cast<int>((nt + energy_chunk - 1) / energy_chunk);
    BGTQ_CUDA_TRY(cudaMemsetAsync(m.partial, 0, static_cast<std::size_t>(nseg) * m.max_chunks * sizeof(double), st));
    energy_kparams kp{};
    kp.q = static_cast<const std::uint8_t*>(q) + static_cast<std::size_t>(t0) * m.Hq * m.D * esz;
    kp.k = static_cast<const std::uint8_t*>(k) + static_cast<std::size_t>(t0) * m.Hkv * m.D * esz;
    kp.type = type;
    kp.tokens = nt;
    kp.Hq = m.Hq;
    kp.Hkv = m.Hkv;
    kp.G = m.Hq / m.Hkv;
    kp.D = m.D;
    kp.L = m.L;
    kp.max_chunks = m.max_chunks;
    kp.block_dims = m.block_dims;
    kp.partial = m.partial;
    kp.first_bad = m.first_bad;
    kp.token_base = m.tokens + t0;
    const dim3 grid(static_cast<unsigned>(chunks), static_cast<unsigned>(m.Hkv));
    const dim3 block(energy_threads);
    BGTQ_LAUNCH(energy_partial_kernel, grid, block, 0, st, kp);
    BGTQ_CUDA_LAUNCHED("energy_partial_kernel");
    std::size_t tb = m.temp_bytes;
    BGTQ_CUDA_TRY(cub::DeviceSegmentedReduce::Sum(m.temp, tb, m.partial, m.reduced, nseg, m.offsets, m.offsets + 1, st));
    const dim3 add_grid(static_cast<unsigned>((nseg + 255) / 256));
    const dim3 add_block(256);
    BGTQ_LAUNCH(add_kernel, add_grid, add_block, 0, st, m.sums, m.reduced, nseg);
    BGTQ_CUDA_LAUNCHED("energy add_kernel");
  }
  m.tokens += tokens;
  return errc::ok;
}

errc device_energy::reset(void* stream) noexcept {
  BGTQ_ARG_CHECK(p_ != nullptr, errc::invalid_argument, "device_energy::reset: empty object");
  BGTQ_CUDA_TRY(cudaMemsetAsync(p_->sums, 0, static_cast<std::size_t>(p_->segments()) * sizeof(double), as_stream(stream)));
  BGTQ_CUDA_TRY(cudaMemsetAsync(p_->first_bad, 0xff, sizeof(unsigned long long), as_stream(stream)));  // no_bad
  p_->tokens = 0;
  return errc::ok;
}

errc device_energy::download(double* q_sums, double* k_sums, void* stream) const noexcept {
  BGTQ_ARG_CHECK(p_ != nullptr, errc::invalid_argument, "device_energy::download: empty object");
  BGTQ_ARG_CHECK(q_sums != nullptr && k_sums != nullptr, errc::invalid_argument, "device_energy::download: null output");
  const std::size_t half = static_cast<std::size_t>(p_->Hkv) * p_->L;
  const cudaStream_t st = as_stream(stream);
  unsigned long long bad = no_bad;
  BGTQ_CUDA_TRY(cudaMemcpyAsync(&bad, p_->first_bad, sizeof bad, cudaMemcpyDeviceToHost, st));
  BGTQ_CUDA_TRY(cudaStreamSynchronize(st));
  if (bad != no_bad) {
    const unsigned long long row = p_->row(), D = static_cast<unsigned long long>(p_->D);
    const unsigned long long token = bad / row, e = bad % row, qn = static_cast<unsigned long long>(p_->Hq) * D;
    const bool in_q = e < qn;
    const unsigned long long head = (in_q ? e : e - qn) / D, dim = e % D;
    char msg[240];
    std::snprintf(msg, sizeof msg,
                  "device_energy::download: non-finite value (NaN or Inf) in %s at token %llu (counted since create / "
                  "reset), head %llu, dim %llu; the sums were not copied (reset to go on)",
                  in_q ? "q" : "k", token, head, dim);
    return detail::arg_fail(errc::non_finite, msg);
  }
  BGTQ_CUDA_TRY(cudaMemcpyAsync(q_sums, p_->sums, half * sizeof(double), cudaMemcpyDeviceToHost, st));
  BGTQ_CUDA_TRY(cudaMemcpyAsync(k_sums, p_->sums + half, half * sizeof(double), cudaMemcpyDeviceToHost, st));
  BGTQ_CUDA_TRY(cudaStreamSynchronize(st));
  return errc::ok;
}

long long device_energy::tokens() const noexcept { return p_ ? p_->tokens : 0; }
int device_energy::blocks() const noexcept { return p_ ? p_->L : 0; }

}  // namespace bgtq::cuda
