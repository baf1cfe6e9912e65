// A downstream program that only sees the installed headers and package config.
#include <bgtq/bgtq.hpp>

#include <cstdio>

int main() {
  const float x = 1.5f;
  const bgtq::half h(x);
  if (static_cast<float>(h) != x) return 1;
  std::printf("blockgtq %d.%d.%d (%s)\n", BGTQ_VERSION_MAJOR, BGTQ_VERSION_MINOR, BGTQ_VERSION_PATCH, bgtq::simd_path());
  return 0;
}
