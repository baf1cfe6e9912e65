#pragma once
//! @file tests/fuzz/target_llama2c_tokenizer.hpp
//! Fuzz target: the llama2.c tokenizer loader (bgtq::llama2c::tokenizer::from_bytes)
//! and, when it loads, the BPE encoder and decoder on text taken from the input.
//! Input layout: `[u16 vocab_size][u16 text length n][n bytes of text][tokenizer file]`.
//! Every token id that encode returns (BOS/EOS aside) must lie in [0, vocab_size).

#include <llama2c.hpp>

#include <string>

#include "fuzz_util.hpp"

namespace bgtq_fuzz {

inline int llama2c_tokenizer_one(const std::uint8_t* data, std::size_t size) {
  using namespace bgtq::llama2c;
  byte_reader r(data, size);
  const int vocab = r.u16();
  std::size_t n = r.u16();
  if (n > r.rest_size()) n = r.rest_size();
  const std::string text(reinterpret_cast<const char*>(r.rest()), n);
  const std::uint8_t* file = r.rest() + n;
  const std::size_t file_size = r.rest_size() - n;
  try {
    const tokenizer t = tokenizer::from_bytes(file, file_size, vocab, "fuzz.tok");
    BGTQ_FUZZ_CHECK("llama2c_tokenizer", t.vocab_size() == vocab);
    for (const bool bos : {false, true}) {
      std::vector<int> ids;
      try {
        ids = t.encode(text, bos, !bos);
      } catch (const bgtq::error&) {
        continue;  // byte fallback outside a vocabulary without <0xHH> tokens
      }
      const std::size_t first = bos ? 1 : 0, last = ids.size() - (bos ? 0 : 1);
      for (std::size_t i = first; i < last; ++i) BGTQ_FUZZ_CHECK("llama2c_tokenizer", ids[i] >= 0 && ids[i] < vocab);
      try {
        (void)t.decode_all(ids, -1);
      } catch (const bgtq::error&) {
        // BOS/EOS outside a tiny vocabulary
      }
    }
    for (int id = 0; id < vocab && id < 64; ++id) {
      (void)t.piece(id);
      (void)t.decode(bos_token, id);
      (void)t.lookup(t.piece(id));
    }
  } catch (const bgtq::error&) {
  }
  return 0;
}

}  // namespace bgtq_fuzz
