// bench_decode: GPU decode-attention benchmark and device self-check (bench/gpu/run.sh).
//
//   bench_decode --probe                 prints the device (exit 77 without one)
//   bench_decode --check                 device checks vs the CPU reference (no Catch2 needed)
//   bench_decode --sanitize              a few short checks per kernel, for compute-sanitizer
//   --path both|cuda_cores|tensor_cores  which split kernels --check and the benchmark run
//                                        (default both; run.sh uses one process per path)
//   exit: 0 ok, 1 a failure, 2 usage, 3 the tensor-core output disagreed with the
//   CUDA-core output (the table and JSON are still written), 77 no device
//   bench_decode [--quick | --tiny | --dry] [--runs N] [--json FILE]   (--tiny: T 256/1024, batch 1/2,
//                                        a dry run of the program, e.g. on the CPU emulator;
//                                        --dry: T 256, batch 1/2, 3 timed runs, not a
//                                        measurement: run.sh's dry run, BGTQ_GPU_DRY=1)
//                                        device-to-device copy bandwidth, then packed decode
//                                        attention at T = 4K..512K, batch 1 and 16, D = 128,
//                                        Hq = 32, Hkv = 8, Block-GTQ and uniform TQ-MSE at
//                                        K3V3 and K2V2 (CUDA events, median of N >= 20 runs,
//                                        L2 evicted before each),
//                                        each on both split kernels (decode_path::cuda_cores,
//                                        and tensor_cores as "<method>/tc", whose output is
//                                        also compared with the CUDA-core output: exit 1
//                                        past 5e-3 of max |out|)
//   --window N                           every decode also attends an N-token fp16 window
//   --splits N                           force N splits (decode_args::splits) at every shape
//
// Pages are filled on the device by encode_append from random fp16 keys/values (one
// 32K-token random chunk encoded into every page range: distinct memory, repeating
// content; the content does not change the work of the kernel). The printed table has
// no fp16 column: bench/gpu/sdpa.py times PyTorch SDPA on the same shapes and merges.
#include <cuda_runtime.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include <bgtq/cuda/device.hpp>
#include <bgtq/cuda/device_cache.hpp>
#include <bgtq/cuda/upload.hpp>

#include "gpu_device_checks.hpp"

namespace {

using namespace bgtq_gpu;
namespace bc = bgtq::cuda;

#define DIE_CUDA(call)                                                                                   \
  do {                                                                                                   \
    const cudaError_t e_ = (call);                                                                       \
    if (e_ != cudaSuccess) {                                                                             \
      std::fprintf(stderr, "bench_decode: %s failed: %s (%s:%d)\n", #call, cudaGetErrorString(e_), __FILE__, __LINE__); \
      std::exit(1);                                                                                      \
    }                                                                                                    \
  } while (0)
#define DIE_ERRC(call)                                                                                   \
  do {                                                                                                   \
    const bgtq::errc e_ = (call);                                                                        \
    if (e_ != bgtq::errc::ok) {                                                                          \
      std::fprintf(stderr, "bench_decode: %s returned %s: %s\n", #call, bgtq::to_string(e_), bc::last_error_message()); \
      std::exit(1);                                                                                      \
    }                                                                                                    \
  } while (0)

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0.0 : (v.size() % 2 ? v[v.size() / 2] : 0.5 * (v[v.size() / 2 - 1] + v[v.size() / 2]));
}

//! Seconds between CUDA events recorded around f() on the default stream.
template <class F>
double event_seconds(cudaEvent_t e0, cudaEvent_t e1, const F& f) {
  DIE_CUDA(cudaEventRecord(e0));
  f();
  DIE_CUDA(cudaEventRecord(e1));
  DIE_CUDA(cudaEventSynchronize(e1));
  float ms = 0;
  DIE_CUDA(cudaEventElapsedTime(&ms, e0, e1));
  return ms * 1e-3;
}

// ------------------------------------------------------------------ --check

//! Which split kernels a run exercises (--path): separate processes per path keep a fault
//! in one kernel (a sticky CUDA error) from losing the other's results (run.sh).
enum class path_mode { both, cuda_cores, tensor_cores };

int report_checks(const std::vector<check_report>& reps) {
  int failed = 0;
  for (const auto& r : reps) {
    std::printf("%s %s\n", r.ok ? "PASS" : "FAIL", r.what.c_str());
    failed += r.ok ? 0 : 1;
  }
  std::printf("check: %zu passed, %d failed\n", reps.size() - static_cast<std::size_t>(failed), failed);
  return failed == 0 ? 0 : 1;
}

//! small: a few short cases per kernel (--sanitize), for runs under compute-sanitizer, whose
//! memcheck/racecheck/synccheck slow a kernel down by one to two orders of magnitude.
int run_checks(path_mode mode, bool small) {
  std::vector<check_report> reps;
  const bool cc = mode != path_mode::tensor_cores, tcs = mode != path_mode::cuda_cores;
  const method mixed = mixed_method();
  const method tq3 = tq_method(3), tq2 = tq_method(2);
  method greedy;
  greedy.name = "gtq-greedy-3";
  greedy.keys = key_kind::greedy;
  method nc = tq3;
  nc.name = "tq3-normcorr-fp32";
  nc.norm_correction = true;
  nc.fp32_radius = true;
  const bc::decode_path tc = bc::decode_path::tensor_cores;
  if (small) {  // every kernel once, at sizes with partial pages, windows, several splits and GQA
    const shape s = encode_shape(128, 2, 8, 12);
    const std::vector<int> lengths{300, 1, 97};
    if (cc) {
      reps.push_back(gpu_check_encode(s, mixed, {97, 54, 1}, bc::dtype::f16, false, 3, 1));
      reps.push_back(gpu_check_decode(decode_shape(128, 2, 8, 2, 8, lengths), mixed, lengths,
                                      {.q_type = bc::dtype::f16, .splits = 3, .seed = 2, .nonfinite = 3}));
      reps.push_back(gpu_check_energy(8, 2, 64, bgtq::rope_pairing::interleaved, 300, bc::dtype::f32, 100, 3));
    }
    if (tcs) {
      reps.push_back(gpu_check_decode(decode_shape(128, 2, 8, 2, 8, lengths), mixed, lengths,
                                      {.q_type = bc::dtype::f16, .splits = 3, .seed = 4, .path = tc, .nonfinite = 3}));
      reps.push_back(gpu_check_decode(decode_shape(128, 2, 8, 2, 16, {300, 97}, 1, 128), tq3, {300, 97},
                                      {.q_type = bc::dtype::f16, .splits = 2, .seed = 5, .path = tc}));
    }
    return report_checks(reps);
  }
  for (int D : {64, 128}) {
    if (!cc) break;
    const shape s = encode_shape(D, 3, 6, 40);
    reps.push_back(gpu_check_encode(s, mixed, {97, 54, 200, 1}, bc::dtype::f16, false, 3, 1 + D));
    reps.push_back(gpu_check_encode(s, mixed, {97, 54, 200, 1}, bc::dtype::bf16, true, 1, 2 + D));
    reps.push_back(gpu_check_encode(s, tq2, {300, 97}, bc::dtype::f32, false, 2, 3 + D));
    reps.push_back(gpu_check_encode(s, nc, {130, 33}, bc::dtype::f16, true, 1, 4 + D, true));
  }
  const int pool[] = {1, 54, 97, 1000, 5000};
  const std::vector<int> wide{1500, 129, 257, 128, 305};  // window rows 304, 129, 257, 128, 304 (sink 4 + recent 300)
  for (int D : {64, 128})
    for (int G : {1, 4, 8})
      for (int batch : {1, 17}) {
        if (!cc) break;
        std::vector<int> lengths;
        for (int i = 0; i < batch; ++i) lengths.push_back(batch == 1 ? 5000 : pool[(i * 3) % 5]);
        const shape s = decode_shape(D, 2, 2 * G, batch == 17 ? 4 : 0, batch == 17 ? 32 : 0, lengths);
        reps.push_back(gpu_check_decode(s, G == 4 ? greedy : mixed, lengths, {.seed = 10 + D + G + batch}));
      }
  for (int bits : {2, 3})
    for (int L : {1, 54, 97, 1000}) {
      if (!cc) break;
      const shape s = decode_shape(128, 4, 16, 2, 16, {L}, 1);
      reps.push_back(gpu_check_decode(s, bits == 2 ? tq2 : tq3, {L},
                                      {.q_type = bc::dtype::f16, .splits = bits == 2 ? 3 : 0, .seed = 20 + L}));
    }
  if (cc) {
    const shape s = decode_shape(128, 1, 16, 1, 8, {1000, 97, 5000}, 8);
    reps.push_back(gpu_check_decode(s, mixed, {1000, 97, 5000}, {.q_type = bc::dtype::bf16, .splits = 64, .seed = 30}));
    reps.push_back(gpu_check_decode(decode_shape(64, 2, 8, 2, 8, {300, 1, 97}), mixed, {300, 1, 97},
                                    {.q_type = bc::dtype::f16, .seed = 31, .nonfinite = 5}));
    reps.push_back(gpu_check_decode(decode_shape(64, 2, 8, 4, 16, {300, 97, 23}), mixed, {300, 97, 23},
                                    {.seed = 32, .inf_window = true}));  // every window score -inf
    reps.push_back(gpu_check_energy(8, 2, 64, bgtq::rope_pairing::interleaved, 1000, bc::dtype::f32, 300, 40));
    reps.push_back(gpu_check_energy(32, 8, 128, bgtq::rope_pairing::half, 517, bc::dtype::f16, 4096, 41));
    reps.push_back(gpu_check_fill());
    // GQA groups that leave head slots of a CTA empty or use the two-head kernel
    for (int G : {2, 3, 6, 12})
      reps.push_back(gpu_check_decode(decode_shape(64, 2, 2 * G, 2, 8, {300, 97, 1}), mixed, {300, 97, 1}, {.seed = 33 + G}));
    // the value widths the Block-GTQ (3) and uniform (2, 3) checks above leave out
    for (int bits : {1, 4, 5, 6, 7, 8})
      reps.push_back(gpu_check_decode(decode_shape(bits % 2 ? 128 : 64, 2, 8, 2, 16, {1000, 54}, 1), tq_method(bits), {1000, 54},
                                      {.q_type = bc::dtype::f16, .seed = 80 + bits}));
    // head dims whose value pass splits tokens 4 ways (16) or gives threads a second
    // coordinate (160), and encode groups narrower than a warp or wider than the CTA
    for (int D : {16, 48, 160, 256}) {
      if (D != 256) reps.push_back(gpu_check_decode(decode_shape(D, 2, 8, 2, 8, {300, 77}), mixed, {300, 77}, {.seed = 90 + D}));
      const shape s = encode_shape(D, 2, 4, 8);
      reps.push_back(gpu_check_encode(s, D == 256 ? nc : mixed, {97, 33}, bc::dtype::f16, D == 48, D == 48 ? 1 : 2, 95 + D));
    }
    // a window wider than the merge kernel's 128 threads
    reps.push_back(gpu_check_decode(decode_shape(128, 2, 8, 4, 300, wide), mixed, wide, {.seed = 99}));
  }
  // the tensor-core path (decode_path::tensor_cores, tolerance 3e-3: fp16 operands)
  for (int D : {64, 128})
    for (int G : {1, 4, 16}) {
      if (!tcs) break;
      const std::vector<int> lengths{5000, 1, 54, 97, 1000, 130, 64};
      const shape s = decode_shape(D, 2, 2 * G, 4, 32, lengths);
      reps.push_back(gpu_check_decode(s, G == 4 ? greedy : mixed, lengths, {.seed = 50 + D + G, .path = tc}));
    }
  for (int G : {3, 6, 12}) {  // partial head chunks
    if (!tcs) break;
    reps.push_back(
        gpu_check_decode(decode_shape(64, 2, 2 * G, 2, 8, {300, 97, 1}), mixed, {300, 97, 1}, {.seed = 53 + G, .path = tc}));
  }
  for (int bits = 1; bits <= 8; ++bits) {
    if (!tcs) break;
    const shape s = decode_shape(128, 2, 8, 2, 16, {1000, 97}, 1, bits % 3 == 0 ? 128 : 64);
    reps.push_back(gpu_check_decode(s, tq_method(bits), {1000, 97},
                                    {.q_type = bc::dtype::f16, .splits = bits == 2 ? 7 : 0, .seed = 60 + bits, .path = tc}));
  }
  if (tcs) {
    reps.push_back(gpu_check_decode(decode_shape(128, 1, 16, 1, 8, {1000, 97, 5000}, 8, 192), mixed, {1000, 97, 5000},
                                    {.q_type = bc::dtype::bf16, .splits = 64, .seed = 70, .path = tc}));
    reps.push_back(gpu_check_decode(decode_shape(32, 2, 8, 2, 8, {300, 77}), mixed, {300, 77}, {.seed = 72, .path = tc}));
    reps.push_back(gpu_check_decode(decode_shape(128, 2, 8, 4, 300, wide), mixed, wide, {.seed = 73, .path = tc}));
    reps.push_back(gpu_check_decode(decode_shape(64, 2, 8, 2, 8, {300, 1, 97}), mixed, {300, 1, 97},
                                    {.q_type = bc::dtype::f16, .seed = 71, .path = tc, .nonfinite = 5}));
  }
  return report_checks(reps);
}

// ------------------------------------------------------------------ benchmark

double copy_bandwidth(std::size_t bytes, int runs) {
  void *a = nullptr, *b = nullptr;
  DIE_CUDA(cudaMalloc(&a, bytes));
  DIE_CUDA(cudaMalloc(&b, bytes));
  DIE_CUDA(cudaMemset(a, 1, bytes));
  cudaEvent_t e0, e1;
  DIE_CUDA(cudaEventCreate(&e0));
  DIE_CUDA(cudaEventCreate(&e1));
  for (int i = 0; i < 3; ++i) DIE_CUDA(cudaMemcpy(b, a, bytes, cudaMemcpyDeviceToDevice));
  std::vector<double> t;
  for (int i = 0; i < runs; ++i)
    t.push_back(event_seconds(e0, e1, [&] { DIE_CUDA(cudaMemcpyAsync(b, a, bytes, cudaMemcpyDeviceToDevice)); }));
  DIE_CUDA(cudaEventDestroy(e0));
  DIE_CUDA(cudaEventDestroy(e1));
  DIE_CUDA(cudaFree(a));
  DIE_CUDA(cudaFree(b));
  return 2.0 * static_cast<double>(bytes) / median(t);  // bytes read + written per second
}

struct row {
  std::string method, kv, path;
  int batch = 0;
  long long T = 0;
  double us = 0, bytes = 0, frac = 0, gbps = 0;
  int splits = 0;
  double bytes_per_token = 0;
  double vs_cuda_cores = -1;  //!< tensor-core rows: max |out_tc - out_cc| / max |out_cc| on the same cache and queries
};

//! window > 0: every decode also attends an fp16 window of that many tokens per sequence
//! (random K/V rows, window_len = window for every b; bytes count them at 4·D per token).
//! splits > 0 forces that split count (decode_args::splits) at every shape.
//! The benchmark's shapes, smallest last: --quick, --tiny and --dry (a flag given
//! beside another takes the smaller sizes). tiny and dry are dry runs of the program
//! (tiny buffers); dry also times T = 256 only, 3 runs (no minimum of 20).
enum class bench_sizes { full, quick, tiny, dry };

int run_bench(bench_sizes sizes, int runs, const std::string& json_path, path_mode mode, int window, int splits) {
  const bool tiny = sizes >= bench_sizes::tiny;
  if (sizes == bench_sizes::dry) runs = 3;
  int dev = 0;
  DIE_CUDA(cudaGetDevice(&dev));
  cudaDeviceProp prop{};
  DIE_CUDA(cudaGetDeviceProperties(&prop, dev));
  std::fprintf(stderr, "device: %s, %d SMs, %.1f GiB\n", prop.name, prop.multiProcessorCount,
               static_cast<double>(prop.totalGlobalMem) / (1u << 30));
  const double copy_bw = copy_bandwidth(tiny ? std::size_t{1} << 24 : std::size_t{1} << 30, std::max(runs, 20));
  std::fprintf(stderr, "device-to-device copy bandwidth: %.1f GB/s (2 x bytes / time, median of %d)\n", copy_bw * 1e-9,
               std::max(runs, 20));

  const int Hkv = 8, Hq = 32, D = 128, P = 64;
  const std::vector<long long> Ts = sizes == bench_sizes::dry     ? std::vector<long long>{256}
                                    : tiny                          ? std::vector<long long>{256, 1024}
                                    : sizes == bench_sizes::quick ? std::vector<long long>{4096, 32768}
                                            : std::vector<long long>{4096, 32768, 131072, 524288};
  const std::vector<int> batches = tiny ? std::vector<int>{1, 2} : std::vector<int>{1, 16};
  const long long maxT = Ts.back();
  const int max_batch = batches.back();
  const long long total_tokens = maxT * max_batch;
  const int max_pages = static_cast<int>(total_tokens / P);

  struct mdef {
    std::string label, kv;
    method m;
  };
  std::vector<mdef> methods;
  for (int bits : {3, 2}) {
    mdef g;
    g.label = "Block-GTQ";
    g.kv = "K" + std::to_string(bits) + "V" + std::to_string(bits);
    g.m.name = "gtq" + std::to_string(bits);
    g.m.keys = key_kind::greedy;
    g.m.key_bits = bits;
    g.m.value_bits = bits;
    g.m.pairing = bgtq::rope_pairing::half;
    g.m.haar_max_dim = 64;
    methods.push_back(g);
    mdef u = g;
    u.label = "TQ-MSE";
    u.m.name = "tq" + std::to_string(bits);
    u.m.keys = key_kind::uniform;
    methods.push_back(u);
  }

  // random fp16 input chunk, reused for every page range
  const int chunk = tiny ? 512 : 32768;
  const std::size_t row_elems = static_cast<std::size_t>(Hkv) * D;
  void *dk = nullptr, *dv = nullptr, *dslots = nullptr, *dq = nullptr, *dout = nullptr, *dpt = nullptr, *dqn = nullptr;
  DIE_CUDA(cudaMalloc(&dk, chunk * row_elems * 2));
  DIE_CUDA(cudaMalloc(&dv, chunk * row_elems * 2));
  DIE_CUDA(cudaMalloc(&dslots, static_cast<std::size_t>(chunk) * 8));
  DIE_ERRC(bc::fill_uniform(dk, chunk * row_elems, bc::dtype::f16, 1, -2.0f, 2.0f));
  DIE_ERRC(bc::fill_uniform(dv, chunk * row_elems, bc::dtype::f16, 2, -1.0f, 1.0f));
  DIE_CUDA(cudaMalloc(&dq, static_cast<std::size_t>(max_batch) * Hq * D * 4));
  DIE_CUDA(cudaMalloc(&dout, static_cast<std::size_t>(max_batch) * Hq * D * 4));
  DIE_ERRC(bc::fill_uniform(dq, static_cast<std::size_t>(max_batch) * Hq * D, bc::dtype::f32, 3, -1.0f, 1.0f));
  DIE_CUDA(cudaMalloc(&dpt, static_cast<std::size_t>(max_pages) * 4));
  DIE_CUDA(cudaMalloc(&dqn, static_cast<std::size_t>(max_batch) * 4));
  void *dwk = nullptr, *dwv = nullptr, *dwl = nullptr;  // the fp16 window, [B][Hkv][window][D]
  if (window > 0) {
    const std::size_t welems = static_cast<std::size_t>(max_batch) * Hkv * static_cast<std::size_t>(window) * D;
    DIE_CUDA(cudaMalloc(&dwk, welems * 2));
    DIE_CUDA(cudaMalloc(&dwv, welems * 2));
    DIE_CUDA(cudaMalloc(&dwl, static_cast<std::size_t>(max_batch) * 4));
    DIE_ERRC(bc::fill_uniform(dwk, welems, bc::dtype::f16, 4, -2.0f, 2.0f));
    DIE_ERRC(bc::fill_uniform(dwv, welems, bc::dtype::f16, 5, -1.0f, 1.0f));
    const std::vector<int> wl(static_cast<std::size_t>(max_batch), window);
    DIE_CUDA(cudaMemcpy(dwl, wl.data(), wl.size() * 4, cudaMemcpyHostToDevice));
  }
  cudaEvent_t e0, e1;
  DIE_CUDA(cudaEventCreate(&e0));
  DIE_CUDA(cudaEventCreate(&e1));
  // an L2 flush buffer: four times the L2 (at least 64 MiB, except for --tiny dry runs)
  const std::size_t flush_bytes = std::max<std::size_t>(std::size_t{4} * static_cast<std::size_t>(std::max(prop.l2CacheSize, 0)),
                                                        tiny ? std::size_t{1} << 20 : std::size_t{64} << 20);
  void* flush = nullptr;
  DIE_CUDA(cudaMalloc(&flush, flush_bytes));
  std::fprintf(stderr, "L2 %d bytes: a %zu-byte memset evicts it before every timed decode run\n", prop.l2CacheSize, flush_bytes);

  std::vector<row> rows;
  std::vector<std::string> encode_lines;
  bool mismatch = false;
  for (const mdef& md : methods) {
    shape s;
    s.layers = 1;
    s.kv_heads = Hkv;
    s.q_heads = Hq;
    s.head_dim = D;
    s.page_tokens = P;
    s.max_pages = 1;  // host object only describes the layout
    const auto host = make_cache(s, md.m, 2024);
    bc::device_cache cache;
    DIE_ERRC(bc::device_cache::create(bc::describe(host, max_pages), cache));
    std::vector<bc::decode_path> paths;
    if (mode != path_mode::tensor_cores) paths.push_back(bc::decode_path::cuda_cores);
    const char* no_tc = nullptr;
    if (mode != path_mode::cuda_cores) {
      if (cache.tensor_core_decode(0, &no_tc))
        paths.push_back(bc::decode_path::tensor_cores);
      else
        std::fprintf(stderr, "bench_decode: %s %s: no tensor-core rows (%s)\n", md.label.c_str(), md.kv.c_str(), no_tc);
    }
    const double head_bytes = static_cast<double>(cache.page_part_bytes(0, 0));
    // fill every page: token t of the pool -> slot t (pages in order)
    std::vector<std::int64_t> slots(static_cast<std::size_t>(chunk));
    std::vector<double> enc_t;
    for (long long t0 = 0; t0 < total_tokens; t0 += chunk) {
      for (int i = 0; i < chunk; ++i) slots[static_cast<std::size_t>(i)] = t0 + i;
      DIE_CUDA(cudaMemcpy(dslots, slots.data(), slots.size() * 8, cudaMemcpyHostToDevice));
      bc::encode_args a;
      a.layer = 0;
      a.tokens = chunk;
      a.type = bc::dtype::f16;
      a.k = dk;
      a.v = dv;
      a.slot_mapping = static_cast<const std::int64_t*>(dslots);
      enc_t.push_back(event_seconds(e0, e1, [&] { DIE_ERRC(cache.encode_append(a)); }));
    }
    {
      const double t = median(enc_t);
      const double in_bytes = 2.0 * chunk * row_elems * 2;  // fp16 K and V read
      char buf[256];
      std::snprintf(buf, sizeof buf, "encode %-9s %s: %d tokens x %d heads in %.1f us (%.1f GB/s of fp16 input, %.3f of copy bw)",
                    md.label.c_str(), md.kv.c_str(), chunk, Hkv, t * 1e6, in_bytes / t * 1e-9, in_bytes / t / copy_bw);
      encode_lines.push_back(buf);
      std::fprintf(stderr, "%s\n", buf);
    }
    for (int B : batches)
      for (long long T : Ts) {
        const int pps = static_cast<int>(T / P);
        std::vector<int> pt(static_cast<std::size_t>(B) * pps), qn(static_cast<std::size_t>(B), static_cast<int>(T));
        for (int b = 0; b < B; ++b)
          for (int p = 0; p < pps; ++p) pt[static_cast<std::size_t>(b) * pps + p] = b * static_cast<int>(maxT / P) + p;
        DIE_CUDA(cudaMemcpy(dpt, pt.data(), pt.size() * 4, cudaMemcpyHostToDevice));
        DIE_CUDA(cudaMemcpy(dqn, qn.data(), qn.size() * 4, cudaMemcpyHostToDevice));
        const bc::split_plan sp = cache.decode_plan(B, T, splits);
        void* ws = nullptr;
        const std::size_t wsb = cache.decode_workspace_bytes(B, sp.splits);
        DIE_CUDA(cudaMalloc(&ws, wsb));
        bc::decode_args a;
        a.layer = 0;
        a.batch = B;
        a.q_type = bc::dtype::f32;
        a.q = dq;
        a.out = static_cast<float*>(dout);
        a.page_table = static_cast<const int*>(dpt);
        a.max_pages_per_seq = pps;
        a.quantized = static_cast<const int*>(dqn);
        a.max_quantized = T;
        a.workspace = ws;
        a.workspace_bytes = wsb;
        a.splits = splits;
        if (window > 0) {
          a.window_k = static_cast<const std::uint16_t*>(dwk);
          a.window_v = static_cast<const std::uint16_t*>(dwv);
          a.window_len = static_cast<const int*>(dwl);
          a.window_cap = window;
        }
        std::vector<float> out_cc;
        if (mode == path_mode::tensor_cores) {  // the reference for vs_cuda_cores: one untimed CUDA-core run
          a.path = bc::decode_path::cuda_cores;
          DIE_ERRC(cache.decode_attention(a));
          out_cc.resize(static_cast<std::size_t>(B) * Hq * D);
          DIE_CUDA(cudaMemcpy(out_cc.data(), dout, out_cc.size() * 4, cudaMemcpyDeviceToHost));
        }
        for (const bc::decode_path path : paths) {
          a.path = path;
          const bool tc = path == bc::decode_path::tensor_cores;
          int splits_run = 0;
          bool tc_run = false;
          a.splits_used = &splits_run;
          a.tensor_cores_used = &tc_run;
          for (int i = 0; i < 3; ++i) DIE_ERRC(cache.decode_attention(a));
          a.splits_used = nullptr;
          a.tensor_cores_used = nullptr;
          if (tc_run != tc) {
            std::fprintf(stderr, "bench_decode: asked for the %s kernel, the launch ran the other one\n", tc ? "tensor-core" : "CUDA-core");
            return 1;
          }
          DIE_CUDA(cudaDeviceSynchronize());
          std::vector<double> t;
          for (int i = 0; i < runs; ++i) {
            // evict the pages from L2 before each timed run (the smaller shapes' pages fit in
            // it), outside the events; the kernels are enqueued while the memset runs, so
            // host launch overhead stays out of the timing too
            DIE_CUDA(cudaMemsetAsync(flush, i & 0xFF, flush_bytes));
            t.push_back(event_seconds(e0, e1, [&] { DIE_ERRC(cache.decode_attention(a)); }));
          }
          std::vector<float> out(static_cast<std::size_t>(B) * Hq * D);
          DIE_CUDA(cudaMemcpy(out.data(), dout, out.size() * 4, cudaMemcpyDeviceToHost));
          for (float x : out)
            if (!std::isfinite(x)) {
              std::fprintf(stderr, "bench_decode: non-finite output (%s %s B=%d T=%lld %s)\n", md.label.c_str(), md.kv.c_str(), B,
                           T, tc ? "tensor cores" : "cuda cores");
              return 1;
            }
          row r;
          r.method = md.label + (tc ? "/tc" : "");
          r.kv = md.kv;
          r.path = tc ? "tensor_cores" : "cuda_cores";
          r.batch = B;
          r.T = T;
          r.us = median(t) * 1e6;
          // packed pages read + queries/outputs + split partials written and read back
          r.bytes = static_cast<double>(B) * Hkv * pps * head_bytes + 2.0 * B * Hq * D * 4 +
                    2.0 * B * Hq * splits_run * (D + 2) * 4.0 + static_cast<double>(B) * Hkv * window * D * 4.0;
          r.gbps = r.bytes / (r.us * 1e-6) * 1e-9;
          r.frac = r.bytes / (r.us * 1e-6) / copy_bw;
          r.splits = splits_run;
          r.bytes_per_token = head_bytes / P;
          if (!tc) out_cc = out;
          if (tc && !out_cc.empty()) {
            // the two paths on the same pages and queries, at benchmark scale (all SMs busy)
            r.vs_cuda_cores = rel_max_error(out, out_cc);
            if (!(r.vs_cuda_cores <= 5e-3)) {
              std::fprintf(stderr, "bench_decode: tensor-core output differs from the CUDA-core output by %.3g (%s %s B=%d T=%lld)\n",
                           r.vs_cuda_cores, md.label.c_str(), md.kv.c_str(), B, T);
              mismatch = true;
            }
          }
          rows.push_back(r);
          std::fprintf(stderr, "%-12s %s B=%2d T=%7lld: %9.1f us, %8.3f GB/s, %.3f of copy bw (%d splits)", r.method.c_str(),
                       r.kv.c_str(), B, T, r.us, r.gbps, r.frac, r.splits);
          if (r.vs_cuda_cores >= 0) std::fprintf(stderr, ", vs cuda cores %.2g", r.vs_cuda_cores);
          std::fprintf(stderr, "\n");
        }
        DIE_CUDA(cudaFree(ws));
      }
  }
  std::printf("%-12s %-5s %5s %8s %11s %14s %9s\n", "method", "kv", "batch", "T", "time_us", "bytes", "frac_bw");
  for (const row& r : rows)
    std::printf("%-12s %-5s %5d %8lld %11.1f %14.0f %9.3f\n", r.method.c_str(), r.kv.c_str(), r.batch, r.T, r.us, r.bytes, r.frac);
  if (!json_path.empty()) {
    FILE* f = std::fopen(json_path.c_str(), "w");
    if (!f) {
      std::fprintf(stderr, "bench_decode: cannot write %s\n", json_path.c_str());
      return 1;
    }
    std::fprintf(f, "{\n  \"device\": \"%s\",\n  \"sms\": %d,\n  \"copy_bw_Bps\": %.6e,\n  \"runs\": %d,\n", prop.name,
                 prop.multiProcessorCount, copy_bw, runs);
    std::fprintf(f, "  \"shape\": {\"Hq\": %d, \"Hkv\": %d, \"D\": %d, \"page_tokens\": %d, \"window\": %d},\n", Hq, Hkv, D, P,
                 window);
    std::fprintf(f, "  \"encode\": [");
    for (std::size_t i = 0; i < encode_lines.size(); ++i) std::fprintf(f, "%s\"%s\"", i ? ", " : "", encode_lines[i].c_str());
    std::fprintf(f, "],\n  \"rows\": [\n");
    for (std::size_t i = 0; i < rows.size(); ++i) {
      const row& r = rows[i];
      std::fprintf(f,
                   "    {\"method\": \"%s\", \"kv\": \"%s\", \"path\": \"%s\", \"batch\": %d, \"T\": %lld, \"time_us\": %.3f, "
                   "\"bytes\": %.0f, \"frac_copy_bw\": %.5f, \"splits\": %d, \"bytes_per_token_head\": %.3f, "
                   "\"vs_cuda_cores\": %.4g}%s\n",
                   r.method.c_str(), r.kv.c_str(), r.path.c_str(), r.batch, r.T, r.us, r.bytes, r.frac, r.splits,
                   r.bytes_per_token, r.vs_cuda_cores, i + 1 < rows.size() ? "," : "");
    }
    std::fprintf(f, "  ]\n}\n");
    std::fclose(f);
  }
  DIE_CUDA(cudaEventDestroy(e0));
  DIE_CUDA(cudaEventDestroy(e1));
  for (void* p : {dk, dv, dslots, dq, dout, dpt, dqn, flush, dwk, dwv, dwl}) DIE_CUDA(cudaFree(p));
  if (mismatch) {  // after the table and the JSON: the timings stay available
    std::fprintf(stderr, "bench_decode: the tensor-core path disagreed with the CUDA-core path (see above)\n");
    return 3;
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  bool check = false, probe = false, small = false;
  bench_sizes sizes = bench_sizes::full;
  auto at_most = [&](bench_sizes s) { sizes = std::max(sizes, s); };
  path_mode mode = path_mode::both;
  int runs = 25, window = 0, splits = 0;
  std::string json;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--check" || a == "--sanitize") {
      check = true;
      small = a == "--sanitize";
    } else if (a == "--probe") {
      probe = true;
    } else if (a == "--quick") {
      at_most(bench_sizes::quick);
    } else if (a == "--tiny") {
      at_most(bench_sizes::tiny);
    } else if (a == "--dry") {
      at_most(bench_sizes::dry);
    } else if (a == "--runs" && i + 1 < argc) {
      runs = std::max(20, std::atoi(argv[++i]));
    } else if (a == "--window" && i + 1 < argc) {
      window = std::atoi(argv[++i]);
      if (window < 0 || window > 16384) {
        std::fprintf(stderr, "bench_decode: --window must be in 0..16384 (got %d)\n", window);
        return 2;
      }
    } else if (a == "--splits" && i + 1 < argc) {
      splits = std::atoi(argv[++i]);
      if (splits < 0 || splits > 1024) {
        std::fprintf(stderr, "bench_decode: --splits must be in 0..1024 (got %d)\n", splits);
        return 2;
      }
    } else if (a == "--json" && i + 1 < argc) {
      json = argv[++i];
    } else if (a == "--path" && i + 1 < argc) {
      const std::string v = argv[++i];
      if (v == "both") {
        mode = path_mode::both;
      } else if (v == "cuda_cores") {
        mode = path_mode::cuda_cores;
      } else if (v == "tensor_cores") {
        mode = path_mode::tensor_cores;
      } else {
        std::fprintf(stderr, "bench_decode: --path must be both, cuda_cores or tensor_cores (got '%s')\n", v.c_str());
        return 2;
      }
    } else {
      std::fprintf(stderr,
                   "usage: bench_decode [--probe | --check | --sanitize | [--quick | --tiny | --dry] [--runs N>=20] [--window N] [--splits N] [--json FILE]] "
                   "[--path both|cuda_cores|tensor_cores]\n");
      return 2;
    }
  }
  if (bgtq::cuda::device_count() == 0) {
    std::fprintf(stderr, "bench_decode: no CUDA device\n");
    return 77;
  }
  if (probe) {
    char name[256];
    if (bgtq::cuda::device_name(0, name, sizeof name) != bgtq::errc::ok) return 1;
    std::printf("%d CUDA device(s); device 0: %s; overlapped launches %s\n", bgtq::cuda::device_count(), name,
                bgtq::cuda::pdl_disabled() ? "off (BGTQ_NO_PDL)" : "on where sm_90 code runs");
    return 0;
  }
  return check ? run_checks(mode, small) : run_bench(sizes, runs, json, mode, window, splits);
}
