// LD_PRELOAD shim for cli:rename_signal (tests/cli/rename_signal.cmake): the process's
// first successful rename(2) through libc is followed at once by raise(SIGTERM), so the
// signal lands between the first and the second of a multi-output write's renames
// (atomic_write_files), where it used to leave some outputs new and some old.
#include <dlfcn.h>

#include <csignal>

extern "C" int rename(const char* from, const char* to) {
  using rename_fn = int (*)(const char*, const char*);
  static const auto real = reinterpret_cast<rename_fn>(dlsym(RTLD_NEXT, "rename"));
  static bool raised = false;
  const int r = real(from, to);
  if (r == 0 && !raised) {
    raised = true;
    std::raise(SIGTERM);
  }
  return r;
}
