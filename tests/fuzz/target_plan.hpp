#pragma once
//! @file tests/fuzz/target_plan.hpp
//! Fuzz target: the plan loader (bgtq::deserialize_plan). Each input is tried twice:
//! as is, and with its payload length and CRC-32C trailer repaired, so that mutations
//! reach the field parser behind the checksum instead of stopping at it. A plan that
//! loads must serialize back to the bytes it was read from (the loader and the writer
//! are exact inverses), export to JSON, and build its codec states when it is small.

#include <bgtq/cache/factory.hpp>
#include <bgtq/io/checksum.hpp>
#include <bgtq/plan/plan_io.hpp>

#include <sstream>
#include <vector>

#include "fuzz_util.hpp"

namespace bgtq_fuzz {

inline void plan_check_one(const std::uint8_t* data, std::size_t size) {
  bgtq::plan p;
  try {
    p = bgtq::deserialize_plan(data, size, "fuzz.plan");
  } catch (const bgtq::error&) {
    return;
  }
  const std::vector<unsigned char> again = bgtq::serialize_plan(p);
  BGTQ_FUZZ_CHECK("plan", again.size() == size && std::memcmp(again.data(), data, size) == 0);
  std::ostringstream js;
  bgtq::write_plan_json(js, p);
  BGTQ_FUZZ_CHECK("plan", !js.str().empty());
  // a plan that validates must also build its codecs (small plans only: construction cost)
  if (p.heads.size() <= 8 && p.rope.head_dim <= 64) {
    try {
      const auto keys = bgtq::plan_key_states(p);
      const auto values = bgtq::plan_value_states(p);
      BGTQ_FUZZ_CHECK("plan", keys.size() == p.heads.size() && values.size() == p.heads.size());
    } catch (const bgtq::error& e) {
      std::fprintf(stderr, "plan target: a loaded plan does not build its codecs: %s\n", e.what());
      invariant_failed("plan", "deserialize_plan accepted a plan whose codecs cannot be built");
    }
  }
}

inline int plan_one(const std::uint8_t* data, std::size_t size) {
  plan_check_one(data, size);
  if (size >= 28) {
    std::vector<std::uint8_t> fixed(data, data + size);
    const std::uint64_t payload = size - 28;
    for (int b = 0; b < 8; ++b) fixed[16 + static_cast<std::size_t>(b)] = static_cast<std::uint8_t>(payload >> (8 * b));
    const std::uint32_t crc = bgtq::crc32c(fixed.data(), size - 4);
    for (int b = 0; b < 4; ++b) fixed[size - 4 + static_cast<std::size_t>(b)] = static_cast<std::uint8_t>(crc >> (8 * b));
    plan_check_one(fixed.data(), fixed.size());
  }
  return 0;
}

}  // namespace bgtq_fuzz
