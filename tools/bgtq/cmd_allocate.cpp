// bgtq allocate: bit widths for one set of block scores (Theorem 1 greedy by default).
//   bgtq allocate --scores FILE --avg-bits X [--b-min M] [--b-max M]
//                 [--distortion rate4|codebook] [--codebook-dim N]
//                 [--allocator greedy|dp|uniform] [--json]
// FILE: whitespace-separated numbers in text ('#' starts a comment), or a 1-D .npy
// (float32 or float16, e.g. np.save of one head's scores).
// Output: the widths, J = sum_i s_i D(b_i) and the total; warnings go to stderr.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <iostream>
#include <sstream>
#include <string>
#include <vector>

#include <bgtq/allocate/allocate.hpp>
#include <bgtq/codebook/codebook.hpp>
#include <bgtq/core/error.hpp>
#include <bgtq/io/json.hpp>
#include <bgtq/io/npy.hpp>

#include "cli.hpp"

namespace {
namespace cmd_allocate {  // cli.hpp: the CLI is one translation unit

bool ends_with(const std::string& s, const std::string& suffix) {
  return s.size() >= suffix.size() && s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

// A token as the error messages show it: control and non-ASCII bytes as \xNN (a NUL
// would end the printed line there).
std::string printable(const std::string& tok) {
  return bgtq::detail::printable_bytes(reinterpret_cast<const unsigned char*>(tok.data()), tok.size());
}

// Scores from a text file: numbers separated by whitespace, '#' to end of line is a
// comment. Errors name the file, line and token.
std::vector<double> read_scores_text(const std::string& path) {
  std::ifstream in(path);
  if (!in) bgtq::fail(bgtq::errc::io_error, "cannot open score file '" + path + "'");
  std::vector<double> scores;
  std::string line;
  int lineno = 0;
  while (std::getline(in, line)) {
    ++lineno;
    if (auto hash = line.find('#'); hash != std::string::npos) line.erase(hash);
    std::istringstream ls(line);
    std::string tok;
    while (ls >> tok) {
      double v = 0.0;
      const std::string where = path + ":" + std::to_string(lineno) + ": ";
      if (!bgtq::cli::parse_decimal(tok, v))  // the whole token, decimal (a NUL inside it, hex: not a number)
        bgtq::fail(bgtq::errc::format_error, where + "token '" + printable(tok) + "' is not a number");
      if (!std::isfinite(v))  // overflow gives inf; underflow (ERANGE, tiny) is kept
        bgtq::fail(bgtq::errc::non_finite, where + "score " + std::to_string(scores.size()) + " ('" + printable(tok) +
                                               "') is not finite");
      if (v < 0.0)
        bgtq::fail(bgtq::errc::invalid_argument, where + "score " + std::to_string(scores.size()) + " ('" + printable(tok) +
                                                     "') is negative (scores must be >= 0)");
      scores.push_back(v);
    }
  }
  if (in.bad()) bgtq::fail(bgtq::errc::io_error, "error reading score file '" + path + "'");
  if (scores.empty()) bgtq::fail(bgtq::errc::format_error, "score file '" + path + "' contains no numbers");
  return scores;
}

// Scores from a 1-D .npy (float32 or float16): every element finite and >= 0; errors name
// the file, the shape or the element.
std::vector<double> read_scores_npy(const std::string& path) {
  const bgtq::npy_array arr = bgtq::read_npy(path);
  if (arr.shape.size() != 1)
    bgtq::fail(bgtq::errc::shape_mismatch, path + ": scores must be a 1-D array, the file holds shape " +
                                               bgtq::detail::shape_repr(arr.shape));
  if (arr.data.empty()) bgtq::fail(bgtq::errc::format_error, path + ": the array is empty (shape (0,))");
  bgtq::require_finite(arr, path);
  std::vector<double> scores(arr.data.begin(), arr.data.end());
  for (std::size_t i = 0; i < scores.size(); ++i)
    if (scores[i] < 0.0)
      bgtq::fail(bgtq::errc::invalid_argument, path + ": score " + std::to_string(i) + " (" + std::to_string(scores[i]) +
                                                   ") is negative (scores must be >= 0)");
  return scores;
}

std::vector<double> read_scores(const std::string& path) {
  return ends_with(path, ".npy") ? read_scores_npy(path) : read_scores_text(path);
}

int run(bgtq::cli::args& a) {
  const std::string path = a.require("scores");
  const double avg_bits = a.require_double("avg-bits", 0.0, 1e9);
  const int b_min = static_cast<int>(a.get_int("b-min", 1, 0, 8));
  const int b_max = static_cast<int>(a.get_int("b-max", 8, 0, 8));
  const std::string dist = a.get_or("distortion", "rate4");
  const auto dim_opt = a.get("codebook-dim");
  const std::string method = a.get_or("allocator", "greedy");
  const bool json = a.flag("json");
  a.finish();
  if (b_min > b_max)
    throw bgtq::cli::usage_error("--b-min " + std::to_string(b_min) + " exceeds --b-max " + std::to_string(b_max));
  if (dist != "rate4" && dist != "codebook")
    throw bgtq::cli::usage_error("--distortion '" + dist + "' (expected rate4 or codebook)");
  if (dim_opt && dist != "codebook") throw bgtq::cli::usage_error("--codebook-dim needs --distortion codebook");
  if (method != "greedy" && method != "dp" && method != "uniform")
    throw bgtq::cli::usage_error("--allocator '" + method + "' (expected greedy, dp or uniform)");
  // Default: the head dimension of the score list (2 per block), as `bgtq calibrate` and
  // `bgtq eval` use it (plan_distortion), capped at 4096 (docs/theory.md §1).
  long codebook_dim = 0;
  if (dim_opt) {
    codebook_dim = bgtq::cli::parse_int(*dim_opt, "--codebook-dim");
    if (codebook_dim < 2 || codebook_dim > 4096)
      throw bgtq::cli::usage_error("--codebook-dim " + *dim_opt + " is out of range [2, 4096]");
  }

  const std::vector<double> scores = read_scores(path);
  if (scores.size() > (std::size_t{1} << 28))
    bgtq::fail(bgtq::errc::invalid_argument, "'" + path + "' holds " + std::to_string(scores.size()) +
                                                 " scores (at most 2^28 blocks)");
  if (!dim_opt) codebook_dim = static_cast<long>(std::min<std::size_t>(2 * scores.size(), 4096));
  struct bgtq::distortion_table table = bgtq::distortion_table::rate4();
  if (dist == "codebook") {
    table = bgtq::distortion_table::checked(bgtq::codebook_distortion(bgtq::codebook_kind::sphere, codebook_dim));
  }
  bgtq::allocation_request req{.scores = scores,
                               .budget = bgtq::budget_for(avg_bits, static_cast<int>(scores.size())),
                               .b_min = b_min,
                               .b_max = b_max,
                               .distortion = table};
  const bgtq::allocation res = method == "dp"        ? bgtq::dp_allocator::allocate(req)
                               : method == "uniform" ? bgtq::uniform_allocator::allocate(req)
                                                     : bgtq::greedy_allocator::allocate(req);
  if (!res.warning.empty()) std::cerr << "bgtq allocate: warning: " << res.warning << "\n";

  if (json) {
    bgtq::json_writer w(std::cout);
    w.begin_object();
    w.key("bits").array(res.bits);
    w.key("objective").value(res.objective);
    w.key("total_bits").value(res.total_bits);
    w.key("distortion").value(dist);
    if (dist == "codebook") w.key("codebook_dim").value(codebook_dim);
    w.key("capped").value(res.capped);
    if (!res.warning.empty()) w.key("warning").value(res.warning);
    w.key("allocator").value(method);
    w.key("budget").value(req.budget);
    w.key("num_blocks").value(scores.size());
    w.key("avg_bits").value(avg_bits);
    w.key("b_min").value(b_min);
    w.key("b_max").value(b_max);
    w.end_object();
    std::cout << "\n";
  } else {
    std::cout << "bits:";
    for (int b : res.bits) std::cout << ' ' << b;
    char buf[64];
    std::snprintf(buf, sizeof buf, "%.17g", res.objective);
    std::cout << "\nobjective: " << buf << "  (sum_i s_i D(b_i), D = " << dist << ")\n"
              << "total_bits: " << res.total_bits << " of budget " << req.budget << " over " << scores.size()
              << " blocks" << (res.capped ? " (capped)" : "") << "\n";
  }
  return 0;  // main checks that the result reached stdout
}

const bgtq::cli::registrar reg{{"allocate", "bit widths per RoPE block from scores and a budget (Theorem 1)",
                                "--scores FILE --avg-bits X [--b-min M (1)] [--b-max M (8)] "
                                "[--distortion rate4|codebook] [--codebook-dim N (2L)] "
                                "[--allocator greedy|dp|uniform] [--json]\n"
                                "  FILE: numbers separated by whitespace ('#' comments) or a 1-D .npy;\n"
                                "  budget B = floor(avg_bits * L); above L*b_max it is capped (warning);\n"
                                "  --codebook-dim: dimension of the TQ-MSE vector whose measured MSE\n"
                                "  is the law; default 2L (L scores: the head dimension, as calibrate\n"
                                "  and eval use it), at most 4096; 2 = one RoPE block alone",
                                &run,
                                {"json"}}};

}  // namespace cmd_allocate
}  // namespace
