#pragma once
//! @file tests/fuzz/target_llama2c_model.hpp
//! Fuzz target: the llama2.c checkpoint loader (bgtq::llama2c::model::from_bytes). Any
//! input either loads or throws bgtq::error. A small model that loads must run two
//! forward steps (token 0 at position 0, then, when seq_len > 1, token vocab_size - 1 at
//! position 1) through the fp32 KV backend without a memory error; its logits may be
//! anything (finite weights can still overflow).
//!
//! After a successful load the only bgtq::error allowed is capacity_exhausted from the
//! fp32_kv_backend constructor: the cache it preallocates (2 x n_layers x seq_len x
//! kv_dim floats, at most 256 MiB under the size bounds below) is checked against the
//! machine's memory or `ulimit -v`. Everything else that engine and forward check holds
//! for a loaded model by construction: from_bytes validated the config (which the
//! backend and engine constructors check again) and rejected non-finite weights, both
//! steps use a position < seq_len in order and a token in [0, vocab_size), and forward
//! checks nothing about values. So any other bgtq::error there is an invariant failure.

#include <cstdio>
#include <optional>

#include <llama2c.hpp>

#include "fuzz_util.hpp"

namespace bgtq_fuzz {

inline int llama2c_model_one(const std::uint8_t* data, std::size_t size) {
  using namespace bgtq::llama2c;
  std::optional<model> loaded;
  try {
    loaded.emplace(model::from_bytes(data, size, "fuzz.bin"));
  } catch (const bgtq::error&) {
    return 0;  // malformed checkpoint, rejected as documented
  }
  const model& m = *loaded;
  const config& c = m.cfg();
  BGTQ_FUZZ_CHECK("llama2c_model", c.checkpoint_bytes() == size);
  if (c.checkpoint_floats() > (1u << 16) || c.seq_len > 4096) return 0;
  std::optional<fp32_kv_backend> kv;
  try {
    kv.emplace(c);
  } catch (const bgtq::error& e) {
    if (e.code() == bgtq::errc::capacity_exhausted) return 0;  // beyond this machine's memory limit
    std::fprintf(stderr, "llama2c_model target: fp32_kv_backend: unexpected bgtq::error: %s\n", e.what());
    invariant_failed("llama2c_model", "the KV backend rejected a loaded model's config");
  }
  try {
    engine e(m, *kv);
    const float* logits = e.forward(0, 0);
    float sink = 0.0f;
    for (int i = 0; i < c.vocab_size; ++i) sink += logits[i];
    (void)sink;
    if (c.seq_len > 1) (void)e.forward(c.vocab_size - 1, 1);
  } catch (const bgtq::error& e) {
    std::fprintf(stderr, "llama2c_model target: engine: unexpected bgtq::error: %s\n", e.what());
    invariant_failed("llama2c_model", "a loaded model failed a forward step");
  }
  return 0;
}

}  // namespace bgtq_fuzz
