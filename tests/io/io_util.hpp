#pragma once
// Helpers shared by the io and plan tests: error expectations, scratch folders, files.
#include <catch2/catch.hpp>

#include "generated_files.hpp"

#include <bgtq/core/error.hpp>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include <unistd.h>

namespace bgtq_test {

//! Runs f(), which must throw bgtq::error with `code` and a message containing `needle`.
template <class F>
void require_error(F&& f, bgtq::errc code, const std::string& needle) {
  bool threw = false;
  try {
    f();
  } catch (const bgtq::error& e) {
    threw = true;
    INFO("message: " << e.what());
    CHECK(bgtq::to_string(e.code()) == std::string(bgtq::to_string(code)));
    CHECK_THAT(std::string(e.what()), Catch::Contains(needle));
  }
  if (!threw) FAIL("expected bgtq::error(" << bgtq::to_string(code) << ") containing \"" << needle << "\"");
}

//! A fresh scratch folder, removed with its content at scope exit.
struct temp_dir {
  std::filesystem::path path;
  explicit temp_dir(const std::string& tag) {
    static int counter = 0;
    path = std::filesystem::temp_directory_path() /
           ("bgtq_" + tag + "_" + std::to_string(::getpid()) + "_" + std::to_string(counter++));
    std::filesystem::remove_all(path);
    std::filesystem::create_directories(path);
  }
  ~temp_dir() {
    std::error_code ec;
    std::filesystem::remove_all(path, ec);
  }
  std::string file(const std::string& name) const { return (path / name).string(); }
  //! Names of the entries in the folder.
  std::vector<std::string> entries() const {
    std::vector<std::string> v;
    for (const auto& e : std::filesystem::directory_iterator(path)) v.push_back(e.path().filename().string());
    return v;
  }
};

inline std::vector<unsigned char> read_bytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  REQUIRE(in.good());
  return std::vector<unsigned char>((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
}

inline void write_bytes(const std::string& path, const std::vector<unsigned char>& b) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(reinterpret_cast<const char*>(b.data()), static_cast<std::streamsize>(b.size()));
  REQUIRE(out.good());
}

//! Fuzz seed corpora (tests/fuzz/corpus/<kind>/): each generated seed must equal the
//! committed file byte for byte; with BGTQ_REGEN_CORPUS=1 in the environment the files
//! are (re)written instead.
inline void check_or_write_corpus(const std::string& kind, const std::string& file, const std::vector<unsigned char>& bytes) {
  check_or_write_generated(std::filesystem::path("tests") / "fuzz" / "corpus" / kind, file, bytes,
                           "build/bin/test_io / test_plan");
}

}  // namespace bgtq_test
