#pragma once
// Helpers of the bad-input contract tests (docs/errors.md): each TEST_CASE of this family
// is one row of the table and is named "errors row N: ...".
#include <bgtq/core/error.hpp>

#include <filesystem>
#include <functional>
#include <initializer_list>
#include <string>

#include "common.hpp"

namespace errors_test {

//! Runs f, which must throw bgtq::error with category `code` and a message containing
//! every string in `parts`; returns the message.
inline std::string require_error(const std::function<void()>& f, bgtq::errc code,
                                 std::initializer_list<const char*> parts = {}) {
  try {
    f();
  } catch (const bgtq::error& e) {
    const std::string msg = e.what();
    INFO("message: " << msg);
    REQUIRE(std::string(bgtq::to_string(e.code())) == bgtq::to_string(code));
    for (const char* p : parts) {
      INFO("expected in the message: " << p);
      CHECK(msg.find(p) != std::string::npos);
    }
    return msg;
  }
  FAIL("no bgtq::error thrown (expected " << bgtq::to_string(code) << ")");
  return {};
}

//! A fresh scratch directory under the build tree for one test.
inline std::filesystem::path scratch_dir(const std::string& name) {
  const auto d = std::filesystem::path(BGTQ_BIN_DIR) / ".." / "errors_scratch" / name;
  std::filesystem::remove_all(d);
  std::filesystem::create_directories(d);
  return d;
}

//! Names of the files in `dir` (not recursive).
inline std::vector<std::string> files_in(const std::filesystem::path& dir) {
  std::vector<std::string> out;
  for (const auto& e : std::filesystem::directory_iterator(dir)) out.push_back(e.path().filename().string());
  return out;
}

}  // namespace errors_test
