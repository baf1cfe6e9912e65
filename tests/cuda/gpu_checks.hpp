#pragma once
// Shared by the GPU tests (Catch2), the host-model tests and bench/gpu/bench_decode
// (its --check mode): building host caches of the methods under test, random inputs,
// and the comparisons of device results with the CPU cache and CPU decode attention.
// Plain C++ (the device parts use the CUDA runtime API through cuda_runtime.h and the
// blockgtq_cuda launchers); no Catch2 here: every check returns a report.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <string>
#include <vector>

#include <bgtq/allocate/allocate.hpp>
#include <bgtq/attention/decode.hpp>
#include <bgtq/cache/factory.hpp>
#include <bgtq/core/half.hpp>
#include <bgtq/core/rng.hpp>
#include <bgtq/cuda/upload.hpp>

namespace bgtq_gpu {

using namespace bgtq;

//! How keys are allocated.
enum class key_kind {
  mixed,    //!< Block-GTQ with every width 1..8 present (widths cycle over the blocks)
  uniform,  //!< uniform TQ-MSE: one group of all blocks at key_bits
  greedy,   //!< Block-GTQ: greedy allocation of key_bits on average from synthetic energies
};

//! A quantization method under test.
struct method {
  std::string name = "tq3";
  key_kind keys = key_kind::uniform;
  int key_bits = 3;    //!< uniform: the width; greedy: the average
  int value_bits = 3;  //!< TQ-MSE values over the whole head
  bool norm_correction = false;
  bool fp32_radius = false;
  int haar_max_dim = 64;  //!< groups up to this dimension use dense Haar, larger the fast rotations
  rope_pairing pairing = rope_pairing::interleaved;
  float value_scale = 1.0f;  //!< fill_cache's values are N(0, value_scale^2) (fp16 radius-range tests)
};

//! Uniform TQ-MSE keys and values at `bits` (named "tq<bits>").
inline method tq_method(int bits) {
  method m;
  m.name = "tq" + std::to_string(bits);
  m.keys = key_kind::uniform;
  m.key_bits = bits;
  m.value_bits = bits;
  return m;
}

//! Block-GTQ keys with every width 1..8 present, 3-bit values.
inline method mixed_method() {
  method m;
  m.name = "gtq-mixed-1..8";
  m.keys = key_kind::mixed;
  m.value_bits = 3;
  return m;
}

//! Cache shape under test.
struct shape {
  int layers = 1, kv_heads = 2, q_heads = 8, head_dim = 64, page_tokens = 64, max_pages = 64, sink = 0, recent = 0;
  bool nonfinite_zero = false;  //!< cache policy for NaN/Inf rows: store zero (else reject)
  float scale = 0.0f;           //!< decode's logit scale, on the device and the CPU (0 = 1 / sqrt(D))
};

//! The shape of the encode checks: one layer, D, Hkv, Hq, a pool of `max_pages` pages of
//! 64 tokens, no window.
inline shape encode_shape(int D, int Hkv, int Hq, int max_pages) {
  shape s;
  s.head_dim = D;
  s.kv_heads = Hkv;
  s.q_heads = Hq;
  s.max_pages = max_pages;
  return s;
}

//! A one-layer decode shape whose pool holds `lengths` (P tokens per page) plus `spare` pages.
inline shape decode_shape(int D, int Hkv, int Hq, int sink, int recent, const std::vector<int>& lengths, int spare = 0,
                          int P = 64) {
  shape s;
  s.page_tokens = P;
  s.head_dim = D;
  s.kv_heads = Hkv;
  s.q_heads = Hq;
  s.sink = sink;
  s.recent = recent;
  s.max_pages = spare;
  for (int L : lengths) s.max_pages += (L + s.page_tokens - 1) / s.page_tokens;
  return s;
}

inline std::uint64_t mix(std::uint64_t a, std::uint64_t b) {
  std::uint64_t x = a * 0x9E3779B97F4A7C15ull ^ (b + 0x632BE59BD9B4E019ull + (a << 6) + (a >> 2));
  x ^= x >> 31;
  x *= 0xBF58476D1CE4E5B9ull;
  return x ^ (x >> 29);
}

//! Key widths of (layer, h) for a method (L blocks).
inline std::vector<int> key_widths(const method& m, int L, int layer, int h) {
  std::vector<int> w(static_cast<std::size_t>(L), m.key_bits);
  if (m.keys == key_kind::mixed) {
    for (int i = 0; i < L; ++i) w[static_cast<std::size_t>(i)] = 1 + ((i * 3 + h + layer) % 8);
  } else if (m.keys == key_kind::greedy) {
    // synthetic RoPE-like energies: low-frequency blocks carry more energy, per-head variation
    std::vector<double> s(static_cast<std::size_t>(L));
    for (int i = 0; i < L; ++i)
      s[static_cast<std::size_t>(i)] = 1.0 + 40.0 * std::exp(-8.0 * i / L) + 0.3 * ((i * 7 + h) % 5);
    allocation_request req;
    req.scores = s;
    req.budget = budget_for(static_cast<double>(m.key_bits), L);
    req.b_min = 1;
    req.b_max = 8;
    w = greedy_allocator::allocate(req).bits;
  }
  return w;
}

//! A Block-GTQ / TQ cache of the given shape for a method.
inline bgtq_cache<> make_cache(const shape& s, const method& m, std::uint64_t seed) {
  cache_config cfg;
  cfg.layers = s.layers;
  cfg.kv_heads = s.kv_heads;
  cfg.q_heads = s.q_heads;
  cfg.head_dim = s.head_dim;
  cfg.page_tokens = s.page_tokens;
  cfg.max_pages = s.max_pages;
  cfg.sink = s.sink;
  cfg.recent = s.recent;
  cfg.nonfinite = s.nonfinite_zero ? nonfinite_policy::zero : nonfinite_policy::reject;
  const rope_layout rope(s.head_dim, m.pairing);
  const rope_layout natural(s.head_dim, rope_pairing::interleaved);
  key_codec_options ko;
  ko.codebook = codebook_kind::sphere;
  ko.radius = m.fp32_radius ? radius_format::fp32 : radius_format::fp16;
  ko.norm_correction = m.norm_correction;
  std::vector<gtq_pages::head_state> keys, values;
  for (int l = 0; l < s.layers; ++l)
    for (int h = 0; h < s.kv_heads; ++h) {
      const std::uint64_t hs = mix(seed, static_cast<std::uint64_t>(l * 1000 + h));
      const head_plan kp = make_head_plan(key_widths(m, rope.num_blocks(), l, h), hs, m.haar_max_dim);
      keys.push_back(gtq_pages::make(block_gtq_codec(kp, rope, ko)));
      const head_plan vp = uniform_head_plan(natural.num_blocks(), m.value_bits, mix(hs, 77), m.haar_max_dim);
      values.push_back(gtq_pages::make(block_gtq_codec(vp, natural, ko)));
    }
  return bgtq_cache<>(cfg, std::move(keys), std::move(values));
}

//! n standard-normal floats (times scale) from counter_rng(seed, stream).
inline std::vector<float> normal_floats(std::size_t n, std::uint64_t seed, std::uint64_t stream, float scale = 1.0f) {
  counter_rng r(seed, stream);
  std::vector<float> v(n);
  for (auto& x : v) x = static_cast<float>(r.normal()) * scale;
  return v;
}

//! Rounds floats through fp16 (type f16) or bf16 (bf16); bits receive the 16-bit patterns.
inline void round_to(std::vector<float>& v, cuda::dtype t, std::vector<std::uint16_t>* bits = nullptr) {
  if (bits) bits->resize(v.size());
  for (std::size_t i = 0; i < v.size(); ++i) {
    if (t == cuda::dtype::f32) continue;
    const std::uint16_t b = t == cuda::dtype::f16 ? float_to_half_bits(v[i]) : float_to_bf16_bits(v[i]);
    v[i] = t == cuda::dtype::f16 ? half_bits_to_float(b) : bf16_bits_to_float(b);
    if (bits) (*bits)[i] = b;
  }
}

//! Where each code of a page part differs between two page parts (same description).
struct code_diff {
  long long codes = 0;           //!< codes compared
  long long mismatches = 0;      //!< codes that differ
  long long near_threshold = 0;  //!< ... of which the CPU's rotated coordinate lies within `band` of the threshold between them
  long long radii = 0;           //!< radii compared (tokens whose codes all match)
  long long radius_far = 0;      //!< radii more than one ulp apart
  long long other_bytes = 0;     //!< differing bytes outside the written code bits and radii (padding, unused slots)
  std::string first;             //!< description of the first unexplained difference
  bool ok() const { return mismatches == near_threshold && radius_far == 0 && other_bytes == 0; }
  code_diff& operator+=(const code_diff& o) {
    codes += o.codes;
    mismatches += o.mismatches;
    near_threshold += o.near_threshold;
    radii += o.radii;
    radius_far += o.radius_far;
    other_bytes += o.other_bytes;
    if (first.empty()) first = o.first;
    return *this;
  }
};

//! Compares page part `got` with the CPU's `want` for tokens [0, used) of (layer, h):
//! code by code; a mismatch counts as near-threshold if the CPU's rotated coordinate
//! of that token (recomputed from krows / vrows: row t = key / value of the token in
//! slot t, D floats) lies within
//! `band` of the threshold between the two codes. Radii are compared when all codes of
//! the (token, group) agree: within one ulp. All other bytes must be equal.
inline code_diff compare_page_part(const bgtq_cache<>& c, int layer, int h, const std::uint8_t* want, const std::uint8_t* got,
                                   int used, const std::vector<const float*>& krows,
                                   const std::vector<const float*>& vrows, float band = 1e-5f) {
  code_diff r;
  const int P = c.config().page_tokens;
  const std::size_t bytes = c.head_page_bytes(layer, h);
  std::vector<std::uint8_t> covered(bytes, 0);  // bytes holding written code bits or radii
  for (int part = 0; part < 2; ++part) {
    const gtq_pages::head_state& s = part == 0 ? c.key(layer, h) : c.value(layer, h);
    const std::size_t base = part == 0 ? 0 : c.value_offset(layer, h);
    const std::size_t rb = gtq_pages::radius_size(s);
    const std::vector<const float*>& rows = part == 0 ? krows : vrows;
    for (std::size_t gi = 0; gi < s.codec.groups().size(); ++gi) {
      const gtq_group& g = s.codec.groups()[gi];
      const int n = g.quantizer.dim(), B = g.quantizer.bits();
      const std::uint8_t* wr = want + base + s.region[gi];
      const std::uint8_t* gr = got + base + s.region[gi];
      for (std::size_t i = 0; i < bit_plane_layout::bytes(n, B, P); ++i) covered[base + s.region[gi] + i] = 1;
      std::vector<float> sub(static_cast<std::size_t>(n)), y(static_cast<std::size_t>(n));
      for (int t = 0; t < P; ++t) {
        bool all = true;
        bool have_y = false;
        for (int j = 0; j < n; ++j) {
          const unsigned a = bit_plane_layout::load(wr, n, B, P, t, j);
          const unsigned b = bit_plane_layout::load(gr, n, B, P, t, j);
          if (t >= used) {  // slots no token was written to: must agree bit for bit
            if (a != b) {
              ++r.other_bytes;
              if (r.first.empty()) r.first = "unused slot " + std::to_string(t) + " has different code bits";
            }
            continue;
          }
          ++r.codes;
          if (a == b) continue;
          all = false;
          ++r.mismatches;
          if (!have_y) {  // the CPU's rotated unit coordinates of this token and group
            for (int q = 0; q < n; ++q) sub[static_cast<std::size_t>(q)] = rows[static_cast<std::size_t>(t)][g.dims[static_cast<std::size_t>(q)]];
            float nr = std::sqrt(detail::sum_squares(sub.data(), n));
            if (detail::tq_prescaled(nr)) {  // the encoders' exact power-of-two copy
              float big = 0.0f;
              for (const float v : sub) big = std::fmax(big, std::fabs(v));
              for (auto& v : sub) v = v * detail::tq_prescale(big);
              nr = std::sqrt(detail::sum_squares(sub.data(), n));
            }
            g.quantizer.rotation().apply(sub.data(), y.data());
            for (auto& v : y) v = v * (1.0f / nr);
            have_y = true;
          }
          const unsigned lo = std::min(a, b);
          const bool adjacent = (a > b ? a - b : b - a) == 1;
          const float th = g.quantizer.thresholds()[lo];
          if (adjacent && std::fabs(y[static_cast<std::size_t>(j)] - th) <= band) {
            ++r.near_threshold;
          } else if (r.first.empty()) {
            char buf[256];
            std::snprintf(buf, sizeof buf, "%s group %zu token %d coord %d: cpu code %u, gpu code %u (y = %.9g)",
                          part == 0 ? "key" : "value", gi, t, j, a, b, static_cast<double>(y[static_cast<std::size_t>(j)]));
            r.first = buf;
          }
        }
        const std::size_t ro = base + s.radii + (gi * static_cast<std::size_t>(P) + static_cast<std::size_t>(t)) * rb;
        for (std::size_t i = 0; i < rb; ++i) covered[ro + i] = 1;
        if (t >= used) {
          if (std::memcmp(want + ro, got + ro, rb) != 0) {
            ++r.other_bytes;
            if (r.first.empty()) r.first = "unused slot " + std::to_string(t) + " has a different radius";
          }
          continue;
        }
        if (!all) continue;
        ++r.radii;
        long long ua = 0, ub = 0;
        if (rb == 2) {
          ua = want[ro] | (want[ro + 1] << 8);
          ub = got[ro] | (got[ro + 1] << 8);
        } else {
          ua = static_cast<long long>(cuda::load_word_le(want + ro));
          ub = static_cast<long long>(cuda::load_word_le(got + ro));
        }
        if (std::llabs(ua - ub) > 1) {
          ++r.radius_far;
          if (r.first.empty()) {
            char buf[200];
            std::snprintf(buf, sizeof buf, "%s group %zu token %d: radius bits cpu %llx gpu %llx", part == 0 ? "key" : "value", gi, t,
                          static_cast<unsigned long long>(ua), static_cast<unsigned long long>(ub));
            r.first = buf;
          }
        }
      }
    }
  }
  // bytes outside every code region and radii array (padding)
  for (std::size_t i = 0; i < bytes; ++i)
    if (!covered[i] && want[i] != got[i]) {
      ++r.other_bytes;
      if (r.first.empty()) r.first = "byte " + std::to_string(i) + " outside codes/radii differs";
    }
  return r;
}

//! The K and V rows appended to a cache: k[seq index][layer] = [len][Hkv][D] floats.
struct filled_cache {
  std::vector<int> seqs;
  std::vector<int> lengths;
  std::vector<std::vector<std::vector<float>>> k, v;
};

//! Adds one sequence per length and appends that many random tokens to every layer
//! (keys N(0,1) scaled per dim so that energies differ across blocks, values N(0,1)),
//! rounded through `type` so the device can be given the same values in fp16/bf16.
//! `edit`, when set, may rewrite a (sequence index, layer)'s rows before the rounding.
using row_edit = std::function<void(std::size_t seq, int layer, std::vector<float>& k, std::vector<float>& v)>;
inline filled_cache fill_cache(bgtq_cache<>& c, const std::vector<int>& lengths, std::uint64_t seed,
                               cuda::dtype type = cuda::dtype::f32, float value_scale = 1.0f, const row_edit& edit = {}) {
  const cache_config& cfg = c.config();
  const std::size_t row = static_cast<std::size_t>(cfg.kv_heads) * static_cast<std::size_t>(cfg.head_dim);
  filled_cache f;
  f.lengths = lengths;
  for (std::size_t s = 0; s < lengths.size(); ++s) {
    const int id = c.add_sequence();
    f.seqs.push_back(id);
    f.k.emplace_back();
    f.v.emplace_back();
    for (int l = 0; l < cfg.layers; ++l) {
      const std::size_t n = static_cast<std::size_t>(lengths[s]) * row;
      std::vector<float> k = normal_floats(n, seed, mix(s, static_cast<std::uint64_t>(2 * l)));
      std::vector<float> v = normal_floats(n, seed, mix(s, static_cast<std::uint64_t>(2 * l + 1)), value_scale);
      for (std::size_t i = 0; i < n; ++i) k[i] *= 0.5f + static_cast<float>((i % static_cast<std::size_t>(cfg.head_dim)) % 7);
      if (edit) edit(s, l, k, v);
      round_to(k, type);
      round_to(v, type);
      if (lengths[s] > 0) c.append(id, l, k.data(), v.data(), lengths[s]);
      f.k.back().push_back(std::move(k));
      f.v.back().push_back(std::move(v));
    }
  }
  return f;
}

//! Rescales token rows of x ([tokens][row], row = kv_heads * D floats) to extreme
//! magnitudes, cycling over six kinds by token: unchanged; largest component 2e5 (fp16
//! radii clamp at 65504); 1e31 (norm above 2^100: the encoders' power-of-two copy, fp32
//! radii clamp); 3e38 (the squared norm and the norm overflow float); 2e37 (norms near
//! 2^126, where 1/r is subnormal); 1e-33 (tiny: the norm is below row 16's 1e-30, so zero
//! radii and the zero code). Values stay
//! finite in fp32 and bf16 (not fp16).
inline void scale_extreme_rows(std::vector<float>& x, std::size_t row) {
  const float target[6] = {0.0f, 2e5f, 1e31f, 3e38f, 2e37f, 1e-33f};
  for (std::size_t t = 0; t * row < x.size(); ++t) {
    const float want = target[t % 6];
    if (want == 0.0f) continue;
    float* r = &x[t * row];
    float big = 0.0f;
    for (std::size_t j = 0; j < row; ++j) big = std::fmax(big, std::fabs(r[j]));
    if (big == 0.0f) continue;
    const double s = static_cast<double>(want) / static_cast<double>(big);
    for (std::size_t j = 0; j < row; ++j) r[j] = static_cast<float>(static_cast<double>(r[j]) * s);
  }
}

//! Largest |a - b| over max |b| (0 when b is all zero and a equals it); a non-finite a
//! or b gives +inf (a NaN in the reference b would otherwise drop out of the maxima).
inline double rel_max_error(const std::vector<float>& a, const std::vector<float>& b) {
  double num = 0.0, den = 0.0;
  for (std::size_t i = 0; i < a.size(); ++i) {
    if (!std::isfinite(a[i]) || !std::isfinite(b[i])) return INFINITY;
    num = std::max(num, std::fabs(static_cast<double>(a[i]) - b[i]));
    den = std::max(den, std::fabs(static_cast<double>(b[i])));
  }
  return den > 0 ? num / den : num;
}

}  // namespace bgtq_gpu
