#pragma once
//! @file io/atomic_file.hpp
//! Write a file all-or-nothing: the content goes to a temporary next to the target
//! and is renamed over it only after it was written and flushed completely. On any
//! error (including an exception from the writer) the temporary is removed and the
//! target is left as it was: no partial output file ever appears.

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <functional>
#include <random>
#include <string>

#include "../core/error.hpp"

namespace bgtq {

//! Calls `write(stream)` on a temporary file and renames it to `path` on success.
//! @throws bgtq::error(io_error) if the file cannot be created, written or renamed;
//!         rethrows whatever `write` throws. In every failing case `path` is untouched.
inline void atomic_write_file(const std::string& path, const std::function<void(std::ostream&)>& write,
                              bool binary = true) {
  namespace fs = std::filesystem;
  const fs::path target(path);
  const fs::path dir = target.has_parent_path() ? target.parent_path() : fs::path(".");
  std::random_device rd;
  const fs::path tmp = dir / (target.filename().string() + ".tmp." + std::to_string(rd()));
  try {
    {
      std::ofstream os(tmp, binary ? (std::ios::binary | std::ios::trunc) : std::ios::trunc);
      if (!os) fail(errc::io_error, "cannot create '" + tmp.string() + "' (does the directory exist and is it writable?)");
      write(os);
      os.flush();
      if (!os) fail(errc::io_error, "write to '" + tmp.string() + "' failed (disk full?)");
    }
    std::error_code ec;
    fs::rename(tmp, target, ec);
    if (ec) fail(errc::io_error, "cannot rename '" + tmp.string() + "' to '" + path + "': " + ec.message());
  } catch (...) {
    std::error_code ec;
    fs::remove(tmp, ec);
    throw;
  }
}

}  // namespace bgtq
