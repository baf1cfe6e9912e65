// Generates the seed corpora of the fuzz targets that have no generator elsewhere (npy
// and plan seeds come from tests/io and tests/plan) and checks that each seed is
// current and exercises its target's main path.
#include <bgtq/core/rng.hpp>

#include <string>
#include <vector>

#include "common.hpp"
#include "corpus_util.hpp"
#include "replay.hpp"

using bgtq_fuzz_test::bytes_out;
using bgtq_fuzz_test::check_or_write_seed;

#if BGTQ_FUZZ_HAVE_LLAMA2C
namespace {

//! A llama2.c checkpoint with Philox weights (tied classifier unless vocab < 0).
std::vector<std::uint8_t> tiny_checkpoint(int dim, int hidden, int layers, int heads, int kv_heads, int vocab, int seq_len,
                                          std::uint64_t seed) {
  bgtq::llama2c::config c;
  c.dim = dim;
  c.hidden_dim = hidden;
  c.n_layers = layers;
  c.n_heads = heads;
  c.n_kv_heads = kv_heads;
  c.vocab_size = vocab < 0 ? -vocab : vocab;
  c.shared_classifier = vocab > 0;
  c.seq_len = seq_len;
  c.validate();
  bytes_out o;
  for (int v : {dim, hidden, layers, heads, kv_heads, vocab, seq_len}) o.i32(v);
  bgtq::counter_rng r(seed);
  for (std::size_t i = 0; i < c.checkpoint_floats(); ++i) o.f32(static_cast<float>(0.5 * r.normal()));
  REQUIRE(o.b.size() == c.checkpoint_bytes());
  return o.b;
}

struct token {
  std::string piece;
  float score;
};

//! Fuzz input of the tokenizer target: [u16 vocab][u16 text length][text][file].
std::vector<std::uint8_t> tokenizer_input(const std::vector<token>& vocab, const std::string& text) {
  int max_len = 1;
  for (const auto& t : vocab) max_len = std::max(max_len, static_cast<int>(t.piece.size()));
  bytes_out o;
  o.u16(static_cast<unsigned>(vocab.size()));
  o.u16(static_cast<unsigned>(text.size()));
  o.str(text);
  o.i32(max_len);
  for (const auto& t : vocab) {
    o.f32(t.score);
    o.i32(static_cast<std::int32_t>(t.piece.size()));
    o.str(t.piece);
  }
  return o.b;
}

//! sentencepiece-style vocabulary: <unk> <s> </s>, 256 byte tokens, then merges.
std::vector<token> byte_vocab(const std::vector<std::string>& merges) {
  std::vector<token> v = {{"<unk>", 0.0f}, {"\n<s>\n", 0.0f}, {"\n</s>\n", 0.0f}};
  static const char* hex = "0123456789ABCDEF";
  for (int b = 0; b < 256; ++b) v.push_back({std::string("<0x") + hex[b >> 4] + hex[b & 15] + ">", 0.0f});
  float s = -1.0f;
  for (const auto& m : merges) v.push_back({m, s -= 0.5f});
  return v;
}

}  // namespace

TEST_CASE("fuzz seeds: llama2.c checkpoints are current and load", "[fuzz][corpus]") {
  const struct {
    const char* file;
    std::vector<std::uint8_t> bytes;
  } seeds[] = {
      {"tied_d8_l1_h2_kv1.bin", tiny_checkpoint(8, 12, 1, 2, 1, 6, 3, 1)},
      {"untied_d4_l2_h1.bin", tiny_checkpoint(4, 4, 2, 1, 1, -5, 2, 2)},
      {"gqa_d16_h4_kv2.bin", tiny_checkpoint(16, 8, 1, 4, 2, 4, 2, 3)},
  };
  for (const auto& s : seeds) {
    check_or_write_seed("llama2c_model", s.file, s.bytes);
    const auto m = bgtq::llama2c::model::from_bytes(s.bytes.data(), s.bytes.size(), s.file);
    REQUIRE(m.cfg().checkpoint_bytes() == s.bytes.size());
    REQUIRE(bgtq_fuzz::llama2c_model_one(s.bytes.data(), s.bytes.size()) == 0);
  }
}

TEST_CASE("fuzz seeds: llama2.c tokenizers are current and load", "[fuzz][corpus]") {
  const struct {
    const char* file;
    std::vector<std::uint8_t> bytes;
  } seeds[] = {
      {"bytes_merges.tok", tokenizer_input(byte_vocab({" ", "a", "b", "ab", " ab", "ba", "aba", "\xc3\xa9", " \xc3\xa9"}),
                                           "abab ba\xc3\xa9 \xe2\x82\xac!")},
      {"no_byte_tokens.tok", tokenizer_input({{"<unk>", 0}, {"<s>", 0}, {"</s>", 0}, {" ", -1}, {"a", -2}, {"aa", -3}}, "aaa")},
      {"empty_text.tok", tokenizer_input({{"x", 0}, {"", 1}}, "")},
  };
  for (const auto& s : seeds) {
    check_or_write_seed("llama2c_tokenizer", s.file, s.bytes);
    const int vocab = s.bytes[0] | (s.bytes[1] << 8);
    const std::size_t text = static_cast<std::size_t>(s.bytes[2] | (s.bytes[3] << 8));
    const auto t = bgtq::llama2c::tokenizer::from_bytes(s.bytes.data() + 4 + text, s.bytes.size() - 4 - text, vocab, s.file);
    REQUIRE(t.vocab_size() == vocab);
    REQUIRE(bgtq_fuzz::llama2c_tokenizer_one(s.bytes.data(), s.bytes.size()) == 0);
  }
}
#endif
