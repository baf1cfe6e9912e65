// Forward pass, the float32 KV backend and the decoding/evaluation utilities.
#include <algorithm>
#include <cmath>
#include <cstring>

#include <bgtq/core/error.hpp>

#include "io_util.hpp"
#include "llama2c.hpp"

namespace bgtq::llama2c {

namespace {

// Dot product with 8 independent partial sums: the fixed summation order is the same
// in every build, and the inner loop maps onto one SIMD register when available.
inline float dot(const float* __restrict a, const float* __restrict b, int n) {
  float acc[8] = {0, 0, 0, 0, 0, 0, 0, 0};
  int j = 0;
  for (; j + 8 <= n; j += 8)
    for (int k = 0; k < 8; ++k) acc[k] += a[j + k] * b[j + k];
  float s = ((acc[0] + acc[1]) + (acc[2] + acc[3])) + ((acc[4] + acc[5]) + (acc[6] + acc[7]));
  for (; j < n; ++j) s += a[j] * b[j];
  return s;
}

// out[i] = sum_j w[i][j] x[j], w row-major [rows][cols].
inline void matvec(float* __restrict out, const float* __restrict w, const float* __restrict x, int rows, int cols) {
  for (int i = 0; i < rows; ++i) out[i] = dot(w + static_cast<std::size_t>(i) * static_cast<std::size_t>(cols), x, cols);
}

// out = x / sqrt(mean(x^2) + 1e-5) * weight.
inline void rmsnorm(float* __restrict out, const float* __restrict x, const float* __restrict weight, int n) {
  const float ss = dot(x, x, n) / static_cast<float>(n) + 1e-5f;
  const float inv = 1.0f / std::sqrt(ss);
  for (int i = 0; i < n; ++i) out[i] = weight[i] * (inv * x[i]);
}

}  // namespace

// ---------------------------------------------------------------- fp32_kv_backend

fp32_kv_backend::fp32_kv_backend(const config& c, int max_positions, std::uint64_t memory_limit) : cfg_(c) {
  c.validate("fp32_kv_backend");
  if (max_positions < 0)
    fail(errc::invalid_argument, "fp32_kv_backend: max_positions = " + std::to_string(max_positions) + " is negative");
  cap_ = max_positions > 0 ? std::min(max_positions, c.seq_len) : c.seq_len;
  // validate() bounds every factor: at most 2 * 2^12 * 2^20 * 2^16 floats, no overflow
  const std::size_t per_layer = static_cast<std::size_t>(cap_) * static_cast<std::size_t>(c.kv_dim());
  const std::size_t floats = per_layer * static_cast<std::size_t>(c.n_layers);
  const std::string what = "the float32 KV cache (2 x " + std::to_string(c.n_layers) + " layers x " + std::to_string(cap_) +
                           " positions x kv_dim " + std::to_string(c.kv_dim()) + " x 4 B)";
  detail::check_allocation(2 * floats * sizeof(float), what, memory_limit);
  try {
    k_.assign(floats, 0.0f);
    v_.assign(floats, 0.0f);
    count_.assign(static_cast<std::size_t>(c.n_layers), 0);
    scores_.assign(static_cast<std::size_t>(cap_), 0.0f);
  } catch (const std::bad_alloc&) {
    fail(errc::capacity_exhausted, what + ": cannot allocate " + detail::bytes_text(2 * floats * sizeof(float)));
  }
}

void fp32_kv_backend::reset() { std::fill(count_.begin(), count_.end(), 0); }

void fp32_kv_backend::append(int layer, int pos, const float* k, const float* v) {
  if (layer < 0 || layer >= cfg_.n_layers)
    fail(errc::invalid_argument, "fp32_kv_backend::append: layer " + std::to_string(layer) + " outside [0, " +
                                     std::to_string(cfg_.n_layers) + ")");
  const int have = count_[static_cast<std::size_t>(layer)];
  if (pos != have)
    fail(errc::invalid_argument, "fp32_kv_backend::append: pos " + std::to_string(pos) + " but layer " +
                                     std::to_string(layer) + " holds " + std::to_string(have) + " positions");
  if (pos >= cap_)
    fail(errc::invalid_argument, "fp32_kv_backend::append: pos " + std::to_string(pos) + " >= the " + std::to_string(cap_) +
                                     " positions it holds (seq_len " + std::to_string(cfg_.seq_len) + ")");
  const std::size_t kvd = static_cast<std::size_t>(cfg_.kv_dim());
  const std::size_t at = (static_cast<std::size_t>(layer) * static_cast<std::size_t>(cap_) +
                          static_cast<std::size_t>(pos)) * kvd;
  std::memcpy(k_.data() + at, k, kvd * sizeof(float));
  std::memcpy(v_.data() + at, v, kvd * sizeof(float));
  count_[static_cast<std::size_t>(layer)] = have + 1;
}

const float* fp32_kv_backend::key(int layer, int pos, int kv_head) const {
  BGTQ_REQUIRE(layer >= 0 && layer < cfg_.n_layers && pos >= 0 && pos < size(layer) && kv_head >= 0 &&
                   kv_head < cfg_.n_kv_heads,
               errc::invalid_argument, "fp32_kv_backend::key: (layer, pos, kv_head) out of range");
  return k_.data() + ((static_cast<std::size_t>(layer) * static_cast<std::size_t>(cap_) +
                       static_cast<std::size_t>(pos)) * static_cast<std::size_t>(cfg_.n_kv_heads) +
                      static_cast<std::size_t>(kv_head)) * static_cast<std::size_t>(cfg_.head_dim());
}

const float* fp32_kv_backend::value(int layer, int pos, int kv_head) const {
  const float* k = key(layer, pos, kv_head);
  return v_.data() + (k - k_.data());
}

void fp32_kv_backend::attend(int layer, int pos, const float* q, float* out) {
  if (layer < 0 || layer >= cfg_.n_layers)
    fail(errc::invalid_argument, "fp32_kv_backend::attend: layer " + std::to_string(layer) + " outside [0, " +
                                     std::to_string(cfg_.n_layers) + ")");
  if (pos < 0 || pos >= count_[static_cast<std::size_t>(layer)])
    fail(errc::invalid_argument, "fp32_kv_backend::attend: pos " + std::to_string(pos) + " is not stored in layer " +
                                     std::to_string(layer) + " (" + std::to_string(count_[static_cast<std::size_t>(layer)]) +
                                     " positions)");
  const int hd = cfg_.head_dim(), kvd = cfg_.kv_dim(), group = cfg_.group_size();
  const float scale = 1.0f / std::sqrt(static_cast<float>(hd));
  const float* kl = k_.data() + static_cast<std::size_t>(layer) * static_cast<std::size_t>(cap_) * static_cast<std::size_t>(kvd);
  const float* vl = v_.data() + static_cast<std::size_t>(layer) * static_cast<std::size_t>(cap_) * static_cast<std::size_t>(kvd);
  float* sc = scores_.data();
  for (int h = 0; h < cfg_.n_heads; ++h) {
    const float* qh = q + static_cast<std::size_t>(h) * static_cast<std::size_t>(hd);
    const std::size_t koff = static_cast<std::size_t>(h / group) * static_cast<std::size_t>(hd);
    float mx = -INFINITY;
    for (int t = 0; t <= pos; ++t) {
      sc[t] = dot(qh, kl + static_cast<std::size_t>(t) * static_cast<std::size_t>(kvd) + koff, hd) * scale;
      mx = std::max(mx, sc[t]);
    }
    float sum = 0.0f;
    for (int t = 0; t <= pos; ++t) {
      sc[t] = std::exp(sc[t] - mx);
      sum += sc[t];
    }
    const float inv = 1.0f / sum;
    float* oh = out + static_cast<std::size_t>(h) * static_cast<std::size_t>(hd);
    std::fill(oh, oh + hd, 0.0f);
    for (int t = 0; t <= pos; ++t) {
      const float p = sc[t] * inv;
      const float* vt = vl + static_cast<std::size_t>(t) * static_cast<std::size_t>(kvd) + koff;
      for (int i = 0; i < hd; ++i) oh[i] += p * vt[i];
    }
  }
}

// ---------------------------------------------------------------- engine

engine::engine(const model& m, kv_backend& kv) : model_(m), kv_(kv), cfg_(m.cfg()) {
  cfg_.validate("engine");
  rope_ = rope_layout(cfg_.head_dim(), rope_pairing::interleaved);
  const auto D = static_cast<std::size_t>(cfg_.dim), qd = static_cast<std::size_t>(cfg_.n_heads * cfg_.head_dim()),
             kvd = static_cast<std::size_t>(cfg_.kv_dim()), H = static_cast<std::size_t>(cfg_.hidden_dim);
  x_.assign(D, 0.0f);
  xb_.assign(D, 0.0f);
  xb2_.assign(D, 0.0f);
  q_.assign(qd, 0.0f);
  k_.assign(kvd, 0.0f);
  v_.assign(kvd, 0.0f);
  att_.assign(qd, 0.0f);
  hb_.assign(H, 0.0f);
  hb2_.assign(H, 0.0f);
  logits_.assign(static_cast<std::size_t>(cfg_.vocab_size), 0.0f);
}

void engine::reset() {
  n_fed_ = 0;
  kv_.reset();
}

const float* engine::forward(int token, int pos) {
  if (pos != n_fed_)
    fail(errc::invalid_argument, "engine::forward: pos " + std::to_string(pos) + " but " + std::to_string(n_fed_) +
                                     " tokens were fed since reset");
  if (pos >= cfg_.seq_len)
    fail(errc::invalid_argument, "engine::forward: pos " + std::to_string(pos) + " >= seq_len " + std::to_string(cfg_.seq_len));
  if (token < 0 || token >= cfg_.vocab_size)
    fail(errc::invalid_argument, "engine::forward: token " + std::to_string(token) + " outside [0, " +
                                     std::to_string(cfg_.vocab_size) + ")");
  const model_weights& w = model_.weights();
  const int D = cfg_.dim, hd = cfg_.head_dim(), qd = cfg_.n_heads * hd, kvd = cfg_.kv_dim(), H = cfg_.hidden_dim;
  const auto Dz = static_cast<std::size_t>(D);
  std::memcpy(x_.data(), w.token_embedding.data() + static_cast<std::size_t>(token) * Dz, Dz * sizeof(float));

  for (int l = 0; l < cfg_.n_layers; ++l) {
    const auto lz = static_cast<std::size_t>(l);
    // attention
    rmsnorm(xb_.data(), x_.data(), w.rms_att.data() + lz * Dz, D);
    matvec(q_.data(), w.wq.data() + lz * static_cast<std::size_t>(qd) * Dz, xb_.data(), qd, D);
    matvec(k_.data(), w.wk.data() + lz * static_cast<std::size_t>(kvd) * Dz, xb_.data(), kvd, D);
    matvec(v_.data(), w.wv.data() + lz * static_cast<std::size_t>(kvd) * Dz, xb_.data(), kvd, D);
    for (int h = 0; h < cfg_.n_heads; ++h) apply_rope(rope_, q_.data() + static_cast<std::size_t>(h * hd), pos);
    for (int h = 0; h < cfg_.n_kv_heads; ++h) apply_rope(rope_, k_.data() + static_cast<std::size_t>(h * hd), pos);
    if (capture_) capture_->on_qkv(l, pos, q_.data(), k_.data(), v_.data());
    kv_.append(l, pos, k_.data(), v_.data());
    kv_.attend(l, pos, q_.data(), att_.data());
    matvec(xb2_.data(), w.wo.data() + lz * Dz * static_cast<std::size_t>(qd), att_.data(), D, qd);
    for (int i = 0; i < D; ++i) x_[static_cast<std::size_t>(i)] += xb2_[static_cast<std::size_t>(i)];
    // feed-forward (SwiGLU): w2 (silu(w1 x) * w3 x)
    const auto Hz = static_cast<std::size_t>(H);
    rmsnorm(xb_.data(), x_.data(), w.rms_ffn.data() + lz * Dz, D);
    matvec(hb_.data(), w.w1.data() + lz * Hz * Dz, xb_.data(), H, D);
    matvec(hb2_.data(), w.w3.data() + lz * Hz * Dz, xb_.data(), H, D);
    for (std::size_t i = 0; i < Hz; ++i) {
      const float a = hb_[i];
      hb_[i] = a / (1.0f + std::exp(-a)) * hb2_[i];
    }
    matvec(xb2_.data(), w.w2.data() + lz * Dz * Hz, hb_.data(), D, H);
    for (int i = 0; i < D; ++i) x_[static_cast<std::size_t>(i)] += xb2_[static_cast<std::size_t>(i)];
  }
  rmsnorm(xb_.data(), x_.data(), w.rms_final.data(), D);
  matvec(logits_.data(), model_.classifier(), xb_.data(), cfg_.vocab_size, D);
  ++n_fed_;
  return logits_.data();
}

// ---------------------------------------------------------------- utilities

std::vector<int> generate_greedy(engine& e, const std::vector<int>& prompt, int steps) {
  const int S = e.cfg().seq_len;
  if (prompt.empty()) fail(errc::invalid_argument, "generate_greedy: empty prompt (start with bos_token)");
  if (static_cast<long>(prompt.size()) > S)
    fail(errc::invalid_argument, "generate_greedy: prompt of " + std::to_string(prompt.size()) + " tokens exceeds seq_len " +
                                     std::to_string(S));
  if (steps < 0) fail(errc::invalid_argument, "generate_greedy: steps = " + std::to_string(steps) + " < 0");
  e.reset();
  std::vector<int> out;
  if (steps == 0) return out;
  const float* logits = nullptr;
  int pos = 0;
  for (const int t : prompt) logits = e.forward(t, pos++);
  const int V = e.cfg().vocab_size;
  for (;;) {
    const int next = static_cast<int>(std::max_element(logits, logits + V) - logits);
    if (next == bos_token || next == eos_token) break;
    out.push_back(next);
    if (static_cast<int>(out.size()) >= steps || pos >= S) break;
    logits = e.forward(next, pos++);
  }
  return out;
}

double log_softmax(const float* lg, int n, float* out) {
  double mx = lg[0];
  for (int i = 1; i < n; ++i) mx = std::max(mx, static_cast<double>(lg[i]));
  double sum = 0.0;
  for (int i = 0; i < n; ++i) sum += std::exp(static_cast<double>(lg[i]) - mx);
  const double lse = mx + std::log(sum);
  if (out)
    for (int i = 0; i < n; ++i) out[i] = static_cast<float>(static_cast<double>(lg[i]) - lse);
  return lse;
}

double mean_nll(engine& e, const std::vector<int>& tokens, std::vector<std::vector<float>>* logprobs_out) {
  const std::size_t T = tokens.size();
  if (T < 2) fail(errc::invalid_argument, "mean_nll: needs at least 2 tokens, got " + std::to_string(T));
  if (T > static_cast<std::size_t>(e.cfg().seq_len))
    fail(errc::invalid_argument, "mean_nll: " + std::to_string(T) + " tokens exceed seq_len " + std::to_string(e.cfg().seq_len));
  const int V = e.cfg().vocab_size;
  for (const int t : tokens)
    if (t < 0 || t >= V)
      fail(errc::invalid_argument, "mean_nll: token " + std::to_string(t) + " outside [0, " + std::to_string(V) + ")");
  e.reset();
  if (logprobs_out) {
    logprobs_out->clear();
    logprobs_out->reserve(T - 1);
  }
  double total = 0.0;
  for (std::size_t t = 0; t + 1 < T; ++t) {
    const float* lg = e.forward(tokens[t], static_cast<int>(t));
    if (logprobs_out) {
      std::vector<float> row(static_cast<std::size_t>(V));
      total += log_softmax(lg, V, row.data()) - static_cast<double>(lg[tokens[t + 1]]);
      logprobs_out->push_back(std::move(row));
    } else {
      total += log_softmax(lg, V) - static_cast<double>(lg[tokens[t + 1]]);
    }
  }
  return total / static_cast<double>(T - 1);
}

}  // namespace bgtq::llama2c
