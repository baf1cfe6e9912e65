#pragma once
//! @file tests/fuzz/target_llama2c_model.hpp
//! Fuzz target: the llama2.c checkpoint loader (bgtq::llama2c::model::from_bytes). Any
//! input either loads or throws bgtq::error. A small model that loads must run one
//! forward step (token 0, position 0) through the fp32 KV backend without a memory error
//! (its logits may be anything, finite weights can still overflow).

#include <llama2c.hpp>

#include "fuzz_util.hpp"

namespace bgtq_fuzz {

inline int llama2c_model_one(const std::uint8_t* data, std::size_t size) {
  using namespace bgtq::llama2c;
  try {
    const model m = model::from_bytes(data, size, "fuzz.bin");
    const config& c = m.cfg();
    BGTQ_FUZZ_CHECK("llama2c_model", c.checkpoint_bytes() == size);
    if (c.checkpoint_floats() <= (1u << 16) && c.seq_len <= 4096) {
      fp32_kv_backend kv(c);
      engine e(m, kv);
      const float* logits = e.forward(0, 0);
      float sink = 0.0f;
      for (int i = 0; i < c.vocab_size; ++i) sink += logits[i];
      (void)sink;
      if (c.seq_len > 1) (void)e.forward(c.vocab_size - 1, 1);
    }
  } catch (const bgtq::error&) {
  }
  return 0;
}

}  // namespace bgtq_fuzz
