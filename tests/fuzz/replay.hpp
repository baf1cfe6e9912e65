#pragma once
// All fuzz targets, for the replay and corpus tests of the normal suite. The llama2.c
// targets exist only when the test program links the llama2c example library
// (BGTQ_BUILD_TOOLS=ON).
#include "target_npy.hpp"
#include "target_plan.hpp"
#include "target_page.hpp"
#include "target_attention.hpp"
#include "target_eval_json.hpp"

#if __has_include(<llama2c.hpp>)
#define BGTQ_FUZZ_HAVE_LLAMA2C 1
#include "target_llama2c_model.hpp"
#include "target_llama2c_tokenizer.hpp"
#else
#define BGTQ_FUZZ_HAVE_LLAMA2C 0
#endif
