// Device tests of the CUDA kernels against the CPU reference (skipped without a GPU).
// The checks themselves live in gpu_device_checks.hpp (shared with bench_decode --check).
#include <catch2/catch.hpp>

#include <algorithm>
#include <climits>
#include <cmath>
#include <cstdlib>
#include <initializer_list>
#include <string>
#include <vector>

#include "common.hpp"
#include "gpu_device_checks.hpp"

using namespace bgtq_gpu;
namespace bc = bgtq::cuda;

namespace {

void require_device() {
  if (bc::device_count() == 0) bgtq_test::skip_test("no CUDA device");
}

// Built against the CPU emulator (tests/cuda/emu), the cases run the device sizes when the
// emulator runs a CTA's threads as fibers without a sanitizer (the default: about 50 s
// for every cuda_emu case on 2 cores). Under ThreadSanitizer (fibers too, each access
// checked) and where they are OS threads (AddressSanitizer, BGTQ_EMU_THREADS=os: each
// barrier wakes every thread through the OS scheduler), the run keeps one configuration
// in three (keep: every value of every loop still occurs), caps kv_len at 1000 (500
// under ThreadSanitizer) and batch 17 at 7; BGTQ_EMU_FULL=1 runs the device sizes there too.
// Tag [tsan]: the cases .ci/run's ThreadSanitizer stage runs on the emulator (make
// test-tsan TSAN_EMU_SPEC="[tsan]"): every kernel (encode, rotation, both split kernels,
// merge, energy), the window, the NaN query's early return; about 50 CPU-seconds of the
// 3.3 CPU-minutes all cases take under TSan, whose CTA threads are fibers (docs/errors.md).
#if defined(BGTQ_CUDA_EMULATION)
bool full_size() {
#if !defined(BGTQ_EMU_TSAN)
  if (bgtq_emu::use_fibers()) return true;
#endif
  const char* e = std::getenv("BGTQ_EMU_FULL");
  return e != nullptr && e[0] == '1';
}
#else
bool full_size() { return true; }
#endif
// The reduced run's one configuration in three: configuration i of nested loops with
// `dims` values each (outermost first) is kept when the sum of its loop indices is a
// multiple of 3. Every value of every loop then occurs (the other loops' index sums take
// all residues: checked for the loops below), where every third i kept only the first
// value of an innermost loop of three (the reduced "pages of 128 and 192 tokens" case
// never forced a split) and a diagonal of i dropped GQA 4 and 16 from a 2 x 4 x 2 loop.
bool reduced_keep(int k, std::initializer_list<int> dims) {
  int sum = 0;
  for (auto d = std::rbegin(dims); d != std::rend(dims); ++d) {
    sum += k % *d;
    k /= *d;
  }
  return sum % 3 == 0;
}
bool keep(int& i, std::initializer_list<int> dims) { return full_size() || reduced_keep(i++, dims); }
// Sequence lengths of the reduced run: at most 1000 tokens, 500 under ThreadSanitizer
// (races need every code path once, not long sequences; the stage runs in .ci/run).
#if defined(BGTQ_EMU_TSAN)
constexpr int reduced_max_len = 500;
#else
constexpr int reduced_max_len = 1000;
#endif
int cap(int L) { return full_size() ? L : std::min(L, reduced_max_len); }

// the awkward lengths of a batch of n sequences
std::vector<int> lengths_for(int n) {
  const int pool[] = {1, 54, 97, 1000, 5000};
  std::vector<int> v;
  for (int i = 0; i < n; ++i) v.push_back(cap(pool[(i * 3) % 5]));
  return v;
}

// Block-GTQ with every width 1..8 over D 64/128, the GQA group sizes `Gs`, batch 1
// (5000 tokens) and 17 (awkward lengths, fp16 window), on one decode path.
void check_mixed_batches(std::initializer_list<int> Gs, bc::decode_path path, int seed) {
  int combo = 0;
  for (int D : {64, 128})
    for (int G : Gs)
      for (int batch : {1, 17}) {
        if (!keep(combo, {2, static_cast<int>(Gs.size()), 2})) continue;
        const std::vector<int> lengths = batch == 1 ? std::vector<int>{cap(5000)} : lengths_for(full_size() ? 17 : 7);
        const shape s = decode_shape(D, 2, 2 * G, batch == 17 ? 4 : 0, batch == 17 ? 32 : 0, lengths);
        const check_report r = gpu_check_decode(s, mixed_method(), lengths, {.seed = seed + D + G + batch, .path = path});
        INFO(r.what);
        REQUIRE(r.ok);
      }
}

}  // namespace

TEST_CASE("the reduced run keeps every value of every loop of the cases that use it, and about a third of them", "[gpu]") {
  const std::vector<std::vector<int>> loops{{2, 3, 2}, {2, 4, 2}, {2, 5, 2}, {3, 2, 3}, {8, 4, 2}};
  for (const auto& dims : loops) {
    int n = 1;
    for (int d : dims) n *= d;
    std::vector<std::vector<bool>> seen(dims.size());
    for (std::size_t j = 0; j < dims.size(); ++j) seen[j].assign(static_cast<std::size_t>(dims[j]), false);
    int kept = 0;
    for (int k = 0; k < n; ++k) {
      if (!reduced_keep(k, {dims[0], dims[1], dims[2]})) continue;
      ++kept;
      for (int j = static_cast<int>(dims.size()) - 1, r = k; j >= 0; --j) {
        seen[static_cast<std::size_t>(j)][static_cast<std::size_t>(r % dims[static_cast<std::size_t>(j)])] = true;
        r /= dims[static_cast<std::size_t>(j)];
      }
    }
    INFO(dims[0] << " x " << dims[1] << " x " << dims[2] << ": kept " << kept << " of " << n);
    for (const auto& v : seen) REQUIRE(std::all_of(v.begin(), v.end(), [](bool b) { return b; }));
    REQUIRE(3 * kept >= n - 2);
    REQUIRE(3 * kept <= n + 4);
  }
}

TEST_CASE("encode_append writes the CPU encoder's pages (Block-GTQ, widths 1..8)", "[gpu][encode]") {
  require_device();
  int combo = 0;
  for (int D : {64, 128})
    for (bc::dtype t : {bc::dtype::f16, bc::dtype::bf16, bc::dtype::f32})
      for (bool interleave : {false, true}) {
        if (!keep(combo, {2, 3, 2})) continue;
        const shape s = encode_shape(D, 3, 6, 40);
        const check_report r = gpu_check_encode(s, mixed_method(), {97, 54, 200, 1}, t, interleave, interleave ? 1 : 3, 100 + D);
        INFO(r.what);
        REQUIRE(r.ok);
      }
}

TEST_CASE("encode_append writes the CPU encoder's pages (uniform TQ 2 and 3 bits, norm correction, fp32 radii)",
          "[gpu][encode][tsan]") {
  require_device();
  for (int bits : {2, 3})
    for (int D : {64, 128}) {
      const shape s = encode_shape(D, 2, 8, 40);
      method m = tq_method(bits);
      const check_report r = gpu_check_encode(s, m, {300, 97}, bc::dtype::f16, false, 2, 200 + bits);
      INFO(r.what);
      REQUIRE(r.ok);
      m.norm_correction = true;
      m.fp32_radius = bits == 3;
      m.name += "-normcorr";
      const check_report r2 = gpu_check_encode(s, m, {130, 33}, bc::dtype::bf16, true, 1, 300 + bits);
      INFO(r2.what);
      REQUIRE(r2.ok);
    }
}

TEST_CASE("encode_append at head dims 16, 48, 160 and 256 (a group wider than the CTA's 128 threads, shared memory past 48 KB)",
          "[gpu][encode]") {
  require_device();
  // the other cases hold D 64 and 128: here rotation groups narrower than a warp (16),
  // between (48), and wider than the CTA (uniform TQ at 160 and 256: a thread rotates
  // two output coordinates), and at 256 with norm correction 96 KB of shared memory
  int combo = 0;
  for (int D : {16, 48, 160, 256})
    for (const bool uniform : {false, true}) {
      method m = uniform ? tq_method(3) : mixed_method();
      if (uniform && D == 256) {
        m.norm_correction = true;
        m.name += "-normcorr";
      }
      const shape s = encode_shape(D, 2, 4, 8);
      const bool interleave = (combo++ % 2) == 1;
      const check_report r = gpu_check_encode(s, m, {97, 33}, bc::dtype::f16, interleave, interleave ? 1 : 2, 600 + D);
      INFO(r.what);
      REQUIRE(r.ok);
    }
}

TEST_CASE("encode_append stores a non-finite row as a zero vector and counts it", "[gpu][encode]") {
  require_device();
  shape s;
  s.max_pages = 8;
  const check_report r = gpu_check_encode(s, tq_method(3), {70, 5}, bc::dtype::f16, true, 1, 400, true);
  INFO(r.what);
  REQUIRE(r.ok);
}


TEST_CASE("encode_append of rows with norms above 2^100 or beyond float, tiny rows, clamped radii (f32, bf16)",
          "[gpu][encode]") {
  require_device();
  // fp16 and fp32 radii, prefill and decode-step order; the clamp counter equals the CPU's
  method fp32 = tq_method(3);
  fp32.fp32_radius = true;
  fp32.norm_correction = true;
  fp32.name = "tq3-normcorr-fp32";
  int combo = 0;
  for (const method& m : {mixed_method(), fp32})
    for (bc::dtype t : {bc::dtype::f32, bc::dtype::bf16})
      for (int D : {64, 128}) {
        const shape s = encode_shape(D, 2, 4, 8);
        const bool interleave = (combo++ % 2) == 1;
        const check_report r = gpu_check_encode(s, m, {70, 33}, t, interleave, interleave ? 1 : 2, 500 + D, false, true);
        INFO(r.what);
        REQUIRE(r.ok);
      }
}

TEST_CASE("decode_attention matches CPU decode_attention (Block-GTQ, batch 1 and 17, D 64 and 128)", "[gpu][decode]") {
  require_device();
  check_mixed_batches({1, 4, 8}, bc::decode_path::cuda_cores, 500);
}

TEST_CASE("decode_attention matches CPU decode_attention (uniform TQ 2/3 bits, awkward lengths, windows)", "[gpu][decode][tsan]") {
  require_device();
  int combo = 0;
  for (int bits : {2, 3})
    for (int L : {1, 54, 97, 1000, 5000})
      for (bool window : {false, true}) {
        if (!keep(combo, {2, 5, 2}) || cap(L) != L) continue;
        const shape s = decode_shape(bits == 2 ? 64 : 128, 4, 16, window ? 2 : 0, window ? 16 : 0, {L}, 1);
        const check_report r = gpu_check_decode(s, tq_method(bits), {L}, {.seed = 600 + L + bits});
        INFO(r.what);
        REQUIRE(r.ok);
      }
}

TEST_CASE("decode_attention: fp16 and bf16 queries, forced split counts, GQA 16 (two head chunks)", "[gpu][decode]") {
  require_device();
  const std::vector<int> lengths{1000, 97, cap(5000)};
  const shape s = decode_shape(128, 1, 16, 1, 8, lengths);
  int combo = 0;
  for (bc::dtype t : {bc::dtype::f16, bc::dtype::bf16})
    for (int splits : {1, 3, 64}) {
      if (!full_size() && combo++ % 2 != 0) continue;
      const check_report r = gpu_check_decode(s, mixed_method(), lengths, {.q_type = t, .splits = splits, .seed = 700 + splits});
      INFO(r.what);
      REQUIRE(r.ok);
    }
}

TEST_CASE("decode_attention: GQA 2, 3, 6 and 12 (two-head CTAs, padded and partial head chunks), both paths",
          "[gpu][decode][mma]") {
  require_device();
  // the other cases use GQA 1, 4, 8 and 16, where every CTA's head chunk is full: G = 2
  // takes the CUDA-core kernel's two-head instantiation, 3 and 6 leave one and two of a
  // chunk's 4 or 8 head slots empty, 12 is one full chunk of 8 and one of 4
  const std::vector<int> lengths{300, 97, 1};
  for (int G : {2, 3, 6, 12})
    for (bc::decode_path path : {bc::decode_path::cuda_cores, bc::decode_path::tensor_cores}) {
      const bool tc = path == bc::decode_path::tensor_cores;
      const shape s = decode_shape(64, 2, 2 * G, 2, 8, lengths);
      const check_report r = gpu_check_decode(s, mixed_method(), lengths, {.seed = 740 + G + 20 * tc, .path = path});
      INFO(r.what);
      REQUIRE(r.ok);
    }
}

TEST_CASE("decode_attention on CUDA cores: uniform TQ keys and values at widths 1 and 4..8", "[gpu][decode]") {
  require_device();
  // the Block-GTQ cases hold keys of every width but values of 3 bits, the uniform case
  // above 2 and 3: here every other value width of the CUDA-core value pass, one length
  // each in the emulated run (both lengths, with and without a window, at full size)
  for (int bits : {1, 4, 5, 6, 7, 8})
    for (int L : {54, 1000})
      for (bool window : {false, true}) {
        if (!full_size() && ((L == 54) != (bits % 2 == 0) || window != (bits >= 6))) continue;
        const shape s = decode_shape(bits % 2 ? 128 : 64, 2, 8, window ? 2 : 0, window ? 16 : 0, {L}, 1);
        const check_report r = gpu_check_decode(s, tq_method(bits), {L}, {.seed = 730 + L + bits});
        INFO(r.what);
        REQUIRE(r.ok);
      }
}

TEST_CASE("decode_attention: an engine's own logit scale (flatter and sharper than 1/sqrt(D)), both paths", "[gpu][decode][mma]") {
  require_device();
  const std::vector<int> lengths{300, 97};
  shape s = decode_shape(64, 2, 8, 2, 8, lengths);
  for (float factor : {0.37f, 3.0f})
    for (bc::decode_path path : {bc::decode_path::cuda_cores, bc::decode_path::tensor_cores}) {
      s.scale = factor / std::sqrt(64.0f);
      const bool tc = path == bc::decode_path::tensor_cores;
      const check_report r =
          gpu_check_decode(s, mixed_method(), lengths, {.seed = 780 + 10 * tc + static_cast<int>(factor), .path = path});
      INFO(r.what);
      REQUIRE(r.ok);
    }
}

TEST_CASE("decode_attention: a NaN, Inf or overflowing (3e38) query element gives NaN outputs for its head only, counted",
          "[gpu][decode][mma][tsan]") {
  require_device();
  const std::vector<int> lengths{300, 1, 97};
  const shape s = decode_shape(64, 2, 8, 2, 8, lengths);
  for (bc::decode_path path : {bc::decode_path::cuda_cores, bc::decode_path::tensor_cores})
    for (bc::dtype t : {bc::dtype::f32, bc::dtype::f16, bc::dtype::bf16}) {
      const bool tc = path == bc::decode_path::tensor_cores;
      const check_report r = gpu_check_decode(
          s, mixed_method(), lengths, {.q_type = t, .seed = 750 + static_cast<int>(t) + 10 * tc, .path = path, .nonfinite = 5});
      INFO(r.what);
      REQUIRE(r.ok);
    }
}

TEST_CASE("decode_attention: queries at 0.999 of the overflow guard's norm bound are served like the CPU, at 1.01 refused",
          "[gpu][decode][mma]") {
  require_device();
  // the device's bound (head_meta::key_bound, and the window's) against the CPU's, with
  // and without a window, at the default and an engine's scale of 4 (max(1, scale))
  const std::vector<int> lengths{300, 97, 23};
  for (const int win : {0, 1})
    for (const float scale : {0.0f, 4.0f}) {
      shape s = decode_shape(64, 2, 8, 2 * win, 8 * win, lengths);
      s.scale = scale;
      for (bc::decode_path path : {bc::decode_path::cuda_cores, bc::decode_path::tensor_cores}) {
        const bool tc = path == bc::decode_path::tensor_cores;
        const check_report r =
            gpu_check_decode(s, mixed_method(), lengths, {.seed = 765 + win + 2 * tc, .path = path, .guard_edge = true});
        INFO(r.what);
        REQUIRE(r.ok);
      }
    }
}

TEST_CASE("decode_attention: a window whose every score is -inf leaves the pages' result, finite", "[gpu][decode][mma]") {
  require_device();
  const std::vector<int> lengths{300, 97, 23};  // 23: a sequence that is all window but 3 tokens
  const shape s = decode_shape(64, 2, 8, 4, 16, lengths);
  for (bc::decode_path path : {bc::decode_path::cuda_cores, bc::decode_path::tensor_cores}) {
    const check_report r = gpu_check_decode(s, mixed_method(), lengths, {.seed = 760, .path = path, .inf_window = true});
    INFO(r.what);
    REQUIRE(r.ok);
  }
}

TEST_CASE("decode_attention: windows wider than the merge kernel's 128 threads (sink 4 + recent 300, rows 128, 129, 257, 304), both paths",
          "[gpu][decode][mma]") {
  require_device();
  // the other cases hold windows of at most 43 tokens: here the merge kernel's max, the
  // exponentials and its value sums each take several passes over the window. A
  // sequence of up to 304 tokens is all window (its window_len is its length, nothing
  // quantized): 128 rows (one pass exactly), 129 and 257 (a multiple of 128 plus one);
  // 305 tokens hold 304 window rows and 1 quantized token, the longest one 304 and the rest
  const std::vector<int> lengths{cap(1500), 129, 257, 128, 305};
  const shape s = decode_shape(128, 2, 8, 4, 300, lengths);
  for (bc::decode_path path : {bc::decode_path::cuda_cores, bc::decode_path::tensor_cores}) {
    const bool tc = path == bc::decode_path::tensor_cores;
    const check_report r = gpu_check_decode(s, mixed_method(), lengths, {.seed = 765 + tc, .path = path});
    INFO(r.what);
    REQUIRE(r.ok);
  }
}

TEST_CASE("the kernels' fp16 and bf16 input conversion equals the host's for every bit pattern", "[gpu]") {
  require_device();
  const check_report r = gpu_check_conversions();
  INFO(r.what);
  REQUIRE(r.ok);
}

TEST_CASE("the kernels' fp32 -> fp16 and bf16 rounding equals the host's at every fp16 tie and its neighbours", "[gpu]") {
  require_device();
  const check_report r = gpu_check_narrowing();
  INFO(r.what);
  REQUIRE(r.ok);
}

TEST_CASE("device energy sums equal the CPU's double sums", "[gpu][energy][tsan]") {
  require_device();
  const check_report a = gpu_check_energy(8, 2, 64, bgtq::rope_pairing::interleaved, 1000, bc::dtype::f32, 300, 800);
  INFO(a.what);
  REQUIRE(a.ok);
  const check_report b = gpu_check_energy(32, 8, 128, bgtq::rope_pairing::half, 517, bc::dtype::f16, 4096, 801);
  INFO(b.what);
  REQUIRE(b.ok);
  // D = 256: one row of 256 threads per CTA, G = 1
  const check_report c = gpu_check_energy(4, 4, 256, bgtq::rope_pairing::interleaved, 97, bc::dtype::bf16, 50, 802);
  INFO(c.what);
  REQUIRE(c.ok);
  // head dims that do not divide the CTA's 256 threads: D = 10 (25 rows of 10 threads,
  // 6 threads idle) and D = 48 (5 rows, 16 idle); the non-finite case below runs D = 10
  // but checks only that its sums are finite, not their values
  for (const int D : {10, 48}) {
    const check_report d = gpu_check_energy(6, 2, D, bgtq::rope_pairing::half, 300, bc::dtype::f32, 120, 803 + D);
    INFO(d.what);
    REQUIRE(d.ok);
  }
}

TEST_CASE("device energy refuses NaN and Inf at download, naming the first, and reset forgets them", "[gpu][energy][errors]") {
  require_device();
  using p = bgtq_gpu::energy_plant;
  const float inf = INFINITY, nan = NAN;
  // token 450 holds a NaN in q head 5 and an Inf in k head 0: q's heads come first; a
  // later token's plant does not matter; 200 + 400 tokens in passes of 300 (token 450 is
  // the second call's 250th, in its first pass)
  const check_report a = gpu_check_energy_nonfinite(8, 2, 64, 600, bc::dtype::f32, 300, 200,
                                                    {p{true, 520, 1, 9, nan}, p{true, 450, 0, 0, inf}, p{false, 450, 5, 3, nan}},
                                                    "in q at token 450 (counted since create / reset), head 5, dim 3", 810);
  INFO(a.what);
  REQUIRE(a.ok);
  // only k: -Inf at token 13 (the first call), f16 input, D = 128
  const check_report b = gpu_check_energy_nonfinite(4, 4, 128, 37, bc::dtype::f16, 1000, 20, {p{true, 13, 3, 127, -inf}},
                                                    "in k at token 13 (counted since create / reset), head 3, dim 127", 811);
  INFO(b.what);
  REQUIRE(b.ok);
  // a bf16 NaN in k in the second call's second pass (token 40 + 20 + 5), D = 10 (25 rows
  // of 10 threads per CTA, 6 threads idle)
  const check_report c = gpu_check_energy_nonfinite(6, 2, 10, 90, bc::dtype::bf16, 20, 40, {p{true, 65, 1, 9, nan}},
                                                    "in k at token 65 (counted since create / reset), head 1, dim 9", 812);
  INFO(c.what);
  REQUIRE(c.ok);
}

TEST_CASE("launchers return error codes with a message for bad arguments", "[gpu][errors]") {
  require_device();
  shape s;
  const auto c = make_cache(s, tq_method(3), 1);
  bc::cache_desc d = bc::describe(c);
  bc::device_cache dev;
  d.head_dim = 512;
  REQUIRE(bc::device_cache::create(d, dev) == bgtq::errc::unsupported);
  REQUIRE(std::string(bc::last_error_message()).find("head_dim") != std::string::npos);
  REQUIRE(!dev.valid());
  REQUIRE(bc::device_cache::create(bc::describe(c), dev) == bgtq::errc::ok);
  REQUIRE(dev.valid());
  bc::encode_args e;
  e.tokens = 4;
  REQUIRE(dev.encode_append(e) == bgtq::errc::invalid_argument);  // null pointers
  e.layer = 3;
  REQUIRE(dev.encode_append(e) == bgtq::errc::not_found);
  bc::decode_args a;
  a.batch = 1;
  REQUIRE(dev.decode_attention(a) == bgtq::errc::invalid_argument);  // null q/out
  REQUIRE(std::string(bc::last_error_message()).find("null") != std::string::npos);
  for (float bad_scale : {NAN, INFINITY, -1.0f}) {
    a.scale = bad_scale;
    REQUIRE(dev.decode_attention(a) == bgtq::errc::invalid_argument);
    REQUIRE(std::string(bc::last_error_message()).find("scale") != std::string::npos);
  }
  a.scale = 0.0f;
  // more tokens than the page table can hold: refused before anything is read or launched
  dev_buf buf;
  REQUIRE(buf.alloc(1 << 16) == cudaSuccess);
  a.q = buf.p;
  a.out = buf.as<float>();
  a.quantized = buf.as<int>();
  a.page_table = buf.as<int>();
  for (const auto& [mq, mpps] : {std::pair{65LL, 1}, std::pair{1LL, 0}, std::pair{-1LL, 1}}) {
    a.max_quantized = mq;
    a.max_pages_per_seq = mpps;
    INFO("max_quantized " << mq << ", max_pages_per_seq " << mpps);
    REQUIRE(dev.decode_attention(a) == bgtq::errc::invalid_argument);
    REQUIRE(std::string(bc::last_error_message()).find("max_quantized") != std::string::npos);
  }
  // within the page table but above INT_MAX (quantized[] is int; the kernels' int tile
  // arithmetic overflowed at 2^40 and the launch ran for minutes)
  for (const long long mq : {(1LL << 31), (1LL << 36)}) {
    a.max_quantized = mq;
    a.max_pages_per_seq = 1 << 30;
    INFO("max_quantized " << mq);
    REQUIRE(dev.decode_attention(a) == bgtq::errc::invalid_argument);
    REQUIRE(std::string(bc::last_error_message()).find("max_quantized above INT_MAX") != std::string::npos);
  }
  // a workspace not 256-byte aligned (its sections sit at 256-byte offsets, the merge
  // reads 8-byte pairs: base + 4 faulted on a device)
  a.max_quantized = 1;
  a.max_pages_per_seq = 1;
  a.workspace = buf.as<std::uint8_t>() + 4;
  a.workspace_bytes = (1 << 16) - 4;
  REQUIRE(dev.decode_attention(a) == bgtq::errc::invalid_argument);
  REQUIRE(std::string(bc::last_error_message()).find("workspace must be 256-byte aligned") != std::string::npos);
  // an empty batch still has its scale, dtype and path checked (it returned ok first)
  a = bc::decode_args{};
  a.batch = 0;
  a.scale = NAN;
  REQUIRE(dev.decode_attention(a) == bgtq::errc::invalid_argument);
  REQUIRE(std::string(bc::last_error_message()).find("scale") != std::string::npos);
  a.scale = 0.0f;
  a.path = static_cast<bc::decode_path>(7);
  REQUIRE(dev.decode_attention(a) == bgtq::errc::invalid_argument);
  a.path = bc::decode_path::automatic;
  REQUIRE(dev.decode_attention(a) == bgtq::errc::ok);
  // a page part no 32-bit size holds is refused (the key part of 0xFFFFFFC0 bytes wrapped
  // the page size to a small one, and encode_append wrote 4 GiB past the pool)
  {
    bc::cache_desc huge = bc::describe(c);
    huge.keys[0].bytes = 0xFFFFFFC0u;
    bc::device_cache hd;
    REQUIRE(bc::device_cache::create(huge, hd) == bgtq::errc::invalid_argument);
    REQUIRE(std::string(bc::last_error_message()).find("above 1 GiB") != std::string::npos);
    REQUIRE(!hd.valid());
  }
  // upload_all_pages names what differs (it returned shape_mismatch with the message of
  // whatever failed before)
  {
    std::vector<std::uint8_t> part(dev.page_part_bytes(0, 0));
    REQUIRE(dev.download_page_part(s.max_pages + 7, 0, 0, part.data()) == bgtq::errc::invalid_argument);
    bc::device_cache other;
    REQUIRE(bc::upload_all_pages(c, other) == bgtq::errc::shape_mismatch);
    REQUIRE(std::string(bc::last_error_message()).find("upload_all_pages: the device_cache is empty") != std::string::npos);
    auto c2 = make_cache(shape{}, tq_method(3), 1);
    bc::cache_desc d2 = bc::describe(c2);
    d2.max_pages += 1;
    REQUIRE(bc::device_cache::create(d2, other) == bgtq::errc::ok);
    REQUIRE(bc::upload_all_pages(c, other) == bgtq::errc::shape_mismatch);
    REQUIRE(std::string(bc::last_error_message()).find("upload_all_pages: the device cache has max_pages") != std::string::npos);
  }
  a = bc::decode_args{};
  std::vector<std::uint8_t> host(dev.page_part_bytes(0, 0));
  REQUIRE(dev.download_page_part(s.max_pages, 0, 0, host.data()) == bgtq::errc::invalid_argument);
  REQUIRE(dev.download_page_part(0, 0, 5, host.data()) == bgtq::errc::not_found);
  REQUIRE(dev.download_page_part(0, 0, 0, host.data()) == bgtq::errc::ok);
  bc::device_energy en;
  REQUIRE(bc::device_energy::create(8, 2, 64, std::vector<int>(63, 0), 100, en) == bgtq::errc::shape_mismatch);
  REQUIRE(bc::device_energy::create(8, 2, 64, std::vector<int>(64, 0), 100, en) == bgtq::errc::ok);
  REQUIRE(en.accumulate(nullptr, nullptr, 5, bc::dtype::f16) == bgtq::errc::invalid_argument);
  REQUIRE(std::string(bc::last_error_message()).find("null") != std::string::npos);
  REQUIRE(en.accumulate(nullptr, nullptr, 0, bc::dtype::f16) == bgtq::errc::ok);  // zero tokens: nothing read
  // a pass beyond int segment offsets is refused, counted without overflow: 2^40 tokens
  // wrapped the chunk count to 0 (a zero-byte partial buffer, then writes past it) and
  // LLONG_MAX overflowed; 2 * 2 * 32 segments allow 256 * floor((2^31 - 1) / 128) tokens
  for (const long long mt : {1LL << 40, (1LL << 40) + 256, LLONG_MAX, 256LL * (INT_MAX / 128) + 1}) {
    bc::device_energy big;
    INFO("max_tokens " << mt);
    REQUIRE(bc::device_energy::create(8, 2, 64, std::vector<int>(64, 0), mt, big) == bgtq::errc::unsupported);
    REQUIRE(std::string(bc::last_error_message()).find("max_tokens " + std::to_string(mt) + " is beyond the 4294967040") !=
            std::string::npos);
    REQUIRE(big.blocks() == 0);
  }
}

TEST_CASE("a failed CUDA call is reported once: a pool beyond device memory, then the next calls succeed", "[gpu][errors]") {
  require_device();
  shape s;
  const auto c = make_cache(s, tq_method(3), 1);
  bc::device_cache dev;
  REQUIRE(bc::device_cache::create(bc::describe(c), dev) == bgtq::errc::ok);
  const std::size_t pool = dev.pool_bytes();
  bc::cache_desc huge = bc::describe(c);
  huge.max_pages = 1 << 28;
  std::size_t huge_bytes = 0;
  for (int h = 0; h < s.kv_heads; ++h) huge_bytes += dev.page_part_bytes(0, h) << 28;
  cudaDeviceProp prop{};
  REQUIRE(cudaGetDeviceProperties(&prop, 0) == cudaSuccess);
  REQUIRE(huge_bytes > prop.totalGlobalMem);
  // the allocation fails: an error naming it, the cache given to create untouched
  REQUIRE(bc::device_cache::create(huge, dev) == bgtq::errc::device_error);
  const std::string msg = bc::last_error_message();
  INFO(msg);
  REQUIRE(msg.find("cudaMalloc") != std::string::npos);
  REQUIRE(msg.find("out of memory") != std::string::npos);
  REQUIRE(dev.valid());
  REQUIRE(dev.pool_bytes() == pool);
  // ... and the runtime's error state consumed by the report: not seen again by the next
  // launch check, as a failure of a launch that succeeded
  REQUIRE(cudaPeekAtLastError() == cudaSuccess);
  dev_buf buf;
  REQUIRE(buf.alloc(1024 * 4) == cudaSuccess);
  REQUIRE(bc::fill_uniform(buf.p, 1024, bc::dtype::f32, 1, 0.0f, 1.0f) == bgtq::errc::ok);
  // a caller's own failed call leaves its error pending (the runtime's behaviour, and the
  // emulator's); the library's next launch is not blamed for it, and does run (the buffer
  // poisoned with NaN first: the check below would pass on the first fill's values)
  REQUIRE(cudaMemset(buf.p, 0xFF, 1024 * 4) == cudaSuccess);
  void* p = nullptr;
  REQUIRE(cudaMalloc(&p, huge_bytes) == cudaErrorMemoryAllocation);
  REQUIRE(cudaPeekAtLastError() == cudaErrorMemoryAllocation);
  REQUIRE(bc::fill_uniform(buf.p, 1024, bc::dtype::f32, 2, 0.0f, 1.0f) == bgtq::errc::ok);
  REQUIRE(cudaPeekAtLastError() == cudaSuccess);
  std::vector<float> got(1024);
  REQUIRE(cudaMemcpy(got.data(), buf.p, 4096, cudaMemcpyDeviceToHost) == cudaSuccess);
  REQUIRE(std::all_of(got.begin(), got.end(), [](float x) { return x >= 0.0f && x < 1.0f; }));
}

TEST_CASE("device_name, and device_cache and device_energy moved and empty", "[gpu][errors]") {
  require_device();
  cudaDeviceProp prop{};
  REQUIRE(cudaGetDeviceProperties(&prop, 0) == cudaSuccess);
  const std::string full(prop.name);
  REQUIRE(!full.empty());
  char name[256];
  REQUIRE(bc::device_name(0, name, static_cast<int>(sizeof name)) == bgtq::errc::ok);
  REQUIRE(std::string(name) == full.substr(0, 255));
  char four[4] = {'x', 'x', 'x', 'x'};
  REQUIRE(bc::device_name(0, four, 4) == bgtq::errc::ok);  // truncated, NUL-terminated
  REQUIRE(std::string(four) == full.substr(0, 3));
  REQUIRE(bc::device_name(0, nullptr, 8) == bgtq::errc::invalid_argument);
  REQUIRE(bc::device_name(bc::device_count(), name, 8) == bgtq::errc::device_error);  // one past the last device
  REQUIRE(std::string(bc::last_error_message()).find("cudaGetDeviceProperties") != std::string::npos);
  REQUIRE(cudaPeekAtLastError() == cudaSuccess);  // reported once

  shape s;
  const auto c = make_cache(s, tq_method(3), 1);
  bc::device_cache a;
  REQUIRE(bc::device_cache::create(bc::describe(c), a) == bgtq::errc::ok);
  const void* pool = a.pool();
  const std::size_t bytes = a.pool_bytes();
  bc::device_cache b(std::move(a));
  REQUIRE((!a.valid() && a.pool() == nullptr && a.pool_bytes() == 0 && a.sm_count() == 0 && a.desc().layers == 0));
  REQUIRE((b.valid() && b.pool() == pool && b.pool_bytes() == bytes && b.desc().layers == s.layers));
  bc::device_cache d;
  d = std::move(b);
  REQUIRE((!b.valid() && d.pool() == pool && d.desc().kv_heads == s.kv_heads));
  REQUIRE(bc::upload_all_pages(c, d) == bgtq::errc::ok);  // the moved-to cache works
  REQUIRE(bc::upload_all_pages(c, b) != bgtq::errc::ok);  // the moved-from one is empty, and says so

  bc::device_energy e;
  REQUIRE(bc::device_energy::create(8, 2, 64, std::vector<int>(64, 0), 100, e) == bgtq::errc::ok);
  REQUIRE(e.blocks() == 32);
  bc::device_energy f(std::move(e));
  REQUIRE((e.blocks() == 0 && e.tokens() == 0 && f.blocks() == 32));
  bc::device_energy g;
  g = std::move(f);
  REQUIRE((f.blocks() == 0 && g.blocks() == 32));
  REQUIRE(e.reset() == bgtq::errc::invalid_argument);
  REQUIRE(g.reset() == bgtq::errc::ok);
}

TEST_CASE("device_cache: pool_bytes is the host pool's, uploads land byte for byte, clear() zeroes every page part", "[gpu]") {
  require_device();
  shape s;
  s.layers = 2;
  s.max_pages = 6;
  const method m = mixed_method();
  auto c = make_cache(s, m, 17);
  fill_cache(c, {150, 70}, 18, bc::dtype::f32, m.value_scale);  // 3 + 2 of the 6 pages in use
  bc::device_cache dev;
  REQUIRE(bc::device_cache::create(bc::describe(c), dev) == bgtq::errc::ok);
  REQUIRE(dev.sm_count() > 0);
  std::size_t pool = 0;
  for (int l = 0; l < s.layers; ++l)
    for (int h = 0; h < s.kv_heads; ++h) {
      REQUIRE(dev.page_part_bytes(l, h) == c.head_page_bytes(l, h));
      pool += c.head_page_bytes(l, h) * static_cast<std::size_t>(s.max_pages);
    }
  REQUIRE(dev.pool_bytes() == pool);
  REQUIRE(bc::upload_all_pages(c, dev) == bgtq::errc::ok);
  // f(page, layer, head, the device's bytes of that page part) for every page part
  auto each_part = [&](auto&& f) {
    for (int pg = 0; pg < s.max_pages; ++pg)
      for (int l = 0; l < s.layers; ++l)
        for (int h = 0; h < s.kv_heads; ++h) {
          std::vector<std::uint8_t> got(dev.page_part_bytes(l, h), 0xA5);
          REQUIRE(dev.download_page_part(pg, l, h, got.data()) == bgtq::errc::ok);
          INFO("page " << pg << " layer " << l << " head " << h);
          f(pg, l, h, got);
        }
  };
  // every page part as the host holds it (pages in use carry codes: not all zero)
  std::size_t nonzero = 0;
  each_part([&](int pg, int l, int h, const std::vector<std::uint8_t>& got) {
    REQUIRE(std::equal(got.begin(), got.end(), c.page_ptr(pg, l, h)));
    nonzero += static_cast<std::size_t>(std::count_if(got.begin(), got.end(), [](std::uint8_t b) { return b != 0; }));
  });
  REQUIRE(nonzero > pool / 8);
  REQUIRE(dev.clear() == bgtq::errc::ok);
  each_part([](int, int, int, const std::vector<std::uint8_t>& got) {
    REQUIRE(std::all_of(got.begin(), got.end(), [](std::uint8_t b) { return b == 0; }));
  });
  bc::device_cache empty;
  REQUIRE(empty.clear() == bgtq::errc::invalid_argument);
  REQUIRE(empty.pool_bytes() == 0);
}

TEST_CASE("fill_uniform writes its Philox formula's values, seeded, and nothing past n (f32, f16, bf16)", "[gpu]") {
  require_device();
  const check_report r = gpu_check_fill();
  INFO(r.what);
  REQUIRE(r.ok);
}

// ---------------------------------------------------------------- tensor-core decode path
// decode_path::tensor_cores: fp16 centroids, scaled fp16 queries and fp16 weights x radii
// on mma.sync, fp32 accumulation (tolerance path_tol(true): 3e-3).

namespace {
method wide_method(int bits) {  // uniform TQ keys and values at `bits` (5..8: the shared-table path)
  method m = tq_method(bits);
  m.name = "tq" + std::to_string(bits) + "v" + std::to_string(bits);
  return m;
}
}  // namespace

TEST_CASE("tensor-core decode matches CPU decode_attention (Block-GTQ widths 1..8, D 64/128, GQA 1/4/8/16, batch 1/17)",
          "[gpu][decode][mma]") {
  require_device();
  check_mixed_batches({1, 4, 8, 16}, bc::decode_path::tensor_cores, 910);
}

TEST_CASE("tensor-core decode: uniform TQ keys and values at every width 1..8, awkward lengths, windows",
          "[gpu][decode][mma]") {
  require_device();
  int combo = 0;
  for (int bits = 1; bits <= 8; ++bits)
    for (int L : {1, 54, 97, 1000})
      for (bool window : {false, true}) {
        if (!keep(combo, {8, 4, 2})) continue;
        const shape s = decode_shape(bits % 2 ? 128 : 64, 3, 12, window ? 2 : 0, window ? 16 : 0, {L}, 1);
        const check_report r =
            gpu_check_decode(s, wide_method(bits), {L}, {.seed = 920 + L + bits, .path = bc::decode_path::tensor_cores});
        INFO(r.what);
        REQUIRE(r.ok);
      }
}

TEST_CASE("tensor-core decode: pages of 128 and 192 tokens, forced splits, fp16/bf16 queries, greedy Block-GTQ",
          "[gpu][decode][mma][tsan]") {
  require_device();
  method greedy = mixed_method();
  greedy.name = "gtq-greedy-3";
  greedy.keys = key_kind::greedy;
  greedy.pairing = bgtq::rope_pairing::half;
  const std::vector<int> lengths{1000, 97, cap(3000), 130};
  int combo = 0;
  for (int P : {64, 128, 192})
    for (bc::dtype t : {bc::dtype::f16, bc::dtype::bf16})
      for (int splits : {1, 3, 64}) {
        if (!keep(combo, {3, 2, 3})) continue;
        const shape s = decode_shape(128, 2, 8, 1, 8, lengths, 1, P);
        const check_report r =
            gpu_check_decode(s, P == 128 ? greedy : mixed_method(), lengths,
                             {.q_type = t, .splits = splits, .seed = 940 + P + splits, .path = bc::decode_path::tensor_cores});
        INFO(r.what);
        REQUIRE(r.ok);
      }
}

TEST_CASE("tensor-core decode: head dims 80, 96 and 120 (5, 6 and 8 value m-tiles counted at run time, at 120 a padded last m-tile and half k-tile)", "[gpu][decode][mma][tsan]") {
  require_device();
  const std::vector<int> lengths{300, 77};
  for (int D : {80, 96, 120})
    for (const method& m : {tq_method(3), mixed_method()}) {
      const shape s = decode_shape(D, 2, 8, 0, 0, lengths);
      const check_report r = gpu_check_decode(s, m, lengths, {.seed = 970 + D, .path = bc::decode_path::tensor_cores});
      INFO(r.what);
      REQUIRE(r.ok);
    }
}

TEST_CASE("decode_attention: head dims 16 to 160 on CUDA cores, 16, 32 and 48 on tensor cores (160 refused there)",
          "[gpu][decode][mma]") {
  require_device();
  // the other cases hold D = 64, 128 and 256 (and 80, 96, 120 on tensor cores). The
  // CUDA-core value pass splits a tile's tokens between 4 parts of 32 threads at D <= 32
  // and 2 parts of 64 at D <= 64 (16 and 48 leave threads of each part without a
  // coordinate), and gives a thread a second coordinate past 128 (at 160, 32 threads have
  // one); the tensor-core kernel's value groups stop at 128 coordinates
  const std::vector<int> lengths{300, 77};
  for (int D : {16, 32, 48, 80, 96, 120, 160})
    for (const method& m : {tq_method(3), mixed_method()}) {
      const shape s = decode_shape(D, 2, 8, 2, 8, lengths);
      const check_report r = gpu_check_decode(s, m, lengths, {.seed = 960 + D});
      INFO(r.what);
      REQUIRE(r.ok);
      if (D > 48 && D != 160) continue;
      const check_report t = gpu_check_decode(s, m, lengths, {.seed = 980 + D, .path = bc::decode_path::tensor_cores});
      INFO(t.what);
      if (D == 160)
        REQUIRE(t.what.find("value group of 160 coordinates") != std::string::npos);
      else
        REQUIRE(t.ok);
    }
}

TEST_CASE("tensor-core decode: tiny and large value radii (the accumulator's 2^E range)", "[gpu][decode][mma][tsan]") {
  require_device();
  const std::vector<int> lengths{700, 130};
  for (float vs : {2e-6f, 1e-3f, 3000.0f}) {
    method m = tq_method(3);
    m.value_scale = vs;
    m.name = "tq3-values-x" + std::to_string(vs);
    const shape s = decode_shape(128, 1, 4, 0, 0, lengths);
    const check_report r = gpu_check_decode(s, m, lengths, {.seed = 950, .path = bc::decode_path::tensor_cores});
    INFO(r.what);
    REQUIRE(r.ok);
  }
}

TEST_CASE("decode_attention on CUDA cores: scores jumping by 15.75 onto fp32 value radii of 1.2e30 stay finite",
          "[gpu][decode][errors]") {
  require_device();
  // errors.md row 18: the weights times such radii overflowed float when the running max
  // was raised only past a margin of 16 (the tensor cores keep an exact max, fp16 radii).
  // 8-bit keys, so that the quantized scores stay near 15.75, below 16; one split (and
  // two) holds 256 zero-score tokens and then hundreds at the jump; the planned split
  // count is checked too (its later splits start past the jump)
  method fp32 = tq_method(8);
  fp32.fp32_radius = true;
  fp32.name = "tq8-fp32-radii";
  const std::vector<int> lengths{1000, 300};
  for (const int splits : {0, 1, 2}) {
    const shape s = decode_shape(128, 2, 4, 0, 0, lengths);
    const check_report r = gpu_check_decode(s, fp32, lengths, {.splits = splits, .seed = 990, .score_jump = true});
    INFO(r.what);
    REQUIRE(r.ok);
  }
}

TEST_CASE("decode_attention ignores what a page holds past a sequence's tokens (Inf radii, random codes), both paths",
          "[gpu][decode][mma][tsan]") {
  require_device();
  const std::vector<int> lengths{700, 130, 65};  // tails of 4, 62 and 63 free slots at P = 64
  method fp32 = tq_method(3);
  fp32.fp32_radius = true;
  fp32.name = "tq3-fp32-radii";
  for (int P : {64, 128})
    for (const bc::decode_path path : {bc::decode_path::cuda_cores, bc::decode_path::tensor_cores})
      for (const method& m : {mixed_method(), fp32}) {
        if (path == bc::decode_path::tensor_cores && m.fp32_radius) continue;  // fp16 radii only there
        const shape s = decode_shape(128, 2, 8, 0, 0, lengths, 1, P);
        const check_report r = gpu_check_decode(s, m, lengths, {.seed = 960 + P, .path = path, .poison_tail = true});
        INFO(r.what);
        REQUIRE(r.ok);
      }
}

TEST_CASE("decode_attention: sequences held by the fp16 window alone (no quantized token, no page table), both paths",
          "[gpu][decode][mma]") {
  require_device();
  // sink 2 + recent 16: lengths up to 18 quantize nothing; a batch of only those has no
  // page table at all (a null pointer), the mixed one has rows for its long sequence only
  for (const std::vector<int>& lengths : {std::vector<int>{5, 18}, std::vector<int>{5, 700, 18, 1}})
    for (const bc::decode_path path : {bc::decode_path::cuda_cores, bc::decode_path::tensor_cores}) {
      const shape s = decode_shape(128, 2, 8, 2, 16, lengths, 1);
      const check_report r =
          gpu_check_decode(s, mixed_method(), lengths, {.seed = 970 + static_cast<int>(lengths.size()), .path = path});
      INFO(r.what);
      REQUIRE(r.ok);
    }
}

TEST_CASE("tensor-core decode: layers it cannot serve are refused (tensor_cores) or fall back (automatic)",
          "[gpu][decode][mma][errors]") {
  require_device();
  const std::vector<int> lengths{200};
  // fp32 radii: the value weights x radii are fp16 operands
  method fp32r = tq_method(3);
  fp32r.name = "tq3-fp32-radii";
  fp32r.fp32_radius = true;
  const shape s = decode_shape(64, 2, 8, 0, 0, lengths);
  {
    const auto c = make_cache(s, fp32r, 1);
    bc::device_cache dev;
    REQUIRE(bc::device_cache::create(bc::describe(c), dev) == bgtq::errc::ok);
    const char* why = nullptr;
    REQUIRE_FALSE(dev.tensor_core_decode(0, &why));
    REQUIRE(std::string(why).find("fp32 radii") != std::string::npos);
    REQUIRE_FALSE(dev.tensor_core_decode(1, &why));
    REQUIRE(std::string(why).find("layer") != std::string::npos);
  }
  check_report r = gpu_check_decode(s, fp32r, lengths, {.seed = 970, .path = bc::decode_path::tensor_cores});
  INFO(r.what);
  REQUIRE_FALSE(r.ok);
  REQUIRE(r.what.find("unsupported") != std::string::npos);
  REQUIRE(r.what.find("fp32 radii") != std::string::npos);
  // automatic falls back to the CUDA-core kernel: the exact tolerance holds
  r = gpu_check_decode(s, fp32r, lengths, {.seed = 971, .path = bc::decode_path::automatic, .tol = 1e-4});
  INFO(r.what);
  REQUIRE(r.ok);
  // head_dim 256: value groups of 256 coordinates are past the path's 128 (with a
  // 3 + 40-token window: the merge kernel's window at its widest rows)
  const shape s256 = decode_shape(256, 1, 4, 3, 40, lengths);
  r = gpu_check_decode(s256, tq_method(2), lengths, {.seed = 972, .path = bc::decode_path::tensor_cores});
  INFO(r.what);
  REQUIRE(r.what.find("value group of 256") != std::string::npos);
  r = gpu_check_decode(s256, tq_method(2), lengths, {.seed = 973, .path = bc::decode_path::automatic, .tol = 1e-4});
  INFO(r.what);
  REQUIRE(r.ok);
  // and where it can serve the layer, automatic takes it
  const auto c = make_cache(s, tq_method(3), 2);
  bc::device_cache dev;
  REQUIRE(bc::device_cache::create(bc::describe(c), dev) == bgtq::errc::ok);
  REQUIRE(dev.tensor_core_decode(0));
#if defined(BGTQ_CUDA_EMULATION)
  // a device whose per-CTA shared memory is below the kernel's need (e.g. 99 KB on sm_86
  // against a large layer): refused with the sizes, and automatic falls back
  setenv("BGTQ_EMU_SMEM_OPTIN", "20000", 1);
  bc::device_cache small;
  REQUIRE(bc::device_cache::create(bc::describe(c), small) == bgtq::errc::ok);
  const char* why = nullptr;
  REQUIRE_FALSE(small.tensor_core_decode(0, &why));
  REQUIRE(std::string(why).find("shared memory") != std::string::npos);
  r = gpu_check_decode(s, tq_method(3), lengths, {.seed = 974, .path = bc::decode_path::automatic, .tol = 1e-4});
  const check_report r2 = gpu_check_decode(s, tq_method(3), lengths, {.seed = 975, .path = bc::decode_path::tensor_cores});
  unsetenv("BGTQ_EMU_SMEM_OPTIN");
  INFO(r.what);
  REQUIRE(r.ok);  // the CUDA-core kernel, at its exact tolerance
  INFO(r2.what);
  REQUIRE(r2.what.find("shared memory") != std::string::npos);
#endif
}

#if defined(BGTQ_CUDA_EMULATION)
// Emulator only (no device can be made to fail this query on demand): the tensor-core
// kernel is planned at decode time from an occupancy query, and automatic falls back to
// the CUDA-core kernel when that plan cannot be made.
// (No ':' in the name: Catch2 v2's console reporter indents a failure's wrapped name at
// its first ": ", and past the line width it aborts.)
TEST_CASE("tensor-core decode without a run-time plan (occupancy 0, a failed query) falls back on automatic, "
          "is refused with its cause on tensor_cores, leaves no CUDA error pending",
          "[gpu][decode][mma][errors]") {
  const std::vector<int> lengths{cap(1500), 97};
  const shape s = decode_shape(128, 2, 8, 2, 16, lengths);
  const method m = mixed_method();
  struct fault {
    int error, blocks;
    const char* why;
  };
  for (const fault& f : {fault{0, 0, "occupancy 0"}, fault{cudaErrorInvalidDeviceFunction, -1, "invalid device function"}}) {
    INFO(f.why);
    const bgtq_emu::scoped_occupancy_fault inject(f.error, f.blocks);
    // automatic: the CUDA-core kernel ran (expect_tc = 0), at its exact tolerance
    check_report r =
        gpu_check_decode(s, m, lengths, {.seed = 1000, .path = bc::decode_path::automatic, .tol = 1e-4, .expect_tc = 0});
    INFO(r.what);
    REQUIRE(r.ok);
    // tensor_cores: refused, naming the cause, and the failed query's error consumed by
    // that report (after the automatic run above the decode's own launches would have
    // cleared it, so only here can a pending error show)
    const check_report t = gpu_check_decode(s, m, lengths, {.seed = 1001, .path = bc::decode_path::tensor_cores});
    INFO(t.what);
    REQUIRE_FALSE(t.ok);
    REQUIRE(t.what.find(f.why) != std::string::npos);
    REQUIRE(cudaPeekAtLastError() == cudaSuccess);
    // a forced split count needs no occupancy query: the tensor cores serve it
    const check_report forced = gpu_check_decode(s, m, lengths, {.splits = 3, .seed = 1002, .path = bc::decode_path::automatic});
    INFO(forced.what);
    REQUIRE(forced.ok);
  }
  // the query answers again: automatic takes the tensor cores
  const check_report r = gpu_check_decode(s, m, lengths, {.seed = 1003, .path = bc::decode_path::automatic});
  INFO(r.what);
  REQUIRE(r.ok);
}
#endif

// ---------------------------------------------------------------- plain launches (BGTQ_NO_PDL)
namespace {
// Sets BGTQ_NO_PDL for the scope (nullptr: unset), restoring what was there.
struct scoped_no_pdl {
  std::string old;
  bool had = false;
  explicit scoped_no_pdl(const char* v) {
    if (const char* e = std::getenv("BGTQ_NO_PDL")) {
      had = true;
      old = e;
    }
    if (v)
      setenv("BGTQ_NO_PDL", v, 1);
    else
      unsetenv("BGTQ_NO_PDL");
  }
  ~scoped_no_pdl() {
    if (had)
      setenv("BGTQ_NO_PDL", old.c_str(), 1);
    else
      unsetenv("BGTQ_NO_PDL");
  }
};
}  // namespace

TEST_CASE("BGTQ_NO_PDL switches overlapped launches off: unset, empty and 0 keep them", "[gpu]") {
  {
    scoped_no_pdl e(nullptr);
    REQUIRE_FALSE(bc::pdl_disabled());
  }
  for (const char* keep_on : {"", "0"}) {
    scoped_no_pdl e(keep_on);
    INFO("BGTQ_NO_PDL='" << keep_on << "'");
    REQUIRE_FALSE(bc::pdl_disabled());
  }
  for (const char* off : {"1", "yes", "00"}) {
    scoped_no_pdl e(off);
    INFO("BGTQ_NO_PDL='" << off << "'");
    REQUIRE(bc::pdl_disabled());
  }
}

TEST_CASE("decode_attention with plain launches (BGTQ_NO_PDL=1) matches the CPU on both split kernels", "[gpu][decode][mma]") {
  require_device();
  scoped_no_pdl e("1");
  const std::vector<int> lengths{cap(2000), 97, 1};
  const shape s = decode_shape(128, 2, 8, 4, 16, lengths);
  for (bc::decode_path path : {bc::decode_path::cuda_cores, bc::decode_path::tensor_cores}) {
    const bool tc = path == bc::decode_path::tensor_cores;
    const check_report r =
        gpu_check_decode(s, mixed_method(), lengths, {.q_type = bc::dtype::f16, .seed = 990 + tc, .path = path});
    INFO(r.what);
    REQUIRE(r.ok);
  }
}
