#include "kv_spec.hpp"

#include <bgtq/cache/factory.hpp>
#include <bgtq/cache/kivi_pages.hpp>
#include <bgtq/energy/energy.hpp>
#include <bgtq/plan/build.hpp>
#include <bgtq/plan/plan_io.hpp>

#include <algorithm>
#include <regex>

#include "cli.hpp"
#include "kv_cache_backend.hpp"
#include "plan_args.hpp"

namespace bgtq::cli {

kv_spec parse_kv_spec(const std::string& s) {
  kv_spec k;
  k.name = s;
  std::smatch m;
  static const std::regex mixed(R"(^(tq|bgtq|kivi)-k([1-8])v([1-8])$)");
  static const std::regex same(R"(^(tq|bgtq|kivi)([1-8])$)");
  static const std::regex bare(R"(^k([1-8])v([1-8])$)");
  if (s == "fp32" || s == "fp16") {
    k.method = s;
  } else if (s.rfind("plan:", 0) == 0) {
    k.method = "plan";
    k.plan_path = s.substr(5);
    if (k.plan_path.empty()) throw usage_error("KV cache 'plan:' names no plan file (plan:FILE, a file from bgtq calibrate)");
    k.file = std::make_shared<const plan>(load_plan(k.plan_path));
  } else if (std::regex_match(s, m, mixed)) {
    k.method = m[1];
    k.key_bits = std::stoi(m[2]);
    k.value_bits = std::stoi(m[3]);
  } else if (std::regex_match(s, m, same)) {
    k.method = m[1];
    k.key_bits = k.value_bits = std::stoi(m[2]);
  } else if (std::regex_match(s, m, bare)) {
    k.method = "bgtq";
    k.key_bits = std::stoi(m[1]);
    k.value_bits = std::stoi(m[2]);
  } else {
    throw usage_error("unknown KV cache '" + s +
                      "' (expected fp32, fp16, tqB, bgtqB, kiviB, kXvY or tq-/bgtq-/kivi-kXvY with bits 1..8, or plan:FILE; "
                      "ppl's --kv list splits at every ',', a FILE's too)");
  }
  return k;
}

void require_kv_spec_fits(const kv_spec& spec, const llama2c::model& m) {
  if (spec.method != "plan") return;
  const auto& c = m.cfg();
  require_plan_fits(*spec.file, "--kv " + spec.name, c.n_layers, c.n_heads, c.n_kv_heads,
                    rope_layout(c.head_dim(), rope_pairing::interleaved), "the model is");
}

namespace {
struct energy_sink : llama2c::capture_sink {
  energy_estimator& est;
  explicit energy_sink(energy_estimator& e) : est(e) {}
  void on_qkv(int layer, int, const float* q, const float* k, const float*) override { est.add(layer, q, k, 1); }
};
}  // namespace

plan calibrate_llama2c(const llama2c::model& m, const std::vector<int>& tokens, double avg_bits, int value_bits) {
  const auto& c = m.cfg();
  BGTQ_REQUIRE(!tokens.empty(), errc::invalid_argument, "calibration needs at least one token");
  const rope_layout rope(c.head_dim(), rope_pairing::interleaved);
  energy_estimator est(c.n_layers, c.n_heads, c.n_kv_heads, rope);
  llama2c::fp32_kv_backend kv(c, static_cast<int>(std::min<std::size_t>(tokens.size(), static_cast<std::size_t>(c.seq_len))));
  llama2c::engine e(m, kv);
  energy_sink sink(est);
  e.set_capture(&sink);
  for (std::size_t t = 0; t < tokens.size() && static_cast<int>(t) < c.seq_len; ++t) (void)e.forward(tokens[t], static_cast<int>(t));
  e.set_capture(nullptr);
  plan_options o;
  o.avg_bits = avg_bits;
  o.value_bits = value_bits;
  return build_plan(c.n_layers, c.n_kv_heads, c.n_heads, rope, est.scores(), o, static_cast<std::int64_t>(tokens.size()));
}

std::unique_ptr<llama2c::kv_backend> make_kv_backend(const kv_spec& spec, const llama2c::model& m,
                                                     const std::vector<int>& calibration, double* bytes_per_token,
                                                     int positions) {
  const auto& c = m.cfg();
  const int P = positions > 0 ? std::min(positions, c.seq_len) : c.seq_len;
  const int D = c.head_dim();
  cache_config cfg;
  cfg.layers = c.n_layers;
  cfg.kv_heads = c.n_kv_heads;
  cfg.q_heads = c.n_heads;
  cfg.head_dim = D;
  cfg.max_pages = (P + 63) / 64 + 1;
  auto per_token = [&](const auto& cache) {
    double b = 0;
    for (int l = 0; l < c.n_layers; ++l)
      for (int h = 0; h < c.n_kv_heads; ++h) b += cache.bytes_per_token(l, h);
    return b / (c.n_layers * c.n_kv_heads);
  };
  if (spec.method == "fp32") {
    if (bytes_per_token) *bytes_per_token = 8.0 * D;
    return std::make_unique<llama2c::fp32_kv_backend>(c, P);
  }
  if (spec.method == "fp16") {
    fp16_cache<> cache(cfg, fp16_states(c.n_layers, c.n_kv_heads, D), fp16_states(c.n_layers, c.n_kv_heads, D));
    if (bytes_per_token) *bytes_per_token = per_token(cache);
    return std::make_unique<llama2c::cache_kv_backend<fp16_cache<>>>(std::move(cache), c);
  }
  if (spec.method == "kivi") {
    kivi_options kk, vv;
    kk.bits = spec.key_bits;
    vv.bits = spec.value_bits;
    kivi_cache<> cache = make_kivi_cache(cfg, kk, vv);
    if (bytes_per_token) *bytes_per_token = per_token(cache);
    return std::make_unique<llama2c::cache_kv_backend<kivi_cache<>>>(std::move(cache), c);
  }
  const rope_layout rope(D, rope_pairing::interleaved);
  plan p;
  if (spec.method == "tq") {
    plan_options o;
    o.value_bits = spec.value_bits;
    p = uniform_plan(c.n_layers, c.n_kv_heads, c.n_heads, rope, spec.key_bits, o);
  } else if (spec.method == "plan") {  // llama2.c rotates every pair of a head, interleaved
    require_kv_spec_fits(spec, m);      // (the commands check it earlier, before any work)
    p = *spec.file;
  } else {  // calibrates(spec)
    p = calibrate_llama2c(m, calibration, spec.key_bits, spec.value_bits);
  }
  auto cache = make_bgtq_cache(p, cfg);
  if (bytes_per_token) *bytes_per_token = per_token(cache);
  return std::make_unique<llama2c::cache_kv_backend<bgtq_cache<>>>(std::move(cache), c);
}

}  // namespace bgtq::cli
