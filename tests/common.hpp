#pragma once
// Helpers shared by the test programs.
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <string>

#include <catch2/catch.hpp>

#include <bgtq/core/error.hpp>

namespace bgtq_test {

//! Ends this test program with ctest's skip code (77), printing why. Each TEST_CASE is
//! its own ctest entry (catch_discover_tests), so ctest reports exactly this case as
//! skipped. Use only for missing optional resources (GPU, ../shared/data), never to
//! hide a failing assertion.
[[noreturn]] inline void skip_test(const std::string& reason) {
  std::printf("SKIPPED: %s\n", reason.c_str());
  std::fflush(stdout);
  std::_Exit(77);
}

//! The optional real-data folder (../shared/data), or "" when absent.
inline std::string data_dir() {
  const std::string d = BGTQ_TEST_DATA_DIR;
  return std::filesystem::is_directory(d) ? d : std::string();
}

//! Path of a file under the real-data folder; skips the test if it is not there.
inline std::string require_data(const std::string& rel) {
  const std::string d = data_dir();
  if (d.empty()) skip_test("real-data folder " BGTQ_TEST_DATA_DIR " is absent");
  const std::string p = d + "/" + rel;
  if (!std::filesystem::exists(p)) skip_test(p + " is absent");
  return p;
}

//! The code of the bgtq::error that f() throws, or errc::ok when it throws none.
template <class F>
bgtq::errc error_code_of(F&& f) {
  try {
    f();
  } catch (const bgtq::error& e) {
    return e.code();
  }
  return bgtq::errc::ok;
}

//! Path of the built bgtq CLI.
inline std::string bgtq_bin() { return std::string(BGTQ_BIN_DIR) + "/bgtq"; }

}  // namespace bgtq_test
