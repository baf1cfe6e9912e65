// bgtq ppl: teacher-forced perplexity of a llama2.c model through each KV cache, and the
// KL of its next-token distributions against the exact float32 cache.
#include <bgtq/io/json.hpp>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <iostream>
#include <memory>

#include "cli.hpp"
#include "kv_spec.hpp"
#include "llama2c.hpp"

namespace {
namespace cmd_ppl {  // cli.hpp: the CLI is one translation unit

namespace lc = bgtq::llama2c;
using namespace bgtq;

int run(cli::args& a) {
  const std::string model_path = a.require("model"), tok_path = a.require("tokenizer"), text = a.require("text");
  const auto kv_list = a.get_list("kv", "fp32,tq3,bgtq3");
  const auto calib_text = a.get("calib-text");
  const bool calib_docs_given = a.get("calib-docs").has_value();
  const long calib_docs = a.get_int("calib-docs", 2, 0, 1 << 20);
  if (calib_text && calib_docs_given)
    throw cli::usage_error("--calib-text and --calib-docs are alternatives (a separate text, or the first N documents): give one");
  const long max_docs = a.get_int("docs", 0, 0, 1 << 20);
  const bool json = a.flag("json");
  a.finish();
  std::vector<cli::kv_spec> specs;
  for (const auto& s : kv_list) specs.push_back(cli::parse_kv_spec(s));
  const bool any_bgtq = std::any_of(specs.begin(), specs.end(), [](const cli::kv_spec& s) { return cli::calibrates(s); });

  const lc::model m = lc::model::load(model_path);
  for (const auto& s : specs) cli::require_kv_spec_fits(s, m);  // every plan:FILE, before any cache works
  const lc::tokenizer tok = lc::tokenizer::load(tok_path, m.cfg().vocab_size);
  const auto docs = lc::read_documents(text);
  BGTQ_REQUIRE(!docs.empty(), errc::invalid_argument, text + ": no documents (one per line)");
  // calibration: a separate text, or the first calib_docs documents (then not evaluated)
  std::size_t first_eval = 0;
  std::vector<int> calib;
  const std::size_t seq = static_cast<std::size_t>(m.cfg().seq_len);
  if (calib_text) {
    calib = lc::encode_documents(tok, lc::read_documents(*calib_text), seq);
    BGTQ_REQUIRE(!calib.empty(), errc::invalid_argument, *calib_text + ": no text to calibrate on (--calib-text)");
    if (!any_bgtq)  // (read all the same: a bad file is an error whatever --kv lists)
      cli::warn("ppl", "--calib-text " + *calib_text +
                           " is not used: no cache in --kv calibrates (" + cli::calibrating_specs + "); every document of " +
                           text + " is scored, as with it");
  } else {
    first_eval = std::min<std::size_t>(static_cast<std::size_t>(calib_docs), docs.size() - 1);
    if (first_eval < static_cast<std::size_t>(calib_docs))  // at least one document is scored
      cli::warn("ppl", "--calib-docs " + std::to_string(calib_docs) + (calib_docs_given ? "" : " (the default)") + ": " + text +
                           " has " + std::to_string(docs.size()) +
                           " documents; the first " + std::to_string(first_eval) + " are held out, the rest scored");
    calib = lc::encode_documents(tok, std::vector<std::string>(docs.begin(), docs.begin() + static_cast<long>(first_eval)), seq);
    if (calib.empty()) {
      calib = lc::encode_documents(tok, {docs.front()}, seq);
      if (any_bgtq)
        cli::warn("ppl", "no held-out document to calibrate on: Block-GTQ calibrates on the first document, which is also scored");
    }
  }
  std::vector<std::vector<int>> eval;
  for (std::size_t d = first_eval; d < docs.size(); ++d) {
    if (max_docs && eval.size() >= static_cast<std::size_t>(max_docs)) break;
    auto t = tok.encode(docs[d], true, false);
    if (t.size() > seq) t.resize(seq);
    if (t.size() >= 2) eval.push_back(std::move(t));
  }
  BGTQ_REQUIRE(!eval.empty(), errc::invalid_argument, text + ": no document left to evaluate after calibration");

  long predictions = 0;
  std::size_t longest = 0;
  for (const auto& t : eval) {
    predictions += static_cast<long>(t.size()) - 1;
    longest = std::max(longest, t.size());
  }
  // Every cache runs in step with the exact float32 reference, token by token: the KL
  // needs the reference's log-probabilities at each position, and only that one row is
  // held (not predictions x vocab floats). Each cache's sums are added in the same order
  // as scoring one cache after another would: documents in order, positions in order.
  struct runner {
    cli::kv_spec spec;
    double bytes = 0;
    std::unique_ptr<lc::kv_backend> kv;
    std::unique_ptr<lc::engine> e;
    double nll = 0, kl = 0, doc_total = 0;
  };
  const int positions = static_cast<int>(longest);
  std::vector<runner> runs(specs.size());
  for (std::size_t i = 0; i < specs.size(); ++i) {
    runs[i].spec = specs[i];
    runs[i].kv = cli::make_kv_backend(specs[i], m, calib, &runs[i].bytes, positions);
    runs[i].e = std::make_unique<lc::engine>(m, *runs[i].kv);
  }
  lc::fp32_kv_backend ref_kv(m.cfg(), positions);
  lc::engine ref(m, ref_kv);
  const int V = m.cfg().vocab_size;
  std::vector<float> ref_row(static_cast<std::size_t>(V)), row(static_cast<std::size_t>(V));
  for (std::size_t d = 0; d < eval.size(); ++d) {
    const std::vector<int>& toks = eval[d];
    ref.reset();
    for (auto& r : runs) {
      r.e->reset();
      r.doc_total = 0;
    }
    for (std::size_t t = 0; t + 1 < toks.size(); ++t) {
      (void)lc::log_softmax(ref.forward(toks[t], static_cast<int>(t)), V, ref_row.data());
      for (auto& r : runs) {
        const float* lg = r.e->forward(toks[t], static_cast<int>(t));
        const double lse = lc::log_softmax(lg, V, row.data());
        r.doc_total += lse - static_cast<double>(lg[toks[t + 1]]);
        double s = 0;
        for (std::size_t v = 0; v < row.size(); ++v) {
          const double pr = std::exp(static_cast<double>(ref_row[v]));
          s += pr * (static_cast<double>(ref_row[v]) - row[v]);
        }
        r.kl += std::max(s, 0.0);
      }
    }
    const double n = static_cast<double>(toks.size() - 1);
    for (auto& r : runs) r.nll += r.doc_total / n * n;  // the document's mean times its predictions
    cli::progress("[ppl] document " + std::to_string(d + 1) + "/" + std::to_string(eval.size()) + " (" +
                  std::to_string(toks.size()) + " tokens) through the reference and " + std::to_string(runs.size()) +
                  " cache(s)");
  }
  struct row_t {
    std::string kv;
    double ppl, kl, bytes;
  };
  std::vector<row_t> rows;
  for (const auto& r : runs) {
    rows.push_back({r.spec.name, std::exp(r.nll / static_cast<double>(predictions)), r.kl / static_cast<double>(predictions), r.bytes});
    cli::progress("[ppl] " + r.spec.name + ": ppl " + std::to_string(rows.back().ppl) + ", KL " + std::to_string(rows.back().kl));
  }
  if (json) {
    json_writer w(std::cout);
    w.begin_object().key("model").value(model_path).key("text").value(text);
    w.key("documents").value(static_cast<long>(eval.size())).key("predictions").value(predictions);
    w.key("calibration_tokens").value(static_cast<long>(calib.size()));
    // the SIMD path this bgtq was built for: the caches' attention sums in its order, so
    // the last digits of ppl and KL differ between paths (docs/RESULTS.md)
    w.key("simd").value(simd_path());
    w.key("results").begin_array();
    for (const auto& r : rows)
      w.begin_object().key("kv").value(r.kv).key("ppl").value(r.ppl).key("kl").value(r.kl).key("bytes_per_token_per_head").value(r.bytes).end_object();
    w.end_array().end_object();
    std::cout << "\n";
  } else {
    std::printf("perplexity over %zu documents (%ld predictions)", eval.size(), predictions);
    if (first_eval > 0) std::printf(", the first %zu held out", first_eval);
    if (any_bgtq)  // the calibration is Block-GTQ's alone: the other caches take no plan
      std::printf(", Block-GTQ calibrated on %zu tokens%s", calib.size(),
                  calib_text ? " of the calibration text" : first_eval > 0 ? " of the held-out documents" : " of the first document");
    std::printf("\n");
    int w = 12;  // the kv column as wide as its longest name (plan:FILE names a path)
    for (const auto& r : rows) w = std::max(w, static_cast<int>(r.kv.size()));
    std::printf("%-*s %10s %12s %14s\n", w, "kv", "ppl", "KL vs fp32", "B/token/head");
    for (const auto& r : rows) std::printf("%-*s %10.4f %12.6f %14.1f\n", w, r.kv.c_str(), r.ppl, r.kl, r.bytes);
  }
  return 0;
}

cli::registrar reg{{"ppl", "perplexity and next-token KL of a llama2.c model through each KV cache",
                    "--model MODEL.bin --tokenizer TOK.bin --text FILE [--kv fp32,fp16,tq3,bgtq3,kivi3,bgtq-k3v2,plan:FILE,...] "
                    "[--calib-text FILE | --calib-docs N (2)] [--docs N] [--json]\n"
                    "  One document per line, each scored from BOS (truncated to the context). Block-GTQ plans are\n"
                    "  calibrated on --calib-text, or on the first N documents, which are then not scored, whatever\n"
                    "  --kv lists (so that runs with different lists score the same documents); the calibration text\n"
                    "  runs as one sequence from BOS, cut at the model's context (seq_len tokens). --docs N scores\n"
                    "  at most N documents after the held-out ones (0, the default: all). Every cache runs in step\n"
                    "  with the float32 reference, one document at a time (a progress line per document).\n"
                    "  plan:FILE is a plan from bgtq calibrate (on bgtq capture's Q/K, --rope interleaved), used as is\n"
                    "  (the --kv list splits at every ',': FILE may not contain one).",
                    &run, {"json"}}};

}  // namespace cmd_ppl
}  // namespace
