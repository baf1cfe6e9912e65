#pragma once
//! @file plot/svg.hpp
//! A minimal SVG 1.1 writer: rectangles, lines, polylines, markers and text, written as
//! one self-contained document (no scripts, no external fonts or images). Coordinates are
//! pixels with the origin at the top left; numbers are printed with at most two
//! decimals, in the C locale's format, so a plot is byte-identical across runs.
//!
//! @code
//! bgtq::plot::svg_canvas c(320, 200);
//! c.rect(10, 10, 100, 50, "#4477aa");
//! c.text(60, 90, "energy", {.size = 12, .anchor = bgtq::plot::text_anchor::middle});
//! std::string doc = c.str();
//! @endcode

#include <cmath>
#include <cstdio>
#include <ostream>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "../core/utf8.hpp"

namespace bgtq::plot {

//! Escapes the five XML special characters (& < > " '), drops control characters that
//! XML 1.0 forbids (all below 0x20 except tab, newline and carriage return) and the
//! non-characters U+FFFE / U+FFFF, and writes U+FFFD for a byte that starts no valid UTF-8
//! sequence (the SVG declares UTF-8; one stray byte would make it unreadable).
inline std::string xml_escape(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  for (char ch : bgtq::detail::utf8_sanitized(s, true)) {
    const unsigned char c = static_cast<unsigned char>(ch);
    switch (ch) {
      case '&': out += "&amp;"; break;
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '"': out += "&quot;"; break;
      case '\'': out += "&apos;"; break;
      default:
        if (c >= 0x20 || ch == '\t' || ch == '\n' || ch == '\r') out += ch;
    }
  }
  return out;
}

//! A coordinate or length as text: at most two decimals, trailing zeros removed,
//! never "-0"; non-finite values become 0 (SVG has no NaN).
inline std::string fmt_num(double v) {
  if (!std::isfinite(v)) v = 0.0;
  char buf[48];
  std::snprintf(buf, sizeof buf, "%.2f", v);
  std::string s(buf);
  if (s.find('.') != std::string::npos) {
    while (!s.empty() && s.back() == '0') s.pop_back();
    if (!s.empty() && s.back() == '.') s.pop_back();
  }
  if (s == "-0") s = "0";
  return s;
}

//! Horizontal alignment of a text element relative to its x.
enum class text_anchor : unsigned char { start, middle, end };

//! How a text element looks. `y` of a text is its baseline; `middle_y` moves the
//! baseline so that the text is vertically centred on y instead.
struct text_style {
  double size = 12.0;                      //!< font size in px
  text_anchor anchor = text_anchor::start;  //!< horizontal alignment
  double rotate = 0.0;                     //!< degrees, clockwise, about (x, y)
  bool bold = false;
  bool middle_y = false;                   //!< centre vertically on y
  std::string color = "#222222";
};

//! A marker shape for line charts.
enum class marker_shape : unsigned char { circle, square, triangle, diamond };

//! Approximate width in px of `s` at font size `size` in a sans-serif font (for layout:
//! legends and margins). Counts UTF-8 code points, not bytes.
inline double text_width(std::string_view s, double size) {
  double n = 0;
  for (char ch : s) {
    const unsigned char c = static_cast<unsigned char>(ch);
    if ((c & 0xC0) == 0x80) continue;  // UTF-8 continuation byte
    n += (ch == ' ' || ch == '.' || ch == ',' || ch == ':' || ch == 'i' || ch == 'l' || ch == '1') ? 0.4 : 0.62;
  }
  return n * size;
}

//! One SVG document being drawn. Elements are emitted in call order (later ones on top).
class svg_canvas {
 public:
  //! An empty canvas of `width` x `height` px with a white background.
  svg_canvas(double width, double height, std::string background = "#ffffff") : w_(width), h_(height) {
    if (!background.empty()) rect(0, 0, width, height, background);
  }

  double width() const noexcept { return w_; }
  double height() const noexcept { return h_; }

  //! Filled rectangle; an optional `tooltip` becomes an SVG title child (shown on hover).
  svg_canvas& rect(double x, double y, double w, double h, const std::string& fill, const std::string& stroke = "none",
                   double stroke_width = 0.0, const std::string& tooltip = "") {
    body_ += "<rect x=\"" + fmt_num(x) + "\" y=\"" + fmt_num(y) + "\" width=\"" + fmt_num(w < 0 ? 0 : w) +
             "\" height=\"" + fmt_num(h < 0 ? 0 : h) + "\" fill=\"" + xml_escape(fill) + "\"";
    if (stroke != "none") body_ += " stroke=\"" + xml_escape(stroke) + "\" stroke-width=\"" + fmt_num(stroke_width) + "\"";
    close_with_tooltip(tooltip, "rect");
    return *this;
  }

  //! Straight line; `dash` is an SVG dash array such as "4 3" (empty: solid).
  svg_canvas& line(double x1, double y1, double x2, double y2, const std::string& stroke, double width = 1.0,
                   const std::string& dash = "") {
    body_ += "<line x1=\"" + fmt_num(x1) + "\" y1=\"" + fmt_num(y1) + "\" x2=\"" + fmt_num(x2) + "\" y2=\"" + fmt_num(y2) +
             "\" stroke=\"" + xml_escape(stroke) + "\" stroke-width=\"" + fmt_num(width) + "\"";
    if (!dash.empty()) body_ += " stroke-dasharray=\"" + xml_escape(dash) + "\"";
    body_ += "/>\n";
    return *this;
  }

  //! Open polyline through `pts` (nothing is drawn for fewer than two points).
  svg_canvas& polyline(const std::vector<std::pair<double, double>>& pts, const std::string& stroke, double width = 1.5,
                       const std::string& dash = "") {
    if (pts.size() < 2) return *this;
    body_ += "<polyline fill=\"none\" stroke=\"" + xml_escape(stroke) + "\" stroke-width=\"" + fmt_num(width) +
             "\" stroke-linejoin=\"round\"";
    if (!dash.empty()) body_ += " stroke-dasharray=\"" + xml_escape(dash) + "\"";
    body_ += " points=\"";
    for (std::size_t i = 0; i < pts.size(); ++i) {
      if (i) body_ += ' ';
      body_ += fmt_num(pts[i].first) + "," + fmt_num(pts[i].second);
    }
    body_ += "\"/>\n";
    return *this;
  }

  //! A marker of about `size` px across centred on (x, y), white outline.
  svg_canvas& marker(marker_shape shape, double x, double y, double size, const std::string& fill,
                     const std::string& tooltip = "") {
    const double r = size / 2;
    const std::string common = " fill=\"" + xml_escape(fill) + "\" stroke=\"#ffffff\" stroke-width=\"1\"";
    switch (shape) {
      case marker_shape::circle:
        body_ += "<circle cx=\"" + fmt_num(x) + "\" cy=\"" + fmt_num(y) + "\" r=\"" + fmt_num(r) + "\"" + common;
        close_with_tooltip(tooltip, "circle");
        return *this;
      case marker_shape::square:
        body_ += "<rect x=\"" + fmt_num(x - r * 0.9) + "\" y=\"" + fmt_num(y - r * 0.9) + "\" width=\"" + fmt_num(1.8 * r) +
                 "\" height=\"" + fmt_num(1.8 * r) + "\"" + common;
        close_with_tooltip(tooltip, "rect");
        return *this;
      case marker_shape::triangle:
        body_ += "<polygon points=\"" + fmt_num(x) + "," + fmt_num(y - 1.15 * r) + " " + fmt_num(x + 1.1 * r) + "," +
                 fmt_num(y + 0.85 * r) + " " + fmt_num(x - 1.1 * r) + "," + fmt_num(y + 0.85 * r) + "\"" + common;
        close_with_tooltip(tooltip, "polygon");
        return *this;
      case marker_shape::diamond:
        body_ += "<polygon points=\"" + fmt_num(x) + "," + fmt_num(y - 1.2 * r) + " " + fmt_num(x + 1.2 * r) + "," +
                 fmt_num(y) + " " + fmt_num(x) + "," + fmt_num(y + 1.2 * r) + " " + fmt_num(x - 1.2 * r) + "," + fmt_num(y) +
                 "\"" + common;
        close_with_tooltip(tooltip, "polygon");
        return *this;
    }
    return *this;
  }

  //! Text with its baseline at y (see text_style::middle_y).
  svg_canvas& text(double x, double y, std::string_view s, const text_style& st = {}) {
    open_text(x, y, st);
    body_ += xml_escape(s);
    body_ += "</text>\n";
    return *this;
  }

  //! "base" followed by a raised, smaller "exponent" (e.g. 10 and -3 for 10^-3), as one
  //! text element. A leading '-' of the exponent is written as a real minus sign.
  svg_canvas& text_power(double x, double y, std::string_view base, std::string_view exponent, const text_style& st = {}) {
    open_text(x, y, st);
    body_ += xml_escape(base);
    std::string e(exponent);
    if (!e.empty() && e.front() == '-') e = "\xE2\x88\x92" + e.substr(1);  // U+2212 minus
    body_ += "<tspan dy=\"" + fmt_num(-0.42 * st.size) + "\" font-size=\"" + fmt_num(0.72 * st.size) + "\">" +
             xml_escape(e) + "</tspan>";
    body_ += "</text>\n";
    return *this;
  }

  //! An XML comment (e.g. provenance); "--" inside is replaced so the comment stays valid.
  svg_canvas& comment(std::string_view s) {
    std::string c = xml_escape(s);
    for (std::size_t p = c.find("--"); p != std::string::npos; p = c.find("--", p)) c.replace(p, 2, "- ");
    if (!c.empty() && c.back() == '-') c += ' ';
    body_ += "<!-- " + c + " -->\n";
    return *this;
  }

  //! The complete document.
  std::string str() const {
    std::string s = "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n";
    s += "<svg xmlns=\"http://www.w3.org/2000/svg\" version=\"1.1\" width=\"" + fmt_num(w_) + "\" height=\"" + fmt_num(h_) +
         "\" viewBox=\"0 0 " + fmt_num(w_) + " " + fmt_num(h_) +
         "\" font-family=\"DejaVu Sans, Helvetica, Arial, sans-serif\">\n";
    s += body_;
    s += "</svg>\n";
    return s;
  }
  //! Writes str() to `os`.
  void write(std::ostream& os) const { os << str(); }

 private:
  void close_with_tooltip(const std::string& tooltip, const char* tag) {
    if (tooltip.empty()) {
      body_ += "/>\n";
    } else {
      body_ += "><title>" + xml_escape(tooltip) + "</title></" + tag + ">\n";
    }
  }
  void open_text(double x, double y, const text_style& st) {
    body_ += "<text x=\"" + fmt_num(x) + "\" y=\"" + fmt_num(y) + "\"";
    // dy moves the baseline perpendicular to the (possibly rotated) text direction
    if (st.middle_y) body_ += " dy=\"" + fmt_num(0.35 * st.size) + "\"";
    body_ += " font-size=\"" + fmt_num(st.size) + "\" fill=\"" + xml_escape(st.color) + "\"";
    if (st.anchor == text_anchor::middle) body_ += " text-anchor=\"middle\"";
    if (st.anchor == text_anchor::end) body_ += " text-anchor=\"end\"";
    if (st.bold) body_ += " font-weight=\"bold\"";
    if (st.rotate != 0.0)
      body_ += " transform=\"rotate(" + fmt_num(st.rotate) + " " + fmt_num(x) + " " + fmt_num(y) + ")\"";
    body_ += ">";
  }

  double w_, h_;
  std::string body_;
};

}  // namespace bgtq::plot
