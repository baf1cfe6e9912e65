// Figures from a plan and from eval results made here; the JSON reader.
#include <bgtq/plan/build.hpp>
#include <bgtq/plot/figures.hpp>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <string>
#include <vector>

#include "common.hpp"
#include "xml_check.hpp"

using namespace bgtq;

namespace {

// 3 layers x 2 KV heads, D = 16 (8 blocks), energies spread over five decades.
plan small_plan(int b_min = 1, int rotary = -1) {
  const rope_layout rope(16, rope_pairing::half, rotary);
  std::vector<double> s;
  for (int l = 0; l < 3; ++l)
    for (int h = 0; h < 2; ++h)
      for (int i = 0; i < 8; ++i) s.push_back(std::pow(10.0, -2.0 + 0.6 * ((i * 5 + l + 3 * h) % 9)));
  plan_options o;
  o.avg_bits = 2.5;
  o.b_min = b_min;
  return build_plan(3, 2, 4, rope, s, o, 100);
}

std::size_t count(const std::string& s, const std::string& what) {
  std::size_t n = 0;
  for (std::size_t p = s.find(what); p != std::string::npos; p = s.find(what, p + 1)) ++n;
  return n;
}

const char* results_json = R"({"config":{"q":"q.npy","layers":3,"tokens":64,"q_heads":4,"kv_heads":2,"head_dim":16,
 "rope":"half","calib_tokens":32,"eval_from":32},
 "layers":[
  {"layer":0,"results":{"fp16":{"logit_mae":0.001,"kl":1e-7,"top10":0.999,"bytes_per_token":64},
    "tq@2":{"logit_mae":0.6,"kl":0.2,"top10":0.7,"bytes_per_token":10},
    "bgtq@2":{"logit_mae":0.4,"kl":0.1,"top10":0.8,"bytes_per_token":12},
    "tq@3":{"logit_mae":0.3,"kl":0.05,"top10":0.85,"bytes_per_token":14},
    "bgtq@3":{"logit_mae":0.2,"kl":0.03,"top10":0.9,"bytes_per_token":16}}},
  {"layer":1,"results":{"fp16":{"logit_mae":0.002,"kl":null,"top10":0.998},
    "tq@2":{"logit_mae":0.7,"kl":0.25,"top10":0.72},"bgtq@2":{"logit_mae":0.45,"kl":0.12,"top10":0.79},
    "tq@3":{"logit_mae":0.35,"kl":0.06,"top10":0.84},"bgtq@3":{"logit_mae":0.22,"kl":0.04,"top10":0.88}}},
  {"layer":2,"results":{"fp16":{"logit_mae":0.0015},"tq@2":{"logit_mae":0.65},"bgtq@2":{"logit_mae":0.5},
    "tq@3":{"logit_mae":0.33},"bgtq@3":{"logit_mae":0.25}}}],
 "summary":{"bgtq_vs_tq":[{"bits":2,"logit_mae_reduction":0.3,"kl_reduction":0.4,"layers_won":3,"layers":3},
   {"bits":3,"logit_mae_reduction":0.31,"kl_reduction":0.3,"layers_won":3,"layers":3}]}})";

}  // namespace

TEST_CASE("energy figure: one bar per block in each panel, well formed", "[plot][figure]") {
  const plan p = small_plan();
  const std::string svg = plot::energy_figure(p, 2, 1);
  const auto r = bgtq_test::check_xml(svg);
  REQUIRE(r.error.empty());
  // every block has a tooltip in the energy panel and in the width panel
  CHECK(count(svg, "<title>block ") == 2u * 8u);
  for (int i = 0; i < 8; ++i) {
    const auto d = p.rope.block_dims(i);
    CHECK(svg.find("block " + std::to_string(i) + " (dims " + std::to_string(d[0]) + ", " + std::to_string(d[1]) + ")") !=
          std::string::npos);
  }
  CHECK(svg.find("Layer 2, KV head 1") != std::string::npos);
  CHECK(svg.find("log scale") != std::string::npos);
  CHECK(svg.find("non-rotary") == std::string::npos);
  // this head's energies span 10^-1.4 .. 10^2.8: the log axis runs from 0.02 to 1000 with
  // majors at the powers of ten, 0.1 .. 100 written plainly and 1000 as a power
  for (const char* lab : {">0.1</text>", ">1</text>", ">10</text>", ">100</text>"}) CHECK(svg.find(lab) != std::string::npos);
  CHECK(svg.find(">10<tspan dy=\"-4.62\" font-size=\"7.92\">3</tspan></text>") != std::string::npos);
  CHECK(svg.find(">0.01</text>") == std::string::npos);
  // custom title, escaped
  CHECK(plot::energy_figure(p, 0, 0, "K & V").find("K &amp; V") != std::string::npos);
}

TEST_CASE("energy figure: partial rotary shading and dropped blocks", "[plot][figure]") {
  const plan p = small_plan(0, 8);
  const std::string svg = plot::energy_figure(p, 0, 0);
  REQUIRE(bgtq_test::check_xml(svg).error.empty());
  CHECK(svg.find("non-rotary blocks") != std::string::npos);
  // a zero energy draws no energy bar but keeps its width bar
  plan z = small_plan();
  for (int i = 0; i < 8; ++i) z.scores[z.head_index(1, 0) * 8 + static_cast<std::size_t>(i)] = 0.0;
  const std::string s2 = plot::energy_figure(z, 1, 0);
  REQUIRE(bgtq_test::check_xml(s2).error.empty());
  CHECK(count(s2, "<title>block ") == 8u);
}

TEST_CASE("energy figure: layer or head out of range is not_found", "[plot][figure]") {
  const plan p = small_plan();
  for (auto [l, h] : std::vector<std::pair<int, int>>{{3, 0}, {-1, 0}, {0, 2}, {0, -1}}) {
    try {
      (void)plot::energy_figure(p, l, h);
      FAIL("no error for layer " << l << " head " << h);
    } catch (const bgtq::error& e) {
      CHECK(e.code() == errc::not_found);
      CHECK(std::string(e.what()).find(l >= 0 && l < 3 ? "KV head" : "layer") != std::string::npos);
    }
  }
}

TEST_CASE("fingerprint figure: one stacked column per layer, shares sum to 100%", "[plot][figure]") {
  const plan p = small_plan(0);
  const std::string svg = plot::fingerprint_figure(p);
  const auto r = bgtq_test::check_xml(svg);
  REQUIRE(r.error.empty());
  for (int l = 0; l < 3; ++l) {
    // parse the shares back out of the tooltips
    double total = 0;
    for (std::size_t pos = svg.find("<title>layer " + std::to_string(l) + ": "); pos != std::string::npos;
         pos = svg.find("<title>layer " + std::to_string(l) + ": ", pos + 1)) {
      const std::size_t pct = svg.find('%', pos);
      std::size_t b = pct;
      while (b > 0 && (std::isdigit(static_cast<unsigned char>(svg[b - 1])) || svg[b - 1] == '.')) --b;
      total += std::stod(svg.substr(b, pct - b));
    }
    CHECK(total == Approx(100).margin(0.3));
  }
  CHECK(svg.find("key width") != std::string::npos);
  // every tooltip of a column names its layer's mean key width over all the layer's heads;
  // one budget for the whole model, so the layers' means differ
  {
    const rope_layout rope(16, rope_pairing::half);
    std::vector<double> e;
    for (int l = 0; l < 3; ++l)
      for (int h = 0; h < 2; ++h)
        for (int i = 0; i < 8; ++i) e.push_back(std::pow(10.0, (l == 1 ? 1.0 : -1.0) + 0.3 * ((i + h) % 5)));
    plan_options o;
    o.scope = alloc_scope::model;
    const plan pm = build_plan(3, 2, 4, rope, e, o, 100);
    const std::string sm = plot::fingerprint_figure(pm);
    std::vector<std::string> means;
    for (int l = 0; l < 3; ++l) {
      double sum = 0, n = 0;
      for (int h = 0; h < pm.kv_heads; ++h)
        for (int w : pm.head(l, h).widths) {
          sum += w;
          ++n;
        }
      char want[64];
      std::snprintf(want, sizeof want, "(mean %.2f bits)</title>", sum / n);
      means.emplace_back(want);
      INFO("layer " << l << ": " << want);
      const std::string tip = "<title>layer " + std::to_string(l) + ": ";
      int tips = 0;
      for (std::size_t pos = sm.find(tip); pos != std::string::npos; pos = sm.find(tip, pos + 1), ++tips)
        CHECK(sm.substr(pos, sm.find("</title>", pos) + 8 - pos).find(want) != std::string::npos);
      CHECK(tips >= 1);
    }
    CHECK(means[1] != means[0]);  // the high-energy layer gets more bits
  }
  // many layers: the canvas grows and labels thin out
  const rope_layout rope(8, rope_pairing::interleaved);
  std::vector<double> s(80 * 1 * 4);
  for (std::size_t i = 0; i < s.size(); ++i) s[i] = 1.0 + static_cast<double>(i % 7);
  const plan big = build_plan(80, 1, 1, rope, s, plan_options{});
  const std::string sb = plot::fingerprint_figure(big);
  REQUIRE(bgtq_test::check_xml(sb).error.empty());
  CHECK(sb.find(">79</text>") != std::string::npos);
  CHECK(sb.find(">1</text>") == std::string::npos);
}

TEST_CASE("eval figure from a results file: panels per bit width, fp16 noted", "[plot][figure]") {
  const auto doc = plot::parse_json(results_json, "R.json");
  const plot::eval_table t = plot::parse_eval_results(doc, "R.json");
  REQUIRE(t.layers == std::vector<int>{0, 1, 2});
  REQUIRE(t.methods == std::vector<std::string>{"fp16", "tq@2", "bgtq@2", "tq@3", "bgtq@3"});
  CHECK(t.value[2][1] == Approx(0.45));
  CHECK(t.bgtq_reduction.at(3) == Approx(0.31));
  CHECK(t.bytes_per_token[2] == Approx(12));
  CHECK(t.description.find("D=16 (half)") != std::string::npos);
  const std::string svg = plot::eval_figure(t);
  const auto r = bgtq_test::check_xml(svg);
  REQUIRE(r.error.empty());
  CHECK(svg.find(">2 bits</text>") != std::string::npos);
  CHECK(svg.find(">3 bits</text>") != std::string::npos);
  CHECK(svg.find("\xE2\x88\x92" "30.0% vs TQ-MSE") != std::string::npos);
  // MAE spans 0.2 .. 0.7 (< 5x): a linear axis from 0, fp16 drawn as a dashed line near 0
  CHECK(svg.find("stroke=\"#777777\" stroke-width=\"1.5\" stroke-linejoin=\"round\" stroke-dasharray=\"5 3\"") !=
        std::string::npos);
  CHECK(svg.find("below the axis") == std::string::npos);
  CHECK(count(svg, "<title>bgtq@2, layer ") == 3u);
  CHECK(svg.find("bytes/token: bgtq 12") != std::string::npos);
  // KL: layer 1 of fp16 is null, layer 2 has no kl at all -> gaps, still well formed
  const std::string kl = plot::eval_figure(plot::parse_eval_results(doc, "R.json", "kl"));
  REQUIRE(bgtq_test::check_xml(kl).error.empty());
  CHECK(count(kl, "<title>bgtq@2, layer ") == 2u);
  // KL spans 0.03 .. 0.25 (> 5x): a log axis; fp16's 1e-7 is far below it, hence a note
  CHECK(kl.find("log scale") != std::string::npos);
  CHECK(kl.find("fp16 cache: mean 1e-07 (below the axis)") != std::string::npos);
  // top-10: higher is better, linear axis zoomed to [lo, 1]
  const std::string top = plot::eval_figure(plot::parse_eval_results(doc, "R.json", "top10"));
  REQUIRE(bgtq_test::check_xml(top).error.empty());
  CHECK(top.find("higher is better") != std::string::npos);
  CHECK(top.find(">1.00</text>") != std::string::npos);
  CHECK(top.find(">0.70</text>") != std::string::npos);
}

TEST_CASE("eval figure: a method without a width (eval --plan's plan) is in every panel", "[plot][figure]") {
  const std::string text = R"({"layers":[)"
                           R"({"layer":0,"results":{"tq@2":{"logit_mae":0.5,"bytes_per_token":10},)"
                           R"("tq@3":{"logit_mae":0.3,"bytes_per_token":14},"plan":{"logit_mae":0.35,"bytes_per_token":12.5}}},)"
                           R"({"layer":1,"results":{"tq@2":{"logit_mae":0.6,"bytes_per_token":10},)"
                           R"("tq@3":{"logit_mae":0.4,"bytes_per_token":14},"plan":{"logit_mae":0.45,"bytes_per_token":12.5}}}]})";
  const plot::eval_table t = plot::parse_eval_results(plot::parse_json(text, "R.json"), "R.json");
  REQUIRE(t.methods == std::vector<std::string>{"tq@2", "tq@3", "plan"});
  const std::string svg = plot::eval_figure(t);
  REQUIRE(bgtq_test::check_xml(svg).error.empty());
  CHECK(svg.find(">2 bits</text>") != std::string::npos);
  CHECK(svg.find(">3 bits</text>") != std::string::npos);
  CHECK(count(svg, "<title>plan, layer ") == 4u);  // 2 layers in each of the 2 panels
  CHECK(count(svg, "<title>tq@2, layer ") == 2u);  // the widths' methods stay in their own panel
  CHECK(count(svg, "bytes/token: plan 12.5 \xC2\xB7 tq 1") == 2u);  // its bytes over both panels
  CHECK(svg.find("plan file (eval --plan)") != std::string::npos);
}

TEST_CASE("eval figure: means of huge values are finite, not the overflowed sum", "[plot][figure]") {
  // two layers of 1e308: a plain sum overflows to inf ("mean inf" was printed before)
  const std::string text = R"({"layers":[)"
                           R"({"layer":0,"results":{"fp16":{"logit_mae":1e308,"bytes_per_token":64},)"
                           R"("tq@2":{"logit_mae":0.5,"bytes_per_token":1.5e308}}},)"
                           R"({"layer":1,"results":{"fp16":{"logit_mae":1e308,"bytes_per_token":64},)"
                           R"("tq@2":{"logit_mae":0.6,"bytes_per_token":1.7e308}}}]})";
  const plot::eval_table t = plot::parse_eval_results(plot::parse_json(text, "R.json"), "R.json");
  REQUIRE(t.methods == std::vector<std::string>{"fp16", "tq@2"});
  CHECK(t.bytes_per_token[1] == Approx(1.6e308));
  const std::string svg = plot::eval_figure(t);
  REQUIRE(bgtq_test::check_xml(svg).error.empty());
  CHECK(svg.find("fp16 cache: mean 1e+308 (above the axis)") != std::string::npos);
  CHECK(svg.find("tq 1.6e+308") != std::string::npos);
  CHECK(svg.find("inf") == std::string::npos);
}

TEST_CASE("eval results: wrong shapes and absent metrics are clear errors", "[plot][figure]") {
  auto code = [](const std::string& text, const std::string& metric = "logit_mae") {
    try {
      (void)plot::parse_eval_results(plot::parse_json(text, "R.json"), "R.json", metric);
    } catch (const bgtq::error& e) {
      CHECK(std::string(e.what()).rfind("R.json", 0) == 0);
      return e.code();
    }
    return errc::ok;
  };
  CHECK(code("[]") == errc::format_error);
  CHECK(code("{}") == errc::format_error);
  CHECK(code(R"({"layers":[]})") == errc::format_error);
  CHECK(code(R"({"layers":[{"layer":0}]})") == errc::format_error);
  CHECK(code(R"({"layers":[{"layer":0,"results":{"tq@2":3}}]})") == errc::format_error);
  CHECK(code(R"({"layers":[{"layer":0,"results":{}}]})") == errc::format_error);
  CHECK(code(R"({"layers":[{"layer":0,"results":{"tq@2":{"kl":1}}}]})") == errc::invalid_argument);
  CHECK(code(results_json, "out_rel_l2") == errc::invalid_argument);
  CHECK(code(results_json) == errc::ok);
  // hostile numbers: a layer or bit width no int holds, a fraction, a metric as a string
  CHECK(code(R"({"layers":[{"layer":1e300,"results":{"tq@2":{"logit_mae":1}}}]})") == errc::format_error);
  CHECK(code(R"({"layers":[{"layer":-1,"results":{"tq@2":{"logit_mae":1}}}]})") == errc::format_error);
  CHECK(code(R"({"layers":[{"layer":0.5,"results":{"tq@2":{"logit_mae":1}}}]})") == errc::format_error);
  CHECK(code(R"({"layers":[{"layer":0,"results":{"tq@2":{"logit_mae":"abc"}}}]})") == errc::format_error);
  // a layer listed twice, a negative metric (no metric of eval's is below 0)
  CHECK(code(R"({"layers":[{"layer":0,"results":{"tq@2":{"logit_mae":1}}},{"layer":0,"results":{"tq@2":{"logit_mae":2}}}]})") ==
        errc::format_error);
  CHECK(code(R"({"layers":[{"layer":0,"results":{"tq@2":{"logit_mae":-0.5}}}]})") == errc::format_error);
  CHECK(code(R"({"layers":[{"layer":0,"results":{"tq@2":{"logit_mae":0}}},{"layer":1,"results":{"tq@2":{"logit_mae":2}}}]})") ==
        errc::ok);
  CHECK(code(R"({"layers":[{"layer":0,"results":{"tq@2":{"logit_mae":1}}}],)"
             R"("summary":{"bgtq_vs_tq":[{"bits":1e300,"logit_mae_reduction":0.5}]}})") == errc::format_error);
  CHECK(code(R"({"layers":[{"layer":0,"results":{"tq@2":{"logit_mae":null}, "tq@3":{"logit_mae":1}}}],)"
             R"("config":{"layers":1e300,"tokens":-5,"head_dim":2.5}})") == errc::ok);  // null: no value; bad counts ignored
  // a metric beyond double's range (the reader's +inf) is refused: it was taken for
  // "absent", the point vanished (ok) or the file was said not to report the metric
  CHECK(code(R"({"layers":[{"layer":0,"results":{"tq@2":{"logit_mae":1e999}}}]})") == errc::format_error);
  CHECK(code(R"({"layers":[{"layer":0,"results":{"tq@2":{"logit_mae":1e999}}},{"layer":1,"results":{"tq@2":{"logit_mae":0.5}}}]})") ==
        errc::format_error);
  // a reduction beyond +-1e6 (1e307 x 100 printed "-inf%") or beyond double's range
  for (const char* red : {"1e307", "1e999", "-2e6"}) {
    INFO(red);
    CHECK(code(std::string(R"({"layers":[{"layer":0,"results":{"tq@2":{"logit_mae":1}}}],"summary":{"bgtq_vs_tq":[{"bits":2,"logit_mae_reduction":)") +
               red + "}]}}") == errc::format_error);
  }
  CHECK(code(R"({"layers":[{"layer":0,"results":{"tq@2":{"logit_mae":1}}}],"summary":{"bgtq_vs_tq":[{"bits":2,"logit_mae_reduction":-5e5}]}})") ==
        errc::ok);
}

TEST_CASE("eval figure: values near double's range get a finite axis with ticks", "[plot][figure]") {
  // 1e308 and 1.7e308: the axis' rounded-out top overflowed to inf, no tick was drawn and
  // both markers sat on the axis line
  const std::string text = R"({"layers":[{"layer":0,"results":{"tq@2":{"logit_mae":1e308,"bytes_per_token":50}}},)"
                           R"({"layer":1,"results":{"tq@2":{"logit_mae":1.7e308,"bytes_per_token":50}}}]})";
  const std::string svg = plot::eval_figure(plot::parse_eval_results(plot::parse_json(text, "R.json"), "R.json"));
  REQUIRE(bgtq_test::check_xml(svg).error.empty());
  CHECK(svg.find("inf") == std::string::npos);
  std::size_t labels = 0;
  for (std::size_t at = svg.find("text-anchor=\"end\""); at != std::string::npos; at = svg.find("text-anchor=\"end\"", at + 1))
    ++labels;
  CHECK(labels >= 3u);
  // the two markers at different heights: their rect y differ
  std::vector<std::string> ys;
  for (std::size_t at = svg.find("<rect x=\""); at != std::string::npos; at = svg.find("<rect x=\"", at + 1)) {
    const std::size_t tt = svg.find("<title>tq@2, layer", at);
    if (tt == std::string::npos || tt > svg.find('>', at) + 2) continue;
    const std::size_t y = svg.find(" y=\"", at);
    ys.push_back(svg.substr(y, svg.find('"', y + 4) - y));
  }
  REQUIRE(ys.size() == 2u);
  CHECK(ys[0] != ys[1]);
}

TEST_CASE("JSON reader: values, escapes, errors with line and column", "[plot][json]") {
  const auto v = plot::parse_json(R"( {"a": [1, -2.5e3, true, false, null, "x\"\\\/\n\u00e9\ud83d\ude00"], "a": 7, "o": {}} )");
  REQUIRE(v.is_object());
  REQUIRE(v.members().size() == 3u);
  CHECK(v.find("a")->as_number() == 7);  // the last duplicate wins
  const auto& arr = v.members()[0].second.items();
  REQUIRE(arr.size() == 6u);
  CHECK(arr[1].as_number() == -2500);
  CHECK(arr[2].as_bool());
  CHECK(arr[4].is_null());
  CHECK(arr[5].as_string() == "x\"\\/\n\xC3\xA9\xF0\x9F\x98\x80");
  CHECK(v.find("missing") == nullptr);
  for (const char* bad : {"", "{", "[1,]", "{\"a\" 1}", "{\"a\":1,}", "01", "1.", "-", "1e", "\"abc", "\"\\q\"",
                          "\"\\ud800\"", "tru", "[1] 2", "{'a':1}", "\"tab\there\"", "NaN"}) {
    INFO(bad);
    CHECK_THROWS_AS(plot::parse_json(bad, "f.json"), bgtq::error);
  }
  try {
    (void)plot::parse_json("{\n  \"a\": [1,\n  2,, 3]}", "f.json");
    FAIL("accepted a double comma");
  } catch (const bgtq::error& e) {
    CHECK(e.code() == errc::format_error);
    CHECK(std::string(e.what()).find("f.json: invalid JSON at line 3, column 5") != std::string::npos);
  }
  std::string deep(300, '[');
  CHECK_THROWS_AS(plot::parse_json(deep), bgtq::error);
  CHECK_THROWS_AS(plot::read_json_file("/nonexistent/R.json"), bgtq::error);
}
