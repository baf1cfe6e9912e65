#pragma once
//! @file cuda/tables.hpp
//! Flattening of a cache_desc into the metadata tables the kernels read (plain C++).
//! device_cache::create uploads exactly these tables, and the host model of the kernels
//! (tests/cuda/host_model.hpp) runs on the very same tables, so a wrong offset here is
//! caught on any machine.

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <string>
#include <vector>

#include "../core/error.hpp"
#include "device_cache.hpp"
#include "kernel_math.hpp"
#include "mma_fragments.hpp"

namespace bgtq::cuda {

//! The kernels' tables for one cache (see group_meta / head_meta for each layout).
struct device_tables {
  std::vector<head_meta> heads;    //!< [layer * kv_heads + h]
  std::vector<group_meta> groups;  //!< key and value groups of every head
  std::vector<int> dims;           //!< gather maps
  std::vector<float> rot;          //!< per group: P^T row-major then P row-major
  std::vector<float> cent;         //!< per group: 2^bits centroids
  std::vector<float> thr;          //!< per group: 2^bits - 1 thresholds, then +inf
  std::vector<rotation_coord> rot_coords;  //!< [layer * kv_heads + h][part: key, value][head_dim]: each rotated coordinate's group
  // per layer: maxima over its heads (shared-memory sizing)
  std::vector<int> key_coords, key_cent, value_coords, value_cent, value_groups, norm_corr;
  std::size_t pool_bytes = 0;      //!< bytes of the page pool
};

//! Checks a description; on failure returns the error and writes a message naming the
//! offending value into *msg (if given).
inline errc validate_desc(const cache_desc& d, std::string* msg = nullptr) {
  char buf[320];
  auto bad = [&](errc code) {
    if (msg) *msg = buf;
    return code;
  };
  if (d.layers < 1 || d.kv_heads < 1 || d.q_heads < d.kv_heads || d.q_heads % d.kv_heads != 0) {
    std::snprintf(buf, sizeof buf, "device_cache: layers/kv_heads/q_heads = %d/%d/%d", d.layers, d.kv_heads, d.q_heads);
    return bad(errc::invalid_argument);
  }
  if (d.head_dim < 2 || d.head_dim % 2 != 0 || d.head_dim > max_head_dim) {
    std::snprintf(buf, sizeof buf, "device_cache: head_dim %d is not even in [2, %d]", d.head_dim, max_head_dim);
    return bad(errc::unsupported);
  }
  if (d.page_tokens < 64 || d.page_tokens % 64 != 0 || d.page_tokens > 4096) {
    std::snprintf(buf, sizeof buf, "device_cache: page_tokens %d is not a multiple of 64 in [64, 4096]", d.page_tokens);
    return bad(errc::invalid_argument);
  }
  if (d.max_pages < 0) {
    std::snprintf(buf, sizeof buf, "device_cache: max_pages %d < 0", d.max_pages);
    return bad(errc::invalid_argument);
  }
  const std::size_t nh = static_cast<std::size_t>(d.layers) * static_cast<std::size_t>(d.kv_heads);
  if (d.keys.size() != nh || d.values.size() != nh) {
    std::snprintf(buf, sizeof buf, "device_cache: %zu key and %zu value parts for %zu (layer, head) pairs", d.keys.size(),
                  d.values.size(), nh);
    return bad(errc::shape_mismatch);
  }
  for (std::size_t i = 0; i < 2 * nh; ++i) {
    const codec_desc& c = i < nh ? d.keys[i] : d.values[i - nh];
    const char* role = i < nh ? "key" : "value";
    const std::size_t hi = i % nh;
    if (c.groups.size() > static_cast<std::size_t>(max_part_groups)) {
      std::snprintf(buf, sizeof buf, "device_cache: %s part of head %zu has %zu groups (at most %d)", role, hi, c.groups.size(),
                    max_part_groups);
      return bad(errc::unsupported);
    }
    if (c.bytes % 64u != 0) {
      std::snprintf(buf, sizeof buf, "device_cache: %s part of head %zu has %u bytes (not a multiple of 64)", role, hi,
                    static_cast<unsigned>(c.bytes));
      return bad(errc::invalid_argument);
    }
    int coords = 0;
    for (std::size_t gi = 0; gi < c.groups.size(); ++gi) {
      const group_desc& g = c.groups[gi];
      const std::size_t n = static_cast<std::size_t>(g.dim);
      const std::size_t levels = g.bits >= 1 && g.bits <= 8 ? (std::size_t{1} << g.bits) : 0;
      const std::size_t rb = g.fp32_radius ? 4u : 2u;
      bool ok = g.dim >= 1 && g.dim <= d.head_dim && levels > 0 && g.coord_off == coords && g.dims.size() == n &&
                g.matrix.size() == n * n && g.centroids.size() == levels && g.thresholds.size() == levels - 1;
      if (ok) {
        for (int x : g.dims) ok = ok && x >= 0 && x < d.head_dim;
        const std::size_t code_end = static_cast<std::size_t>(g.region) + bit_plane_bytes(g.dim, g.bits, d.page_tokens);
        const std::size_t radii_end = static_cast<std::size_t>(g.radii) + rb * static_cast<std::size_t>(d.page_tokens);
        ok = ok && g.region % 8u == 0 && code_end <= c.bytes && radii_end <= c.bytes && g.radii % rb == 0;
      }
      if (!ok) {
        std::snprintf(buf, sizeof buf,
                      "device_cache: %s group %zu of head %zu is malformed (dim %d, bits %d, coord_off %d, region %u, "
                      "radii %u, part bytes %u)",
                      role, gi, hi, g.dim, g.bits, g.coord_off, static_cast<unsigned>(g.region),
                      static_cast<unsigned>(g.radii), static_cast<unsigned>(c.bytes));
        return bad(errc::invalid_argument);
      }
      coords += g.dim;
    }
    if (coords > d.head_dim) {
      std::snprintf(buf, sizeof buf, "device_cache: %s groups of head %zu cover %d > head_dim coordinates", role, hi, coords);
      return bad(errc::invalid_argument);
    }
  }
  // a head's page part (keys + values) is held in 32 bits: a key part of 0xFFFFFFC0 bytes
  // wrapped the sum to a small page whose value offset lay 4 GiB past it. Real parts are
  // at most ~1.3 MB (D = 256, 8 bits, 4096 tokens), so anything past 1 GiB is refused,
  // and the pool (parts x max_pages) stays below 2^50 bytes, computed without overflow
  std::uint64_t pool = 0;
  for (std::size_t i = 0; i < nh; ++i) {
    const std::uint64_t part = static_cast<std::uint64_t>(d.keys[i].bytes) + static_cast<std::uint64_t>(d.values[i].bytes);
    if (part > (std::uint64_t{1} << 30)) {
      std::snprintf(buf, sizeof buf, "device_cache: head %zu's page part has %llu bytes (keys %u + values %u), above 1 GiB", i,
                    static_cast<unsigned long long>(part), static_cast<unsigned>(d.keys[i].bytes),
                    static_cast<unsigned>(d.values[i].bytes));
      return bad(errc::invalid_argument);
    }
    pool += part * static_cast<std::uint64_t>(d.max_pages > 0 ? d.max_pages : 0);  // < 2^30 * 2^31 per head
    if (pool > (std::uint64_t{1} << 50)) {
      std::snprintf(buf, sizeof buf, "device_cache: a pool of %d pages of these parts is above 2^50 bytes", d.max_pages);
      return bad(errc::capacity_exhausted);
    }
  }
  return errc::ok;
}

//! Builds the tables of a valid description (validate_desc first).
inline device_tables build_tables(const cache_desc& d) {
  device_tables t;
  const std::size_t nh = static_cast<std::size_t>(d.layers) * static_cast<std::size_t>(d.kv_heads);
  const std::size_t nl = static_cast<std::size_t>(d.layers);
  t.key_coords.assign(nl, 0);
  t.key_cent.assign(nl, 0);
  t.value_coords.assign(nl, 0);
  t.value_cent.assign(nl, 0);
  t.value_groups.assign(nl, 0);
  t.norm_corr.assign(nl, 0);
  std::uint64_t off = 0;
  for (std::size_t i = 0; i < nh; ++i) {
    const std::size_t l = i / static_cast<std::size_t>(d.kv_heads);
    head_meta hm;
    hm.offset = off;
    hm.value_offset = d.keys[i].bytes;
    hm.page_bytes = d.keys[i].bytes + d.values[i].bytes;
    off += static_cast<std::uint64_t>(hm.page_bytes) * static_cast<std::uint64_t>(d.max_pages);
    for (int part = 0; part < 2; ++part) {
      const codec_desc& c = part == 0 ? d.keys[i] : d.values[i];
      const int first = static_cast<int>(t.groups.size());
      int coords = 0, ncent = 0;
      double bound_sq = 0.0;
      // the part's rotation_coord entries, [head_dim] (zero past its groups)
      const std::size_t rc0 = t.rot_coords.size();
      t.rot_coords.resize(rc0 + static_cast<std::size_t>(d.head_dim));
      for (const group_desc& g : c.groups) {
        group_meta gm;
        gm.n = g.dim;
        gm.bits = g.bits;
        gm.coord_off = g.coord_off;
        gm.fp32_radius = g.fp32_radius ? 1 : 0;
        gm.norm_correction = g.norm_correction ? 1 : 0;
        gm.dims = static_cast<int>(t.dims.size());
        gm.cent = static_cast<int>(t.cent.size());
        gm.cent_local = ncent;
        gm.region = g.region;
        gm.radii = g.radii;
        gm.rot = t.rot.size();
        t.dims.insert(t.dims.end(), g.dims.begin(), g.dims.end());
        const std::size_t n = static_cast<std::size_t>(g.dim);
        for (std::size_t a = 0; a < n; ++a)  // fwd = P^T row-major: fwd[a*n + o] = P[o][a]
          for (std::size_t o = 0; o < n; ++o) t.rot.push_back(g.matrix[o * n + a]);
        t.rot.insert(t.rot.end(), g.matrix.begin(), g.matrix.end());  // bwd = P row-major
        // coordinate coord_off + o: column o of fwd (keys) or bwd (values)
        const std::uint64_t mat = gm.rot + (part == 0 ? 0u : static_cast<std::uint64_t>(n) * n);
        for (int o = 0; o < g.dim; ++o)
          t.rot_coords[rc0 + static_cast<std::size_t>(g.coord_off + o)] =
              make_rotation_coord(mat + static_cast<std::uint64_t>(o), g.dim, g.coord_off, g.dims[static_cast<std::size_t>(o)]);
        t.cent.insert(t.cent.end(), g.centroids.begin(), g.centroids.end());
        t.thr.insert(t.thr.end(), g.thresholds.begin(), g.thresholds.end());
        t.thr.push_back(__builtin_inff());
        coords += g.dim;
        ncent += 1 << g.bits;
        double cmax = 0.0;
        for (const float cv : g.centroids) cmax = std::max(cmax, static_cast<double>(std::fabs(cv)));
        bound_sq += ::bgtq::detail::tq_group_norm_sq_bound(g.dim, cmax, g.fp32_radius);
        t.norm_corr[l] |= gm.norm_correction;
        t.groups.push_back(gm);
      }
      if (part == 0) {
        hm.key_first = first;
        hm.key_count = static_cast<int>(c.groups.size());
        hm.key_coords = coords;
        hm.key_cent = ncent;
        hm.key_bound = std::sqrt(bound_sq);
        t.key_coords[l] = std::max(t.key_coords[l], coords);
        t.key_cent[l] = std::max(t.key_cent[l], ncent);
      } else {
        hm.value_first = first;
        hm.value_count = static_cast<int>(c.groups.size());
        hm.value_coords = coords;
        hm.value_cent = ncent;
        t.value_coords[l] = std::max(t.value_coords[l], coords);
        t.value_cent[l] = std::max(t.value_cent[l], ncent);
        t.value_groups[l] = std::max(t.value_groups[l], static_cast<int>(c.groups.size()));
      }
    }
    t.heads.push_back(hm);
  }
  t.pool_bytes = static_cast<std::size_t>(off);
  return t;
}

//! What the tensor-core decode kernel needs to know about one layer (mma_layer_support).
struct mma_layer_info {
  bool ok = false;      //!< the layer can use the tensor-core path
  int key_padded = 0;   //!< largest sum over a head's key groups of n rounded up to 16
  int key_groups = 0;   //!< largest key group count of a head
  int half_table = 0;   //!< largest sum over a head's groups wider than 4 bits of 2^bits
  int stage_bytes = 0;  //!< largest stage image of a 64-token unit (mma_stage_of); two per warp
  mma_smem smem;        //!< the kernel's shared-memory layout
};

//! Largest dynamic shared memory the tensor-core kernel asks for (sm_80: 163 KB, sm_90: 227 KB).
inline constexpr int mma_max_smem = 160 * 1024;

//! Whether layer `layer` of a cache with tables t can use the tensor-core decode path,
//! and its sizes. Conditions (otherwise *why names the first one that fails): every
//! head has at least one key group and exactly one value group of at most 128
//! coordinates (head_dim <= 128 for TQ-MSE values), fp16 radii everywhere (the value
//! weights w * r are fp16 operands), the gtq_pages layout (code rows of P/8 bytes, then
//! each group's radii in order), and a shared-memory layout within mma_max_smem (the
//! device's own opt-in limit is checked by device_cache::create).
inline mma_layer_info mma_layer_support(const device_tables& t, const cache_desc& d, int layer, std::string* why = nullptr) {
  mma_layer_info info;
  char buf[256];
  auto fail = [&](const char* m) {
    if (why) *why = m;
    return info;
  };
  if (layer < 0 || layer >= d.layers) return fail("tensor-core decode: layer out of range");
  const int P = d.page_tokens;
  for (int h = 0; h < d.kv_heads; ++h) {
    const head_meta& hm = t.heads[static_cast<std::size_t>(layer) * static_cast<std::size_t>(d.kv_heads) + static_cast<std::size_t>(h)];
    if (hm.key_count < 1) return fail("tensor-core decode: a head has no key group");
    if (hm.value_count != 1) {
      std::snprintf(buf, sizeof buf, "tensor-core decode: head %d has %d value groups (the path needs exactly 1)", h, hm.value_count);
      return fail(buf);
    }
    const group_meta& vg = t.groups[static_cast<std::size_t>(hm.value_first)];
    if (vg.n > 16 * mma::max_value_mtiles) {
      std::snprintf(buf, sizeof buf, "tensor-core decode: value group of %d coordinates (at most %d)", vg.n,
                    16 * mma::max_value_mtiles);
      return fail(buf);
    }
    int padded = 0, half = 0;
    for (int part = 0; part < 2; ++part) {
      // the staging copies a part's code rows [0, first radii) and 64 radii per group at
      // radii_0 + 2 P i: the gtq_pages layout (codes, then the groups' fp16 radii in order)
      const int first = part == 0 ? hm.key_first : hm.value_first, count = part == 0 ? hm.key_count : 1;
      const std::uint32_t radii0 = t.groups[static_cast<std::size_t>(first)].radii;
      for (int i = 0; i < count; ++i) {
        const group_meta& g = t.groups[static_cast<std::size_t>(first + i)];
        if (g.fp32_radius) return fail("tensor-core decode: fp32 radii (the path multiplies fp16 weights x radii)");
        const std::uint32_t row = static_cast<std::uint32_t>(P / 8);
        const std::size_t code_end = static_cast<std::size_t>(g.region) + bit_plane_bytes(g.n, g.bits, P);
        if (g.region % row != 0 || radii0 % row != 0 || code_end > radii0 ||
            g.radii != radii0 + static_cast<std::uint32_t>(2 * P * i))
          return fail("tensor-core decode: the page layout is not codes on P/8-byte rows followed by each group's fp16 radii");
        if (part == 0) padded += (g.n + 15) & ~15;
        if (g.bits > mma::max_lut_bits) half += 1 << g.bits;
      }
    }
    info.key_padded = std::max(info.key_padded, padded);
    info.key_groups = std::max(info.key_groups, hm.key_count);
    info.half_table = std::max(info.half_table, half);
    info.stage_bytes = std::max(info.stage_bytes, mma_stage_of(hm, t.groups.data(), P).bytes);
  }
  info.smem = mma_smem_layout(info.key_padded, info.key_groups, info.half_table, info.stage_bytes);
  if (info.smem.bytes > mma_max_smem) {
    std::snprintf(buf, sizeof buf, "tensor-core decode: %d bytes of shared memory needed (at most %d)", info.smem.bytes,
                  mma_max_smem);
    return fail(buf);
  }
  info.ok = true;
  return info;
}


//! The tensor-core kernel's per-head constants, built here once instead of by every CTA
//! of every decode call: until 2026-12-05 each CTA derived its groups' query offsets
//! with a prefix loop over global loads, converted every centroid to fp16 and built the
//! byte tables, and gathered the query group by group: round trips to memory one after
//! another, more with more key groups (18 for bench_decode's Block-GTQ head of four key
//! groups, by bench/gpu/sass_trace.py's latency model), which a CTA of a short sequence,
//! with one unit per warp, waited out in full. Now a CTA copies its head's rows
//! (independent loads, issued together), reads its query rows with contiguous loads and
//! writes them to their positions through cpos: two round trips (docs/gpu.md, "The split
//! kernel's setup"). Indexed by head = layer * kv_heads + h.
struct mma_head_tables {
  int gstride = 0;  //!< mma_group entries per head: the largest key group count + 1
  int hstride = 0;  //!< fp16 halves per head for the centroids of groups wider than 4 bits (multiple of 8)
  int cstride = 0;  //!< entries of cpos per head: head_dim
  std::vector<mma_group> groups;  //!< [head][gstride]: the key groups, the value group, then empty entries
  std::vector<std::uint16_t> half;  //!< [head][hstride]: wide groups' fp16 centroids at mma_group::half
  std::vector<std::int16_t> cpos;   //!< [head][cstride]: position of key coordinate c in the fp16 query row, -1: none
  std::vector<std::uint32_t> zmask; //!< [head][32 lanes]: bit i set = position lane + 32 i is padding (a zero)
  std::vector<mma_stage> stages;    //!< [head]: mma_stage_of, the head's stage image
};

//! The mma_head_tables of a cache with tables t (build_tables(d)). A head's key groups
//! sit in the fp16 query rows one after another, each padded to a multiple of 16 (qoff);
//! the wide groups' centroid tables follow one another in `half`, the key groups' first,
//! then the value group's. Centroids are rounded to fp16 as the device rounds them
//! (float_to_half_bits: round to nearest even, the same bits as cvt.rn.f16.f32).
inline mma_head_tables build_mma_tables(const device_tables& t, const cache_desc& d) {
  mma_head_tables m;
  const int P = d.page_tokens;
  for (const head_meta& hm : t.heads) {
    int half = 0;
    for (int i = 0; i < hm.key_count + hm.value_count; ++i) {
      const group_meta& g = t.groups[static_cast<std::size_t>(i < hm.key_count ? hm.key_first + i : hm.value_first)];
      if (g.bits > mma::max_lut_bits) half += 1 << g.bits;
    }
    m.gstride = std::max(m.gstride, hm.key_count + 1);
    m.hstride = std::max(m.hstride, (half + 7) & ~7);
  }
  const std::size_t nh = t.heads.size();
  m.groups.assign(nh * static_cast<std::size_t>(m.gstride), mma_group{});
  m.half.assign(nh * static_cast<std::size_t>(m.hstride), std::uint16_t{0});
  m.cstride = d.head_dim;
  m.cpos.assign(nh * static_cast<std::size_t>(m.cstride), std::int16_t{-1});
  m.zmask.assign(nh * 32u, 0u);
  for (const head_meta& hm : t.heads) m.stages.push_back(mma_stage_of(hm, t.groups.data(), P));
  for (std::size_t hi = 0; hi < nh; ++hi) {
    const head_meta& hm = t.heads[hi];
    mma_group* out = m.groups.data() + hi * static_cast<std::size_t>(m.gstride);
    std::uint16_t* ht = m.half.data() + hi * static_cast<std::size_t>(m.hstride);
    std::int16_t* cp = m.cpos.data() + hi * static_cast<std::size_t>(m.cstride);
    std::uint32_t* zm = m.zmask.data() + hi * 32u;
    int qoff = 0, half = 0;
    // the key groups, then the value group (the tensor-core path needs exactly one; a
    // head without one, which mma_layer_support turns away, gets an empty entry)
    for (int i = 0; i <= hm.key_count; ++i) {
      const bool key = i < hm.key_count;
      if (!key && hm.value_count < 1) break;
      const group_meta& g = t.groups[static_cast<std::size_t>(key ? hm.key_first + i : hm.value_first)];
      mma_group& o = out[i];
      o.n = g.n;
      o.bits = g.bits;
      o.coord_off = g.coord_off;
      o.code = mma_stage_offset(g.region, P);
      o.radii = mma_stage_offset(g.radii, P);
      std::uint16_t hc[1 << 8];
      for (int v = 0; v < (1 << g.bits); ++v) hc[v] = float_to_half_bits(t.cent[static_cast<std::size_t>(g.cent + v)]);
      if (g.bits <= mma::max_lut_bits) {
        const mma::lut16 lt = mma::make_lut(hc, g.bits);
        for (int w = 0; w < 4; ++w) {
          o.lo[w] = lt.lo[w];
          o.hi[w] = lt.hi[w];
        }
      } else {
        o.half = half;
        std::copy(hc, hc + (1 << g.bits), ht + half);
        half += 1 << g.bits;
      }
      if (key) {
        o.qoff = qoff;
        for (int j = 0; j < g.n; ++j) cp[g.coord_off + j] = static_cast<std::int16_t>(qoff + j);
        for (int pp = qoff + g.n; pp < qoff + align16(g.n); ++pp) zm[pp % 32] |= 1u << (pp / 32);
        qoff += align16(g.n);
      }
    }
  }
  return m;
}

}  // namespace bgtq::cuda
