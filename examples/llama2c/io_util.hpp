#pragma once
//! @file io_util.hpp
//! Internal helper of the llama2c example library: whole-file reads with clear errors.

#include <cstdio>
#include <string>
#include <vector>

#include <bgtq/core/error.hpp>

namespace bgtq::llama2c::detail {

//! Reads the whole file `path` (a `what`, e.g. "checkpoint", for messages).
//! @throws bgtq::error(io_error) if it cannot be opened or read completely.
inline std::vector<unsigned char> read_file(const std::string& path, const char* what) {
  std::FILE* f = std::fopen(path.c_str(), "rb");
  if (!f) fail(errc::io_error, std::string("cannot open ") + what + " '" + path + "'");
  std::vector<unsigned char> out;
  unsigned char buf[1 << 16];
  for (;;) {
    const std::size_t n = std::fread(buf, 1, sizeof buf, f);
    out.insert(out.end(), buf, buf + n);
    if (n < sizeof buf) break;
  }
  const bool bad = std::ferror(f) != 0;
  std::fclose(f);
  if (bad) fail(errc::io_error, std::string("error reading ") + what + " '" + path + "'");
  return out;
}

}  // namespace bgtq::llama2c::detail
