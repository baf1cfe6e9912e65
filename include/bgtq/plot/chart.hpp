#pragma once
//! @file plot/chart.hpp
//! Chart furniture on an svg_canvas: plot areas, y axes (linear or log, left or right,
//! with grid lines), categorical x axes, titles and legends, plus the colour palettes
//! the figures share (a colour-blind safe categorical set and a sequential scale for
//! bit widths 0..8).

#include <algorithm>
#include <string>
#include <vector>

#include "scale.hpp"
#include "svg.hpp"

namespace bgtq::plot {

//! A rectangle in pixels (the plot area of a panel).
struct area {
  double x = 0, y = 0, w = 0, h = 0;
  double right() const noexcept { return x + w; }
  double bottom() const noexcept { return y + h; }
};

//! Categorical colour i (Paul Tol's "bright" set, cycled): distinguishable for the
//! common forms of colour blindness.
inline std::string category_color(int i) {
  static const char* const c[] = {"#4477AA", "#EE6677", "#228833", "#CCBB44", "#AA3377", "#66CCEE", "#BBBBBB"};
  const int n = static_cast<int>(sizeof c / sizeof c[0]);
  return c[((i % n) + n) % n];
}

//! Colour of a bit width: grey for 0 (dropped), then a reversed viridis ramp from light
//! (1 bit) to dark (8 bits), so that "more bits" reads as "darker".
inline std::string width_color(int bits) {
  static const char* const c[] = {"#BDBDBD", "#FDE725", "#A0DA39", "#4AC16D", "#1FA187",
                                  "#277F8E", "#365C8D", "#46327E", "#440154"};
  return c[std::clamp(bits, 0, 8)];
}

//! One tick of an axis: its pixel position and label (empty label: minor tick).
struct axis_tick {
  double px = 0;
  log_label label;
  bool minor = false;
};

//! Ticks of a linear scale (about `target` intervals), labelled.
inline std::vector<axis_tick> make_ticks(const linear_scale& s, int target = 5) {
  std::vector<axis_tick> out;
  const double lo = std::min(s.lo, s.hi), hi = std::max(s.lo, s.hi);
  const double step = nice_step(hi - lo, target);
  for (double v : linear_ticks(lo, hi, target)) out.push_back({s(v), {linear_tick_label(v, step), ""}, false});
  return out;
}

//! Ticks of a log scale: labelled majors and unlabelled minors.
inline std::vector<axis_tick> make_ticks(const log_scale& s, int max_major = 8) {
  std::vector<axis_tick> out;
  const log_tick_set t = log_ticks(s.lo, s.hi, max_major);
  for (double v : t.minor) out.push_back({s(v), {}, true});
  for (double v : t.major) out.push_back({s(v), log_tick_label(v), false});
  return out;
}

//! Light horizontal grid lines at the major ticks (and fainter ones at minor ticks).
inline void draw_grid(svg_canvas& c, const area& a, const std::vector<axis_tick>& ticks) {
  for (const auto& t : ticks)
    c.line(a.x, t.px, a.right(), t.px, t.minor ? "#F2F2F2" : "#E3E3E3", 1.0);
}

//! A vertical axis on the left (or right) edge of `a`: axis line, ticks, labels and a
//! rotated title centred on the axis. `color` tints labels and title (to tie a second
//! axis to its series).
inline void draw_y_axis(svg_canvas& c, const area& a, const std::vector<axis_tick>& ticks, const std::string& title,
                        bool right = false, const std::string& color = "#222222", double title_offset = 0) {
  const double x = right ? a.right() : a.x;
  const double dir = right ? 1.0 : -1.0;
  c.line(x, a.y, x, a.bottom(), "#444444", 1.0);
  double widest = 0;
  for (const auto& t : ticks) {
    const double len = t.minor ? 3.0 : 5.0;
    c.line(x, t.px, x + dir * len, t.px, "#444444", 1.0);
    if (t.minor) continue;
    text_style st;
    st.size = 11;
    st.anchor = right ? text_anchor::start : text_anchor::end;
    st.middle_y = true;
    st.color = color;
    const double lx = x + dir * 8.0;
    if (t.label.exponent.empty()) {
      c.text(lx, t.px, t.label.mantissa, st);
      widest = std::max(widest, text_width(t.label.mantissa, 11));
    } else {
      c.text_power(lx, t.px, t.label.mantissa, t.label.exponent, st);
      widest = std::max(widest, text_width(t.label.mantissa, 11) + text_width(t.label.exponent, 8));
    }
  }
  if (!title.empty()) {
    text_style st;
    st.size = 12;
    st.anchor = text_anchor::middle;
    st.rotate = right ? 90 : -90;
    st.color = color;
    const double off = title_offset > 0 ? title_offset : widest + 20.0;
    c.text(x + dir * off, a.y + a.h / 2, title, st);
  }
}

//! A categorical x axis under `a` with n bands of equal width; band i is labelled
//! label(i) when i % every == 0 (or i == n - 1 and it does not crowd the previous label).
template <class LabelFn>
void draw_x_bands(svg_canvas& c, const area& a, int n, LabelFn label, int every, const std::string& title) {
  c.line(a.x, a.bottom(), a.right(), a.bottom(), "#444444", 1.0);
  const double bw = a.w / std::max(1, n);
  every = std::max(1, every);
  for (int i = 0; i < n; ++i) {
    const bool last = i == n - 1 && (n - 1) % every >= (every + 1) / 2;
    if (i % every != 0 && !last) continue;
    const double cx = a.x + (i + 0.5) * bw;
    c.line(cx, a.bottom(), cx, a.bottom() + 4, "#444444", 1.0);
    text_style st;
    st.size = 11;
    st.anchor = text_anchor::middle;
    c.text(cx, a.bottom() + 17, label(i), st);
  }
  if (!title.empty()) {
    text_style st;
    st.size = 12;
    st.anchor = text_anchor::middle;
    c.text(a.x + a.w / 2, a.bottom() + 36, title, st);
  }
}

//! Title (bold) and an optional subtitle line at the top left of the canvas.
inline void draw_title(svg_canvas& c, double x, const std::string& title, const std::string& subtitle = "") {
  text_style st;
  st.size = 16;
  st.bold = true;
  c.text(x, 24, title, st);
  if (!subtitle.empty()) {
    text_style s2;
    s2.size = 11.5;
    s2.color = "#555555";
    c.text(x, 42, subtitle, s2);
  }
}

//! How a legend entry is drawn.
enum class legend_kind : unsigned char { swatch, line, line_marker, dashed_line };

//! One legend entry.
struct legend_entry {
  std::string label;
  std::string color;
  legend_kind kind = legend_kind::swatch;
  marker_shape marker = marker_shape::circle;
};

//! Width in px a legend entry takes in a row.
inline double legend_entry_width(const legend_entry& e) { return 26.0 + text_width(e.label, 11.5) + 18.0; }

//! Draws entries left to right from (x, y) (y = centre of the first row), wrapping at
//! max_width; returns the height used.
inline double draw_legend(svg_canvas& c, double x, double y, const std::vector<legend_entry>& entries, double max_width) {
  double cx = x, cy = y;
  const double row = 18.0;
  for (const auto& e : entries) {
    const double w = legend_entry_width(e);
    if (cx > x && cx + w - 18.0 > x + max_width) {
      cx = x;
      cy += row;
    }
    switch (e.kind) {
      case legend_kind::swatch: c.rect(cx, cy - 6, 18, 12, e.color, "#FFFFFF", 0.5); break;
      case legend_kind::line: c.line(cx, cy, cx + 20, cy, e.color, 2.5); break;
      case legend_kind::dashed_line: c.line(cx, cy, cx + 20, cy, e.color, 2.0, "5 3"); break;
      case legend_kind::line_marker:
        c.line(cx, cy, cx + 20, cy, e.color, 2.0);
        c.marker(e.marker, cx + 10, cy, 8, e.color);
        break;
    }
    text_style st;
    st.size = 11.5;
    st.middle_y = true;
    c.text(cx + 26, cy, e.label, st);
    cx += w;
  }
  return cy - y + row;
}

//! Height a legend of these entries takes when wrapped at max_width (see draw_legend).
inline double legend_height(const std::vector<legend_entry>& entries, double max_width) {
  double cx = 0, h = entries.empty() ? 0.0 : 18.0;
  for (const auto& e : entries) {
    const double w = legend_entry_width(e);
    if (cx > 0 && cx + w - 18.0 > max_width) {
      cx = 0;
      h += 18.0;
    }
    cx += w;
  }
  return h;
}

}  // namespace bgtq::plot
