// bgtq synth: writes synthetic post-RoPE Q/K and V activations (include/bgtq/synth/synth.hpp,
// docs/synth.md) as DIR/q.npy [L,T,Hq,D], DIR/k.npy and DIR/v.npy [L,T,Hkv,D], float32.
#include <algorithm>
#include <filesystem>
#include <iostream>
#include <string>
#include <system_error>
#include <vector>

#include <bgtq/core/error.hpp>
#include <bgtq/io/json.hpp>
#include <bgtq/io/npy.hpp>
#include <bgtq/plan/plan.hpp>
#include <bgtq/rope/layout.hpp>
#include <bgtq/synth/synth.hpp>

#include "cli.hpp"
#include "plan_args.hpp"

namespace {
namespace cmd_synth {  // cli.hpp: the CLI is one translation unit

constexpr const char* usage =
    "--layers L --tokens T --q-heads Hq --kv-heads Hkv --dim D --rope interleaved|half [--rotary-dim R]\n"
    "       [--rope-base B] [--seed S] [--spread-min X] [--spread-max Y] [--outliers-min N] [--outliers-max N]\n"
    "       [--qk-coupling RHO] -o DIR [--json] [--quiet]\n"
    "  Writes DIR/q.npy [L,T,Hq,D], DIR/k.npy and DIR/v.npy [L,T,Hkv,D] (float32, post-RoPE Q/K, V without\n"
    "  RoPE) from the generative model of docs/synth.md; same options and seed give identical files.\n"
    "  Output is limited to 4 GiB. --rope-base B in (1, 1e12] (default 10000). Each KV head gets N outlier blocks,\n"
    "  N drawn from --outliers-min..--outliers-max (1..4), capped at D/8 (a quarter of the D/2 blocks: none\n"
    "  at D < 8; given values above the cap warn). --json prints the shapes and the drawn per-head spreads to stdout.";

int run(bgtq::cli::args& a) {
  bgtq::synth_config c;
  // layers, heads and dim within what plans (calibrate, eval) accept (plan/plan.hpp)
  c.layers = static_cast<int>(a.require_int("layers", 1, bgtq::max_plan_layers));
  c.tokens = static_cast<int>(a.require_int("tokens", 1, 1L << 30));
  c.q_heads = static_cast<int>(a.require_int("q-heads", 1, bgtq::max_plan_q_heads));
  c.kv_heads = static_cast<int>(a.require_int("kv-heads", 1, bgtq::max_plan_kv_heads));
  const int dim = static_cast<int>(a.require_int("dim", 2, 1024));
  const bgtq::rope_pairing pairing = bgtq::cli::pairing_from_args(a);  // "--rope: ..." as eval and calibrate say
  int rotary = static_cast<int>(a.get_int("rotary-dim", -1, -1, 1 << 16));  // default: all of D
  // RoPE needs base > 1 (frequencies falling with the block): the range is open at 1
  const double base = a.get_double("rope-base", 10000.0, -1e300, 1e12);
  if (base <= 1.0)
    throw bgtq::cli::usage_error("--rope-base " + a.get_or("rope-base", "") + " is out of range (1, 1e+12]: RoPE needs a base > 1");
  const std::string seed_text = a.get_or("seed", "1");
  c.spread_min = a.get_double("spread-min", c.spread_min, 1.0, 1e12);
  c.spread_max = a.get_double("spread-max", c.spread_max, 1.0, 1e12);
  const bool outliers_given = a.get("outliers-min").has_value() || a.get("outliers-max").has_value();
  c.outliers_min = static_cast<int>(a.get_int("outliers-min", c.outliers_min, 0, 100000));
  c.outliers_max = static_cast<int>(a.get_int("outliers-max", c.outliers_max, 0, 100000));
  c.qk_coupling = a.get_double("qk-coupling", c.qk_coupling, 0.0, 1.0);
  const std::string dir = a.require("o");
  const bool json = a.flag("json");
  a.finish();
  if (dir.empty()) throw bgtq::cli::usage_error("-o: the output directory is empty");

  c.seed = bgtq::cli::parse_uint64(seed_text, "--seed");  // decimal or 0x hex ("010" is ten)
  // size and geometry problems are usage errors (exit 2), reported with the library's message
  try {
    if (dim % 2 != 0) throw bgtq::cli::usage_error("--dim must be even, got " + std::to_string(dim));
    if (rotary < 0) rotary = dim;
    if (rotary > dim || rotary % 2 != 0)
      throw bgtq::cli::usage_error("--rotary-dim must be even and <= --dim " + std::to_string(dim) + ", got " +
                                   std::to_string(rotary));
    c.rope = bgtq::rope_layout(dim, pairing, rotary, base);
    c.validate();
  } catch (const bgtq::error& e) {
    throw bgtq::cli::usage_error(e.what());
  }

  namespace fs = std::filesystem;
  // before the work: q.npy, k.npy and v.npy naming one file (symlinks), a directory in the
  // way of one of them, a link into a missing directory, an unwritable parent
  bgtq::cli::check_output_dir_files(dir, "-o", {"q.npy", "k.npy", "v.npy"}, {});
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec || !fs::is_directory(dir))
    bgtq::fail(bgtq::errc::io_error, "cannot create output directory '" + dir + "'" + (ec ? ": " + ec.message() : ""));

  // outlier blocks are capped at a quarter of the D/2 blocks (synth.hpp): say so where the
  // options ask for more (the defaults, 1..4, are capped silently at D < 32)
  const int outlier_cap = c.rope.num_blocks() / 4;
  if (outliers_given && c.outliers_max > outlier_cap)
    bgtq::cli::warn("synth", "--outliers-min/--outliers-max " + std::to_string(c.outliers_min) + ".." +
                                 std::to_string(c.outliers_max) + ": at most " + std::to_string(outlier_cap) +
                                 " outlier block(s) per KV head at --dim " + std::to_string(dim) +
                                 " (D/8, a quarter of the blocks); larger draws are capped");
  bgtq::cli::progress("[synth] generating " + std::to_string(c.layers) + " layers x " + std::to_string(c.tokens) +
                      " tokens, " + std::to_string(c.q_heads) + "/" + std::to_string(c.kv_heads) + " heads, D=" +
                      std::to_string(dim) + " (" + bgtq::to_string(c.rope.pairing) + "), seed " + std::to_string(c.seed));
  const bgtq::synth_data s = bgtq::generate_synth(c);
  const auto L = static_cast<std::size_t>(c.layers), T = static_cast<std::size_t>(c.tokens), D = static_cast<std::size_t>(dim);
  const std::vector<std::size_t> q_shape{L, T, static_cast<std::size_t>(c.q_heads), D};
  const std::vector<std::size_t> kv_shape{L, T, static_cast<std::size_t>(c.kv_heads), D};
  const std::string qp = (fs::path(dir) / "q.npy").string(), kp = (fs::path(dir) / "k.npy").string(),
                    vp = (fs::path(dir) / "v.npy").string();
  // all three or none (a failure on v.npy leaves no new q.npy / k.npy behind)
  bgtq::atomic_write_files({bgtq::npy_output(qp, s.q.data(), q_shape), bgtq::npy_output(kp, s.k.data(), kv_shape),
                            bgtq::npy_output(vp, s.v.data(), kv_shape)});
  bgtq::cli::progress("[synth] wrote " + qp + ", " + kp + ", " + vp);

  if (json) {
    // per-head spread (max/min expected block score)
    const int nb = c.rope.num_blocks();
    std::vector<double> spreads;
    for (std::size_t h = 0; h * nb < s.expected_scores.size(); ++h) {
      const auto b = s.expected_scores.begin() + static_cast<std::ptrdiff_t>(h * nb);
      const auto [mn, mx] = std::minmax_element(b, b + nb);
      spreads.push_back(*mx / *mn);
    }
    std::vector<double> sorted = spreads;
    std::sort(sorted.begin(), sorted.end());
    bgtq::json_writer w(std::cout);
    w.begin_object();
    w.key("q").value(qp).key("k").value(kp).key("v").value(vp);
    w.key("q_shape").array(q_shape).key("kv_shape").array(kv_shape);
    w.key("dtype").value("float32");
    w.key("rope").value(bgtq::to_string(c.rope.pairing)).key("rotary_dim").value(c.rope.rotary_dim);
    w.key("rope_base").value(c.rope.base);
    w.key("seed").value(static_cast<std::uint64_t>(c.seed));
    w.key("bytes").value(static_cast<std::uint64_t>(4.0 * c.total_values()));
    w.key("spread").begin_object();
    w.key("min").value(sorted.front()).key("median").value(sorted[sorted.size() / 2]).key("max").value(sorted.back());
    w.end_object();
    w.key("head_spreads").array(spreads);
    w.end_object();
    std::cout << "\n";
  }
  return 0;
}

bgtq::cli::registrar reg{{"synth", "write synthetic post-RoPE Q/K/V activations (.npy) from a seeded model", usage, &run,
                          {"json"}}};

}  // namespace cmd_synth
}  // namespace
