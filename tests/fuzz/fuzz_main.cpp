// libFuzzer entry point of one fuzz target; tests/fuzz/CMakeLists.txt compiles this file
// once per target with BGTQ_FUZZ_HEADER (the target's header) and BGTQ_FUZZ_FN (its
// function) defined.
#include <cstddef>
#include <cstdint>

#include BGTQ_FUZZ_HEADER

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) { return BGTQ_FUZZ_FN(data, size); }
