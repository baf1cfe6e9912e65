#pragma once
//! @file plot/figures.hpp
//! The three figures of `bgtq plot`, as functions from data to an SVG document:
//! - energy_figure: one (layer, KV head) of a plan: the energy s_i of every RoPE block
//!   as bars on a log axis, coloured by the key width allocated to the block, and the
//!   widths as a step line on a second axis (the paper's Figure 1b/c);
//! - fingerprint_figure: one column per layer, the stacked share of key blocks at each
//!   width 0..8 over all KV heads of the layer (the paper's Figure 3);
//! - eval_figure: a metric (default RoPE-logit MAE) per layer for every method of a
//!   `bgtq eval -o R.json` results file, one panel per bit width.

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <limits>
#include <map>
#include <string>
#include <vector>

#include "../core/error.hpp"
#include "../plan/plan.hpp"
#include "chart.hpp"
#include "json_read.hpp"

namespace bgtq::plot {

namespace detail {

inline std::string fmt(const char* f, double v) {
  char b[64];
  std::snprintf(b, sizeof b, f, v);
  return b;
}

//! Label step for n categories so that about `max_labels` are shown (1, 2, 4, 5, 8, 10, 16, ...).
inline int label_every(int n, int max_labels) {
  static const int steps[] = {1, 2, 4, 5, 8, 10, 16, 20, 25, 32, 50, 64, 100, 128, 200, 256, 500, 1000};
  for (int s : steps)
    if ((n + s - 1) / s <= max_labels) return s;
  return (n + max_labels - 1) / max_labels;
}

//! Mean of finite values that cannot overflow where the sum would (two 1e308 values
//! average to 1e308, not inf): each step adds v/n - mean/n, both at most max/2 from n = 2.
struct running_mean {
  double mean = 0.0;
  long n = 0;
  void add(double v) {
    ++n;
    mean += v / static_cast<double>(n) - mean / static_cast<double>(n);
  }
  //! The mean, or NaN with no values.
  double value() const { return n > 0 ? mean : std::numeric_limits<double>::quiet_NaN(); }
};

inline std::string bits_label(int b) {
  if (b == 0) return "0 (dropped)";
  return std::to_string(b) + (b == 1 ? " bit" : " bits");
}

inline std::string plan_summary(const plan& p) {
  std::string s = "D=" + std::to_string(p.rope.head_dim) + " (" + to_string(p.rope.pairing);
  if (p.rope.rotary_dim != p.rope.head_dim) s += ", rotary " + std::to_string(p.rope.rotary_dim);
  s += "), avg " + fmt("%g", p.avg_bits) + " bits in [" + std::to_string(p.b_min) + ", " + std::to_string(p.b_max) +
       "], scope " + to_string(p.scope) + ", " + to_string(p.distortion);
  if (p.calib_tokens > 0) s += ", calibrated on " + std::to_string(p.calib_tokens) + " tokens";
  return s;
}

}  // namespace detail

//! Per-block energies and allocated widths of one (layer, KV head) of a plan.
//! @throws bgtq::error(not_found) if layer or kv_head is outside the plan
inline std::string energy_figure(const plan& p, int layer, int kv_head, const std::string& title = "") {
  BGTQ_REQUIRE(layer >= 0 && layer < p.layers, errc::not_found,
               "layer " + std::to_string(layer) + " is outside the plan's " + std::to_string(p.layers) + " layers (0.." +
                   std::to_string(p.layers - 1) + ")");
  BGTQ_REQUIRE(kv_head >= 0 && kv_head < p.kv_heads, errc::not_found,
               "KV head " + std::to_string(kv_head) + " is outside the plan's " + std::to_string(p.kv_heads) +
                   " KV heads (0.." + std::to_string(p.kv_heads - 1) + ")");
  const int L = p.num_blocks();
  const head_plan& hp = p.head(layer, kv_head);
  std::vector<double> s(static_cast<std::size_t>(L));
  double smin = std::numeric_limits<double>::infinity(), smax = 0;
  int wmax = 0, wsum = 0;
  for (int i = 0; i < L; ++i) {
    s[static_cast<std::size_t>(i)] = p.score(layer, kv_head, i);
    if (s[static_cast<std::size_t>(i)] > 0) smin = std::min(smin, s[static_cast<std::size_t>(i)]);
    smax = std::max(smax, s[static_cast<std::size_t>(i)]);
    wmax = std::max(wmax, hp.widths[static_cast<std::size_t>(i)]);
    wsum += hp.widths[static_cast<std::size_t>(i)];
  }
  if (!(smax > 0)) smin = smax = 1.0;  // all energies zero: an empty log axis

  // two panels sharing the block axis: energies (log) above, allocated widths below
  const double W = 880, H = 510;
  svg_canvas c(W, H);
  const area a{84, 74, W - 84 - 40, 250};
  const area aw{a.x, a.bottom() + 16, a.w, 96};
  const auto dom = log_domain_padded(smin, smax, 1.5, 1.05);
  const log_scale ys{dom.first, dom.second, a.bottom(), a.y};
  const int wtop = std::max({p.b_max, wmax, 1});
  const linear_scale ws{0, static_cast<double>(wtop), aw.bottom(), aw.y};

  draw_title(c, a.x, title.empty() ? "Layer " + std::to_string(layer) + ", KV head " + std::to_string(kv_head) +
                                         ": block energies and allocated key widths"
                                   : title,
             detail::plan_summary(p) + "; this head: " + detail::fmt("%.2f", static_cast<double>(wsum) / L) +
                 " bits/block in " + std::to_string(hp.groups.size()) + " groups");
  const auto yt = make_ticks(ys);
  std::vector<axis_tick> wt;
  const int wstep = wtop > 4 ? 2 : 1;
  for (int b = 0; b <= wtop; b += wstep) wt.push_back({ws(b), {std::to_string(b), ""}, false});
  draw_grid(c, a, yt);
  draw_grid(c, aw, wt);
  const double bw = a.w / L;
  // non-rotary blocks (partial rotary): shaded bands
  if (p.rope.num_rotary_blocks() < L) {
    const double x0 = a.x + p.rope.num_rotary_blocks() * bw;
    c.rect(x0, a.y, a.right() - x0, a.h, "#F4F1EA");
    c.rect(x0, aw.y, aw.right() - x0, aw.h, "#F4F1EA");
    text_style st;
    st.size = 10.5;
    st.color = "#8A7F66";
    c.text(x0 + 4, a.y + 12, "non-rotary blocks", st);
  }
  std::vector<bool> present(9, false);
  const double gap = bw > 6 ? bw * 0.18 : 0.0;
  for (int i = 0; i < L; ++i) {
    const int b = hp.widths[static_cast<std::size_t>(i)];
    present[static_cast<std::size_t>(std::clamp(b, 0, 8))] = true;
    const double v = s[static_cast<std::size_t>(i)];
    const auto d = p.rope.block_dims(i);
    const std::string tip = "block " + std::to_string(i) + " (dims " + std::to_string(d[0]) + ", " + std::to_string(d[1]) +
                            "): energy " + detail::fmt("%.4g", v) + ", " + detail::bits_label(b);
    if (v > 0) {
      const double top = ys(v);
      c.rect(a.x + i * bw + gap / 2, top, bw - gap, a.bottom() - top, width_color(b), "none", 0, tip);
    }
    const double wy = ws(b);
    c.rect(a.x + i * bw + gap / 2, wy, bw - gap, aw.bottom() - wy, width_color(b), "none", 0, tip);
  }
  // widths also as a step line over their bars
  std::vector<std::pair<double, double>> pts;
  for (int i = 0; i < L; ++i) {
    const double y = ws(hp.widths[static_cast<std::size_t>(i)]);
    pts.emplace_back(a.x + i * bw, y);
    pts.emplace_back(a.x + (i + 1) * bw, y);
  }
  c.polyline(pts, "#333333", 1.2);
  draw_y_axis(c, a, yt, "block energy s\xE1\xB5\xA2 (log scale)", false, "#222222", 52);
  draw_y_axis(c, aw, wt, "key bits", false, "#222222", 52);
  draw_x_bands(
      c, aw, L, [](int i) { return std::to_string(i); }, detail::label_every(L, 17),
      "RoPE block i (low i rotates fastest: frequency base^(\xE2\x88\x92" "2i/R))");
  c.line(a.x, a.bottom(), a.right(), a.bottom(), "#444444", 1.0);
  std::vector<legend_entry> le;
  for (int b = 0; b <= 8; ++b)
    if (present[static_cast<std::size_t>(b)]) le.push_back({detail::bits_label(b), width_color(b), legend_kind::swatch});
  text_style st;
  st.size = 11.5;
  st.middle_y = true;
  st.color = "#555555";
  const std::string lead = "colour = allocated key width:";
  c.text(a.x, aw.bottom() + 62, lead, st);
  draw_legend(c, a.x + text_width(lead, 11.5) + 10, aw.bottom() + 62, le, a.w - text_width(lead, 11.5) - 10);
  c.comment("bgtq plot energy: layer " + std::to_string(layer) + ", kv_head " + std::to_string(kv_head));
  return c.str();
}

//! Share of key blocks at each width per layer, over all KV heads of the layer.
inline std::string fingerprint_figure(const plan& p, const std::string& title = "") {
  const int nl = p.layers, L = p.num_blocks();
  std::vector<std::vector<double>> share(static_cast<std::size_t>(nl), std::vector<double>(9, 0.0));
  std::vector<bool> present(9, false);
  std::vector<double> mean_bits(static_cast<std::size_t>(nl), 0.0);
  for (int l = 0; l < nl; ++l) {
    long tot = 0, sum = 0;
    for (int h = 0; h < p.kv_heads; ++h)
      for (int b : p.head(l, h).widths) {
        const int bb = std::clamp(b, 0, 8);
        share[static_cast<std::size_t>(l)][static_cast<std::size_t>(bb)] += 1.0;
        present[static_cast<std::size_t>(bb)] = true;
        ++tot;
        sum += b;
      }
    for (auto& x : share[static_cast<std::size_t>(l)]) x /= std::max(1L, tot);
    mean_bits[static_cast<std::size_t>(l)] = static_cast<double>(sum) / std::max(1L, tot);
  }
  const double legend_w = 120;
  const std::string ttl = title.empty() ? "Bit-width fingerprint: share of key blocks per width, by layer" : title;
  const std::string sub = detail::plan_summary(p) + "; " + std::to_string(p.kv_heads) + " KV heads x " +
                          std::to_string(L) + " blocks per layer";
  const double need = std::max(text_width(ttl, 16) * 1.05, text_width(sub, 11.5)) + 78 + 24;
  const double pw = std::max(std::clamp(nl * 34.0, 300.0, 1100.0), need - 78 - 24 - legend_w);
  const double W = 78 + pw + 24 + legend_w, H = 440;
  svg_canvas c(W, H);
  const area a{78, 74, pw, H - 74 - 64};
  draw_title(c, a.x, ttl, sub);
  const linear_scale ys{0, 100, a.bottom(), a.y};
  const auto yt = make_ticks(ys, 5);
  draw_grid(c, a, yt);
  const double band = a.w / nl;
  const double bw = std::min(band * 0.78, 64.0);
  for (int l = 0; l < nl; ++l) {
    const double x = a.x + l * band + (band - bw) / 2;
    double acc = 0;
    for (int b = 0; b <= 8; ++b) {
      const double sh = share[static_cast<std::size_t>(l)][static_cast<std::size_t>(b)];
      if (sh <= 0) continue;
      const double y1 = ys(100 * acc), y0 = ys(100 * (acc + sh));
      c.rect(x, y0, bw, y1 - y0, width_color(b), "#FFFFFF", 0.6,
             "layer " + std::to_string(l) + ": " + detail::bits_label(b) + " " + detail::fmt("%.1f", 100 * sh) +
                 "% of blocks (mean " + detail::fmt("%.2f", mean_bits[static_cast<std::size_t>(l)]) + " bits)");
      if (y1 - y0 >= 14 && bw >= 30) {
        text_style st;
        st.size = 10.5;
        st.anchor = text_anchor::middle;
        st.middle_y = true;
        st.color = b >= 4 ? "#FFFFFF" : "#222222";
        c.text(x + bw / 2, (y0 + y1) / 2, detail::fmt("%.0f%%", 100 * sh), st);
      }
      acc += sh;
    }
  }
  draw_y_axis(c, a, yt, "share of key blocks (%)");
  draw_x_bands(
      c, a, nl, [](int i) { return std::to_string(i); }, detail::label_every(nl, 24), "layer");
  // legend: widest width on top, as the stack reads
  double ly = a.y + 8;
  text_style hs;
  hs.size = 11.5;
  hs.bold = true;
  c.text(a.right() + 24, ly, "key width", hs);
  ly += 18;
  for (int b = 8; b >= 0; --b) {
    if (!present[static_cast<std::size_t>(b)]) continue;
    draw_legend(c, a.right() + 24, ly, {{detail::bits_label(b), width_color(b), legend_kind::swatch}}, legend_w);
    ly += 18;
  }
  c.comment("bgtq plot fingerprint");
  return c.str();
}

//! One metric per layer and method, read from a `bgtq eval -o` results file.
struct eval_table {
  std::string metric;                     //!< e.g. "logit_mae"
  std::vector<int> layers;                //!< layer ids, in file order
  std::vector<std::string> methods;       //!< "fp16", "tq@2", "bgtq@2", ... in order of first appearance
  std::vector<std::vector<double>> value;  //!< [method][layer index]; NaN where absent or null
  std::map<int, double> bgtq_reduction;   //!< bits -> relative logit-MAE reduction of bgtq vs tq (summary)
  std::string description;                //!< one line from the file's "config"
  std::vector<double> bytes_per_token;     //!< [method] mean bytes per token per KV head (NaN if absent)
};

//! The metrics an eval results file holds per method.
inline const std::vector<std::string>& eval_metrics() {
  static const std::vector<std::string> m = {"logit_mae", "kl", "top10", "out_rel_l2", "bytes_per_token"};
  return m;
}

//! Extracts `metric` from a parsed results file (`name` prefixes errors).
//! @throws bgtq::error(format_error) if the document does not have the shape
//!         {"layers":[{"layer":N,"results":{"method":{metric:x,...}}}]} (each layer once,
//!         every metric >= 0), or
//!         invalid_argument if no method reports `metric`
//! A JSON number as short text for messages ("1e+300", "2.5").
inline std::string json_number_text(double x) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.6g", x);
  return buf;
}

inline eval_table parse_eval_results(const json_value& doc, const std::string& name, const std::string& metric = "logit_mae") {
  auto bad = [&](const std::string& what) {
    fail(errc::format_error, name + ": " + what + " (expected the file `bgtq eval ... -o R.json` writes)");
  };
  if (!doc.is_object()) bad("the top level is not an object");
  const json_value* layers = doc.find("layers");
  if (!layers || !layers->is_array()) bad("no \"layers\" array");
  if (layers->items().empty()) bad("\"layers\" is empty");
  eval_table t;
  t.metric = metric;
  std::map<std::string, std::size_t> idx;
  std::map<int, std::size_t> first_entry;  // layer id -> its entry in "layers"
  std::vector<detail::running_mean> bytes_mean;
  const std::size_t nl = layers->items().size();
  for (std::size_t li = 0; li < nl; ++li) {
    const json_value& e = layers->items()[li];
    const json_value* id = e.find("layer");
    const json_value* res = e.find("results");
    if (!id || !id->is_number() || !res || !res->is_object())
      bad("layers[" + std::to_string(li) + "] lacks a numeric \"layer\" or a \"results\" object");
    const double lid = id->as_number();
    if (!(lid >= 0.0 && lid <= 1e6 && lid == std::floor(lid)))  // (also keeps the int conversion defined)
      bad("layers[" + std::to_string(li) + "].layer = " + json_number_text(lid) + " is not a layer index (0 .. 1e6)");
    if (const auto [at, fresh] = first_entry.emplace(static_cast<int>(lid), li); !fresh)
      bad("layers[" + std::to_string(li) + "].layer = " + json_number_text(lid) + " is there twice (also layers[" +
          std::to_string(at->second) + "])");
    t.layers.push_back(static_cast<int>(lid));
    for (const auto& [m, v] : res->members()) {
      if (!v.is_object()) bad("layers[" + std::to_string(li) + "].results." + m + " is not an object");
      auto it = idx.find(m);
      if (it == idx.end()) {
        it = idx.emplace(m, t.methods.size()).first;
        t.methods.push_back(m);
        t.value.emplace_back(nl, std::numeric_limits<double>::quiet_NaN());
        bytes_mean.emplace_back();
      }
      const json_value* x = v.find(metric);
      if (x && !x->is_number() && !x->is_null())  // absent or null: no value for this layer
        bad("layers[" + std::to_string(li) + "].results." + m + "." + metric + " is not a number");
      if (x && x->is_number() && x->as_number() < 0.0)  // errors, overlaps and byte counts are all >= 0
        bad("layers[" + std::to_string(li) + "].results." + m + "." + metric + " = " + json_number_text(x->as_number()) +
            " is negative");
      // a number beyond double's range (1e999) reads as +inf: refused, not taken for "absent"
      // (which dropped the point without a word, or blamed the file for not reporting it)
      if (x && x->is_number() && !std::isfinite(x->as_number()))
        bad("layers[" + std::to_string(li) + "].results." + m + "." + metric + " is beyond double's range");
      if (x && x->is_number()) t.value[it->second][li] = x->as_number();
      const json_value* by = v.find("bytes_per_token");
      if (by && by->is_number() && std::isfinite(by->as_number())) bytes_mean[it->second].add(by->as_number());
    }
  }
  if (t.methods.empty()) bad("no method results in any layer");
  for (std::size_t m = 0; m < t.methods.size(); ++m)
    t.bytes_per_token.push_back(bytes_mean[m].value());
  bool any = false;
  for (const auto& row : t.value)
    for (double x : row) any = any || !std::isnan(x);
  if (!any) {
    std::string hint = metric == "out_rel_l2" ? " (the attention-output error needs `bgtq eval --v V.npy`)" : "";
    fail(errc::invalid_argument, name + ": no method reports \"" + metric + "\"" + hint);
  }
  if (const json_value* sm = doc.find("summary"); sm && sm->is_object())
    if (const json_value* r = sm->find("bgtq_vs_tq"); r && r->is_array())
      for (const auto& e : r->items()) {
        const json_value* b = e.find("bits");
        const json_value* red = e.find("logit_mae_reduction");
        if (b && b->is_number() && red && red->is_number()) {
          const double bits = b->as_number();
          if (!(bits >= 1.0 && bits <= 8.0 && bits == std::floor(bits)))
            bad("summary.bgtq_vs_tq[].bits = " + json_number_text(bits) + " is not a bit width (1..8)");
          // 1 - MAE ratio: at most 1; far below -1e6 (a million times tq's error) only a
          // broken or hand-made file has (1e307 printed "-inf%", x 100 overflowing)
          if (!(std::abs(red->as_number()) <= 1e6))
            bad("summary.bgtq_vs_tq[].logit_mae_reduction = " + json_number_text(red->as_number()) +
                " is not a reduction (finite, within +-1e6)");
          t.bgtq_reduction[static_cast<int>(bits)] = red->as_number();
        }
      }
  if (const json_value* cf = doc.find("config"); cf && cf->is_object()) {
    auto num = [&](const char* k) -> long {  // a count, or -1 (absent, not a whole number, out of range)
      const json_value* v = cf->find(k);
      if (!v || !v->is_number()) return -1;
      const double x = v->as_number();
      return x >= 0.0 && x <= 1e15 && x == std::floor(x) ? static_cast<long>(x) : -1;
    };
    auto str = [&](const char* k) -> std::string {
      const json_value* v = cf->find(k);
      return v && v->is_string() ? v->as_string() : std::string();
    };
    std::string d;
    if (num("layers") > 0) d += std::to_string(num("layers")) + " layers, ";
    if (num("tokens") > 0) d += "T=" + std::to_string(num("tokens")) + ", ";
    if (num("q_heads") > 0) d += "Hq=" + std::to_string(num("q_heads")) + ", Hkv=" + std::to_string(num("kv_heads")) + ", ";
    if (num("head_dim") > 0) d += "D=" + std::to_string(num("head_dim")) + " (" + str("rope") + "), ";
    // Block-GTQ (bgtq@B) calibrates on the first calib_tokens; without it (e.g. eval --plan
    // beside tq only) nothing calibrates there, and the split only says where queries begin
    bool calibrated = true;
    if (const json_value* ms = cf->find("methods"); ms && ms->is_array())
      calibrated = std::any_of(ms->items().begin(), ms->items().end(),
                               [](const json_value& m) { return m.is_string() && m.as_string() == "bgtq"; });
    if (num("calib_tokens") > 0 && calibrated)
      d += "calibrated on " + std::to_string(num("calib_tokens")) + " tokens, evaluated from token " +
           std::to_string(std::max(0L, num("eval_from"))) + ", ";
    else if (num("eval_from") >= 0)
      d += "evaluated from token " + std::to_string(num("eval_from")) + ", ";
    if (d.size() >= 2) d.resize(d.size() - 2);
    t.description = d;
  }
  return t;
}

namespace detail {

struct method_style {
  std::string label, color;
  marker_shape marker;
  bool reference;  // drawn as a dashed line without markers (fp16 / fp32)
};

inline method_style style_for(const std::string& family, int& next_extra) {
  if (family == "bgtq") return {"Block-GTQ", "#4477AA", marker_shape::circle, false};
  if (family == "tq") return {"TQ-MSE (uniform)", "#EE6677", marker_shape::square, false};
  if (family == "kivi") return {"KIVI", "#228833", marker_shape::triangle, false};
  if (family == "kivi-sym") return {"KIVI (symmetric)", "#CCBB44", marker_shape::diamond, false};
  if (family == "plan") return {"plan file (eval --plan)", "#AA3377", marker_shape::circle, false};
  if (family == "fp16" || family == "fp32") return {family + " cache", "#777777", marker_shape::circle, true};
  const int i = next_extra++;
  return {family, category_color(4 + i), static_cast<marker_shape>(i % 4), false};
}

inline std::string capitalized(std::string s) {
  if (!s.empty() && s[0] >= 'a' && s[0] <= 'z') s[0] = static_cast<char>(s[0] - 'a' + 'A');
  return s;
}

inline std::string metric_label(const std::string& m) {
  if (m == "logit_mae") return "RoPE-logit MAE";
  if (m == "kl") return "softmax KL(p \xE2\x80\x96 p\xCC\x82)";
  if (m == "top10") return "top-10 overlap";
  if (m == "out_rel_l2") return "attention-output relative L2 error";
  if (m == "bytes_per_token") return "bytes per token per KV head";
  return m;
}

}  // namespace detail

//! Small multiples, one panel per bit width: the metric per layer, one line per method
//! (fp16 as a dashed reference in every panel); a log axis when the values span more
//! than 5x, shared by all panels.
inline std::string eval_figure(const eval_table& t, const std::string& title = "") {
  // split method names "family@bits"
  struct series {
    std::size_t row;
    std::string family;
    int bits;
  };
  std::vector<series> ser;
  std::vector<int> bits;
  std::vector<std::string> families;
  for (std::size_t m = 0; m < t.methods.size(); ++m) {
    const std::string& name = t.methods[m];
    const auto at = name.find('@');
    series s{m, name.substr(0, at), -1};
    if (at != std::string::npos) {
      const std::string b = name.substr(at + 1);
      char* end = nullptr;
      const long v = std::strtol(b.c_str(), &end, 10);
      if (!b.empty() && *end == '\0' && v >= 0 && v <= 64) s.bits = static_cast<int>(v);
      else s.family = name;
    }
    if (s.bits >= 0 && std::find(bits.begin(), bits.end(), s.bits) == bits.end()) bits.push_back(s.bits);
    if (std::find(families.begin(), families.end(), s.family) == families.end()) families.push_back(s.family);
    ser.push_back(s);
  }
  std::sort(bits.begin(), bits.end());
  const bool no_bits = bits.empty();
  if (no_bits) bits.push_back(-1);
  // styles per family: methods first, references last in the legend
  std::map<std::string, detail::method_style> style;
  int extra = 0;
  for (const auto& f : families) style.emplace(f, detail::style_for(f, extra));

  // shared y domain, from the quantized methods (a reference such as fp16 is usually
  // orders of magnitude lower; it is drawn when inside, else noted in each panel)
  double lo = std::numeric_limits<double>::infinity(), hi = -lo;
  bool all_pos = true;
  const bool have_methods = std::any_of(ser.begin(), ser.end(), [&](const series& x) { return !style.at(x.family).reference; });
  for (const auto& x : ser) {
    if (have_methods && style.at(x.family).reference) continue;
    for (double v : t.value[x.row])
      if (!std::isnan(v)) {
        lo = std::min(lo, v);
        hi = std::max(hi, v);
        all_pos = all_pos && v > 0;
      }
  }
  const bool use_log = all_pos && hi / lo > 5.0;

  const int np = static_cast<int>(bits.size());
  const int nl = static_cast<int>(t.layers.size());
  const double pw = std::clamp(60.0 + nl * 40.0, 240.0, 420.0), gap = 26;
  const double left = 84, right = 24;
  const double W = std::max(640.0, left + np * pw + (np - 1) * gap + right);
  // legend order: the method first, then the baselines, references last
  auto rank = [](const std::string& f) {
    static const char* const order[] = {"bgtq", "plan", "tq", "kivi", "kivi-sym"};
    for (int i = 0; i < 5; ++i)
      if (f == order[i]) return i;
    return 5;
  };
  std::stable_sort(families.begin(), families.end(), [&](const std::string& x, const std::string& y) { return rank(x) < rank(y); });
  std::vector<legend_entry> le;
  for (const auto& f : families) {
    const auto& st = style.at(f);
    if (!st.reference) le.push_back({st.label, st.color, legend_kind::line_marker, st.marker});
  }
  for (const auto& f : families) {
    const auto& st = style.at(f);
    if (st.reference) le.push_back({st.label, st.color, legend_kind::dashed_line});
  }
  const double lh = legend_height(le, W - left - right);
  const double H = 136 + 300 + lh;
  svg_canvas c(W, H);
  const bool higher_better = t.metric == "top10";
  draw_title(c, left,
             title.empty() ? detail::capitalized(detail::metric_label(t.metric)) + " per layer (" + (higher_better ? "higher" : "lower") +
                                 " is better)"
                           : title,
             t.description);
  const double top = 112, ph = 260;

  std::vector<axis_tick> yt;
  std::function<double(double)> ymap;
  double ylo = 0, yhi = 0;
  if (use_log) {
    const auto d = log_domain_padded(lo, hi, 1.15, 1.1);
    ylo = d.first;
    yhi = d.second;
    const log_scale s{d.first, d.second, top + ph, top};
    yt = make_ticks(s);
    ymap = s;
  } else {
    // from zero for errors; a share such as top-10 overlap zooms in on [lo, 1]
    auto d = higher_better && hi <= 1.0 && lo > 0 ? nice_domain(lo, 1.0, 5) : nice_domain(std::min(0.0, lo), hi, 5);
    ylo = d.first;
    yhi = d.second;
    const linear_scale s{d.first, d.second, top + ph, top};
    yt = make_ticks(s, 5);
    ymap = s;
  }
  for (int pi = 0; pi < np; ++pi) {
    const int b = bits[static_cast<std::size_t>(pi)];
    const area a{left + pi * (pw + gap), top, pw, ph};
    draw_grid(c, a, yt);
    c.rect(a.x, a.y, a.w, a.h, "none", "#CCCCCC", 1.0);
    // panel header
    text_style hs;
    hs.size = 12.5;
    hs.bold = true;
    c.text(a.x, a.y - 24, no_bits ? std::string("all methods") : detail::bits_label(b), hs);
    {  // what each method of this panel costs: equal nominal bits are not equal bytes
      std::string bl;
      for (const auto& f : families)
        for (const auto& x : ser) {
          if (x.family != f || style.at(f).reference || (!no_bits && x.bits >= 0 && x.bits != b)) continue;
          if (std::isnan(t.bytes_per_token[x.row])) continue;
          bl += (bl.empty() ? "" : " \xC2\xB7 ") + f + " " + detail::fmt("%.3g", t.bytes_per_token[x.row]);
        }
      if (!bl.empty()) {
        text_style bs;
        bs.size = 10.5;
        bs.color = "#666666";
        c.text(a.x, a.y - 8, "bytes/token: " + bl, bs);
      }
    }
    if (auto it = t.bgtq_reduction.find(b); it != t.bgtq_reduction.end() && t.metric == "logit_mae") {
      text_style rs;
      rs.size = 11;
      rs.anchor = text_anchor::end;
      rs.color = "#4477AA";
      const double r = it->second * 100;
      c.text(a.right(), a.y - 24,
             "Block-GTQ " + std::string(r >= 0 ? "\xE2\x88\x92" : "+") + detail::fmt("%.1f", std::abs(r)) + "% vs TQ-MSE", rs);
    }
    const double band = a.w / std::max(1, nl);
    auto xpos = [&](int li) { return a.x + (li + 0.5) * band; };
    // references first (underneath), then methods
    for (int pass = 0; pass < 2; ++pass)
      for (const auto& s : ser) {
        const auto& st = style.at(s.family);
        if (st.reference != (pass == 0)) continue;
        // a method without a width (eval --plan's "plan": its own average) is in every panel
        if (!st.reference && !no_bits && s.bits >= 0 && s.bits != b) continue;
        if (st.reference && s.bits >= 0 && s.bits != b) continue;
        if (st.reference && have_methods) {  // off the scale: a note instead of a line
          detail::running_mean mean;
          double vmin = std::numeric_limits<double>::infinity(), vmax = -vmin;
          for (double v : t.value[s.row])
            if (!std::isnan(v)) {
              mean.add(v);
              vmin = std::min(vmin, v);
              vmax = std::max(vmax, v);
            }
          if (mean.n > 0 && (vmin < ylo * 0.999 || vmax > yhi * 1.001)) {
            text_style ns;
            ns.size = 10.5;
            ns.color = st.color;
            const bool below = vmax < ylo;
            c.text(a.x + 6, below ? a.bottom() - 7 : a.y + 14,
                   st.label + ": mean " + detail::fmt("%.2g", mean.value()) + (below ? " (below the axis)" : " (above the axis)"),
                   ns);
            continue;
          }
        }
        std::vector<std::pair<double, double>> pts;
        for (int li = 0; li < nl; ++li) {
          const double v = t.value[s.row][static_cast<std::size_t>(li)];
          if (std::isnan(v)) {
            c.polyline(pts, st.color, st.reference ? 1.5 : 2.0, st.reference ? "5 3" : "");
            pts.clear();
            continue;
          }
          pts.emplace_back(xpos(li), ymap(v));
        }
        c.polyline(pts, st.color, st.reference ? 1.5 : 2.0, st.reference ? "5 3" : "");
        if (st.reference && nl == 1 && !pts.empty())
          c.line(a.x + 4, pts[0].second, a.right() - 4, pts[0].second, st.color, 1.5, "5 3");
        if (!st.reference)
          for (int li = 0; li < nl; ++li) {
            const double v = t.value[s.row][static_cast<std::size_t>(li)];
            if (std::isnan(v)) continue;
            c.marker(st.marker, xpos(li), ymap(v), 8, st.color,
                     t.methods[s.row] + ", layer " + std::to_string(t.layers[static_cast<std::size_t>(li)]) + ": " +
                         detail::fmt("%.4g", v));
          }
      }
    draw_y_axis(c, a, pi == 0 ? yt : std::vector<axis_tick>{}, pi == 0 ? detail::metric_label(t.metric) +
                                                                             (use_log ? " (log scale)" : "")
                                                                       : std::string());
    const auto& ly = t.layers;
    draw_x_bands(
        c, a, nl, [&](int i) { return std::to_string(ly[static_cast<std::size_t>(i)]); }, detail::label_every(nl, 12),
        "layer");
  }
  draw_legend(c, left, top + ph + 62, le, W - left - right);
  c.comment("bgtq plot eval: " + t.metric);
  return c.str();
}

}  // namespace bgtq::plot
