#pragma once
// KV-cache specifications for the llama2.c commands (generate, ppl, demo):
//   fp32            the engine's exact float32 cache (reference)
//   fp16            bgtq cache with fp16 pages
//   tqB  | tq-kXvY  uniform TQ-MSE, keys X bits, values Y bits (B = X = Y)
//   bgtqB| bgtq-kXvY Block-GTQ keys (X bits on average, calibrated) + TQ-MSE values
//   kiviB| kivi-kXvY KIVI (per-channel keys over 32 tokens, per-token values)
//   kXvY            shorthand for bgtq-kXvY
//   plan:FILE       a plan file (bgtq calibrate -o FILE on the model's captured Q/K,
//                   --rope interleaved): Block-GTQ keys and TQ-MSE values at its widths
#include <memory>
#include <string>
#include <vector>

#include <bgtq/plan/plan.hpp>

#include "llama2c.hpp"

namespace bgtq::cli {

struct kv_spec {
  std::string name;    //!< as given
  std::string method;  //!< fp32, fp16, tq, bgtq, kivi, plan
  int key_bits = 16, value_bits = 16;  //!< (plan: unused; the file holds its widths and value bits)
  std::string plan_path;               //!< plan: the file
  std::shared_ptr<const plan> file;    //!< plan: the file's plan, read and validated by parse_kv_spec
};

//! True for the specifications whose cache is calibrated on the run's text (bgtqB,
//! bgtq-kXvY, kXvY): make_kv_backend reads `calibration` for them only.
inline bool calibrates(const kv_spec& s) { return s.method == "bgtq"; }
//! The same, for messages that say which specifications calibrate.
inline constexpr const char* calibrating_specs = "bgtqB, bgtq-kXvY and kXvY do; plan:FILE brings its own plan";

//! Parses one specification; usage_error naming it when malformed. A plan:FILE's file is
//! read and validated here, before any work on the model (load_plan's errors).
kv_spec parse_kv_spec(const std::string& s);

//! A plan:FILE's plan must be one for the model (its layers, heads, head_dim; interleaved
//! pairing over the whole head, as llama2.c rotates): checked once the model is loaded,
//! before anything runs. Other specifications fit every model.
//! @throws bgtq::error(shape_mismatch) naming both shapes
void require_kv_spec_fits(const kv_spec& spec, const llama2c::model& m);

//! Energies of every (layer, KV head, block) measured by running the fp32 engine over
//! `tokens`, then a plan at `avg_bits` for keys and `value_bits` for values.
plan calibrate_llama2c(const llama2c::model& m, const std::vector<int>& tokens, double avg_bits, int value_bits);

//! A kv_backend for the spec (bgtq methods use `calibration`; fp32 ignores it), holding
//! `positions` positions (0: the model's seq_len; sized so, the cache of a model with a
//! huge context need not be allocated whole). Also returns the exact cache bytes per
//! token per KV head (K + V, averaged over heads).
//! @throws bgtq::error(capacity_exhausted) naming the size when the cache cannot be held.
std::unique_ptr<llama2c::kv_backend> make_kv_backend(const kv_spec& spec, const llama2c::model& m,
                                                     const std::vector<int>& calibration, double* bytes_per_token,
                                                     int positions = 0);

}  // namespace bgtq::cli
