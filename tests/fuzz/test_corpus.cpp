// Generates the seed corpora of the fuzz targets that have no generator elsewhere (npy
// and plan seeds come from tests/io and tests/plan) and checks that each seed is
// current and exercises its target's main path.
#include <bgtq/core/rng.hpp>

#include <string>
#include <vector>

#include "common.hpp"
#include "corpus_util.hpp"
#include "replay.hpp"

#if BGTQ_FUZZ_HAVE_LLAMA2C
#include <llama2c.hpp>
#endif

using bgtq_fuzz_test::bytes_out;
using bgtq_fuzz_test::check_or_write_seed;

namespace {

//! Configuration bytes of the page target (see target_page.hpp): kind, layout, dim index,
//! page-size index, nvalid, G, flags, seed, then per-block widths (kind 0) or the bit
//! width (kinds 1..5).
std::vector<std::uint8_t> page_header(int kind, int layout, int dim_index, int p_index, int nvalid, int G, int flags,
                                      std::uint32_t seed, const std::vector<int>& bits) {
  bytes_out o;
  for (int v : {kind, layout, dim_index, p_index}) o.u8(static_cast<unsigned>(v));
  o.u16(static_cast<unsigned>(nvalid - 1));
  o.u8(static_cast<unsigned>(G - 1));
  o.u8(static_cast<unsigned>(flags));
  o.u16(seed & 0xFFFFu);
  o.u16(seed >> 16);
  for (int b : bits) o.u8(static_cast<unsigned>(b));
  return o.b;
}

//! Configuration bytes of the attention target (see target_attention.hpp).
std::vector<std::uint8_t> attention_input(int kind, int token_major, int dim_index, int layers, int kv_heads, int group,
                                          int p_index, int sink, int recent, int T, int chunk, int mode, int scale_exp,
                                          std::uint32_t seed, int spare, const std::vector<int>& extra,
                                          const std::vector<std::uint8_t>& tail = {}) {
  bytes_out o;
  for (int v : {kind, token_major, dim_index, layers - 1, kv_heads - 1, group - 1}) o.u8(static_cast<unsigned>(v));
  if (token_major) o.u8(static_cast<unsigned>(p_index));
  o.u8(static_cast<unsigned>(sink));
  o.u8(static_cast<unsigned>(recent));
  o.u16(static_cast<unsigned>(T - 1));
  o.u8(static_cast<unsigned>(chunk - 1));
  o.u8(static_cast<unsigned>(mode));
  o.u8(static_cast<unsigned>(scale_exp + 12));
  o.u16(seed & 0xFFFFu);
  o.u16(seed >> 16);
  o.u8(static_cast<unsigned>(spare));
  for (int v : extra) o.u8(static_cast<unsigned>(v));
  o.raw(tail);
  return o.b;
}

}  // namespace

TEST_CASE("fuzz seeds: packed pages of every codec are current and run", "[fuzz][corpus]") {
  const struct {
    const char* file;
    std::vector<std::uint8_t> header;
  } seeds[] = {
      // Block-GTQ keys, D = 16 (8 blocks, widths 0..8), bit planes, P = 64, fp16 radii
      {"gtq_d16_bitplane.seed", page_header(0, 0, 6, 0, 64, 4, 0, 11, {3, 1, 4, 1, 5, 0, 2, 8})},
      // Block-GTQ keys, D = 10, token-major P = 48, fp32 radii, norm correction, half pairing
      {"gtq_d10_tokenmajor_fp32.seed", page_header(0, 1, 4, 2, 37, 3, 1 | 2 | 16, 12, {2, 2, 7, 1, 6})},
      // uniform 3-bit TQ over D = 32 (Hadamard), P = 128, 100 valid tokens, G = 8
      {"tq3_d32.seed", page_header(1, 0, 8, 1, 100, 8, 4, 13, {3})},
      // uniform 8-bit TQ over D = 6 (structured rotation), Gaussian codebook
      {"tq8_d6_gauss.seed", page_header(1, 1, 2, 0, 16, 2, 1 << 5, 14, {8})},
      {"kivi_k2_asym.seed", page_header(2, 0, 3, 0, 50, 2, 0, 15, {1})},
      {"kivi_k4_sym_tokenmajor.seed", page_header(3, 1, 5, 1, 64, 1, 0, 16, {3})},
      {"kivi_v3_asym.seed", page_header(4, 0, 7, 1, 128, 5, 4, 17, {2})},
      {"kivi_v1_sym.seed", page_header(5, 1, 0, 0, 9, 9, 0, 18, {0})},
      {"fp16_d64.seed", page_header(6, 0, 9, 0, 17, 4, 4, 19, {})},
  };
  for (const auto& s : seeds) {
    const auto bytes = bgtq_fuzz_test::page_seed(s.header);
    REQUIRE(bytes.size() > s.header.size());
    check_or_write_seed("page", s.file, bytes);
    REQUIRE(bgtq_fuzz_test::page_one(bytes.data(), bytes.size()) == 0);
  }
}

TEST_CASE("fuzz seeds: cache + attention configurations are current and run", "[fuzz][corpus]") {
  std::vector<std::uint8_t> pattern(256);
  for (std::size_t i = 0; i < pattern.size(); ++i) pattern[i] = static_cast<std::uint8_t>(i * 37 + 11);
  const struct {
    const char* file;
    std::vector<std::uint8_t> bytes;
  } seeds[] = {
      // Block-GTQ, D = 8, 2 layers, 2 KV heads, GQA 3, sink 2, recent 3, 150 tokens in chunks of 17
      {"gtq_d8_window.seed", attention_input(0, 0, 3, 2, 2, 3, 0, 2, 3, 150, 17, 0, 0, 21, 1, {3, 0, 2, 3, 1, 4, 2, 3, 1, 4, 0, 0})},
      // Block-GTQ, D = 16, token-major, fp32 radii + norm correction, huge keys (1e6)
      {"gtq_d16_big_fp32.seed", attention_input(0, 1, 4, 1, 1, 4, 3, 0, 0, 70, 70, 0, 6, 22, 0, {4, 1 | 2 | 4, 1, 2, 3, 4, 5, 6, 7, 8})},
      // fp16, D = 32, values in the 1e5 range (clamped), pages overwritten by a byte pattern
      {"fp16_d32_overwrite.seed", attention_input(1, 0, 5, 1, 2, 2, 0, 1, 0, 130, 64, 4, 5, 23, 1, {}, pattern)},
      // KIVI 2-bit with a 32-token block window, raw float rows with the zero policy
      {"kivi_raw_rows.seed", attention_input(2, 1, 2, 1, 1, 1, 1, 0, 5, 90, 7, 1 | 2, 0, 24, 0, {1}, pattern)},
      // KIVI symmetric 1-bit, tiny values (1e-9)
      {"kivi_sym1_tiny.seed", attention_input(3, 0, 6, 2, 1, 2, 0, 3, 7, 200, 80, 0, -9, 25, 1, {0})},
  };
  for (const auto& s : seeds) {
    check_or_write_seed("attention", s.file, s.bytes);
    REQUIRE(bgtq_fuzz_test::attention_one(s.bytes.data(), s.bytes.size()) == 0);
  }
}

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
  std::size_t bytes = 8 + text.size();
  for (const auto& t : vocab) bytes += 8 + t.piece.size();
  bytes_out o;
  o.b.reserve(bytes);  // one allocation (and no false -Wstringop-overflow from GCC 12 on the growth)
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
      {"tied_d8_l1_h2_kv1.seed", tiny_checkpoint(8, 12, 1, 2, 1, 6, 3, 1)},
      {"untied_d4_l2_h1.seed", tiny_checkpoint(4, 4, 2, 1, 1, -5, 2, 2)},
      {"gqa_d16_h4_kv2.seed", tiny_checkpoint(16, 8, 1, 4, 2, 4, 2, 3)},
  };
  for (const auto& s : seeds) {
    check_or_write_seed("llama2c_model", s.file, s.bytes);
    const auto m = bgtq::llama2c::model::from_bytes(s.bytes.data(), s.bytes.size(), s.file);
    REQUIRE(m.cfg().checkpoint_bytes() == s.bytes.size());
    REQUIRE(bgtq_fuzz_test::llama2c_model_one(s.bytes.data(), s.bytes.size()) == 0);
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
    REQUIRE(bgtq_fuzz_test::llama2c_tokenizer_one(s.bytes.data(), s.bytes.size()) == 0);
  }
}
#endif

TEST_CASE("fuzz seeds: eval results JSON (plot eval's reader) are current and run", "[fuzz][corpus]") {
  struct seed {
    const char* file;
    std::string text;
    int min_rendered;  // metrics that must parse and render
  };
  const std::string valid =
      R"({"config":{"q":"q.npy","k":"k.npy","layers":2,"tokens":64,"q_heads":4,"kv_heads":2,"head_dim":16,)"
      R"("rope":"half","rotary_dim":16,"calib_tokens":32,"eval_from":32},"layers":[)"
      R"({"layer":0,"results":{"fp16":{"logit_mae":0.001,"kl":1e-6,"top10":0.99,"out_rel_l2":0.001,"bytes_per_token":64},)"
      R"("tq@2":{"logit_mae":0.6,"kl":0.2,"top10":0.7,"out_rel_l2":0.5,"bytes_per_token":12},)"
      R"("bgtq@2":{"logit_mae":0.3,"kl":0.1,"top10":0.8,"out_rel_l2":0.4,"bytes_per_token":13.5}}},)"
      R"({"layer":1,"results":{"fp16":{"logit_mae":0.002,"kl":2e-6,"top10":0.98,"out_rel_l2":0.002,"bytes_per_token":64},)"
      R"("tq@2":{"logit_mae":0.7,"kl":0.3,"top10":0.6,"out_rel_l2":0.6,"bytes_per_token":12},)"
      R"("bgtq@2":{"logit_mae":0.35,"kl":0.12,"top10":0.75,"out_rel_l2":0.45,"bytes_per_token":13.5}}}],)"
      R"("summary":{"bgtq_vs_tq":[{"bits":2,"logit_mae_reduction":0.5,"kl_reduction":0.5,"layers_won":2,"layers":2}]}})";
  const std::vector<seed> seeds{
      {"valid_2layers.seed", valid, 4},
      {"no_v.seed", R"({"layers":[{"layer":0,"results":{"tq@3":{"logit_mae":0.2,"kl":0.05,"top10":0.9}}}]})", 3},
      {"hostile_numbers.seed",
       R"({"config":{"layers":1e300,"tokens":-1},"layers":[{"layer":0,"results":{"kivi@4":{"logit_mae":null,"kl":1e-320,)"
       R"("top10":1.5,"bytes_per_token":-7}}}],"summary":{"bgtq_vs_tq":[{"bits":3,"logit_mae_reduction":-999999.5}]}})",
       2},
      // reductions beyond +-1e6 and metrics beyond double's range are refused (format_error)
      {"hostile_reduction.seed",
       R"({"layers":[{"layer":0,"results":{"tq@3":{"logit_mae":0.5}}}],"summary":{"bgtq_vs_tq":[{"bits":3,"logit_mae_reduction":1e308}]}})",
       0},
      {"overflowing_metric.seed", R"({"layers":[{"layer":0,"results":{"tq@3":{"logit_mae":1e999,"kl":0.1}}}]})", 0},
      {"bad_layer.seed", R"({"layers":[{"layer":4294967296.5,"results":{"tq@2":{"logit_mae":1}}}]})", 0},
      {"escapes.seed", "{\"layers\":[{\"layer\":0,\"results\":{\"t\\u00e9q@2\\ud83d\\ude00\":{\"logit_mae\":1e-3}}}]}", 1},
      {"nested.seed", std::string(300, '[') + std::string(300, ']'), 0},
  };
  for (const seed& s : seeds) {
    INFO(s.file);
    const std::vector<std::uint8_t> bytes(s.text.begin(), s.text.end());
    check_or_write_seed("eval_json", s.file, bytes);
    CHECK(bgtq_fuzz_test::eval_json_rendered(bytes.data(), bytes.size()) >= s.min_rendered);
  }
}
