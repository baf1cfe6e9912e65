#pragma once
//! @file io/atomic_file.hpp
//! Write a file all-or-nothing: the content goes to a temporary next to the target
//! and is renamed over it only after it was written and flushed completely. On any
//! error (including an exception from the writer) the temporary is removed and the
//! target is left as it was: no partial output file ever appears. Also the one way the
//! readers (.npy, plan files) open an input file.

#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <functional>
#include <random>
#include <string>
#include <system_error>

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

namespace detail {

//! Opens `path` for binary reading into `in` and returns its size in bytes.
//! @throws bgtq::error(io_error) for a directory, a file that cannot be opened, or one
//!         whose size cannot be read; the message names the path and the cause.
inline std::uintmax_t open_for_reading(const std::string& path, std::ifstream& in) {
  namespace fs = std::filesystem;
  std::error_code ec;
  if (fs::is_directory(path, ec)) fail(errc::io_error, "cannot read '" + path + "': it is a directory");
  in.open(path, std::ios::binary);
  if (!in) fail(errc::io_error, "cannot open '" + path + "': " + std::generic_category().message(errno));
  const std::uintmax_t size = fs::file_size(path, ec);
  if (ec) fail(errc::io_error, "cannot get the size of '" + path + "': " + ec.message());
  return size;
}

}  // namespace detail

}  // namespace bgtq
