#pragma once
// Every fuzz target, for the replay and corpus tests of the normal suite, as plain
// declarations: the targets are compiled once per test program, in test_targets.cpp
// (each target instantiates caches and decode attention, the costliest code in the
// build; under the sanitizers a target header costs minutes to compile). The llama2.c
// targets exist only when the test program links the llama2c example library
// (BGTQ_BUILD_TOOLS=ON).
#include <cstddef>
#include <cstdint>
#include <vector>

#if __has_include(<llama2c.hpp>)
#define BGTQ_FUZZ_HAVE_LLAMA2C 1
#else
#define BGTQ_FUZZ_HAVE_LLAMA2C 0
#endif

namespace bgtq_fuzz_test {

// bgtq_fuzz::<name>_one of tests/fuzz/target_<name>.hpp: 0, or an abort on a broken invariant.
int npy_one(const std::uint8_t* data, std::size_t size);
int plan_one(const std::uint8_t* data, std::size_t size);
int page_one(const std::uint8_t* data, std::size_t size);
int attention_one(const std::uint8_t* data, std::size_t size);
int eval_json_one(const std::uint8_t* data, std::size_t size);
// The seed builders the corpus test needs: bgtq_fuzz::page_seed, ::eval_json_rendered.
std::vector<std::uint8_t> page_seed(const std::vector<std::uint8_t>& header);
int eval_json_rendered(const std::uint8_t* data, std::size_t size);
#if BGTQ_FUZZ_HAVE_LLAMA2C
int llama2c_model_one(const std::uint8_t* data, std::size_t size);
int llama2c_tokenizer_one(const std::uint8_t* data, std::size_t size);
#endif

}  // namespace bgtq_fuzz_test
