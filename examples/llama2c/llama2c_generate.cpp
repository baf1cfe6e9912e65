// Example: greedy generation with the llama2c engine and the exact float32 KV cache.
//   llama2c_generate MODEL.bin TOKENIZER.bin ["prompt"] [steps]
// Prints the prompt and its continuation on stdout, the speed on stderr.
#include <charconv>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <exception>
#include <string>

#include "llama2c.hpp"

int main(int argc, char** argv) {
  if (argc < 3 || argc > 5) {
    std::fprintf(stderr, "usage: %s MODEL.bin TOKENIZER.bin [\"prompt\"] [steps]\n", argv[0]);
    return 2;
  }
  // steps: a whole non-negative decimal number (atoi read "abc" as 0 and generated nothing)
  int steps = 256;
  if (argc > 4) {
    const char* s = argv[4];
    const auto [end, ec] = std::from_chars(s, s + std::strlen(s), steps);
    if (ec != std::errc() || *end != '\0' || steps < 0) {
      std::fprintf(stderr, "%s: steps '%s' is not a whole number >= 0\nusage: %s MODEL.bin TOKENIZER.bin [\"prompt\"] [steps]\n",
                   argv[0], s, argv[0]);
      return 2;
    }
  }
  try {
    namespace lc = bgtq::llama2c;
    const lc::model m = lc::model::load(argv[1]);
    const lc::tokenizer tok = lc::tokenizer::load(argv[2], m.cfg().vocab_size);
    const std::string prompt = argc > 3 ? argv[3] : "";

    lc::fp32_kv_backend kv(m.cfg());
    lc::engine eng(m, kv);
    const std::vector<int> in = tok.encode(prompt, /*bos=*/true, /*eos=*/false);
    const auto t0 = std::chrono::steady_clock::now();
    const std::vector<int> out = lc::generate_greedy(eng, in, steps);
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();

    // The leading BOS is not text: decode every later token after its predecessor.
    std::vector<int> all(in.begin() + 1, in.end());
    all.insert(all.end(), out.begin(), out.end());
    const std::string text = tok.decode_all(all, in.front());
    std::printf("%s\n", text.c_str());
    std::fprintf(stderr, "%zu prompt + %zu generated tokens in %.3f s (%.0f tokens/s)\n", in.size(), out.size(), s,
                 static_cast<double>(in.size() + out.size()) / s);
    return 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "error: %s\n", e.what());
    return 1;
  }
}
