// bgtq: calibrate, evaluate and benchmark Block-GTQ KV-cache quantization.
// Exit codes: 0 success, 1 error in data or computation, 2 bad usage.
#include <algorithm>
#include <cstdio>
#include <cstring>
#include <exception>
#include <iostream>
#include <string>

#include <bgtq/core/error.hpp>

#include "cli.hpp"

namespace {
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
      if (!std::strcmp(argv[i], "--help") || !std::strcmp(argv[i], "-h")) {
        std::printf("usage: bgtq %s %s\n\n%s\n(every command also takes --quiet: no progress lines on stderr)\n", c.name,
                    c.usage, c.summary);
        return 0;
      }
    }
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
    } catch (const std::exception& e) {
      std::fprintf(stderr, "bgtq %s: error: %s\n", c.name, e.what());
      return 1;
    }
  }
  std::fprintf(stderr, "bgtq: unknown command '%s'\n", name.c_str());
  print_help();
  return 2;
}
