#pragma once
// Host model of the CUDA kernels: the same decomposition (tiles, 32-token chunks, lanes,
// splits, parts, merge) and the same BGTQ_HOST_DEVICE helpers (kernel_math.hpp) over
// the same tables (tables.hpp), executed sequentially on the CPU. It is what lets this
// project check the kernels' index math, layouts and numerics on machines without a GPU;
// only the CUDA thread mapping itself (shared memory, barriers, shuffles) is left to the
// device tests.
#include <cmath>
#include <cstdint>
#include <cstring>
#include <vector>

#include <bgtq/attention/softmax.hpp>
#include <bgtq/codec/tq_math.hpp>
#include <bgtq/cuda/kernel_math.hpp>
#include <bgtq/cuda/tables.hpp>

namespace bgtq_gpu {

using namespace bgtq::cuda;

//! encode_kernel's arithmetic for one token row (D floats) of one part of (layer, h):
//! writes its code bits and radii into `part` (the page part of its page; `value`
//! selects the value part) at `slot`, and counts clamped radii in `clamped`.
inline void model_encode_row(const device_tables& t, const head_meta& hm, bool value, const float* row, int P,
                             std::uint8_t* page_part, int slot, unsigned long long* clamped = nullptr) {
  const int first = value ? hm.value_first : hm.key_first;
  const int count = value ? hm.value_count : hm.key_count;
  std::uint8_t* part = page_part + (value ? hm.value_offset : 0u);
  std::vector<float> sub, cv;
  for (int gi = 0; gi < count; ++gi) {
    const group_meta& g = t.groups[static_cast<std::size_t>(first + gi)];
    const int n = g.n, B = g.bits;
    const bool fp32 = g.fp32_radius != 0;
    const float* thr = t.thr.data() + g.cent;
    const float* fwd = t.rot.data() + g.rot;
    sub.assign(static_cast<std::size_t>(n), 0.0f);
    cv.assign(static_cast<std::size_t>(n), 0.0f);
    for (int j = 0; j < n; ++j) sub[static_cast<std::size_t>(j)] = row[t.dims[static_cast<std::size_t>(g.dims + j)]];
    auto get = [&](int j) { return sub[static_cast<std::size_t>(j)]; };
    const tq_norms nm = tq_norm_parts(get, n);
    const float r = nm.r;
    const bool zero = tq_radius_is_zero(r, fp32);
    for (int j = 0; j < n; ++j) sub[static_cast<std::size_t>(j)] *= nm.scale;  // exact (a power of two)
    const float inv = zero ? 0.0f : 1.0f / nm.dir_norm;
    const unsigned zero_code = static_cast<unsigned>(bgtq::detail::quantize_sorted(0.0f, thr, B));
    for (int o = 0; o < n; ++o) {
      const float y = rotated_coord(fwd, n, o, get);
      const unsigned code = zero ? zero_code : static_cast<unsigned>(bgtq::detail::quantize_sorted(y * inv, thr, B));
      cv[static_cast<std::size_t>(o)] = t.cent[static_cast<std::size_t>(g.cent) + code];
      for (int k = 0; k < B; ++k) {
        std::uint8_t* w = part + g.region + plane_word_offset(o, k, B, P, slot);
        std::uint8_t& byte = w[(slot & 31) >> 3];
        const std::uint8_t bit = static_cast<std::uint8_t>(1u << (slot & 7));
        byte = static_cast<std::uint8_t>(((code >> k) & 1u) ? (byte | bit) : (byte & ~bit));
      }
    }
    float radius = 0.0f;
    if (!zero) {
      const float cn = g.norm_correction
                           ? std::sqrt(canonical_sum_squares([&](int j) { return cv[static_cast<std::size_t>(j)]; }, n))
                           : 0.0f;
      const float rs = bgtq::detail::tq_corrected_radius(r, cn, g.norm_correction != 0);
      radius = bgtq::detail::round_radius(rs, fp32);
      if (clamped != nullptr && bgtq::detail::radius_clamped(rs, fp32)) ++*clamped;
    }
    bgtq::detail::store_radius(part + g.radii + static_cast<std::size_t>(slot) * (fp32 ? 4u : 2u), radius, fp32);
  }
}

//! Inputs of the decode model (host arrays, decode_args' layouts).
struct model_decode_in {
  int layer = 0, batch = 0;
  const float* q = nullptr;  // [B][Hq][D]
  const int* page_table = nullptr;
  int max_pages_per_seq = 0;
  const int* quantized = nullptr;
  long long max_quantized = 0;
  const std::uint16_t* window_k = nullptr;
  const std::uint16_t* window_v = nullptr;
  const int* window_len = nullptr;
  int window_cap = 0;
  float scale = 0.0f;
  int sms = 132;    // SM count the split plan assumes
  int splits = 0;   // 0: plan_splits
};

//! The three decode kernels on the host: out [B][Hq][D].
inline void model_decode(const cache_desc& d, const device_tables& t, const std::uint8_t* pool, const model_decode_in& in,
                         float* out) {
  const int Hkv = d.kv_heads, Hq = d.q_heads, G = Hq / Hkv, D = d.head_dim, P = d.page_tokens;
  const int gm = heads_per_cta(G);
  const int hchunks = (G + gm - 1) / gm;
  const split_plan sp = plan_splits(in.batch * Hkv * hchunks, in.max_quantized, in.sms, in.splits);
  const float scale = ::bgtq::logit_scale(in.scale, D);
  const decode_workspace_layout wl = decode_workspace(in.batch, Hq, D, sp.splits);
  std::vector<float> ws(wl.bytes / 4, std::nanf(""));
  float* qrot = ws.data() + wl.qrot / 4;
  float* ml = ws.data() + wl.ml / 4;
  float* accw = ws.data() + wl.acc / 4;
  const std::size_t row_bytes = plane_row_bytes(P);
  auto head = [&](int h) -> const head_meta& { return t.heads[static_cast<std::size_t>(in.layer * Hkv + h)]; };
  auto grp = [&](int i) -> const group_meta& { return t.groups[static_cast<std::size_t>(i)]; };

  // 1. rotate_query_kernel: every key coordinate through its rotation_coord entry
  for (int b = 0; b < in.batch; ++b)
    for (int hq = 0; hq < Hq; ++hq) {
      const float* x = in.q + (static_cast<std::size_t>(b) * Hq + hq) * D;
      const rotation_coord* rc = t.rot_coords.data() + static_cast<std::size_t>(in.layer * Hkv + hq / G) * 2 * D;
      std::vector<float> xg(static_cast<std::size_t>(D), 0.0f);  // the query in key-coordinate order
      for (int c = 0; c < D; ++c)
        if (rc[c].n() > 0) xg[static_cast<std::size_t>(c)] = x[rc[c].dim()];
      for (int c = 0; c < D; ++c) qrot[(static_cast<std::size_t>(b) * Hq + hq) * D + c] = rotate_entry(t.rot.data(), rc[c], xg.data());
    }

  // 2. decode_split_kernel
  for (int b = 0; b < in.batch; ++b)
    for (int h = 0; h < Hkv; ++h)
      for (int hc = 0; hc < hchunks; ++hc)
        for (int split = 0; split < sp.splits; ++split) {
          const head_meta& hm = head(h);
          const int g0 = hc * gm, gcount = std::min(gm, G - g0), hq0 = h * G + g0;
          std::vector<float> sq(static_cast<std::size_t>(hm.key_coords * gm), 0.0f);
          for (int c = 0; c < hm.key_coords; ++c)
            for (int g = 0; g < gcount; ++g)
              sq[static_cast<std::size_t>(c * gm + g)] = qrot[(static_cast<std::size_t>(b) * Hq + hq0 + g) * D + c];
          std::vector<bgtq::softmax_state> st(static_cast<std::size_t>(gm), bgtq::softmax_state{-INFINITY, 0.0f});
          const int nvc = hm.value_coords;
          const int parts = value_parts(nvc), tpp = decode_threads / parts;
          // acc[part][coord][g] (thread (part, cl) holds coords cl and cl + tpp)
          std::vector<float> acc(static_cast<std::size_t>(parts) * static_cast<std::size_t>(2 * tpp) * gm, 0.0f);
          auto A = [&](int part, int c, int g) -> float& {
            return acc[(static_cast<std::size_t>(part) * 2 * tpp + static_cast<std::size_t>(c)) * gm + static_cast<std::size_t>(g)];
          };
          const int nq = in.quantized[b];
          const int tiles = (nq + decode_tile - 1) / decode_tile;
          const int t_begin = split * sp.tiles_per_split, t_end = std::min(tiles, t_begin + sp.tiles_per_split);
          const int* ptab = in.page_table + static_cast<std::size_t>(b) * in.max_pages_per_seq;
          std::vector<float> w(static_cast<std::size_t>(gm * decode_tile)), rv(static_cast<std::size_t>(hm.value_count * decode_tile));
          for (int tile = t_begin; tile < t_end; ++tile) {
            // A. scores
            for (int warp = 0; warp < decode_tile / 32; ++warp) {
              const int tok0 = tile * decode_tile + warp * 32;
              for (int lane = 0; lane < 32; ++lane) {
                const bool valid = tok0 + lane < nq;
                float sc[max_heads_per_cta];
                for (int g = 0; g < gm; ++g) sc[g] = -INFINITY;
                for (int gi = 0; gi < hm.value_count; ++gi) rv[static_cast<std::size_t>(gi * decode_tile + warp * 32 + lane)] = 0.0f;
                if (tok0 < nq) {
                  const std::uint8_t* part = pool + hm.offset + static_cast<std::size_t>(ptab[tok0 / P]) * hm.page_bytes;
                  const int slot0 = tok0 % P, slot = slot0 + lane;
                  float s[max_heads_per_cta] = {};
                  for (int gi = 0; gi < hm.key_count; ++gi) {
                    const group_meta& g = grp(hm.key_first + gi);
                    float a[max_heads_per_cta] = {};
                    const std::uint8_t* words = part + g.region + plane_word_offset(0, 0, g.bits, P, slot0);
                    for (int j = 0; j < g.n; ++j) {
                      std::uint32_t wv[8];
                      for (int k = 0; k < g.bits; ++k)
                        wv[k] = load_word_le(words + (static_cast<std::size_t>(j) * g.bits + static_cast<std::size_t>(k)) * row_bytes);
                      unsigned idx = 0;
                      for (int k = 0; k < g.bits; ++k) idx |= plane_bit_to(wv[k], lane, k);  // as score_group
                      const float c = t.cent[static_cast<std::size_t>(g.cent) + idx];
                      for (int x = 0; x < gm; ++x) a[x] = fmaf(c, sq[static_cast<std::size_t>((g.coord_off + j) * gm + x)], a[x]);
                    }
                    const float r = valid ? bgtq::detail::load_radius(part + g.radii + static_cast<std::size_t>(slot) * (g.fp32_radius ? 4u : 2u),
                                                                      g.fp32_radius != 0)
                                          : 0.0f;
                    for (int x = 0; x < gm; ++x) s[x] = fmaf(a[x], r, s[x]);
                  }
                  if (valid)
                    for (int g = 0; g < gm; ++g) sc[g] = s[g] * scale;
                  for (int gi = 0; gi < hm.value_count; ++gi) {
                    const group_meta& g = grp(hm.value_first + gi);
                    rv[static_cast<std::size_t>(gi * decode_tile + warp * 32 + lane)] =
                        valid ? bgtq::detail::load_radius(part + hm.value_offset + g.radii + static_cast<std::size_t>(slot) * (g.fp32_radius ? 4u : 2u),
                                                          g.fp32_radius != 0)
                              : 0.0f;
                  }
                }
                for (int g = 0; g < gm; ++g) w[static_cast<std::size_t>(g * decode_tile + warp * 32 + lane)] = sc[g];
              }
            }
            // B. softmax
            std::vector<float> f(static_cast<std::size_t>(gm), 1.0f);
            for (int g = 0; g < gm; ++g) {
              float mx = -INFINITY;
              for (int i = 0; i < decode_tile; ++i) mx = std::fmax(mx, w[static_cast<std::size_t>(g * decode_tile + i)]);
              bgtq::softmax_state s = st[static_cast<std::size_t>(g)];
              f[static_cast<std::size_t>(g)] = bgtq::update_max(s, mx);
              float sum = 0.0f;
              for (int i = 0; i < decode_tile; ++i) {
                float& v = w[static_cast<std::size_t>(g * decode_tile + i)];
                v = v == -INFINITY ? 0.0f : std::exp(v - s.m);
                sum += v;
              }
              s.l += sum;
              st[static_cast<std::size_t>(g)] = s;
            }
            // C + D. weights x radii, value accumulation (thread (part, cl) order)
            for (int part = 0; part < parts; ++part)
              for (int cl = 0; cl < tpp; ++cl)
                for (int ci = 0; ci < 2; ++ci) {
                  const int c = cl + ci * tpp;
                  for (int g = 0; g < gm; ++g)
                    if (f[static_cast<std::size_t>(g)] != 1.0f) A(part, c, g) *= f[static_cast<std::size_t>(g)];
                  if (c >= nvc) continue;
                  int gv = -1;
                  for (int gi = 0; gi < hm.value_count; ++gi) {
                    const group_meta& g = grp(hm.value_first + gi);
                    if (c >= g.coord_off && c < g.coord_off + g.n) gv = gi;
                  }
                  if (gv < 0) continue;
                  const group_meta& g = grp(hm.value_first + gv);
                  for (int ch = part; ch < decode_tile / 32; ch += parts) {
                    const int c0 = tile * decode_tile + ch * 32;
                    if (c0 >= nq) break;
                    const std::uint8_t* vpart = pool + hm.offset + static_cast<std::size_t>(ptab[c0 / P]) * hm.page_bytes + hm.value_offset;
                    const std::uint8_t* row = vpart + g.region + plane_word_offset(c - g.coord_off, 0, g.bits, P, c0 % P);
                    std::uint32_t wv[8];
                    for (int k = 0; k < g.bits; ++k) wv[k] = load_word_le(row + static_cast<std::size_t>(k) * row_bytes);
                    for (int tt = 0; tt < 32; ++tt) {
                      const float cv = t.cent[static_cast<std::size_t>(g.cent) + code_from_planes(wv, g.bits, tt)];
                      for (int x = 0; x < gm; ++x) {
                        const float wr = w[static_cast<std::size_t>(x * decode_tile + ch * 32 + tt)] *
                                         rv[static_cast<std::size_t>(gv * decode_tile + ch * 32 + tt)];
                        A(part, c, x) = fmaf(cv, wr, A(part, c, x));
                      }
                    }
                  }
                }
          }
          // epilogue
          const std::size_t row0 = (static_cast<std::size_t>(b) * Hq + hq0) * sp.splits + split;
          for (int g = 0; g < gcount; ++g) {
            const std::size_t r = row0 + static_cast<std::size_t>(g) * sp.splits;
            ml[2 * r] = st[static_cast<std::size_t>(g)].m;
            ml[2 * r + 1] = st[static_cast<std::size_t>(g)].l;
            for (int c = 0; c < nvc; ++c) {
              float sum = parts > 1 ? 0.0f : A(0, c, g);
              if (parts > 1)
                for (int pp = 0; pp < parts; ++pp) sum += A(pp, c, g);
              accw[r * D + static_cast<std::size_t>(c)] = sum;
            }
          }
        }

  // 3. merge_kernel
  for (int b = 0; b < in.batch; ++b)
    for (int hq = 0; hq < Hq; ++hq) {
      const int h = hq / G;
      const head_meta& hm = head(h);
      const std::size_t row0 = (static_cast<std::size_t>(b) * Hq + hq) * sp.splits;
      bgtq::softmax_state st{-INFINITY, 0.0f};
      std::vector<float> y(static_cast<std::size_t>(D), 0.0f), x(static_cast<std::size_t>(D), 0.0f);
      for (int s = 0; s < sp.splits; ++s) {
        float fa, fb;
        bgtq::merge(st, bgtq::softmax_state{ml[2 * (row0 + s)], ml[2 * (row0 + s) + 1]}, fa, fb);
        for (int c = 0; c < hm.value_coords; ++c)
          y[static_cast<std::size_t>(c)] = fmaf(fb, accw[(row0 + s) * D + static_cast<std::size_t>(c)], fa * y[static_cast<std::size_t>(c)]);
      }
      const rotation_coord* rc = t.rot_coords.data() + (static_cast<std::size_t>(in.layer * Hkv + h) * 2 + 1) * D;
      for (int c = 0; c < D; ++c)
        if (rc[c].n() > 0) x[static_cast<std::size_t>(rc[c].dim())] = rotate_entry(t.rot.data(), rc[c], y.data());
      const float* q = in.q + (static_cast<std::size_t>(b) * Hq + hq) * D;
      int nwin = in.window_len ? in.window_len[b] : 0;
      if (nwin > in.window_cap) nwin = in.window_cap;
      float fa = 1.0f, fb = 0.0f;
      std::vector<float> aw(static_cast<std::size_t>(D), 0.0f);
      if (nwin > 0) {
        const std::size_t wbase = (static_cast<std::size_t>(b) * Hkv + h) * in.window_cap * D;
        std::vector<float> sw(static_cast<std::size_t>(nwin));
        float mw = -INFINITY;
        for (int i = 0; i < nwin; ++i) {
          float s = 0.0f;
          for (int dd = 0; dd < D; ++dd) s = fmaf(q[dd], bgtq::half_bits_to_float(in.window_k[wbase + static_cast<std::size_t>(i) * D + dd]), s);
          sw[static_cast<std::size_t>(i)] = s * scale;
          mw = std::fmax(mw, sw[static_cast<std::size_t>(i)]);
        }
        float lw = 0.0f;
        for (int i = 0; i < nwin; ++i) {
          const float e = std::exp(sw[static_cast<std::size_t>(i)] - mw);
          lw += e;
          for (int dd = 0; dd < D; ++dd)
            aw[static_cast<std::size_t>(dd)] = fmaf(e, bgtq::half_bits_to_float(in.window_v[wbase + static_cast<std::size_t>(i) * D + dd]),
                                                    aw[static_cast<std::size_t>(dd)]);
        }
        bgtq::merge(st, bgtq::softmax_state{mw, lw}, fa, fb);
      }
      const float inv = st.l > 0.0f ? 1.0f / st.l : 0.0f;
      for (int dd = 0; dd < D; ++dd)
        out[(static_cast<std::size_t>(b) * Hq + hq) * D + dd] =
            (fa * x[static_cast<std::size_t>(dd)] + fb * aw[static_cast<std::size_t>(dd)]) * inv;
    }
}

}  // namespace bgtq_gpu
