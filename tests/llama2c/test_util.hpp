#pragma once
// Helpers for the llama2c tests: synthetic checkpoints and tokenizers written byte by
// byte in the llama2.c formats, and slow, obviously-correct reference implementations
// (double precision forward pass, run.c's quadratic BPE) to compare the engine against.
#include <cmath>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <optional>
#include <algorithm>
#include <iterator>
#include <string>
#include <utility>
#include <vector>

#include <unistd.h>

#include <bgtq/core/rng.hpp>

#include "llama2c.hpp"

namespace llama2c_test {

namespace lc = bgtq::llama2c;

inline void put_i32(std::vector<unsigned char>& b, std::int32_t v) {
  const std::size_t n = b.size();
  b.resize(n + 4);
  std::memcpy(b.data() + n, &v, 4);
}
inline void put_f32(std::vector<unsigned char>& b, float v) {
  const std::size_t n = b.size();
  b.resize(n + 4);
  std::memcpy(b.data() + n, &v, 4);
}

//! Random weights for `c` (Philox, fixed seed): matrices N(0, 1/fan_in), RMSNorm gains
//! 1 + 0.1 N(0,1), embeddings N(0,1).
inline lc::model_weights random_weights(const lc::config& c, std::uint64_t seed) {
  bgtq::counter_rng rng(seed);
  const std::size_t d = c.dim, h = c.hidden_dim, L = c.n_layers, V = c.vocab_size, kvd = c.kv_dim();
  auto fill = [&](std::vector<float>& t, std::size_t n, double scale, double mean) {
    t.resize(n);
    for (auto& x : t) x = static_cast<float>(mean + scale * rng.normal());
  };
  lc::model_weights w;
  fill(w.token_embedding, V * d, 1.0, 0.0);
  fill(w.rms_att, L * d, 0.1, 1.0);
  fill(w.wq, L * d * d, 1.0 / std::sqrt(double(d)), 0.0);
  fill(w.wk, L * kvd * d, 1.0 / std::sqrt(double(d)), 0.0);
  fill(w.wv, L * kvd * d, 1.0 / std::sqrt(double(d)), 0.0);
  fill(w.wo, L * d * d, 1.0 / std::sqrt(double(d)), 0.0);
  fill(w.rms_ffn, L * d, 0.1, 1.0);
  fill(w.w1, L * h * d, 1.0 / std::sqrt(double(d)), 0.0);
  fill(w.w2, L * d * h, 1.0 / std::sqrt(double(h)), 0.0);
  fill(w.w3, L * h * d, 1.0 / std::sqrt(double(d)), 0.0);
  fill(w.rms_final, d, 0.1, 1.0);
  if (!c.shared_classifier) fill(w.wcls, V * d, 1.0 / std::sqrt(double(d)), 0.0);
  return w;
}

//! Serialises config + weights as a llama2.c checkpoint (freq_cis filled with junk that
//! the loader must skip).
inline std::vector<unsigned char> checkpoint_bytes(const lc::config& c, const lc::model_weights& w) {
  std::vector<unsigned char> b;
  for (int v : {c.dim, c.hidden_dim, c.n_layers, c.n_heads, c.n_kv_heads,
                c.shared_classifier ? c.vocab_size : -c.vocab_size, c.seq_len})
    put_i32(b, v);
  for (const auto* t : {&w.token_embedding, &w.rms_att, &w.wq, &w.wk, &w.wv, &w.wo, &w.rms_ffn, &w.w1, &w.w2, &w.w3,
                        &w.rms_final})
    for (float x : *t) put_f32(b, x);
  for (int i = 0; i < c.seq_len * c.head_dim(); ++i) put_f32(b, 1234.5f + i);  // legacy freq_cis
  for (float x : w.wcls) put_f32(b, x);
  return b;
}

//! Independent double-precision forward pass (own RoPE, own attention), full recompute.
struct reference_model {
  lc::config c;
  lc::model_weights w;
  std::vector<std::vector<std::vector<double>>> kc, vc;  // [layer][pos][kv_dim]
  std::vector<std::vector<double>> q_post_rope;           // per layer, last position

  reference_model(const lc::config& cfg, lc::model_weights weights) : c(cfg), w(std::move(weights)) { reset(); }
  void reset() {
    kc.assign(c.n_layers, {});
    vc.assign(c.n_layers, {});
    q_post_rope.assign(c.n_layers, {});
  }
  static std::vector<double> matvec(const std::vector<float>& W, std::size_t off, const std::vector<double>& x, int rows) {
    std::vector<double> y(rows, 0.0);
    const std::size_t cols = x.size();
    for (int i = 0; i < rows; ++i)
      for (std::size_t j = 0; j < cols; ++j) y[i] += double(W[off + i * cols + j]) * x[j];
    return y;
  }
  static std::vector<double> rmsnorm(const std::vector<double>& x, const std::vector<float>& g, std::size_t off) {
    double ss = 0;
    for (double v : x) ss += v * v;
    const double inv = 1.0 / std::sqrt(ss / x.size() + 1e-5);
    std::vector<double> y(x.size());
    for (std::size_t i = 0; i < x.size(); ++i) y[i] = x[i] * inv * g[off + i];
    return y;
  }
  void rope(std::vector<double>& x, int heads, int pos) const {
    const int hd = c.head_dim();
    for (int h = 0; h < heads; ++h)
      for (int i = 0; i < hd / 2; ++i) {
        const double th = std::pow(10000.0, -2.0 * i / hd) * pos;
        double& a = x[h * hd + 2 * i];
        double& b = x[h * hd + 2 * i + 1];
        const double na = a * std::cos(th) - b * std::sin(th), nb = a * std::sin(th) + b * std::cos(th);
        a = na;
        b = nb;
      }
  }
  //! Logits after feeding `token` at the next position.
  std::vector<double> forward(int token) {
    const int D = c.dim, hd = c.head_dim(), kvd = c.kv_dim(), H = c.hidden_dim;
    const int pos = static_cast<int>(kc[0].size());
    std::vector<double> x(D);
    for (int i = 0; i < D; ++i) x[i] = w.token_embedding[std::size_t(token) * D + i];
    for (int l = 0; l < c.n_layers; ++l) {
      auto xb = rmsnorm(x, w.rms_att, std::size_t(l) * D);
      auto q = matvec(w.wq, std::size_t(l) * D * D, xb, D);
      auto k = matvec(w.wk, std::size_t(l) * kvd * D, xb, kvd);
      auto v = matvec(w.wv, std::size_t(l) * kvd * D, xb, kvd);
      rope(q, c.n_heads, pos);
      rope(k, c.n_kv_heads, pos);
      q_post_rope[l] = q;
      kc[l].push_back(k);
      vc[l].push_back(v);
      std::vector<double> att(D, 0.0);
      for (int h = 0; h < c.n_heads; ++h) {
        const int g = h / (c.n_heads / c.n_kv_heads);
        std::vector<double> s(pos + 1);
        double mx = -1e300;
        for (int t = 0; t <= pos; ++t) {
          double d = 0;
          for (int i = 0; i < hd; ++i) d += q[h * hd + i] * kc[l][t][g * hd + i];
          s[t] = d / std::sqrt(double(hd));
          mx = std::max(mx, s[t]);
        }
        double z = 0;
        for (auto& e : s) z += (e = std::exp(e - mx));
        for (int t = 0; t <= pos; ++t)
          for (int i = 0; i < hd; ++i) att[h * hd + i] += s[t] / z * vc[l][t][g * hd + i];
      }
      auto o = matvec(w.wo, std::size_t(l) * D * D, att, D);
      for (int i = 0; i < D; ++i) x[i] += o[i];
      xb = rmsnorm(x, w.rms_ffn, std::size_t(l) * D);
      auto h1 = matvec(w.w1, std::size_t(l) * H * D, xb, H);
      auto h3 = matvec(w.w3, std::size_t(l) * H * D, xb, H);
      for (int i = 0; i < H; ++i) h1[i] = h1[i] / (1.0 + std::exp(-h1[i])) * h3[i];
      auto f = matvec(w.w2, std::size_t(l) * D * H, h1, D);
      for (int i = 0; i < D; ++i) x[i] += f[i];
    }
    x = rmsnorm(x, w.rms_final, 0);
    return matvec(c.shared_classifier ? w.token_embedding : w.wcls, 0, x, c.vocab_size);
  }
};

//! Serialises a tokenizer: max_token_length, then (score, length, bytes) per token.
//! `max_len` defaults to the longest piece.
inline std::vector<unsigned char> tokenizer_bytes(const std::vector<std::pair<std::string, float>>& vocab,
                                                  std::optional<int> max_len_opt = std::nullopt) {
  int max_len = 1;
  for (const auto& [s, sc] : vocab) max_len = std::max<int>(max_len, static_cast<int>(s.size()));
  if (max_len_opt) max_len = *max_len_opt;
  std::vector<unsigned char> b;
  put_i32(b, max_len);
  for (const auto& [s, sc] : vocab) {
    put_f32(b, sc);
    put_i32(b, static_cast<std::int32_t>(s.size()));
    b.insert(b.end(), s.begin(), s.end());
  }
  return b;
}

//! A small sentencepiece-like vocabulary: <unk>, <s>, </s>, 256 byte tokens, single
//! characters, merges with tied scores, one empty piece and one merge whose score is
//! too low (<= -1e10) ever to be applied.
inline std::vector<std::pair<std::string, float>> small_vocab() {
  std::vector<std::pair<std::string, float>> v = {{"<unk>", 0.f}, {"\n<s>\n", 0.f}, {"\n</s>\n", 0.f}};
  const char* hex = "0123456789ABCDEF";
  for (int b = 0; b < 256; ++b) v.push_back({std::string("<0x") + hex[b >> 4] + hex[b & 15] + ">", 0.f});
  for (const char* s : {" ", "a", "b", "c", "e", "h", "t", "o", "n", "\xC3\xA9" /* é */})
    v.push_back({s, -100.f});
  v.push_back({"", 0.f});
  v.push_back({" t", -1.f});
  v.push_back({"th", -1.f});  // ties with " t": the leftmost pair wins
  v.push_back({"he", -2.f});
  v.push_back({" the", -0.5f});
  v.push_back({" th", -3.f});
  v.push_back({"ab", -4.f});
  v.push_back({"bc", -4.f});
  v.push_back({"abc", -0.1f});
  v.push_back({"on", -2e10f});  // never merged: run.c only takes scores > -1e10
  v.push_back({" \xC3\xA9", -5.f});
  v.push_back({"at", -2.f});
  v.push_back({"en", -6.f});  // "ene": ties with "ne"; run.c merges the leftmost pair
  v.push_back({"ne", -6.f});
  return v;
}

//! run.c's quadratic BPE encode, written as literally as possible (the reference).
inline std::vector<int> naive_encode(const lc::tokenizer& t, const std::string& text, bool bos, bool eos) {
  std::vector<int> toks;
  if (bos) toks.push_back(1);
  if (!text.empty()) {
    const int sp = t.lookup(" ");
    toks.push_back(sp >= 0 ? sp : ' ' + 3);
  }
  std::string buf;
  for (std::size_t i = 0; i < text.size(); ++i) {
    const unsigned char ch = static_cast<unsigned char>(text[i]);
    if ((ch & 0xC0) != 0x80) buf.clear();
    buf.push_back(static_cast<char>(ch));
    if (i + 1 < text.size() && (static_cast<unsigned char>(text[i + 1]) & 0xC0) == 0x80 && buf.size() < 4) continue;
    const int id = t.lookup(buf);
    if (id >= 0) {
      toks.push_back(id);
    } else {
      for (unsigned char b : buf) toks.push_back(b + 3);
    }
    buf.clear();
  }
  const std::size_t first = bos ? 1 : 0;
  for (;;) {
    float best = -1e10f;
    int best_id = -1;
    std::size_t best_i = 0;
    for (std::size_t i = first; i + 1 < toks.size(); ++i) {
      const int id = t.lookup(t.piece(toks[i]) + t.piece(toks[i + 1]));
      if (id >= 0 && t.score(id) > best) {
        best = t.score(id);
        best_id = id;
        best_i = i;
      }
    }
    if (best_id < 0) break;
    toks[best_i] = best_id;
    toks.erase(toks.begin() + static_cast<long>(best_i) + 1);
  }
  if (eos) toks.push_back(2);
  return toks;
}

//! A fresh scratch directory under the system temp dir, removed on destruction.
struct temp_dir {
  std::filesystem::path path;
  explicit temp_dir(const std::string& tag) {
    path = std::filesystem::temp_directory_path() / ("bgtq_llama2c_" + tag + "_" + std::to_string(::getpid()));
    std::filesystem::remove_all(path);
    std::filesystem::create_directories(path);
  }
  ~temp_dir() {
    std::error_code ec;
    std::filesystem::remove_all(path, ec);
  }
  std::string write(const std::string& name, const std::vector<unsigned char>& bytes) const {
    const auto p = path / name;
    std::ofstream os(p, std::ios::binary);
    os.write(reinterpret_cast<const char*>(bytes.data()), static_cast<std::streamsize>(bytes.size()));
    return p.string();
  }
};

inline std::vector<unsigned char> read_all(const std::string& path) {
  std::ifstream is(path, std::ios::binary);
  return std::vector<unsigned char>((std::istreambuf_iterator<char>(is)), std::istreambuf_iterator<char>());
}

}  // namespace llama2c_test
