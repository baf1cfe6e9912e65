// Activation capture and document helpers.
#include <cstring>
#include <fstream>

#include <bgtq/core/error.hpp>

#include "io_util.hpp"
#include "llama2c.hpp"

namespace bgtq::llama2c {

namespace {

// Copies each (layer, pos) q/k/v into the [L][T][H][D] arrays of an `activations`.
struct array_sink final : capture_sink {
  activations& a;
  std::size_t qd, kvd;
  explicit array_sink(activations& act)
      : a(act), qd(static_cast<std::size_t>(act.n_heads) * static_cast<std::size_t>(act.head_dim)),
        kvd(static_cast<std::size_t>(act.n_kv_heads) * static_cast<std::size_t>(act.head_dim)) {}
  void on_qkv(int layer, int pos, const float* q, const float* k, const float* v) override {
    const std::size_t row = static_cast<std::size_t>(layer) * static_cast<std::size_t>(a.n_tokens) + static_cast<std::size_t>(pos);
    std::memcpy(a.q.data() + row * qd, q, qd * sizeof(float));
    std::memcpy(a.k.data() + row * kvd, k, kvd * sizeof(float));
    std::memcpy(a.v.data() + row * kvd, v, kvd * sizeof(float));
  }
};

// Uninstalls the sink however capture_activations is left.
struct sink_guard {
  engine& e;
  ~sink_guard() { e.set_capture(nullptr); }
};

}  // namespace

activations capture_activations(engine& e, const std::vector<int>& tokens, const std::function<void(int, int)>& progress) {
  const config& c = e.cfg();
  if (tokens.empty()) fail(errc::invalid_argument, "capture_activations: no tokens");
  if (tokens.size() > static_cast<std::size_t>(c.seq_len))
    fail(errc::invalid_argument, "capture_activations: " + std::to_string(tokens.size()) + " tokens exceed seq_len " +
                                     std::to_string(c.seq_len));
  activations a;
  a.n_layers = c.n_layers;
  a.n_tokens = static_cast<int>(tokens.size());
  a.n_heads = c.n_heads;
  a.n_kv_heads = c.n_kv_heads;
  a.head_dim = c.head_dim();
  const std::size_t rows = static_cast<std::size_t>(a.n_layers) * tokens.size();
  const std::size_t qd = static_cast<std::size_t>(c.n_heads) * static_cast<std::size_t>(c.head_dim());
  const std::size_t kvd = static_cast<std::size_t>(c.kv_dim());
  const std::size_t bytes = rows * (qd + 2 * kvd) * sizeof(float);
  const std::string what = "capture_activations: q, k and v (" + std::to_string(a.n_layers) + " layers x " +
                           std::to_string(tokens.size()) + " tokens x (" + std::to_string(qd) + " + 2 x " +
                           std::to_string(kvd) + ") x 4 B)";
  detail::check_allocation(bytes, what);
  try {
    a.q.assign(rows * qd, 0.0f);
    a.k.assign(rows * kvd, 0.0f);
    a.v.assign(rows * kvd, 0.0f);
  } catch (const std::bad_alloc&) {
    fail(errc::capacity_exhausted, what + ": cannot allocate " + detail::bytes_text(bytes));
  }
  array_sink sink(a);
  sink_guard guard{e};
  e.reset();
  e.set_capture(&sink);
  for (std::size_t t = 0; t < tokens.size(); ++t) {
    e.forward(tokens[t], static_cast<int>(t));
    if (progress) progress(static_cast<int>(t) + 1, a.n_tokens);
  }
  return a;
}

std::vector<std::string> read_documents(const std::string& path) {
  std::ifstream is(path, std::ios::binary);
  if (!is) fail(errc::io_error, "cannot open text file '" + path + "'");
  std::vector<std::string> docs;
  for (std::string line; std::getline(is, line);) {
    if (!line.empty() && line.back() == '\r') line.pop_back();
    if (!line.empty()) docs.push_back(std::move(line));
  }
  if (is.bad()) fail(errc::io_error, "error reading text file '" + path + "'");
  return docs;
}

std::vector<int> encode_documents(const tokenizer& tok, const std::vector<std::string>& docs, std::size_t max_tokens) {
  std::vector<int> out;
  for (const auto& d : docs) {
    if (out.size() >= max_tokens) break;
    const std::vector<int> t = tok.encode(d, /*bos=*/true, /*eos=*/false);
    out.insert(out.end(), t.begin(), t.end());
  }
  if (out.size() > max_tokens) out.resize(max_tokens);
  return out;
}

}  // namespace bgtq::llama2c
