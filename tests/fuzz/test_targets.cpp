// The fuzz targets of replay.hpp, compiled once for the test program (no test cases
// here: test_replay.cpp and test_corpus.cpp call them).
#include "replay.hpp"

#include "target_attention.hpp"
#include "target_eval_json.hpp"
#include "target_npy.hpp"
#include "target_page.hpp"
#include "target_plan.hpp"
#if BGTQ_FUZZ_HAVE_LLAMA2C
#include "target_llama2c_model.hpp"
#include "target_llama2c_tokenizer.hpp"
#endif

namespace bgtq_fuzz_test {

int npy_one(const std::uint8_t* data, std::size_t size) { return bgtq_fuzz::npy_one(data, size); }
int plan_one(const std::uint8_t* data, std::size_t size) { return bgtq_fuzz::plan_one(data, size); }
int page_one(const std::uint8_t* data, std::size_t size) { return bgtq_fuzz::page_one(data, size); }
int attention_one(const std::uint8_t* data, std::size_t size) { return bgtq_fuzz::attention_one(data, size); }
int eval_json_one(const std::uint8_t* data, std::size_t size) { return bgtq_fuzz::eval_json_one(data, size); }
std::vector<std::uint8_t> page_seed(const std::vector<std::uint8_t>& header) { return bgtq_fuzz::page_seed(header); }
int eval_json_rendered(const std::uint8_t* data, std::size_t size) { return bgtq_fuzz::eval_json_rendered(data, size); }
#if BGTQ_FUZZ_HAVE_LLAMA2C
int llama2c_model_one(const std::uint8_t* data, std::size_t size) { return bgtq_fuzz::llama2c_model_one(data, size); }
int llama2c_tokenizer_one(const std::uint8_t* data, std::size_t size) { return bgtq_fuzz::llama2c_tokenizer_one(data, size); }
#endif

}  // namespace bgtq_fuzz_test
