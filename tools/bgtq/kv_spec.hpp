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
  int key_bits = 16, value_bits = 16;  //!< (plan: the file's, read when the cache is made)
  std::string plan_path;               //!< plan: the file
};

//! Parses one specification; usage_error naming it when malformed.
kv_spec parse_kv_spec(const std::string& s);

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
