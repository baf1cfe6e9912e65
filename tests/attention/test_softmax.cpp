// The online-softmax pieces on their own (softmax.hpp): update_max's rescale rule and
// merge's factors, which the CPU decode (window and pages) and the GPU split merge use.
// Exact where the arithmetic is exact, else within 2 float ulps of the closed form.
#include <catch2/catch.hpp>

#include <bgtq/attention/softmax.hpp>

#include <cmath>

TEST_CASE("merge: factors and sum of two partial softmax states", "[attention][softmax]") {
  float fa = -1.0f, fb = -1.0f;
  bgtq::softmax_state a{0.0f, 1.0f}, b{2.0f, 3.0f};
  bgtq::merge(a, b, fa, fb);  // the larger max is b's: a's sum is scaled by e^-2
  CHECK(a.m == 2.0f);
  CHECK(fb == 1.0f);
  CHECK(fa == Approx(std::exp(-2.0)).epsilon(2e-7));
  CHECK(a.l == Approx(std::exp(-2.0) + 3.0).epsilon(2e-7));
  bgtq::softmax_state c{5.0f, 2.0f}, d{1.0f, 4.0f};
  bgtq::merge(c, d, fa, fb);  // and the other way round
  CHECK(c.m == 5.0f);
  CHECK(fa == 1.0f);
  CHECK(fb == Approx(std::exp(-4.0)).epsilon(2e-7));
  CHECK(c.l == Approx(2.0 + 4.0 * std::exp(-4.0)).epsilon(2e-7));
  // an empty side contributes nothing, whichever side it is
  bgtq::softmax_state e{-INFINITY, 0.0f}, f{1.0f, 2.0f};
  bgtq::merge(e, f, fa, fb);
  CHECK(e.m == 1.0f);
  CHECK(fa == 0.0f);
  CHECK(fb == 1.0f);
  CHECK(e.l == 2.0f);
  bgtq::softmax_state g{1.0f, 2.0f}, h{-INFINITY, 0.0f};
  bgtq::merge(g, h, fa, fb);
  CHECK(g.m == 1.0f);
  CHECK(fa == 1.0f);
  CHECK(fb == 0.0f);
  CHECK(g.l == 2.0f);
  bgtq::softmax_state x{-INFINITY, 0.0f}, y{-INFINITY, 0.0f};
  bgtq::merge(x, y, fa, fb);  // both empty: still empty, no NaN from -inf - -inf
  CHECK(x.m == -INFINITY);
  CHECK(x.l == 0.0f);
  CHECK(fa == 1.0f);
  CHECK(fb == 0.0f);
}

TEST_CASE("update_max: rescales whenever a block beats the max, and scales the running sum", "[attention][softmax]") {
  bgtq::softmax_state s{-INFINITY, 0.0f};
  CHECK(bgtq::update_max(s, -INFINITY) == 1.0f);  // nothing yet
  CHECK(s.m == -INFINITY);
  CHECK(bgtq::update_max(s, 3.0f) == 0.0f);  // first block: the accumulators start from zero
  CHECK(s.m == 3.0f);
  CHECK(s.l == 0.0f);
  s.l = 5.0f;
  for (const float lower : {3.0f, 2.0f, -INFINITY}) {  // not above the max: no rescale
    CHECK(bgtq::update_max(s, lower) == 1.0f);
    CHECK(s.m == 3.0f);
    CHECK(s.l == 5.0f);
  }
  const float up = std::nextafter(3.0f, 4.0f);  // the smallest step up rescales: weights stay <= 1
  float f = bgtq::update_max(s, up);
  CHECK(f < 1.0f);
  CHECK(f == Approx(std::exp(static_cast<double>(3.0f) - static_cast<double>(up))).epsilon(2e-7));
  CHECK(s.m == up);
  CHECK(s.l == 5.0f * f);
  const float l = s.l;
  f = bgtq::update_max(s, 18.5f);  // a jump of 15.5
  CHECK(f == Approx(std::exp(static_cast<double>(up) - 18.5)).epsilon(2e-6));
  CHECK(s.m == 18.5f);
  CHECK(s.l == l * f);
}
