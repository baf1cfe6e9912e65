// SVG writer: well-formed XML for every element kind, escaping, number formatting.
#include <bgtq/plot/chart.hpp>
#include <bgtq/plot/svg.hpp>

#include <algorithm>
#include <string>

#include "common.hpp"
#include "xml_check.hpp"

using namespace bgtq::plot;

TEST_CASE("the XML checker itself rejects what it should", "[plot][svg]") {
  CHECK(bgtq_test::check_xml("<a><b x=\"1\"/></a>").error.empty());
  CHECK(bgtq_test::check_xml("<?xml version=\"1.0\"?>\n<a>t &amp; &#x2212; <!-- c --></a>\n").error.empty());
  CHECK_FALSE(bgtq_test::check_xml("<a><b></a>").error.empty());          // mismatched
  CHECK_FALSE(bgtq_test::check_xml("<a x=1/>").error.empty());            // unquoted
  CHECK_FALSE(bgtq_test::check_xml("<a x=\"1\" x=\"2\"/>").error.empty());  // duplicate attribute
  CHECK_FALSE(bgtq_test::check_xml("<a>1 < 2</a>").error.empty());        // raw '<'
  CHECK_FALSE(bgtq_test::check_xml("<a>AT&T</a>").error.empty());         // raw '&'
  CHECK_FALSE(bgtq_test::check_xml("<a x=\"<\"/>").error.empty());        // '<' in attribute
  CHECK_FALSE(bgtq_test::check_xml("<a><!-- a -- b --></a>").error.empty());
  CHECK_FALSE(bgtq_test::check_xml("<a/><b/>").error.empty());            // two roots
  CHECK_FALSE(bgtq_test::check_xml("<a>").error.empty());                 // unterminated
}

TEST_CASE("fmt_num prints short, locale-free, finite numbers", "[plot][svg]") {
  CHECK(fmt_num(0) == "0");
  CHECK(fmt_num(12) == "12");
  CHECK(fmt_num(12.5) == "12.5");
  CHECK(fmt_num(1.0 / 3) == "0.33");
  CHECK(fmt_num(-0.001) == "0");
  CHECK(fmt_num(-2.25) == "-2.25");
  CHECK(fmt_num(1e6) == "1000000");
  CHECK(fmt_num(std::nan("")) == "0");
  CHECK(fmt_num(INFINITY) == "0");
}

TEST_CASE("xml_escape escapes markup and drops forbidden control characters", "[plot][svg]") {
  CHECK(xml_escape("a<b>&\"c\"'d'") == "a&lt;b&gt;&amp;&quot;c&quot;&apos;d&apos;");
  CHECK(xml_escape(std::string("x\x01y\tz", 5)) == "xy\tz");
  CHECK(xml_escape("s\xE1\xB5\xA2 \xE2\x88\x92") == "s\xE1\xB5\xA2 \xE2\x88\x92");  // UTF-8 passes through
  // bytes of no valid UTF-8 sequence become U+FFFD; the non-characters U+FFFE / U+FFFF go
  CHECK(xml_escape("a\xFF" "b\xC3") == "a\xEF\xBF\xBD" "b\xEF\xBF\xBD");
  CHECK(xml_escape("x\xEF\xBF\xBEy\xEF\xBF\xBFz\xEF\xBF\xBD") == "xyz\xEF\xBF\xBD");
}

TEST_CASE("every element kind gives a well-formed document, hostile text included", "[plot][svg]") {
  svg_canvas c(320.5, 200);
  const std::string nasty = "<script>alert('x') & \"y\"</script> -- ]]> \x02";
  c.rect(1, 2, 3, 4, "#123456", "#000000", 1, nasty);
  c.rect(1, 2, -3, 4, "#123456");  // negative sizes are clamped
  c.line(0, 0, 10, 10, "#ff0000", 2, "4 2");
  c.polyline({{0, 0}, {1, 1}, {2, 0}}, "#00ff00", 1.5, "3 3");
  c.polyline({{0, 0}}, "#00ff00");  // one point: nothing
  for (auto m : {marker_shape::circle, marker_shape::square, marker_shape::triangle, marker_shape::diamond}) {
    c.marker(m, 50, 50, 8, "#0000ff");
    c.marker(m, 50, 50, 8, "#0000ff", nasty);
  }
  text_style st;
  st.anchor = text_anchor::middle;
  st.rotate = -90;
  st.bold = true;
  st.middle_y = true;
  c.text(10, 10, nasty, st);
  c.text_power(10, 30, "10", "-3", st);
  c.comment(nasty + "--");
  c.comment("-");
  const std::string doc = c.str();
  const auto r = bgtq_test::check_xml(doc);
  INFO(doc);
  REQUIRE(r.error.empty());
  CHECK(r.names.front() == "svg");
  CHECK(std::count(r.names.begin(), r.names.end(), "title") == 5);
  CHECK(doc.find("<script>") == std::string::npos);
  CHECK(doc.find("width=\"320.5\"") != std::string::npos);
  CHECK(doc.find("viewBox=\"0 0 320.5 200\"") != std::string::npos);
  CHECK(doc.find("\xE2\x88\x92" "3</tspan>") != std::string::npos);  // real minus sign in exponents
  CHECK(doc.find("polyline") != std::string::npos);
}

TEST_CASE("the same drawing gives the same bytes", "[plot][svg]") {
  auto draw = [] {
    svg_canvas c(100, 80);
    c.rect(1.005, 2.004, 3.333, 4, "#111111");
    c.text(5, 6, "x", {});
    c.polyline({{0.1, 0.2}, {0.3, 0.4}}, "#222222");
    return c.str();
  };
  CHECK(draw() == draw());
  CHECK(draw().find("width=\"3.33\"") != std::string::npos);
}

TEST_CASE("axes and legends are well formed and wrap", "[plot][svg]") {
  svg_canvas c(600, 400);
  const area a{60, 40, 480, 280};
  const log_scale ls{1e-4, 1e2, a.bottom(), a.y};
  const auto ticks = make_ticks(ls);
  draw_grid(c, a, ticks);
  draw_y_axis(c, a, ticks, "energy (log)");
  draw_y_axis(c, a, make_ticks(linear_scale{0, 8, a.bottom(), a.y}), "bits", true, "#C0392B");
  draw_x_bands(c, a, 64, [](int i) { return std::to_string(i); }, 8, "block");
  draw_title(c, a.x, "A & B", "sub <title>");
  std::vector<legend_entry> le;
  for (int b = 0; b <= 8; ++b) le.push_back({"width " + std::to_string(b), width_color(b), legend_kind::swatch});
  le.push_back({"line", "#000", legend_kind::line});
  le.push_back({"dashed", "#000", legend_kind::dashed_line});
  le.push_back({"marker", "#000", legend_kind::line_marker, marker_shape::diamond});
  const double h = draw_legend(c, a.x, a.bottom() + 50, le, 300);
  CHECK(h == Approx(legend_height(le, 300)));
  CHECK(h > 18.0);  // 12 entries do not fit in 300 px
  CHECK(legend_height({le.front()}, 300) == Approx(18.0));
  const auto r = bgtq_test::check_xml(c.str());
  REQUIRE(r.error.empty());
  // seven labelled decades: 10^-4 and 10^-3 typeset as powers, 0.01 .. 100 written plainly
  CHECK(std::count(r.names.begin(), r.names.end(), "tspan") == 2);
}
