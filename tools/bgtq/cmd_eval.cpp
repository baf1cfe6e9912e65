// bgtq eval: Block-GTQ against uniform TQ-MSE, KIVI and fp16 on Q/K(/V) dumps, layer by
// layer: RoPE-logit MAE, softmax KL, top-10 overlap, attention-output error, bytes.
#include <bgtq/cache/factory.hpp>
#include <bgtq/cache/kivi_pages.hpp>
#include <bgtq/codec/kivi.hpp>
#include <bgtq/energy/energy.hpp>
#include <bgtq/eval/metrics.hpp>
#include <bgtq/eval/summary.hpp>
#include <bgtq/io/atomic_file.hpp>
#include <bgtq/io/json.hpp>
#include <bgtq/plan/plan_io.hpp>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <iostream>
#include <iomanip>
#include <map>
#include <numeric>
#include <optional>
#include <sstream>
#include <thread>

#include "activations.hpp"
#include "plan_args.hpp"
#include "roundtrip.hpp"

namespace {
namespace cmd_eval {  // cli.hpp: the CLI is one translation unit

using namespace bgtq;

// The machine's hardware threads (the metrics do not depend on the count).
long default_threads() {
  const unsigned n = std::thread::hardware_concurrency();
  return n == 0 ? 1 : std::min<long>(n, 64);
}

struct method_spec {
  std::string method;  // fp16 | tq | bgtq | kivi | kivi-sym | plan (--plan's file)
  int bits = 16;
  std::string key() const { return method == "fp16" || method == "plan" ? method : method + "@" + std::to_string(bits); }
};

int run(cli::args& a) {
  const std::string qp = a.require("q"), kp = a.require("k");
  const auto vp = a.get("v");
  const rope_pairing pairing = cli::pairing_from_args(a);
  const long rotary = a.get_int("rotary-dim", -1, -1, 1 << 20);
  const long calib = a.get_int("calib-tokens", 0, 0, 1L << 30);
  const bool eval_all = a.flag("eval-all");
  const long eval_queries = a.get_int("eval-queries", 0, 0, 1L << 30);
  const long threads = a.get_int("threads", default_threads(), 1, 1024);
  // the cache's fp16 window (cache_config::sink, recent): held unquantized by every method
  const long sink = a.get_int("sink", 0, 0, 1L << 30), recent = a.get_int("recent", 0, 0, 1L << 30);
  const bool json = a.flag("json");
  const auto out_path = a.get("o");
  const auto plan_path = a.get("plan");  // a plan file (bgtq calibrate -o), evaluated as method "plan"
  std::vector<int> bits;  // in the order given, repeats dropped (each method@bits is one result)
  for (const auto& s : a.get_list("bits", "2,3,4")) {
    const long b = cli::parse_int(s, "--bits");
    if (b < 1 || b > 8) throw cli::usage_error("--bits entries must be in 1..8, got " + s);
    if (std::find(bits.begin(), bits.end(), static_cast<int>(b)) == bits.end()) bits.push_back(static_cast<int>(b));
  }
  std::vector<method_spec> methods;
  std::vector<std::string> seen;
  for (const auto& m : a.get_list("methods", "fp16,tq,bgtq,kivi")) {
    if (m != "fp16" && m != "tq" && m != "bgtq" && m != "kivi" && m != "kivi-sym" && m != "plan")
      throw cli::usage_error("unknown method '" + m + "' (expected fp16, tq, bgtq, kivi, kivi-sym, or plan with --plan)");
    if (m == "plan" && !plan_path)
      throw cli::usage_error("--methods plan needs --plan PLAN (a plan file written by bgtq calibrate)");
    if (std::find(seen.begin(), seen.end(), m) != seen.end()) continue;
    seen.push_back(m);
    if (m == "fp16" || m == "plan") {
      methods.push_back({m, 16});
    } else {
      for (int b : bits) methods.push_back({m, b});
    }
  }
  if (plan_path && std::find(seen.begin(), seen.end(), "plan") == seen.end()) {  // --plan alone: last
    seen.push_back("plan");
    methods.push_back({"plan", 16});
  }
  plan_options base = cli::plan_options_from_args(a, 3.0);
  if (base.value_bits >= 0)  // eval compares every method at equal K and V widths
    throw cli::usage_error("--value-bits is a calibrate option; eval codes keys and values at each --bits width");
  a.finish();
  if (out_path)  // before the work, which can take long
    cli::check_outputs({{"-o", *out_path}},
                       {{"--q", qp}, {"--k", kp}, {"--v", vp.value_or("")}, {"--plan", plan_path.value_or("")}});
  for (const auto& m : methods)  // tq's uniform plan sets b_min to its width: only Block-GTQ's can be infeasible
    if (m.method == "bgtq") cli::require_feasible_average(m.bits, base.b_min, m.key() + ": ", "--bits");
  std::optional<plan> given;  // read (and validated) before the dumps, which can take minutes
  double given_mean_bits = 0;  // its key widths' mean over every block of every head (the budget, avg_bits, may be capped)
  if (plan_path) {
    given = load_plan(*plan_path);  // validated: every head has num_blocks() widths
    for (const head_plan& hp : given->heads) given_mean_bits += std::accumulate(hp.widths.begin(), hp.widths.end(), 0.0);
    given_mean_bits /= static_cast<double>(given->heads.size()) * given->num_blocks();
  }

  cli::progress("[eval] reading activations");
  const auto q = cli::load_activations(qp, "Q");
  const auto k = cli::load_activations(kp, "K");
  std::unique_ptr<cli::activation_file> v;
  if (vp) v = std::make_unique<cli::activation_file>(cli::load_activations(*vp, "V"));
  cli::check_qkv(q, k, v.get());
  if (rotary > q.dim || (rotary >= 0 && rotary % 2))
    throw cli::usage_error("--rotary-dim " + std::to_string(rotary) + " must be even and at most head_dim " + std::to_string(q.dim));
  const rope_layout rope(q.dim, pairing, static_cast<int>(rotary));
  const int T = q.tokens, L = q.layers, Hq = q.heads, Hkv = k.heads, D = q.dim;
  if (given) cli::require_plan_fits(*given, "--plan " + *plan_path, L, Hq, Hkv, rope, "the dumps (with --rope and --rotary-dim) are");
  const int N = calib > 0 ? static_cast<int>(std::min<long>(calib, T)) : std::max(1, T / 2);
  const int t_begin = eval_all ? 0 : N;
  BGTQ_REQUIRE(t_begin < T, errc::invalid_argument,
               "eval: calibration uses all " + std::to_string(T) + " tokens" +
                   (calib >= T ? " (--calib-tokens " + std::to_string(calib) + " is not below the dump's length)" : "") +
                   ", none is left to evaluate (use --eval-all or a smaller --calib-tokens)");
  // A plan records how many tokens it was calibrated on, not which: bgtq calibrate takes
  // the first --tokens of its dumps (all of them by default), so a plan from these dumps
  // that saw more tokens than the split would be measured partly on what it was fitted
  // to. Said once, before the work (--eval-all asks for every query on purpose).
  if (given && !eval_all && given->calib_tokens > t_begin) {
    const long long pc = given->calib_tokens;
    cli::warn("eval", "--plan " + *plan_path + " was calibrated on " + std::to_string(pc) +
                          " tokens and the evaluation starts at token " + std::to_string(t_begin) +
                          ": if the plan came from these dumps (bgtq calibrate takes their first --tokens, all by "
                          "default), the method plan is measured partly on its own calibration tokens; " +
                          (pc < T ? "--calib-tokens " + std::to_string(pc) + " evaluates only the tokens after them"
                                  : "these dumps have no token after them (calibrate with a smaller --tokens)"));
  }

  // calibration on the first N tokens (Block-GTQ's energies; TQ-MSE's plans and --plan's
  // need none)
  std::vector<double> scores;
  const bool calibrates = std::any_of(methods.begin(), methods.end(), [](const method_spec& m) { return m.method == "bgtq"; });
  if (calibrates) {
    energy_estimator est(L, Hq, Hkv, rope);
    for (int l = 0; l < L; ++l) est.add(l, q.layer(l), k.layer(l), static_cast<std::size_t>(N));
    scores = est.scores();
  }
  std::map<std::string, plan> plans;
  if (given) plans.emplace("plan", *given);
  for (const auto& m : methods) {
    if (m.method != "tq" && m.method != "bgtq") continue;  // (--plan's is in already)
    plan_options o = base;
    o.avg_bits = m.bits;
    o.value_bits = m.bits;
    std::string warn;
    try {
      plans.emplace(m.key(), m.method == "tq" ? uniform_plan(L, Hkv, Hq, rope, m.bits, o)
                                              : build_plan(L, Hkv, Hq, rope, scores, o, N, &warn));
    } catch (const error& e) {  // which of the plans (a --bits width below --b-min was refused above)
      fail(e.code(), m.key() + ": " + e.what());
    }
    cli::warn("eval", warn, m.key() + ": ");  // one line per (layer, head), each naming the method
  }

  std::map<std::string, std::vector<method_result>> results;  // method -> its result in each layer
  for (const auto& m : methods) results[m.key()].resize(static_cast<std::size_t>(L));
  const std::size_t nk = static_cast<std::size_t>(T) * Hkv * D;
  std::vector<float> khat(nk), vhat(nk);
  std::vector<float> kheld, vheld;  // the layer's keys and values in fp16: the rows a cache holds unquantized
  // what each method's cache holds in fp16 when a query attends: the window (--sink,
  // --recent) and, for KIVI, the key block still filling (its cache keeps the block's
  // keys and values in the window until the block's 32 tokens are in, as KIVI does: a
  // query never reads keys quantized with the statistics of tokens after it)
  const auto held_by = [&](const method_spec& m) {
    if (m.method == "fp16") return held_window{};  // stored in fp16 already
    const bool kivi = m.method == "kivi" || m.method == "kivi-sym";
    return held_window{static_cast<int>(sink), static_cast<int>(recent), kivi ? kivi_options{}.group_tokens : 1, kheld.data(),
                       v ? vheld.data() : nullptr};
  };
  const layer_shape sh{T, Hq, Hkv, D};
  const std::vector<int> queries = spaced_queries(T, t_begin, static_cast<int>(eval_queries));
  std::unique_ptr<thread_pool> pool;
  if (threads > 1) pool = std::make_unique<thread_pool>(static_cast<int>(threads));
  const auto started = std::chrono::steady_clock::now();
  auto last_line = started;
  std::size_t done = 0;
  // "[eval] layer l/L: WHAT (done/all method-layers done, t s)", at most every 2 s
  const auto say_every_2s = [&](int l, const std::string& what) {
    const auto now = std::chrono::steady_clock::now();
    if (now - last_line < std::chrono::seconds(2)) return;
    std::ostringstream line;
    line << "[eval] layer " << (l + 1) << "/" << L << ": " << what << " (" << done << "/"
         << methods.size() * static_cast<std::size_t>(L) << " method-layers done, "
         << std::chrono::duration_cast<std::chrono::seconds>(now - started).count() << " s)";
    cli::progress(line.str());
    last_line = now;
  };
  // what fp16 clamped, per method (said once at the end: it can dominate the errors), over
  // the rows its cache stores that way: components of the rows held in fp16 (the fp16
  // baseline's, and the window's: docs/errors.md, row 19) and radii of the rows encoded
  // (TQ-MSE and Block-GTQ's fp16 radii: row 17)
  struct clamps {
    std::uint64_t keys = 0, values = 0;
    int first_layer = -1;
    void add(std::uint64_t k, std::uint64_t v, int l) {
      keys += k;
      values += v;
      if (first_layer < 0 && k + v > 0) first_layer = l;
    }
  };
  std::map<std::string, clamps> clamped_components, clamped_radii;
  // components of rows [t0, t1) of a layer's [T][Hkv][D] array beyond fp16's +-65504
  const auto beyond_half_in = [&](const float* x, int t0, int t1) {
    std::uint64_t n = 0;
    if (x)
      for (std::size_t i = static_cast<std::size_t>(t0) * Hkv * D; i < static_cast<std::size_t>(t1) * Hkv * D; ++i)
        n += beyond_half(x[i]);
    return n;
  };
  // the rows of the window's sink: held in fp16 and never encoded
  const int sink_rows = static_cast<int>(std::min<long>(sink, T));
  for (int l = 0; l < L; ++l) {
    const float* kl = k.layer(l);
    const float* vl = v ? v->layer(l) : nullptr;
    cli::fp16_rows(kl, nk, kheld);
    if (vl) cli::fp16_rows(vl, nk, vheld);
    for (const auto& m : methods) {
      method_result r;
      const held_window held = held_by(m);
      if (m.method == "fp16") {
        // as the fp16 cache stores them (docs/errors.md, row 19): clamped to +-65504, never
        // Inf, i.e. the layer's fp16 rows (kheld, vheld)
        clamped_components[m.key()].add(beyond_half_in(kl, 0, T), beyond_half_in(vl, 0, T), l);
        std::copy(kheld.begin(), kheld.end(), khat.begin());
        if (vl) std::copy(vheld.begin(), vheld.end(), vhat.begin());
        r.key_bytes = r.value_bytes = 2.0 * D;
      } else if (m.method == "kivi" || m.method == "kivi-sym") {
        kivi_options o;
        o.bits = m.bits;
        o.symmetric = m.method == "kivi-sym";
        // from the fp16 rows, as the cache encodes a block once it leaves the window
        // its 32-token blocks start after the sink (the sink's rows are never quantized:
        // they are read from kheld / vheld). Every row is held in fp16 first (in the sink,
        // or in the window while its block fills), so fp16 clamps all of them
        clamped_components[m.key()].add(beyond_half_in(kl, 0, T), beyond_half_in(vl, 0, T), l);
        const std::size_t skip = static_cast<std::size_t>(sink_rows) * Hkv * D;
        const int rest = T - sink_rows;
        std::copy(kheld.begin(), kheld.begin() + static_cast<std::ptrdiff_t>(skip), khat.begin());
        cli::kivi_rows(kheld.data() + skip, rest, Hkv, D, o, true, khat.data() + skip);
        if (vl) {
          std::copy(vheld.begin(), vheld.begin() + static_cast<std::ptrdiff_t>(skip), vhat.begin());
          cli::kivi_rows(vheld.data() + skip, rest, Hkv, D, o, false, vhat.data() + skip);
        }
        // what the default KIVI cache stores (bit-plane pages of 64 tokens, each page part
        // 64-byte aligned), as for the rows below
        r.key_bytes = kivi_key_stored_bytes_per_token(D, o);
        r.value_bytes = kivi_value_stored_bytes_per_token(D, o);
      } else {
        const plan& p = plans.at(m.key());
        // a cache with a recent window encodes a token from its fp16 row when it leaves the
        // window; without one, straight from the input. The sink's rows and, with a recent
        // window, every row are held in fp16 (the window clamps their components)
        const float* kin = recent > 0 ? kheld.data() : kl;
        const float* vin = recent > 0 && vl ? vheld.data() : vl;
        const int held_to = recent > 0 ? T : sink_rows;
        clamped_components[m.key()].add(beyond_half_in(kl, 0, held_to), beyond_half_in(vl, 0, held_to), l);
        // the rows the cache encodes, [sink_rows, encoded_to) once all T tokens are in (the
        // rest are read from the window by every query, kheld / vheld): their radii beyond
        // fp16's 65504 are counted (docs/errors.md, row 17). Every row is round-tripped all
        // the same (compare_attention's output product reads khat / vhat before it swaps in
        // the held rows)
        const int encoded_to = std::max(sink_rows, static_cast<int>(held.tail_from(T)));
        encode_stats ks, vs;
        const auto roundtrip = [&](const float* in, auto codec_of, float* out, encode_stats& st) {
          const auto rows = [&](int t0, int t1, encode_stats* counted) {
            const std::size_t off = static_cast<std::size_t>(t0) * Hkv * D;
            if (t1 > t0) cli::roundtrip_rows(in + off, t1 - t0, Hkv, D, codec_of, out + off, counted);
          };
          rows(0, sink_rows, nullptr);
          rows(sink_rows, encoded_to, &st);
          rows(encoded_to, T, nullptr);
        };
        roundtrip(kin, [&](int h) { return block_gtq_codec::from_plan(p, l, h); }, khat.data(), ks);
        if (vl) roundtrip(vin, [&](int h) { return plan_value_codec(p, l, h); }, vhat.data(), vs);
        clamped_radii[m.key()].add(ks.clamped_radii, vs.clamped_radii, l);
        for (int h = 0; h < Hkv; ++h) {  // what the default cache stores (bit-plane pages of 64 tokens)
          r.key_bytes += stored_bytes_per_token(block_gtq_codec::from_plan(p, l, h)) / Hkv;
          r.value_bytes += stored_bytes_per_token(plan_value_codec(p, l, h)) / Hkv;
        }
      }
      // a long dump takes minutes per method-layer: say how far it is (the callback runs on
      // the pool's threads, one call at a time)
      const auto part = [&](double fraction) {
        if (fraction < 1.0)
          say_every_2s(l, m.key() + " " + std::to_string(static_cast<int>(100.0 * fraction)) + "% of its attention pairs");
      };
      r.m = compare_attention(sh, q.layer(l), kl, khat.data(), vl, vl ? vhat.data() : nullptr, queries, pool.get(), part,
                              held);
      results[m.key()][static_cast<std::size_t>(l)] = r;
      ++done;
      // within a layer too: long dumps take minutes per layer
      if (done < methods.size() * static_cast<std::size_t>(L)) say_every_2s(l, m.key() + " done");
    }
    std::ostringstream line;
    line << "[eval] layer " << (l + 1) << "/" << L;
    for (int b : bits)
      if (results.count("bgtq@" + std::to_string(b)) && results.count("tq@" + std::to_string(b)))
        line << "  MAE@" << b << " tq " << results["tq@" + std::to_string(b)][static_cast<std::size_t>(l)].m.logit_mae
             << " bgtq " << results["bgtq@" + std::to_string(b)][static_cast<std::size_t>(l)].m.logit_mae;
    if (given) line << "  MAE plan " << results["plan"][static_cast<std::size_t>(l)].m.logit_mae;
    cli::progress(line.str());
    last_line = std::chrono::steady_clock::now();
  }

  for (const auto& m : methods) {
    const auto said = [&](const clamps& c, const std::string& what) {
      if (c.keys + c.values == 0) return;
      std::ostringstream text;
      text << c.keys << " key and " << c.values << " value " << what << ", first at layer index " << c.first_layer
           << ": those tokens' errors can dominate this method's metrics";
      cli::warn("eval", text.str(), m.key() + ": ");
    };
    // the components of the rows held in fp16, and what holds them
    const std::string held_in =
        m.method == "fp16"                             ? "fp16 storage saturates there"
        : m.method == "kivi" || m.method == "kivi-sym" ? "KIVI holds every token in the fp16 window, which saturates there, and "
                                                         "quantizes its blocks from those rows"
        : recent > 0 ? "the fp16 --sink / --recent window saturates there, and tokens are encoded from its rows"
                     : "the fp16 --sink window saturates there";
    said(clamped_components[m.key()], "components beyond +-65504 were clamped to it (" + held_in + "; docs/errors.md, row 19)");
    said(clamped_radii[m.key()], "radii above 65504 were clamped to it (fp16 radii; docs/errors.md, row 17)");
  }
  // Rows read in fp16 (the --sink / --recent window of every quantized method, and KIVI's
  // unfinished key block: all of the keys below 32 tokens, a large share on short dumps):
  // say how much of the evaluation reads them, since B/token leaves them out. One line
  // for the window methods (TQ-MSE, Block-GTQ) and one for KIVI, each when at least 1%.
  const auto held_share = [&](const held_window& w) {
    double all = 0, held = 0;
    for (const int t : queries) {
      all += static_cast<double>(t + 1);
      held += static_cast<double>(w.count(t + 1));
    }
    return 100.0 * held / all;
  };
  const auto said_once = [&](const std::string& who, double share, const std::string& what) {
    if (share < 1.0) return;
    std::ostringstream text;
    text << std::fixed << std::setprecision(1) << share << "% of the evaluated (query, key) pairs read keys and values "
         << "in fp16 (" << what << ", as the cache holds them); B/token, the steady-state rate, leaves them out";
    cli::warn("eval", text.str(), who + ": ");
  };
  std::vector<std::string> windowed, kivis;
  for (const auto& m : methods) {
    if (m.method == "tq" || m.method == "bgtq" || m.method == "plan") {
      if (std::find(windowed.begin(), windowed.end(), m.method) == windowed.end()) windowed.push_back(m.method);
    } else if (m.method != "fp16" && std::find(kivis.begin(), kivis.end(), m.method) == kivis.end()) {
      kivis.push_back(m.method);
    }
  }
  auto joined = [](const std::vector<std::string>& v) {
    std::string r;
    for (const auto& x : v) r += (r.empty() ? "" : ", ") + x;
    return r;
  };
  if (!windowed.empty())
    said_once(joined(windowed), held_share(held_by({"tq", 1})), "the --sink / --recent window");
  if (!kivis.empty())
    said_once(joined(kivis), held_share(held_by({"kivi", 1})),
              std::string("its unfinished ") + std::to_string(kivi_options{}.group_tokens) + "-token key block" +
                  (sink + recent > 0 ? " and the --sink / --recent window" : "") +
                  ", whose newest keys weigh more in the softmax than their share");

  // summary: means over layers, Block-GTQ vs uniform TQ-MSE
  std::map<std::string, method_result> mean;
  for (const auto& [key, layers] : results) mean[key] = mean_over_layers(layers);
  std::vector<method_comparison> comps;
  for (int b : bits) {
    const std::string kb = "bgtq@" + std::to_string(b), kt = "tq@" + std::to_string(b);
    if (results.count(kb) && results.count(kt)) comps.push_back(compare_methods(results[kb], results[kt], b));
  }
  // --plan's against uniform TQ-MSE at its budget: where its keys' budget is a whole width
  // b and its values take b bits, as tq@b's do (as bgtq@b against tq@b: the budget, which
  // --b-max may cap or --charge-radii spend partly on radii; config.plan has the mean width)
  std::vector<method_comparison> plan_comps;
  if (given)
    for (int b : bits)
      if (given->avg_bits == b && given->value_bits == b && results.count("tq@" + std::to_string(b)))
        plan_comps.push_back(compare_methods(results["plan"], results["tq@" + std::to_string(b)], b));

  auto write_json = [&](std::ostream& os) {
    json_writer w(os);
    auto put = [&](const method_result& r) {
      w.begin_object().key("logit_mae").value(r.m.logit_mae).key("kl").value(r.m.kl).key("top10").value(r.m.top10);
      if (v) w.key("out_rel_l2").value(r.m.out_rel_l2);
      w.key("key_bytes_per_token").value(r.key_bytes).key("value_bytes_per_token").value(r.value_bytes);
      w.key("bytes_per_token").value(r.key_bytes + r.value_bytes);
      w.key("compression_vs_fp16").value(4.0 * D / (r.key_bytes + r.value_bytes)).end_object();
    };
    w.begin_object();
    w.key("config").begin_object().key("q").value(qp).key("k").value(kp);
    if (vp) w.key("v").value(*vp);
    w.key("layers").value(L).key("tokens").value(T).key("q_heads").value(Hq).key("kv_heads").value(Hkv).key("head_dim").value(D);
    w.key("rope").value(to_string(rope.pairing)).key("rotary_dim").value(rope.rotary_dim);
    w.key("calib_tokens").value(N).key("eval_from").value(t_begin).key("eval_queries").value(queries.size());
    w.key("sink").value(sink).key("recent").value(recent);
    // the options that change results (repeats dropped, as run); the plans' allocation
    // options as calibrate's (plan JSON names)
    w.key("bits").array(bits).key("methods").begin_array();
    for (const auto& m : seen) w.value(m);
    w.end_array().key("b_min").value(base.b_min).key("b_max").value(base.b_max).key("scope").value(to_string(base.scope));
    w.key("distortion").value(to_string(base.distortion)).key("seed").value(base.seed);
    w.key("norm_correction").value(base.norm_correction).key("charge_radii").value(base.charge_radii);
    if (given)  // the file's plan: what its key widths average, its value width, its calibration
      w.key("plan").begin_object().key("path").value(*plan_path).key("avg_bits").value(given->avg_bits)
          .key("mean_key_bits").value(given_mean_bits).key("value_bits").value(given->value_bits).key("calib_tokens").value(static_cast<long>(given->calib_tokens))
          .end_object();
    w.end_object();
    w.key("layers").begin_array();
    for (int l = 0; l < L; ++l) {
      w.begin_object().key("layer").value(l).key("results").begin_object();
      for (const auto& m : methods) {
        w.key(m.key());
        put(results[m.key()][static_cast<std::size_t>(l)]);
      }
      w.end_object().end_object();
    }
    w.end_array();
    w.key("summary").begin_object().key("mean").begin_object();
    for (const auto& m : methods) {
      w.key(m.key());
      put(mean[m.key()]);
    }
    const auto put_comparisons = [&](const char* name, const std::vector<method_comparison>& cs) {
      w.key(name).begin_array();
      for (const auto& c : cs)
        w.begin_object().key("bits").value(c.bits).key("logit_mae_reduction").value(c.logit_mae_reduction)
            .key("kl_reduction").value(c.kl_reduction).key("layers_won").value(c.layers_won).key("layers").value(c.layers).end_object();
      w.end_array();
    };
    w.end_object();
    put_comparisons("bgtq_vs_tq", comps);
    if (given) put_comparisons("plan_vs_tq", plan_comps);
    w.end_object().end_object();
    os << "\n";
  };
  if (out_path) atomic_write_file(*out_path, write_json, false);
  if (json) {
    write_json(std::cout);
  } else {
    if (calibrates)
      std::printf("eval: %d layer%s, T=%d (calibrated on %d, evaluated from token %d", L, L == 1 ? "" : "s", T, N, t_begin);
    else  // nothing calibrates here (no bgtq@B): the split still sets where queries begin
      std::printf("eval: %d layer%s, T=%d (evaluated from token %d%s", L, L == 1 ? "" : "s", T, t_begin,
                  t_begin > 0 ? ", --calib-tokens' split; --eval-all evaluates every query" : "");
    if (queries.size() == 1 && T - t_begin > 1)
      std::printf(": 1 query, the last");
    else if (queries.size() < static_cast<std::size_t>(T - t_begin))
      std::printf(": %zu queries, evenly spaced", queries.size());
    std::printf("), Hq=%d Hkv=%d D=%d (%s)", Hq, Hkv, D, to_string(rope.pairing));
    if (sink + recent > 0) std::printf(", fp16 window: sink %ld + recent %ld", sink, recent);
    std::printf("\n");
    if (given)
      std::printf("plan: %s (keys: a budget of %.4g bits on average, widths averaging %.4g; values %d bits; calibrated on %lld "
                  "tokens)\n",
                  plan_path->c_str(), given->avg_bits, given_mean_bits, given->value_bits,
                  static_cast<long long>(given->calib_tokens));
    std::printf("%-12s %12s %12s %8s %10s %10s %8s\n", "method", "logit MAE", "KL", "top-10", v ? "out relL2" : "-",
                "B/token", "vs fp16");
    for (const auto& m : methods) {
      const auto& r = mean[m.key()];
      char rel[32] = "-";  // no V: no output error
      if (v) std::snprintf(rel, sizeof rel, "%.4g", r.m.out_rel_l2);
      const double bytes = r.key_bytes + r.value_bytes;
      char ratio[32] = "-";  // a plan that stores nothing (every width 0): no ratio
      if (bytes > 0) std::snprintf(ratio, sizeof ratio, "%.2fx", 4.0 * D / bytes);
      std::printf("%-12s %12.5g %12.5g %8.4f %10s %10.1f %8s\n", m.key().c_str(), r.m.logit_mae, r.m.kl, r.m.top10, rel, bytes,
                  ratio);
    }
    // a change relative to uniform TQ's mean, "n/a" where that mean is 0 (the JSON has null),
    // "0.0%" where it rounds to none (not "-0.0%": -100 * 0 is -0)
    const auto pct = [](double reduction) {
      if (!std::isfinite(reduction)) return std::string("n/a");
      char buf[32];
      std::snprintf(buf, sizeof buf, "%+.1f%%", -100 * reduction);
      const std::string s(buf);
      return s == "+0.0%" || s == "-0.0%" ? std::string("0.0%") : s;
    };
    for (const auto& [who, cs] : {std::pair{"Block-GTQ", &comps}, std::pair{"plan", &plan_comps}})
      for (const auto& c : *cs)
        std::printf("%s vs uniform TQ-MSE at %d bit%s: logit MAE %s, KL %s, wins %d/%d layer%s\n", who, c.bits,
                    c.bits == 1 ? "" : "s", pct(c.logit_mae_reduction).c_str(), pct(c.kl_reduction).c_str(), c.layers_won,
                    c.layers, c.layers == 1 ? "" : "s");
  }
  return 0;
}

cli::registrar reg{{"eval", "compare Block-GTQ, uniform TQ-MSE, KIVI and fp16 on Q/K(/V) activation dumps",
                    "--q Q.npy --k K.npy [--v V.npy] --rope interleaved|half [--rotary-dim R] [--calib-tokens N (0: T/2)] "
                    "[--eval-all] [--eval-queries N (0: all)] [--threads N] [--bits 2,3,4] [--methods fp16,tq,bgtq,kivi (also kivi-sym, plan)] "
                    "[--plan PLAN (a bgtq calibrate plan, also evaluated: method plan)] [--b-min M] [--b-max M] "
                    "[--sink N] [--recent N (the cache's fp16 window, held by every method; 0)] "
                    "[--scope head|layer|model] [--distortion rate4|codebook] [--seed S] [--norm-correction] [--charge-radii] "
                    "[-o RESULTS.json] [--json]",
                    &run, {"json", "eval-all", "norm-correction", "charge-radii"}}};

}  // namespace cmd_eval
}  // namespace
