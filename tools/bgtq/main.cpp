// bgtq: calibrate, evaluate and benchmark Block-GTQ KV-cache quantization.
// Exit codes: 0 success, 1 error in data or computation, 2 bad usage; killed by SIGINT,
// SIGTERM or SIGHUP, the signal's own status after removing any output temporary.
#include <algorithm>
#include <csignal>
#include <cstdio>
#include <cstring>
#include <exception>
#include <iostream>
#include <new>
#include <string>
#include <vector>

#include <bgtq/core/error.hpp>
#include <bgtq/io/atomic_file.hpp>

#include "cli.hpp"

namespace {

// Ctrl-C, kill or a closed terminal while an output is being written: remove its
// temporary (docs/errors.md: no *.tmp.* is left behind), then die of the same signal.
extern "C" void on_terminating_signal(int sig) {
  bgtq::remove_pending_temporaries();
  std::signal(sig, SIG_DFL);
  std::raise(sig);
}

void install_signal_handlers() {
  for (int sig : {SIGINT, SIGTERM, SIGHUP}) {
    struct sigaction old {};
    if (sigaction(sig, nullptr, &old) == 0 && old.sa_handler == SIG_IGN) continue;  // e.g. nohup: stay ignored
    struct sigaction sa {};
    sa.sa_handler = on_terminating_signal;
    sigemptyset(&sa.sa_mask);
    sigaction(sig, &sa, nullptr);
  }
  // a closed pipe on stdout is a write error the command reports (exit 1, docs/errors.md),
  // not a silent death by SIGPIPE
  std::signal(SIGPIPE, SIG_IGN);
}

//! Whether argv[i] asks for the command's help: --help anywhere, -h unless it is the
//! value of the option before it ("--title -h").
bool asks_for_help(char** argv, int i, const std::vector<std::string>& flags) {
  if (!std::strcmp(argv[i], "--help")) return true;
  if (std::strcmp(argv[i], "-h") != 0) return false;
  return i <= 2 || !bgtq::cli::takes_next_as_value(argv[i - 1], flags);
}
void print_help() {
  auto& cmds = bgtq::cli::registry();
  std::sort(cmds.begin(), cmds.end(), [](const auto& a, const auto& b) { return std::strcmp(a.name, b.name) < 0; });
  std::printf("usage: bgtq <command> [options]   (bgtq <command> --help for its options)\n\ncommands:\n");
  for (const auto& c : cmds) std::printf("  %-12s %s\n", c.name, c.summary);
}
}  // namespace

int main(int argc, char** argv) {
  if (argc < 2 || !std::strcmp(argv[1], "--help") || !std::strcmp(argv[1], "-h") || !std::strcmp(argv[1], "help")) {
    print_help();
    return argc < 2 ? 2 : 0;
  }
  const std::string name = argv[1];
  for (const auto& c : bgtq::cli::registry()) {
    if (name != c.name) continue;
    for (int i = 2; i < argc; ++i) {
      if (asks_for_help(argv, i, c.flags)) {
        std::printf("usage: bgtq %s %s\n\n%s\n(every command also takes --quiet: no progress lines on stderr)\n", c.name,
                    c.usage, c.summary);
        return 0;
      }
    }
    install_signal_handlers();
    try {
      bgtq::cli::args a(argc, argv, 2, c.flags);
      const int rc = c.run(a);
      // results printed to stdout (tables, --json) count as output: a full disk or a closed
      // pipe must not exit 0 with a truncated result
      std::cout.flush();
      if (std::fflush(stdout) != 0 || std::ferror(stdout) || !std::cout)
        bgtq::fail(bgtq::errc::io_error, "writing the result to standard output failed");
      return rc;
    } catch (const bgtq::cli::usage_error& e) {
      std::fprintf(stderr, "bgtq %s: %s\nusage: bgtq %s %s\n", c.name, e.what(), c.name, c.usage);
      return 2;
    } catch (const bgtq::error& e) {
      std::fprintf(stderr, "bgtq %s: error (%s): %s\n", c.name, bgtq::to_string(e.code()), e.what());
      return 1;
    } catch (const std::bad_alloc&) {
      // what no check foresaw (docs/errors.md: never a bare std::bad_alloc)
      std::fprintf(stderr, "bgtq %s: error (%s): out of memory: an allocation failed (std::bad_alloc)\n", c.name,
                   bgtq::to_string(bgtq::errc::capacity_exhausted));
      return 1;
    } catch (const std::exception& e) {
      std::fprintf(stderr, "bgtq %s: error: %s\n", c.name, e.what());
      return 1;
    }
  }
  std::fprintf(stderr, "bgtq: unknown command '%s'\n", name.c_str());
  print_help();
  return 2;
}
