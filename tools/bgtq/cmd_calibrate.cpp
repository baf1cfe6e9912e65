// bgtq calibrate: block energies from Q/K dumps -> bit allocation -> plan file.
#include <bgtq/cache/factory.hpp>
#include <bgtq/codec/block_gtq.hpp>
#include <bgtq/energy/energy.hpp>
#include <bgtq/io/atomic_file.hpp>
#include <bgtq/io/json.hpp>
#include <bgtq/plan/plan_io.hpp>

#include <cstdio>
#include <fstream>
#include <iostream>
#include <map>

#include "activations.hpp"
#include "plan_args.hpp"

namespace {
namespace cmd_calibrate {  // cli.hpp: the CLI is one translation unit

using namespace bgtq;

int run(cli::args& a) {
  const std::string qp = a.require("q"), kp = a.require("k"), out = a.require("o");
  const double avg = a.require_double("avg-bits", 0.0, 8.0);
  const long tokens = a.get_int("tokens", 0, 0, 1L << 30);
  const auto json_out = a.get("json-out");
  const bool json = a.flag("json");
  // parse every option before reading data
  const rope_pairing pairing = cli::pairing_from_args(a);
  const long rotary = a.get_int("rotary-dim", -1, -1, 1 << 20);
  plan_options opt = cli::plan_options_from_args(a, avg);
  a.finish();
  // before the work: a bad path fails now, not after it
  std::vector<cli::named_path> outs{{"-o", out}};
  if (json_out) outs.push_back({"--json-out", *json_out});
  cli::check_outputs(outs, {{"--q", qp}, {"--k", kp}});
  cli::require_feasible_average(avg, opt.b_min, "", "--avg-bits");

  cli::progress("[calibrate] reading " + qp + " and " + kp);
  const auto q = cli::load_activations(qp, "Q");
  const auto k = cli::load_activations(kp, "K");
  cli::check_qkv(q, k, nullptr);
  if (rotary > q.dim || (rotary >= 0 && rotary % 2))
    throw cli::usage_error("--rotary-dim " + std::to_string(rotary) + " must be even and at most head_dim " + std::to_string(q.dim));
  const rope_layout rope(q.dim, pairing, static_cast<int>(rotary));
  const int T = tokens > 0 ? static_cast<int>(std::min<long>(tokens, q.tokens)) : q.tokens;
  if (tokens > q.tokens)
    cli::warn("calibrate", "--tokens " + std::to_string(tokens) + " is more than the dump's " + std::to_string(q.tokens) +
                               " tokens: calibrating on all " + std::to_string(q.tokens) + "\n");
  energy_estimator est(q.layers, q.heads, k.heads, rope);
  for (int l = 0; l < q.layers; ++l) est.add(l, q.layer(l), k.layer(l), static_cast<std::size_t>(T));
  std::string warnings;
  const plan p = build_plan(q.layers, k.heads, q.heads, rope, est.scores(), opt, T, &warnings);
  if (!warnings.empty()) cli::warn("calibrate", warnings);
  // the plan and its JSON twin together: both are written before either replaces its target
  std::vector<output_file> files{plan_output(out, p)};
  if (json_out) files.push_back({*json_out, [&](std::ostream& os) { write_plan_json(os, p); os << "\n"; }, false});
  atomic_write_files(files);

  // summary: width histogram and bytes per token
  // (what the default cache stores: bit-plane pages of 64 tokens, kv_cache::bytes_per_token)
  std::map<int, long> hist;
  double key_bytes = 0, value_bytes = 0;
  for (int l = 0; l < p.layers; ++l)
    for (int h = 0; h < p.kv_heads; ++h) {
      for (int b : p.head(l, h).widths) ++hist[b];
      key_bytes += stored_bytes_per_token(block_gtq_codec::from_plan(p, l, h));
      if (p.value_bits > 0) value_bytes += stored_bytes_per_token(plan_value_codec(p, l, h));
    }
  key_bytes /= static_cast<double>(p.layers * p.kv_heads);
  value_bytes /= static_cast<double>(p.layers * p.kv_heads);
  const long nblocks = static_cast<long>(p.layers) * p.kv_heads * p.num_blocks();
  if (json) {
    json_writer w(std::cout);
    w.begin_object().key("plan").value(out).key("layers").value(p.layers).key("kv_heads").value(p.kv_heads);
    w.key("q_heads").value(p.q_heads).key("head_dim").value(p.rope.head_dim).key("rope").value(to_string(p.rope.pairing));
    w.key("calib_tokens").value(static_cast<long>(T)).key("avg_bits").value(p.avg_bits).key("value_bits").value(p.value_bits);
    w.key("capped").value(!warnings.empty());  // the budget exceeded L * b_max somewhere (the warnings say where)
    w.key("width_histogram").begin_object();
    for (const auto& [b, n] : hist) w.key(std::to_string(b)).value(static_cast<double>(n) / nblocks);
    w.end_object();
    w.key("key_bytes_per_token").value(key_bytes).key("value_bytes_per_token").value(value_bytes);
    w.key("fp16_bytes_per_token").value(4.0 * p.rope.head_dim);
    w.key("compression_vs_fp16").value(4.0 * p.rope.head_dim / (key_bytes + value_bytes)).end_object();
    std::cout << "\n";
  } else {
    std::printf("plan %s: %d layers x %d KV heads, D=%d (%s), calibrated on %d tokens\n", out.c_str(), p.layers, p.kv_heads,
                p.rope.head_dim, to_string(p.rope.pairing), T);
    std::printf("key widths (share of blocks):");
    for (const auto& [b, n] : hist) std::printf("  %d bit: %.1f%%", b, 100.0 * static_cast<double>(n) / nblocks);
    const double stored = key_bytes + value_bytes;
    char ratio[64] = "nothing stored";  // every block dropped, values too (--value-bits 0)
    if (stored > 0) std::snprintf(ratio, sizeof ratio, "%.2fx smaller", 4.0 * p.rope.head_dim / stored);
    std::printf("\nbytes per token per KV head: K %.1f + V %.1f = %.1f (fp16: %d, %s)\n", key_bytes, value_bytes, stored,
                4 * p.rope.head_dim, ratio);
  }
  return 0;
}

cli::registrar reg{{"calibrate", "measure RoPE block energies on Q/K dumps and write a Block-GTQ plan",
                    "--q Q.npy --k K.npy --rope interleaved|half [--rotary-dim R] [--tokens N (0: all)] --avg-bits X -o PLAN "
                    "[--b-min 1] [--b-max 8] [--scope head|layer|model] [--distortion rate4|codebook] [--value-bits B] "
                    "[--seed S] [--norm-correction] [--charge-radii] [--json-out PLAN.json] [--json]",
                    &run, {"json", "norm-correction", "charge-radii"}}};

}  // namespace cmd_calibrate
}  // namespace
