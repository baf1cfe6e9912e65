// Replays every fuzz target over its committed seed corpus (tests/fuzz/corpus/<name>/)
// and over every crash ever found (tests/fuzz/regressions/<name>/), in the normal test
// suite: no clang or libFuzzer needed. Under `make test-asan` this is the sanitizer
// check of those inputs; in a plain build it still catches exceptions other than
// bgtq::error, aborts on broken invariants and segfaults.
#include <algorithm>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "common.hpp"
#include "replay.hpp"

namespace {

std::vector<std::filesystem::path> inputs_of(const std::string& name, const char* kind) {
  std::vector<std::filesystem::path> out;
  const auto dir = std::filesystem::path(BGTQ_SOURCE_DIR) / "tests" / "fuzz" / kind / name;
  if (!std::filesystem::is_directory(dir)) return out;
  for (const auto& e : std::filesystem::directory_iterator(dir))
    if (e.is_regular_file()) out.push_back(e.path());
  std::sort(out.begin(), out.end());
  return out;
}

std::vector<std::uint8_t> slurp(const std::filesystem::path& p) {
  std::ifstream in(p, std::ios::binary);
  REQUIRE(in.good());
  return std::vector<std::uint8_t>((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
}

template <class F>
void replay(const std::string& name, F&& target) {
  const auto seeds = inputs_of(name, "corpus");
  const auto crashes = inputs_of(name, "regressions");
  INFO("fuzz target " << name << ": " << seeds.size() << " seeds, " << crashes.size() << " regressions");
  REQUIRE(!seeds.empty());
  for (const auto* set : {&seeds, &crashes})
    for (const auto& p : *set) {
      INFO("input " << p.string());
      const std::vector<std::uint8_t> b = slurp(p);
      REQUIRE(target(b.data(), b.size()) == 0);
      // every prefix of a short input too: truncation is the commonest corruption
      if (b.size() <= 1024)
        for (std::size_t n = 0; n < b.size(); n += 1 + b.size() / 64) REQUIRE(target(b.data(), n) == 0);
    }
}

}  // namespace

TEST_CASE("fuzz replay: npy reader over its seeds and regressions", "[fuzz]") { replay("npy", bgtq_fuzz_test::npy_one); }
TEST_CASE("fuzz replay: plan loader over its seeds and regressions", "[fuzz]") { replay("plan", bgtq_fuzz_test::plan_one); }
TEST_CASE("fuzz replay: packed-page codecs over their seeds and regressions", "[fuzz]") { replay("page", bgtq_fuzz_test::page_one); }
TEST_CASE("fuzz replay: plot eval's results reader over its seeds and regressions", "[fuzz]") {
  replay("eval_json", bgtq_fuzz_test::eval_json_one);
}
TEST_CASE("fuzz replay: cache + decode attention over its seeds and regressions", "[fuzz]") {
  replay("attention", bgtq_fuzz_test::attention_one);
}
#if BGTQ_FUZZ_HAVE_LLAMA2C
TEST_CASE("fuzz replay: llama2.c checkpoint loader over its seeds and regressions", "[fuzz]") {
  replay("llama2c_model", bgtq_fuzz_test::llama2c_model_one);
}
TEST_CASE("fuzz replay: llama2.c tokenizer loader over its seeds and regressions", "[fuzz]") {
  replay("llama2c_tokenizer", bgtq_fuzz_test::llama2c_tokenizer_one);
}
#endif
