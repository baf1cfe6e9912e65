#pragma once
//! @file io/atomic_file.hpp
//! Write a file all-or-nothing: the content goes to a temporary next to the target
//! and is renamed over it only after it was written and flushed completely. On any
//! error (including an exception from the writer) the temporary is removed and the
//! target is left as it was: no partial output file ever appears. Also the one way the
//! readers (.npy, plan files) open an input file.
//!
//! Targets that are not files: a symlink is followed (the file it names is replaced or
//! created, the link stays); an existing device, FIFO or socket (`/dev/null`, `/dev/stdout` on a
//! pipe) is written in place, after every regular output was written, since a rename
//! would replace the node itself (run as root, `-o /dev/null` would turn the system's
//! /dev/null into a regular file).

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <memory>
#include <random>
#include <string>
#include <system_error>
#include <vector>

#if defined(__unix__) || defined(__APPLE__)
#include <pthread.h>
#include <signal.h>
#include <unistd.h>
#endif

#include "../core/error.hpp"

namespace bgtq {

namespace detail {
//! Holds SIGINT, SIGTERM, SIGHUP and SIGQUIT pending in the calling thread for its
//! lifetime and restores the thread's mask after: while several outputs are renamed
//! over their targets, a signal is delivered after the last rename instead of between
//! two, where its handler's exit would leave some targets new and some old. (SIGKILL
//! cannot be held; a power cut neither.) A no-op off POSIX.
class termination_signals_held {
 public:
  termination_signals_held() noexcept {
#if defined(__unix__) || defined(__APPLE__)
    sigset_t set;
    sigemptyset(&set);
    for (int sig : {SIGINT, SIGTERM, SIGHUP, SIGQUIT}) sigaddset(&set, sig);
    held_ = pthread_sigmask(SIG_BLOCK, &set, &old_) == 0;
#endif
  }
  ~termination_signals_held() {
#if defined(__unix__) || defined(__APPLE__)
    if (held_) pthread_sigmask(SIG_SETMASK, &old_, nullptr);
#endif
  }
  termination_signals_held(const termination_signals_held&) = delete;
  termination_signals_held& operator=(const termination_signals_held&) = delete;

 private:
#if defined(__unix__) || defined(__APPLE__)
  sigset_t old_{};
  bool held_ = false;
#endif
};

//! A fresh temporary name next to `target`: "<name>.tmp.<random>" in its directory.
inline std::filesystem::path temp_path_for(const std::filesystem::path& target) {
  const std::filesystem::path dir = target.has_parent_path() ? target.parent_path() : std::filesystem::path(".");
  std::random_device rd;
  return dir / (target.filename().string() + ".tmp." + std::to_string(rd()));
}
//! Where an output to `path` goes: `in_place` for an existing device, FIFO or socket
//! (after following symlinks), written directly; otherwise `path` is the file to rename
//! a temporary over, a symlink's target when `path` is a symlink.
struct output_target {
  std::filesystem::path path;
  bool in_place = false;
};
//! A symlink is followed link by link, also when the file it names does not exist yet
//! (weakly_canonical stops at such a dangling last link and would return the link).
//! @throws bgtq::error(io_error) for a cycle of links (more than 40).
inline output_target resolve_output(const std::string& p) {
  namespace fs = std::filesystem;
  std::error_code ec;
  const fs::file_status st = fs::status(p, ec);  // follows symlinks
  if (!ec && fs::exists(st) && !fs::is_regular_file(st) && !fs::is_directory(st)) return {fs::path(p), true};
  fs::path q(p);
  for (int hops = 0; fs::is_symlink(fs::symlink_status(q, ec)); ++hops) {
    if (hops == 40) fail(errc::io_error, "'" + p + "': too many levels of symbolic links");
    const fs::path to = fs::read_symlink(q, ec);
    if (ec) break;
    q = to.is_absolute() ? to : q.parent_path() / to;
  }
  if (q == fs::path(p)) return {q, false};
  const fs::path r = fs::weakly_canonical(q, ec);
  return {ec ? q : r, false};
}
//! Whether two output paths name one file: equal after following symlinks (also to
//! files not there yet), making them absolute and resolving the "." / ".." and links of
//! the part that exists (weakly_canonical).
inline bool same_target(const std::string& a, const std::string& b) {
  namespace fs = std::filesystem;
  // absolute first: weakly_canonical leaves a relative path whose first element does not
  // exist as it is, so "p.bin" (not written yet) and "./p.bin" or "$PWD/p.bin" compared
  // unequal, and the second output silently replaced the first
  auto canonical_of = [](const std::string& p, std::error_code& ec) {
    const fs::path abs = fs::absolute(resolve_output(p).path, ec);
    return ec ? fs::path() : fs::weakly_canonical(abs, ec);
  };
  std::error_code ea, eb;
  const fs::path ca = canonical_of(a, ea), cb = canonical_of(b, eb);
  if (ea || eb) return a == b;
  return ca == cb;
}

//! The temporaries being written right now, for a signal handler to remove
//! (remove_pending_temporaries): a fixed table, constant-initialised, so that reading it
//! from a handler needs no lock and no allocation. A slot is 0 free, 1 being filled,
//! 2 holding the path of a temporary that may exist.
inline constexpr int max_pending_temporaries = 16;
inline constexpr std::size_t max_pending_path = 4096;
struct pending_slot {
  std::atomic<int> state{0};
  char path[max_pending_path] = {};
};
inline pending_slot pending_temporaries[max_pending_temporaries];

//! Registers a temporary's path for the life of the object (before the file is created;
//! released after it was renamed or removed). A path too long for a slot, or a full
//! table, is simply not registered: only a hint for an interrupted run.
class pending_temporary {
 public:
  explicit pending_temporary(const std::filesystem::path& p) noexcept {
    const std::string& s = p.native();
    if (s.size() >= max_pending_path) return;
    for (int i = 0; i < max_pending_temporaries; ++i) {
      int expected = 0;
      if (pending_temporaries[i].state.compare_exchange_strong(expected, 1)) {
        std::memcpy(pending_temporaries[i].path, s.c_str(), s.size() + 1);
        pending_temporaries[i].state.store(2, std::memory_order_release);
        slot_ = i;
        return;
      }
    }
  }
  ~pending_temporary() {
    if (slot_ >= 0) pending_temporaries[slot_].state.store(0, std::memory_order_release);
  }
  pending_temporary(const pending_temporary&) = delete;
  pending_temporary& operator=(const pending_temporary&) = delete;

 private:
  int slot_ = -1;
};
static_assert(std::atomic<int>::is_always_lock_free, "the signal handler reads the slots' state");
}  // namespace detail

//! Removes every temporary that atomic_write_files / check_output_path may be writing at
//! this moment. Async-signal-safe (lock-free loads and unlink only): a program's handler
//! for SIGINT / SIGTERM calls it before re-raising the signal, so that an interrupted
//! write leaves no `*.tmp.*` behind (bgtq's main does). A temporary already renamed over
//! its target is gone under its temporary name, so unlinking that name does nothing.
inline void remove_pending_temporaries() noexcept {
  for (auto& slot : detail::pending_temporaries)
    if (slot.state.load(std::memory_order_acquire) == 2) {
#if defined(__unix__) || defined(__APPLE__)
      (void)::unlink(slot.path);
#else
      (void)std::remove(slot.path);
#endif
    }
}

//! One output of atomic_write_files: a target path and the function that writes it.
struct output_file {
  std::string path;
  std::function<void(std::ostream&)> write;
  bool binary = true;
};

//! Writes every file to a temporary next to its target, and only when all of them were
//! written and flushed completely renames them over their targets: a failure in any
//! writer (a missing directory for the second file, a full disk) leaves every target as
//! it was. (A rename failing after an earlier one succeeded, e.g. across a permission
//! change between the two, is the one case that can leave the first file replaced.)
//! SIGINT, SIGTERM, SIGHUP and SIGQUIT are held pending in the calling thread during the
//! renames (a handler that exits then runs after the last one), not during the writes.
//! Device, FIFO and socket targets are written in place after the temporaries and
//! before the renames (see the file comment).
//! @throws bgtq::error(invalid_argument) for an empty path or two outputs naming the
//!         same file (the second rename would silently replace the first), io_error if
//!         a target is a directory, all before anything is written; io_error naming the
//!         file; rethrows whatever a writer throws.
inline void atomic_write_files(const std::vector<output_file>& files) {
  namespace fs = std::filesystem;
  std::vector<detail::output_target> targets;
  for (std::size_t i = 0; i < files.size(); ++i) {
    if (files[i].path.empty()) fail(errc::invalid_argument, "an output path is empty");
    for (std::size_t j = 0; j < i; ++j)
      if (detail::same_target(files[i].path, files[j].path))
        fail(errc::invalid_argument, "two outputs name the same file: '" + files[j].path + "' and '" + files[i].path + "'");
    std::error_code ec;
    if (fs::is_directory(files[i].path, ec)) fail(errc::io_error, "cannot replace '" + files[i].path + "': it is a directory");
    targets.push_back(detail::resolve_output(files[i].path));
  }
  // messages name the output as the user gave it: the temporary is gone when they read
  // them (a note says that the file, if any, is unchanged)
  const auto write_to = [](const output_file& f, const fs::path& to, bool temporary) {
    const std::string note = temporary ? " ('" + f.path + "' is unchanged; its temporary '" + to.string() + "' was removed)" : "";
    std::ofstream os(to, f.binary ? (std::ios::binary | std::ios::trunc) : std::ios::trunc);
    if (!os) fail(errc::io_error, "cannot create '" + f.path + "' (does the directory exist and is it writable?)" + note);
    f.write(os);
    os.flush();
    if (!os) fail(errc::io_error, "write to '" + f.path + "' failed (disk full?)" + note);
  };
  std::vector<fs::path> tmps(files.size());
  std::vector<std::unique_ptr<detail::pending_temporary>> pending(files.size());  // released on return
  try {
    for (std::size_t i = 0; i < files.size(); ++i)
      if (!targets[i].in_place) {
        tmps[i] = detail::temp_path_for(targets[i].path);
        pending[i] = std::make_unique<detail::pending_temporary>(tmps[i]);
        write_to(files[i], tmps[i], true);
      }
    for (std::size_t i = 0; i < files.size(); ++i)
      if (targets[i].in_place) write_to(files[i], targets[i].path, false);
    // the renames run with the terminating signals held: one arriving now takes effect
    // after the last of them (all targets new), not between two (some new, some old)
    const detail::termination_signals_held held;
    for (std::size_t i = 0; i < files.size(); ++i) {
      if (targets[i].in_place) continue;
      std::error_code ec;
      fs::rename(tmps[i], targets[i].path, ec);
      if (ec) fail(errc::io_error, "cannot rename '" + tmps[i].string() + "' to '" + files[i].path + "': " + ec.message());
      tmps[i].clear();
    }
  } catch (...) {
    for (const fs::path& t : tmps) {
      std::error_code ec;
      if (!t.empty()) fs::remove(t, ec);
    }
    throw;
  }
}

//! Calls `write(stream)` on a temporary file and renames it to `path` on success.
//! @throws bgtq::error(io_error) if the file cannot be created, written or renamed;
//!         rethrows whatever `write` throws. In every failing case `path` is untouched.
inline void atomic_write_file(const std::string& path, const std::function<void(std::ostream&)>& write,
                              bool binary = true) {
  atomic_write_files({output_file{path, write, binary}});
}

//! Checks, before any long computation, that `path` can be written later: it is not
//! empty, its directory exists and accepts a new file (a probe file is created and
//! removed there), and `path` is not a directory. An existing device, FIFO or socket
//! passes (it is written in place, see the file comment). `what` names the option in
//! the message ("-o").
//! @throws bgtq::error(invalid_argument) for an empty path, (io_error) naming the
//!         option, the path and the cause.
inline void check_output_path(const std::string& path, const std::string& what) {
  namespace fs = std::filesystem;
  if (path.empty()) fail(errc::invalid_argument, what + ": the output path is empty");
  const detail::output_target t = detail::resolve_output(path);
  if (t.in_place) return;
  const fs::path& target = t.path;
  const fs::path dir = target.has_parent_path() ? target.parent_path() : fs::path(".");
  std::error_code ec;
  if (!fs::is_directory(dir, ec))
    fail(errc::io_error, what + " '" + path + "': " +
                             (fs::exists(dir, ec) ? "'" + dir.string() + "' is not a directory"
                                                  : "the directory '" + dir.string() + "' does not exist"));
  if (fs::is_directory(target, ec)) fail(errc::io_error, what + " '" + path + "' is a directory");
  const fs::path probe = detail::temp_path_for(target);
  const detail::pending_temporary pending(probe);
  {
    std::ofstream os(probe, std::ios::binary | std::ios::trunc);
    if (!os) fail(errc::io_error, what + " '" + path + "': cannot create a file in '" + dir.string() + "'");
  }
  fs::remove(probe, ec);
}

//! check_output_path for an output directory that may not exist yet (it is created when
//! the results are written): `dir` is a directory, or its nearest existing ancestor is
//! one, so that creating it later can work. Creates nothing.
//! @throws bgtq::error(io_error) naming the option, the path and the blocking file.
inline void check_output_dir(const std::string& dir, const std::string& what) {
  namespace fs = std::filesystem;
  std::error_code ec;
  fs::path p = fs::absolute(fs::path(dir), ec);
  if (ec) fail(errc::io_error, what + " '" + dir + "': " + ec.message());
  for (;;) {
    const fs::file_status st = fs::status(p, ec);
    if (fs::exists(st)) {
      if (!fs::is_directory(st))
        fail(errc::io_error, what + " '" + dir + "': '" + p.string() + "' exists and is not a directory");
      return;
    }
    if (!p.has_parent_path() || p.parent_path() == p) return;  // nothing of the path exists: created later
    p = p.parent_path();
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

//! Whether `path` can only be read as a stream, from start to end: a pipe or FIFO
//! (`/dev/stdin` fed by a pipe, a process substitution such as `<(zcat q.npy.gz)`) or a
//! character device, which has no size to ask for. Block devices, sockets and the
//! like are not (they fail as before, when their size is asked for).
inline bool is_stream(const std::string& path) {
  namespace fs = std::filesystem;
  std::error_code ec;
  const fs::file_status st = fs::status(path, ec);
  return !ec && (fs::is_fifo(st) || fs::is_character_file(st));
}

//! A stream opened for reading (is_stream), read in stages: the readers take what a
//! header says they need, then a byte more to see whether anything trails, so that a
//! device that never ends (/dev/zero) fails on its first bytes, not when memory runs out.
class stream_reader {
 public:
  //! @throws bgtq::error(io_error) if `path` cannot be opened.
  explicit stream_reader(const std::string& path) : path_(path), in_(path, std::ios::binary) {
    if (!in_) fail(errc::io_error, "cannot open '" + path + "': " + std::generic_category().message(errno));
  }
  //! Reads until `bytes()` holds `n` bytes or the stream ends; returns whether it holds `n`.
  //! @throws bgtq::error(io_error) if a read fails.
  bool fill_to(std::size_t n) {
    while (bytes_.size() < n && !ended_) {
      const std::size_t at = bytes_.size();
      const std::size_t step = std::min<std::size_t>(n - at, std::size_t{1} << 20);
      bytes_.resize(at + step);
      in_.read(reinterpret_cast<char*>(bytes_.data() + at), static_cast<std::streamsize>(step));
      const auto got = static_cast<std::size_t>(in_.gcount());
      bytes_.resize(at + got);
      if (in_.bad()) fail(errc::io_error, "read from '" + path_ + "' failed");
      ended_ = got < step;
    }
    return bytes_.size() >= n;
  }
  const std::vector<unsigned char>& bytes() const { return bytes_; }

 private:
  std::string path_;
  std::ifstream in_;
  std::vector<unsigned char> bytes_;
  bool ended_ = false;
};

}  // namespace detail

}  // namespace bgtq
