// llama2c engine tests that need no data: synthetic checkpoints and tokenizers built here.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include <bgtq/core/error.hpp>
#include <bgtq/core/rng.hpp>

#include "common.hpp"
#include "llama2c/test_util.hpp"

using namespace llama2c_test;

namespace {

lc::config tied_cfg() {  // GQA 2:1, hidden not a multiple of 8, head_dim 8
  return lc::config{16, 23, 2, 2, 1, 32, 12, true};
}
lc::config untied_cfg() {  // head_dim 6 (3 RoPE blocks), GQA 2:1, awkward vocab
  return lc::config{24, 20, 3, 4, 2, 19, 9, false};
}

bool throws_format(const std::vector<unsigned char>& b) {
  try {
    (void)lc::model::from_bytes(b.data(), b.size(), "synthetic");
  } catch (const bgtq::error& e) {
    return e.code() == bgtq::errc::format_error;
  }
  return false;
}

struct recording_sink : lc::capture_sink {
  std::vector<std::vector<float>> q, k, v;
  std::vector<std::pair<int, int>> where;
  int hq = 0, hkv = 0;
  void on_qkv(int layer, int pos, const float* qq, const float* kk, const float* vv) override {
    where.emplace_back(layer, pos);
    q.emplace_back(qq, qq + hq);
    k.emplace_back(kk, kk + hkv);
    v.emplace_back(vv, vv + hkv);
  }
};

}  // namespace

TEST_CASE("synthetic checkpoint round-trips through from_bytes and a file", "[llama2c]") {
  for (const lc::config c : {tied_cfg(), untied_cfg()}) {
    const auto w = random_weights(c, 7);
    const auto bytes = checkpoint_bytes(c, w);
    REQUIRE(bytes.size() == c.checkpoint_bytes());
    const lc::model m = lc::model::from_bytes(bytes.data(), bytes.size(), "synthetic");
    CHECK(m.cfg().dim == c.dim);
    CHECK(m.cfg().vocab_size == c.vocab_size);
    CHECK(m.cfg().shared_classifier == c.shared_classifier);
    CHECK(m.weights().wq == w.wq);
    CHECK(m.weights().w2 == w.w2);
    CHECK(m.weights().rms_final == w.rms_final);
    CHECK(m.weights().wcls == w.wcls);
    CHECK(m.classifier() == (c.shared_classifier ? m.weights().token_embedding.data() : m.weights().wcls.data()));
    temp_dir td("roundtrip");
    const lc::model f = lc::model::load(td.write("m.bin", bytes));
    CHECK(f.weights().w3 == w.w3);
    const lc::model g = lc::model::from_weights(c, w);
    CHECK(g.weights().token_embedding == w.token_embedding);
  }
}

namespace {
// Largest |engine logit - reference logit| and largest |reference logit|.
struct logit_error {
  double err = 0, scale = 0;
};
logit_error compare_logits(const float* got, const std::vector<double>& want, int vocab) {
  logit_error e;
  for (int i = 0; i < vocab; ++i) {
    e.err = std::max(e.err, std::abs(got[i] - want[static_cast<std::size_t>(i)]));
    e.scale = std::max(e.scale, std::abs(want[static_cast<std::size_t>(i)]));
  }
  return e;
}
}  // namespace

TEST_CASE("engine's RMSNorm epsilon is llama2.c's 1e-5: tiny activations, where it dominates", "[llama2c]") {
  // With N(0, 1) embeddings mean(x^2) ~ 1 and the epsilon is invisible within the forward
  // pass tolerance; with embeddings scaled by 1e-3 (mean(x^2) ~ 1e-6) it sets the first
  // norm's scale, so a different epsilon moves every logit far beyond 2e-5.
  const lc::config c = untied_cfg();
  auto w = random_weights(c, 12);
  for (float& x : w.token_embedding) x *= 1e-3f;
  const lc::model m = lc::model::from_weights(c, w);
  lc::fp32_kv_backend kv(c);
  lc::engine e(m, kv);
  reference_model ref(c, w);
  for (int pos = 0; pos < 3; ++pos) {
    const int tok = (7 * pos + 1) % c.vocab_size;
    const auto [err, scale] = compare_logits(e.forward(tok, pos), ref.forward(tok), c.vocab_size);
    INFO("pos " << pos << " max |logit err| " << err << " scale " << scale);
    REQUIRE(scale > 1e-3);  // the logits are not vanishing: the comparison can fail
    REQUIRE(err <= 2e-5 * std::max(1.0, scale));
  }
}

TEST_CASE("engine matches a double-precision reference forward pass", "[llama2c]") {
  for (const lc::config c : {tied_cfg(), untied_cfg()}) {
    const auto w = random_weights(c, 11);
    const lc::model m = lc::model::from_weights(c, w);
    lc::fp32_kv_backend kv(c);
    lc::engine e(m, kv);
    recording_sink sink;
    sink.hq = c.n_heads * c.head_dim();
    sink.hkv = c.kv_dim();
    e.set_capture(&sink);
    reference_model ref(c, w);
    bgtq::counter_rng rng(3);
    for (int pos = 0; pos < c.seq_len; ++pos) {
      const int tok = static_cast<int>(rng.below(static_cast<std::uint32_t>(c.vocab_size)));
      const auto [err, scale] = compare_logits(e.forward(tok, pos), ref.forward(tok), c.vocab_size);
      INFO("dim " << c.dim << " pos " << pos << " max |logit err| " << err << " scale " << scale);
      REQUIRE(err <= 2e-5 * std::max(1.0, scale));
      // capture: post-RoPE q of the last layer at this position, k/v as stored
      const auto& last_q = sink.q.back();
      for (int i = 0; i < sink.hq; ++i) REQUIRE(last_q[i] == Approx(ref.q_post_rope.back()[i]).margin(1e-4));
      for (int l = 0; l < c.n_layers; ++l)
        for (int g = 0; g < c.n_kv_heads; ++g)
          for (int i = 0; i < c.head_dim(); ++i)
            REQUIRE(kv.key(l, pos, g)[i] == Approx(ref.kc[l][pos][g * c.head_dim() + i]).margin(1e-4));
    }
    REQUIRE(sink.where.size() == static_cast<std::size_t>(c.seq_len * c.n_layers));
    REQUIRE(sink.where[1] == std::make_pair(1, 0));
    REQUIRE(sink.where.back() == std::make_pair(c.n_layers - 1, c.seq_len - 1));
    // capture k/v equal what the backend stored
    for (std::size_t j = 0; j < sink.where.size(); ++j) {
      const auto [l, p] = sink.where[j];
      for (int g = 0; g < c.n_kv_heads; ++g)
        for (int i = 0; i < c.head_dim(); ++i) {
          REQUIRE(sink.k[j][g * c.head_dim() + i] == kv.key(l, p, g)[i]);
          REQUIRE(sink.v[j][g * c.head_dim() + i] == kv.value(l, p, g)[i]);
        }
    }
    // past the context, wrong positions and bad tokens are errors
    CHECK_THROWS_AS(e.forward(0, c.seq_len), bgtq::error);
    e.reset();
    CHECK_THROWS_AS(e.forward(0, 1), bgtq::error);
    CHECK_THROWS_AS(e.forward(-1, 0), bgtq::error);
    CHECK_THROWS_AS(e.forward(c.vocab_size, 0), bgtq::error);
    e.set_capture(nullptr);
    const std::size_t before = sink.where.size();
    e.forward(1, 0);
    CHECK(e.position() == 1);
    CHECK(sink.where.size() == before);
  }
}

TEST_CASE("engine is deterministic across reset and agrees with itself", "[llama2c]") {
  const lc::config c = tied_cfg();
  const lc::model m = lc::model::from_weights(c, random_weights(c, 5));
  lc::fp32_kv_backend kv(c);
  lc::engine e(m, kv);
  const std::vector<int> toks = {1, 5, 9, 31, 0, 4, 4, 17};
  std::vector<std::vector<float>> lp1, lp2;
  const double a = lc::mean_nll(e, toks, &lp1);
  const double b = lc::mean_nll(e, toks, &lp2);
  REQUIRE(a == b);
  REQUIRE(lp1 == lp2);
  REQUIRE(lp1.size() == toks.size() - 1);
  // rows are log-softmax: logsumexp = 0, and the NLL is their mean at the targets
  double nll = 0;
  for (std::size_t t = 0; t + 1 < toks.size(); ++t) {
    double z = 0;
    for (float x : lp1[t]) z += std::exp(double(x));
    REQUIRE(z == Approx(1.0).epsilon(1e-5));
    nll -= lp1[t][toks[t + 1]];
  }
  REQUIRE(nll / double(toks.size() - 1) == Approx(a).epsilon(1e-5));
  CHECK(a > 0.0);
  CHECK_THROWS_AS(lc::mean_nll(e, {1}), bgtq::error);
  CHECK_THROWS_AS(lc::mean_nll(e, std::vector<int>(c.seq_len + 1, 3)), bgtq::error);
  CHECK_THROWS_AS(lc::mean_nll(e, {1, 99}), bgtq::error);

  // greedy: argmax of the engine's own logits, stops by steps / context
  const auto gen = lc::generate_greedy(e, {1, 7}, 5);
  REQUIRE(gen.size() <= 5);
  e.reset();
  const float* lg = e.forward(1, 0);
  lg = e.forward(7, 1);
  for (std::size_t i = 0; i < gen.size(); ++i) {
    REQUIRE(gen[i] == static_cast<int>(std::max_element(lg, lg + c.vocab_size) - lg));
    if (i + 1 < gen.size()) lg = e.forward(gen[i], static_cast<int>(i) + 2);
  }
  const auto all = lc::generate_greedy(e, {3}, 1000);
  CHECK(all.size() <= static_cast<std::size_t>(c.seq_len));
  CHECK(lc::generate_greedy(e, {3}, 0).empty());
  CHECK_THROWS_AS(lc::generate_greedy(e, {}, 3), bgtq::error);
  CHECK_THROWS_AS(lc::generate_greedy(e, {1}, -1), bgtq::error);
}

TEST_CASE("fp32_kv_backend attention equals naive softmax attention", "[llama2c]") {
  // GQA 3:1 with head_dim 6 and 300 positions, random keys, values and queries (the
  // engine tests' contexts are 9 and 12 positions: with 37 here, a backend that attends
  // only to the last 38 positions passed every test of this program, the stories260K
  // NLL and greedy sample included).
  const lc::config c{36, 8, 2, 6, 2, 8, 300, true};
  lc::fp32_kv_backend kv(c);
  bgtq::counter_rng rng(21);
  const int hd = c.head_dim(), kvd = c.kv_dim(), qd = c.n_heads * hd;
  std::vector<std::vector<std::vector<float>>> K(c.n_layers), V(c.n_layers);
  std::vector<float> q(qd), out(qd), k(kvd), v(kvd);
  for (int pos = 0; pos < c.seq_len; ++pos) {
    for (int l = 0; l < c.n_layers; ++l) {
      for (auto& x : k) x = static_cast<float>(3.0 * rng.normal());
      for (auto& x : v) x = static_cast<float>(rng.normal());
      for (auto& x : q) x = static_cast<float>(3.0 * rng.normal());
      kv.append(l, pos, k.data(), v.data());
      K[l].push_back(k);
      V[l].push_back(v);
      kv.attend(l, pos, q.data(), out.data());
      for (int h = 0; h < c.n_heads; ++h) {
        const int g = h / 3;
        std::vector<double> s(pos + 1);
        double mx = -1e300, z = 0;
        for (int t = 0; t <= pos; ++t) {
          double d = 0;
          for (int i = 0; i < hd; ++i) d += double(q[h * hd + i]) * K[l][t][g * hd + i];
          s[t] = d / std::sqrt(double(hd));
          mx = std::max(mx, s[t]);
        }
        for (auto& x : s) z += (x = std::exp(x - mx));
        for (int i = 0; i < hd; ++i) {
          double o = 0;
          for (int t = 0; t <= pos; ++t) o += s[t] / z * V[l][t][g * hd + i];
          INFO("layer " << l << " pos " << pos << " head " << h << " dim " << i);
          REQUIRE(out[h * hd + i] == Approx(o).margin(2e-5));
        }
      }
    }
  }
  CHECK(kv.size(0) == c.seq_len);
  CHECK_THROWS_AS(kv.append(0, c.seq_len, k.data(), v.data()), bgtq::error);  // full
  CHECK_THROWS_AS(kv.append(c.n_layers, 0, k.data(), v.data()), bgtq::error);
  kv.reset();
  CHECK(kv.size(1) == 0);
  CHECK_THROWS_AS(kv.attend(0, 0, q.data(), out.data()), bgtq::error);  // nothing stored
  CHECK_THROWS_AS(kv.append(0, 1, k.data(), v.data()), bgtq::error);     // skips position 0
  kv.append(0, 0, k.data(), v.data());
  kv.attend(0, 0, q.data(), out.data());
  for (int h = 0; h < c.n_heads; ++h)  // one position: the output is its value
    for (int i = 0; i < hd; ++i) REQUIRE(out[h * hd + i] == v[(h / 3) * hd + i]);
}

TEST_CASE("a custom kv_backend sees append then attend per layer in order", "[llama2c]") {
  struct logging_backend : lc::kv_backend {
    lc::fp32_kv_backend inner;
    std::vector<std::string> log;
    explicit logging_backend(const lc::config& c) : inner(c) {}
    void reset() override {
      log.push_back("reset");
      inner.reset();
    }
    void append(int l, int p, const float* k, const float* v) override {
      log.push_back("append " + std::to_string(l) + " " + std::to_string(p));
      inner.append(l, p, k, v);
    }
    void attend(int l, int p, const float* q, float* o) override {
      log.push_back("attend " + std::to_string(l) + " " + std::to_string(p));
      inner.attend(l, p, q, o);
    }
  };
  const lc::config c = untied_cfg();
  const lc::model m = lc::model::from_weights(c, random_weights(c, 9));
  logging_backend kv(c);
  lc::engine e(m, kv);
  lc::fp32_kv_backend plain_kv(c);
  lc::engine plain(m, plain_kv);
  for (int p = 0; p < 3; ++p) {
    const float* a = e.forward(p + 4, p);
    std::vector<float> la(a, a + c.vocab_size);
    const float* b = plain.forward(p + 4, p);
    REQUIRE(std::equal(la.begin(), la.end(), b));
  }
  REQUIRE(kv.log.size() == 3u * c.n_layers * 2);
  CHECK(kv.log[0] == "append 0 0");
  CHECK(kv.log[1] == "attend 0 0");
  CHECK(kv.log[2] == "append 1 0");
  CHECK(kv.log.back() == "attend 2 2");
  e.reset();
  CHECK(kv.log.back() == "reset");
}

TEST_CASE("checkpoint loader rejects malformed headers and sizes", "[llama2c]") {
  const lc::config c = untied_cfg();
  const auto good = checkpoint_bytes(c, random_weights(c, 1));
  REQUIRE_NOTHROW(lc::model::from_bytes(good.data(), good.size(), "good"));

  // every short length is rejected with a message naming both sizes
  for (std::size_t n = 0; n < good.size(); n += (n < 64 ? 1 : 97)) {
    std::vector<unsigned char> b(good.begin(), good.begin() + static_cast<long>(n));
    INFO("length " << n);
    REQUIRE(throws_format(b));
  }
  try {
    (void)lc::model::from_bytes(good.data(), good.size() - 4, "short.bin");
    FAIL("no error");
  } catch (const bgtq::error& e) {
    const std::string msg = e.what();
    CHECK(msg.find("short.bin") != std::string::npos);
    CHECK(msg.find("expected " + std::to_string(good.size())) != std::string::npos);
    CHECK(msg.find("actual " + std::to_string(good.size() - 4)) != std::string::npos);
  }
  {
    auto b = good;
    b.push_back(0);
    REQUIRE(throws_format(b));
  }
  // header fields: absurd or inconsistent values
  auto with = [&](int field, std::int32_t value) {
    auto b = good;
    std::memcpy(b.data() + 4 * field, &value, 4);
    return b;
  };
  for (const auto& [field, value] : std::vector<std::pair<int, std::int32_t>>{
           {0, 0}, {0, -24}, {0, 65537 * 4}, {0, 25},                  // dim
           {1, 0}, {1, -1}, {1, 1 << 21},                             // hidden_dim
           {2, 0}, {2, 100000},                                       // n_layers
           {3, 0}, {3, 5}, {3, 48}, {3, 24},                          // n_heads: 5 does not divide, 24 -> head_dim 1 (odd)
           {4, 0}, {4, 3}, {4, 8},                                    // n_kv_heads: must divide n_heads
           {5, 0}, {5, INT32_MIN}, {5, 1 << 23}, {5, 19}, {5, -20},   // vocab: 19 (tied) changes the size
           {6, 0}, {6, -9}, {6, 1 << 21}, {6, 10}}) {                 // seq_len
    INFO("field " << field << " = " << value);
    REQUIRE(throws_format(with(field, value)));
  }
  // a non-finite weight is reported with its tensor
  {
    auto b = good;
    const float nan = std::nanf("");
    std::memcpy(b.data() + 28 + 4 * (c.vocab_size * c.dim + 3), &nan, 4);  // rms_att[3]
    try {
      (void)lc::model::from_bytes(b.data(), b.size(), "nan.bin");
      FAIL("no error");
    } catch (const bgtq::error& e) {
      CHECK(std::string(e.what()).find("rms_att") != std::string::npos);
    }
  }
  // random header corruption never crashes: either a clean error or a valid model
  bgtq::counter_rng rng(77);
  for (int trial = 0; trial < 2000; ++trial) {
    auto b = good;
    const int flips = 1 + static_cast<int>(rng.below(4));
    for (int f = 0; f < flips; ++f) b[rng.below(28)] ^= static_cast<unsigned char>(1u << rng.below(8));
    try {
      const auto m = lc::model::from_bytes(b.data(), b.size(), "fuzz");
      REQUIRE(m.cfg().checkpoint_bytes() == b.size());
    } catch (const bgtq::error&) {
    }
  }
  CHECK_THROWS_AS(lc::model::load("/nonexistent/dir/model.bin"), bgtq::error);
  CHECK_THROWS_AS(lc::model::from_weights(c, lc::model_weights{}), bgtq::error);
}

TEST_CASE("tokenizer encode matches run.c's quadratic BPE on a small vocabulary", "[llama2c]") {
  const auto vocab = small_vocab();
  const auto bytes = tokenizer_bytes(vocab);
  const auto tok = lc::tokenizer::from_bytes(bytes.data(), bytes.size(), static_cast<int>(vocab.size()), "small");
  REQUIRE(tok.vocab_size() == static_cast<int>(vocab.size()));
  const int the = tok.lookup(" the"), abc = tok.lookup("abc");
  REQUIRE(the > 258);
  CHECK(tok.encode("the", true, false) == std::vector<int>{1, the});
  CHECK(tok.encode("abc", false, true) == std::vector<int>{tok.lookup(" "), abc, 2});
  CHECK(tok.encode("", true, true) == std::vector<int>{1, 2});
  CHECK(tok.encode("", false, false).empty());
  // equal scores: the leftmost pair merges first
  CHECK(tok.encode("ene", false, false) == std::vector<int>{tok.lookup(" "), tok.lookup("en"), tok.lookup("e")});
  // "on" has score -2e10: never merged
  CHECK(tok.encode("on", false, false) == std::vector<int>{tok.lookup(" "), tok.lookup("o"), tok.lookup("n")});
  // x has no token: byte fallback; é (2 bytes) has one, and merges with the space
  CHECK(tok.encode("x", false, false) == std::vector<int>{tok.lookup(" "), 'x' + 3});
  CHECK(tok.encode("\xC3\xA9", false, false) == std::vector<int>{tok.lookup(" \xC3\xA9")});
  // decode: BOS strips the leading space; byte tokens are raw bytes
  CHECK(tok.decode(1, the) == "the");
  CHECK(tok.decode(5, the) == " the");
  CHECK(tok.decode(0, 'x' + 3) == "x");
  CHECK(tok.decode(1, 0 + 3) == std::string(1, '\0'));
  CHECK(tok.decode(1, ' ' + 3) == " ");  // a space byte is not stripped (run.c)
  CHECK_THROWS_AS(tok.decode(1, tok.vocab_size()), bgtq::error);
  CHECK_THROWS_AS(tok.decode(1, -1), bgtq::error);

  // random strings over an alphabet that makes many merges, ties and invalid UTF-8
  const std::string alphabet[] = {"a", "b", "c", "t", "h", "e", " ", "o", "n", "x", "\xC3\xA9", "\xC3", "\xA9", "\xF0\x9F\x98\x80", "\n"};
  bgtq::counter_rng rng(5);
  for (int trial = 0; trial < 400; ++trial) {
    std::string s;
    const int len = static_cast<int>(rng.below(40));
    for (int i = 0; i < len; ++i) s += alphabet[rng.below(15)];
    const bool bos = rng.below(2), eos = rng.below(2);
    const auto got = tok.encode(s, bos, eos);
    INFO("text '" << s << "'");
    REQUIRE(got == naive_encode(tok, s, bos, eos));
    // round trip: decoding after BOS gives the text back (the dummy prefix is stripped)
    std::vector<int> body(got.begin() + (bos ? 1 : 0), got.end() - (eos ? 1 : 0));
    if (!s.empty()) REQUIRE(tok.decode_all(body, 1) == s);
  }
}

TEST_CASE("tokenizer loader rejects truncated and corrupted files", "[llama2c]") {
  const auto vocab = small_vocab();
  const int V = static_cast<int>(vocab.size());
  const auto good = tokenizer_bytes(vocab);
  auto rejects = [&](const std::vector<unsigned char>& b, int v) {
    try {
      (void)lc::tokenizer::from_bytes(b.data(), b.size(), v, "tok");
    } catch (const bgtq::error&) {
      return true;
    }
    return false;
  };
  REQUIRE_FALSE(rejects(good, V));
  for (std::size_t n = 0; n < good.size(); ++n) {
    INFO("length " << n);
    REQUIRE(rejects(std::vector<unsigned char>(good.begin(), good.begin() + static_cast<long>(n)), V));
  }
  CHECK(rejects(good, V - 1));  // bytes left over: vocab size mismatch
  CHECK(rejects(good, V + 1));  // truncated
  CHECK(rejects(good, 0));
  CHECK(rejects(good, -5));
  CHECK(rejects(good, 1 << 23));
  CHECK(rejects(tokenizer_bytes(vocab, 3), V));   // a token longer than max_token_length
  CHECK(rejects(tokenizer_bytes(vocab, 0), V));   // max_token_length 0
  CHECK(rejects(tokenizer_bytes(vocab, -1 - 0x7fffffff), V));
  auto set_i32 = [](std::vector<unsigned char> b, std::size_t off, std::int32_t v) {
    std::memcpy(b.data() + off, &v, 4);
    return b;
  };
  // token 0 is "<unk>": its length field sits at offset 8
  CHECK(rejects(set_i32(good, 8, -1), V));
  CHECK(rejects(set_i32(good, 8, 0x7fffffff), V));
  CHECK(rejects(set_i32(good, 8, 6), V));  // misaligned remainder
  {
    auto b = good;
    const float inf = INFINITY;
    std::memcpy(b.data() + 4, &inf, 4);
    CHECK(rejects(b, V));
  }
  // random corruption: a clean error or a valid tokenizer, never a crash
  bgtq::counter_rng rng(8);
  for (int trial = 0; trial < 3000; ++trial) {
    auto b = good;
    for (int f = 0; f < 3; ++f) b[rng.below(static_cast<std::uint32_t>(b.size()))] ^= static_cast<unsigned char>(rng.next_u32());
    try {
      const auto t = lc::tokenizer::from_bytes(b.data(), b.size(), V, "fuzz");
      (void)t.encode("the abc on x", true, true);
    } catch (const bgtq::error&) {
    }
  }
  temp_dir td("tok");
  CHECK(lc::tokenizer::load(td.write("t.bin", good), V).vocab_size() == V);
  CHECK_THROWS_AS(lc::tokenizer::load((td.path / "absent.bin").string(), V), bgtq::error);
}

TEST_CASE("capture_activations records post-RoPE q, k, v in [L][T][H][D] order", "[llama2c]") {
  const lc::config c = untied_cfg();  // 3 layers, 4 query heads, 2 KV heads, head_dim 6
  const auto w = random_weights(c, 13);
  const lc::model m = lc::model::from_weights(c, w);
  lc::fp32_kv_backend kv(c);
  lc::engine e(m, kv);
  recording_sink outer;
  e.set_capture(&outer);
  const std::vector<int> toks = {1, 4, 18, 0, 7, 7, 2};
  int calls = 0;
  const auto a = lc::capture_activations(e, toks, [&](int done, int total) {
    ++calls;
    REQUIRE(done == calls);
    REQUIRE(total == 7);
  });
  CHECK(calls == 7);
  CHECK(outer.where.empty());  // the previous sink was replaced...
  e.forward(3, 0 + e.position());
  CHECK(outer.where.empty());  // ...and none is installed afterwards
  REQUIRE(a.n_layers == 3);
  REQUIRE(a.n_tokens == 7);
  REQUIRE(a.n_heads == 4);
  REQUIRE(a.n_kv_heads == 2);
  REQUIRE(a.head_dim == 6);
  REQUIRE(a.q.size() == 3u * 7 * 4 * 6);
  REQUIRE(a.k.size() == 3u * 7 * 2 * 6);
  reference_model ref(c, w);
  for (int t = 0; t < 7; ++t) {
    ref.forward(toks[t]);
    for (int l = 0; l < 3; ++l) {
      for (int i = 0; i < 4 * 6; ++i)
        REQUIRE(a.q[(static_cast<std::size_t>(l) * 7 + t) * 24 + i] == Approx(ref.q_post_rope[l][i]).margin(1e-4));
      for (int i = 0; i < 2 * 6; ++i) {
        REQUIRE(a.k[(static_cast<std::size_t>(l) * 7 + t) * 12 + i] == Approx(ref.kc[l][t][i]).margin(1e-4));
        REQUIRE(a.v[(static_cast<std::size_t>(l) * 7 + t) * 12 + i] == Approx(ref.vc[l][t][i]).margin(1e-4));
      }
    }
  }
  CHECK_THROWS_AS(lc::capture_activations(e, {}), bgtq::error);
  CHECK_THROWS_AS(lc::capture_activations(e, std::vector<int>(c.seq_len + 1, 1)), bgtq::error);
  CHECK_THROWS_AS(lc::capture_activations(e, {1, 99}), bgtq::error);
}

TEST_CASE("documents are read per line and concatenated with a BOS each", "[llama2c]") {
  temp_dir td("docs");
  const std::string text = "the abc\r\n\r\nabc\nthe\n";
  const std::string p = td.write("docs.txt", std::vector<unsigned char>(text.begin(), text.end()));
  const auto docs = lc::read_documents(p);
  REQUIRE(docs == std::vector<std::string>{"the abc", "abc", "the"});
  const auto vocab = small_vocab();
  const auto bytes = tokenizer_bytes(vocab);
  const auto tok = lc::tokenizer::from_bytes(bytes.data(), bytes.size(), static_cast<int>(vocab.size()));
  const int the = tok.lookup(" the");
  const auto all = lc::encode_documents(tok, docs, 1000);
  std::vector<int> want;
  for (const auto& d : docs) {
    const auto t = tok.encode(d, true, false);
    want.insert(want.end(), t.begin(), t.end());
  }
  REQUIRE(all == want);
  REQUIRE(all.front() == 1);
  REQUIRE(all.back() == the);
  REQUIRE(std::count(all.begin(), all.end(), 1) == 3);
  REQUIRE(lc::encode_documents(tok, docs, 3) == std::vector<int>(want.begin(), want.begin() + 3));
  REQUIRE(lc::encode_documents(tok, docs, 0).empty());
  CHECK_THROWS_AS(lc::read_documents((td.path / "absent.txt").string()), bgtq::error);
}

TEST_CASE("fp32_kv_backend holds the positions asked for and refuses a size beyond the memory limit", "[llama2c]") {
  // dim 2, 4096 layers, seq_len 2^20: the whole context is 2 x 4096 x 2^20 x 2 x 4 B = 64 GiB
  const lc::config huge{2, 1, 4096, 1, 1, 3, 1 << 20, true};
  try {
    lc::fp32_kv_backend kv(huge, 0, std::uint64_t{1} << 32);
    FAIL("a 64 GiB cache was accepted under a 4 GiB limit");
  } catch (const bgtq::error& e) {
    CHECK(e.code() == bgtq::errc::capacity_exhausted);
    const std::string m = e.what();
    CHECK(m.find("4096 layers x 1048576 positions x kv_dim 2") != std::string::npos);
    CHECK(m.find("needs 68719476736 bytes (64.0 GiB)") != std::string::npos);
    CHECK(m.find("memory limit of 4294967296 bytes") != std::string::npos);
  }
  // the positions a run feeds: 16 of them, 512 KiB
  lc::fp32_kv_backend kv(huge, 16, std::uint64_t{1} << 32);
  CHECK(kv.positions() == 16);
  const float k[2] = {1, 2}, v[2] = {3, 4};
  for (int p = 0; p < 16; ++p) kv.append(4095, p, k, v);
  CHECK(kv.value(4095, 15, 0)[1] == 4.0f);
  CHECK_THROWS_AS(kv.append(4095, 16, k, v), bgtq::error);
  CHECK_THROWS_AS(lc::fp32_kv_backend(huge, -1), bgtq::error);
  CHECK(lc::fp32_kv_backend(tied_cfg(), 1000).positions() == tied_cfg().seq_len);  // capped at seq_len
}
