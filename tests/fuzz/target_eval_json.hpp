#pragma once
//! @file tests/fuzz/target_eval_json.hpp
//! Fuzz target: the reader behind `bgtq plot eval` (bgtq::plot::parse_json, then
//! parse_eval_results for each metric). Bytes are JSON text from any source (a results
//! file a user edited, truncated or produced elsewhere): anything but a bgtq::error is a
//! bug, and so is undefined behaviour (huge numbers cast to int: the sanitizer builds
//! catch it). A table that parses must render to a complete SVG document.

#include <bgtq/plot/figures.hpp>
#include <bgtq/plot/json_read.hpp>

#include <string>
#include <string_view>

#include "fuzz_util.hpp"

namespace bgtq_fuzz {

//! Number of metrics for which the input parsed into a table and rendered (for the seed
//! test: a valid seed must reach the figure).
inline int eval_json_rendered(const std::uint8_t* data, std::size_t size) {
  bgtq::plot::json_value doc;
  try {
    doc = bgtq::plot::parse_json(std::string_view(reinterpret_cast<const char*>(data), size), "fuzz.json");
  } catch (const bgtq::error&) {
    return 0;
  }
  int rendered = 0;
  for (const char* metric : {"logit_mae", "kl", "top10", "out_rel_l2"}) {
    bgtq::plot::eval_table t;
    try {
      t = bgtq::plot::parse_eval_results(doc, "fuzz.json", metric);
    } catch (const bgtq::error&) {
      continue;
    }
    BGTQ_FUZZ_CHECK("eval_json", !t.methods.empty() && t.value.size() == t.methods.size());
    const std::string svg = bgtq::plot::eval_figure(t);
    BGTQ_FUZZ_CHECK("eval_json", svg.rfind("<?xml", 0) == 0 && svg.find("<svg") != std::string::npos &&
                                     svg.find("</svg>") != std::string::npos);
    ++rendered;
  }
  return rendered;
}

inline int eval_json_one(const std::uint8_t* data, std::size_t size) {
  (void)eval_json_rendered(data, size);
  return 0;
}

}  // namespace bgtq_fuzz
