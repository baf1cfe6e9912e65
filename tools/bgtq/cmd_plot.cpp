// bgtq plot energy|fingerprint|eval: self-contained SVG figures of plans and eval results.
#include <bgtq/io/atomic_file.hpp>
#include <bgtq/io/json.hpp>
#include <bgtq/plan/plan_io.hpp>
#include <bgtq/plot/figures.hpp>

#include <iostream>
#include <string>

#include "cli.hpp"

namespace {
namespace cmd_plot {  // cli.hpp: the CLI is one translation unit

using namespace bgtq;

constexpr const char* usage_text =
    "energy|fingerprint|eval -o OUT.svg [--title T] [--json]\n"
    "  energy       --plan PLAN --layer L --head H   per-block energy (log axis) and allocated key widths\n"
    "                                                of one (layer, KV head)\n"
    "  fingerprint  --plan PLAN                      per layer, the share of key blocks at each width\n"
    "  eval         --results R.json [--metric logit_mae|kl|top10|out_rel_l2|bytes_per_token]\n"
    "                                                a metric per layer and method (R.json: bgtq eval -o)\n"
    "  The SVG is written atomically. --json prints {\"plot\":KIND,\"output\":OUT,\"bytes\":N} on stdout.";

void write_svg(const std::string& out, const std::string& svg, const std::string& kind, bool json) {
  atomic_write_file(out, [&](std::ostream& os) { os << svg; }, false);
  if (json) {
    json_writer w(std::cout);
    w.begin_object().key("plot").value(kind).key("output").value(out).key("bytes").value(svg.size()).end_object();
    std::cout << "\n";
  } else {
    cli::progress("wrote " + out + " (" + std::to_string(svg.size()) + " bytes)");
  }
}

int plot_energy(cli::args& a) {
  const std::string plan_path = a.require("plan"), out = a.require("o");
  // any integer parses; the plan decides what is in range (exit 1 with the valid range)
  const long layer = a.require_int("layer", -(1L << 30), 1L << 30);
  const long head = a.require_int("head", -(1L << 30), 1L << 30);
  const std::string title = a.get_or("title", "");
  const bool json = a.flag("json");
  a.finish();
  cli::check_outputs({{"-o", out}}, {{"--plan", plan_path}});
  const plan p = load_plan(plan_path);
  write_svg(out, plot::energy_figure(p, static_cast<int>(layer), static_cast<int>(head), title), "energy", json);
  return 0;
}

int plot_fingerprint(cli::args& a) {
  const std::string plan_path = a.require("plan"), out = a.require("o");
  const std::string title = a.get_or("title", "");
  const bool json = a.flag("json");
  a.finish();
  cli::check_outputs({{"-o", out}}, {{"--plan", plan_path}});
  const plan p = load_plan(plan_path);
  write_svg(out, plot::fingerprint_figure(p, title), "fingerprint", json);
  return 0;
}

int plot_eval(cli::args& a) {
  const std::string results = a.require("results"), out = a.require("o");
  const std::string metric = a.get_or("metric", "logit_mae");
  const std::string title = a.get_or("title", "");
  const bool json = a.flag("json");
  a.finish();
  cli::check_outputs({{"-o", out}}, {{"--results", results}});
  const auto& ms = plot::eval_metrics();
  if (std::find(ms.begin(), ms.end(), metric) == ms.end())
    throw cli::usage_error("--metric '" + metric + "' is not one of logit_mae, kl, top10, out_rel_l2, bytes_per_token");
  const plot::eval_table t = plot::parse_eval_results(plot::read_json_file(results), results, metric);
  write_svg(out, plot::eval_figure(t, title), "eval", json);
  return 0;
}

int run(cli::args& a) {
  const auto& pos = a.positional();
  if (pos.empty()) throw cli::usage_error("which plot? energy, fingerprint or eval");
  const std::string what = pos.front();
  if (pos.size() > 1) throw cli::usage_error("unexpected argument '" + pos[1] + "'");
  cli::args rest = a;
  rest.drop_positional();
  if (what == "energy") return plot_energy(rest);
  if (what == "fingerprint") return plot_fingerprint(rest);
  if (what == "eval") return plot_eval(rest);
  throw cli::usage_error("unknown plot '" + what + "' (expected energy, fingerprint or eval)");
}

cli::registrar reg{{"plot", "SVG figures: block energies and widths, width fingerprint per layer, eval metrics per layer",
                    usage_text, &run, {"json"}}};

}  // namespace cmd_plot
}  // namespace
