// Generates the tiny llama2.c checkpoint and tokenizer that the CLI error tests
// (tests/cli/test_errors_*.cmake) feed to `bgtq capture`: the committed files under
// tests/errors/data/ must equal what this test generates (BGTQ_REGEN_CORPUS=1 rewrites
// them). A valid pair is needed so that each failing CLI case fails for the one reason
// it is about.
#include <bgtq/core/rng.hpp>
#include <bgtq/io/npy.hpp>

#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <iterator>
#include <limits>
#include <string>
#include <vector>

#include "errors_util.hpp"
#include "generated_files.hpp"

namespace {

struct sink {
  std::vector<unsigned char> b;
  // resize + memcpy: vector::insert of the 4 bytes drew GCC 12's false -Wstringop-overflow
  // in the one-file test program (BGTQ_UNITY_BUILD) under ThreadSanitizer's -O1
  void put4(const void* p) {
    const std::size_t n = b.size();
    b.resize(n + 4);
    std::memcpy(b.data() + n, p, 4);
  }
  void i32(std::int32_t v) { put4(&v); }
  void f32(float v) { put4(&v); }
};

void check_or_write(const std::string& file, const std::vector<unsigned char>& bytes) {
  bgtq_test::check_or_write_generated(std::filesystem::path("tests") / "errors" / "data", file, bytes,
                                      "build/bin/test_errors \"[data]\"");
}

}  // namespace

TEST_CASE("CLI error-test data: tiny llama2.c model and byte-level tokenizer are current", "[errors][data]") {
  // tokenizer: <unk> <s> </s>, the 256 byte tokens <0xHH> (ids 3..258), three merges
  const std::vector<std::string> merges = {" t", "he", " the"};
  const int vocab = 3 + 256 + static_cast<int>(merges.size());
  sink tok;
  tok.i32(16);  // max_token_length
  auto piece = [&](const std::string& s, float score) {
    tok.f32(score);
    tok.i32(static_cast<std::int32_t>(s.size()));
    tok.b.insert(tok.b.end(), s.begin(), s.end());
  };
  piece("<unk>", 0.0f);
  piece("\n<s>\n", 0.0f);
  piece("\n</s>\n", 0.0f);
  static const char* hex = "0123456789ABCDEF";
  for (int b = 0; b < 256; ++b) piece(std::string("<0x") + hex[b >> 4] + hex[b & 15] + ">", 0.0f);
  float score = -1.0f;
  for (const auto& m : merges) piece(m, score -= 1.0f);
  check_or_write("tiny.tok", tok.b);

  // checkpoint: dim 8, hidden 16, 1 layer, 2 query heads / 1 KV head (head_dim 4),
  // tied classifier, seq_len 32; weights 0.3 * N(0, 1), RMSNorm gains 1
  const int dim = 8, hidden = 16, layers = 1, heads = 2, kv_heads = 1, seq_len = 32;
  const std::size_t hd = dim / heads, kvd = kv_heads * hd;
  sink m;
  for (int v : {dim, hidden, layers, heads, kv_heads, vocab, seq_len}) m.i32(v);
  bgtq::counter_rng r(2024);
  auto tensor = [&](std::size_t n, bool gain) {
    for (std::size_t i = 0; i < n; ++i) m.f32(gain ? 1.0f : static_cast<float>(0.3 * r.normal()));
  };
  tensor(static_cast<std::size_t>(vocab) * dim, false);  // token_embedding
  tensor(dim, true);                                      // rms_att
  tensor(static_cast<std::size_t>(dim) * dim, false);    // wq
  tensor(kvd * dim, false);                               // wk
  tensor(kvd * dim, false);                               // wv
  tensor(static_cast<std::size_t>(dim) * dim, false);    // wo
  tensor(dim, true);                                      // rms_ffn
  tensor(static_cast<std::size_t>(hidden) * dim, false); // w1
  tensor(static_cast<std::size_t>(dim) * hidden, false); // w2
  tensor(static_cast<std::size_t>(hidden) * dim, false); // w3
  tensor(dim, true);                                      // rms_final
  tensor(static_cast<std::size_t>(seq_len) * hd, true);   // legacy freq_cis (ignored)
  check_or_write("tiny.ckpt", m.b);
  // the same checkpoint cut after 1000 bytes (a truncated download)
  check_or_write("tiny_truncated.ckpt", std::vector<unsigned char>(m.b.begin(), m.b.begin() + 1000));
}

TEST_CASE("CLI error-test data: .npy activations with shape, NaN and truncation faults are current", "[errors][data]") {
  // Q [1, 9, 2, 8] and K/V [1, 9, 1, 8] are valid together (layers 1, tokens 9, Hq 2, Hkv 1, D 8);
  // every other file breaks exactly one thing
  auto arr = [](std::vector<std::size_t> shape, std::uint64_t seed) {
    std::size_t n = 1;
    for (auto d : shape) n *= d;
    bgtq::counter_rng r(seed);
    std::vector<float> x(n);
    for (auto& v : x) v = static_cast<float>(r.normal());
    return x;
  };
  auto npy = [&](std::vector<std::size_t> shape, std::uint64_t seed) { return bgtq::npy_bytes(arr(shape, seed).data(), shape); };
  check_or_write("q.npy", npy({1, 9, 2, 8}, 1));
  check_or_write("k.npy", npy({1, 9, 1, 8}, 2));
  check_or_write("v.npy", npy({1, 9, 1, 8}, 3));
  check_or_write("k_d6.npy", npy({1, 9, 1, 6}, 4));   // head_dim 6 instead of 8
  check_or_write("k_t8.npy", npy({1, 8, 1, 8}, 5));   // 8 tokens instead of 9
  check_or_write("k_l2.npy", npy({2, 9, 1, 8}, 6));   // 2 layers instead of 1
  check_or_write("k_h3.npy", npy({1, 9, 3, 8}, 7));   // 3 KV heads: Hq = 2 is not a multiple
  check_or_write("v_h2.npy", npy({1, 9, 2, 8}, 8));   // V with 2 heads, K with 1
  auto nan = arr({1, 9, 1, 8}, 9);
  nan[4 * 8 + 3] = std::numeric_limits<float>::quiet_NaN();  // element [0, 4, 0, 3]
  check_or_write("k_nan.npy", bgtq::npy_bytes(nan.data(), {1, 9, 1, 8}));
  // one layer more than a plan holds (bgtq::max_plan_layers = 4096): 32 KiB each
  check_or_write("q_l4097.npy", npy({4097, 1, 1, 2}, 10));
  check_or_write("k_l4097.npy", npy({4097, 1, 1, 2}, 11));
  // all-zero queries: every logit 0 with exact and quantized keys alike, so both methods'
  // errors are 0 and eval's "Block-GTQ vs uniform TQ" change has no base (n/a)
  const std::vector<float> zeros(1 * 9 * 2 * 8, 0.0f);
  check_or_write("q_zero.npy", bgtq::npy_bytes(zeros.data(), {1, 9, 2, 8}));
  auto big = arr({1, 9, 1, 8}, 2);
  big[2 * 8 + 5] = 1.0e5f;  // finite, beyond fp16's 65504: element [0, 2, 0, 5]
  check_or_write("k_big.npy", bgtq::npy_bytes(big.data(), {1, 9, 1, 8}));
  auto cut = npy({1, 9, 1, 8}, 2);
  cut.resize(cut.size() - 7);
  check_or_write("k_truncated.npy", cut);
}
