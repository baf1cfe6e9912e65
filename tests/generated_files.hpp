#pragma once
// Small files that the test suite generates and the repository commits (fuzz seed
// corpora, tiny data files for the CLI error tests): the generator is the truth, the
// committed copy must equal its bytes, and BGTQ_REGEN_CORPUS=1 in the environment
// rewrites the copy instead of checking it.
#include <catch2/catch.hpp>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

namespace bgtq_test {

//! Checks (or, with BGTQ_REGEN_CORPUS=1, writes) BGTQ_SOURCE_DIR/rel_dir/file; `regen`
//! names the command that regenerates it, for the failure message.
inline void check_or_write_generated(const std::filesystem::path& rel_dir, const std::string& file,
                                     const std::vector<unsigned char>& bytes, const std::string& regen) {
  const std::filesystem::path dir = std::filesystem::path(BGTQ_SOURCE_DIR) / rel_dir;
  const std::filesystem::path p = dir / file;
  const char* env = std::getenv("BGTQ_REGEN_CORPUS");
  if (env != nullptr && std::string(env) == "1") {
    std::filesystem::create_directories(dir);
    std::ofstream out(p, std::ios::binary | std::ios::trunc);
    out.write(reinterpret_cast<const char*>(bytes.data()), static_cast<std::streamsize>(bytes.size()));
    REQUIRE(out.good());
    return;
  }
  INFO(p.string() << " (regenerate with BGTQ_REGEN_CORPUS=1 " << regen << ")");
  REQUIRE(std::filesystem::exists(p));
  std::ifstream in(p, std::ios::binary);
  REQUIRE(in.good());
  const std::vector<unsigned char> have((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  CHECK(have == bytes);
}

}  // namespace bgtq_test
