// bgtq generate: greedy text generation with the llama2c engine (exact float32 KV cache).
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <iostream>
#include <string>
#include <vector>

#include <bgtq/core/error.hpp>
#include <bgtq/io/json.hpp>

#include "cli.hpp"
#include "kv_spec.hpp"
#include "llama2c.hpp"

namespace {
namespace cmd_generate {  // cli.hpp: the CLI is one translation unit

namespace lc = bgtq::llama2c;

int run(bgtq::cli::args& a) {
  const std::string model_path = a.require("model");
  const std::string tok_path = a.require("tokenizer");
  const std::string prompt = a.get_or("prompt", "");
  const long steps = a.get_int("steps", 256, 0, 1 << 20);
  const bool json = a.flag("json");
  // one cache: spaces around it go, as in ppl's --kv list
  const std::string kv_name = bgtq::cli::trim_spaces(a.get_or("kv", "fp32"));
  const auto calib_text = a.get("calib-text");
  a.finish();
  const bgtq::cli::kv_spec spec = bgtq::cli::parse_kv_spec(kv_name);  // (reads a plan:FILE)

  const lc::model m = lc::model::load(model_path);
  bgtq::cli::require_kv_spec_fits(spec, m);
  const lc::tokenizer tok = lc::tokenizer::load(tok_path, m.cfg().vocab_size);
  const std::vector<int> in = tok.encode(prompt, /*bos=*/true, /*eos=*/false);
  BGTQ_REQUIRE(static_cast<long>(in.size()) <= m.cfg().seq_len, bgtq::errc::invalid_argument,
               "the prompt is " + std::to_string(in.size()) + " tokens, more than the model's context of " +
                   std::to_string(m.cfg().seq_len));

  // Block-GTQ plans are calibrated on the prompt unless a calibration text is given.
  std::vector<int> calib = in;
  if (calib_text) {
    calib = lc::encode_documents(tok, lc::read_documents(*calib_text), static_cast<std::size_t>(m.cfg().seq_len));
    BGTQ_REQUIRE(!calib.empty(), bgtq::errc::invalid_argument, *calib_text + ": no text to calibrate on (--calib-text)");
    if (!bgtq::cli::calibrates(spec))  // (read all the same: a bad file is an error whatever the cache)
      bgtq::cli::warn("generate", "--calib-text " + *calib_text + " is not used: the cache " + spec.name +
                                      " does not calibrate (" + bgtq::cli::calibrating_specs + ")");
  }
  double bytes = 0;
  // the cache holds what this run feeds (prompt and generated tokens), not the whole context
  const long positions = std::min<long>(static_cast<long>(in.size()) + steps, m.cfg().seq_len);
  const auto kv = bgtq::cli::make_kv_backend(spec, m, calib, &bytes, static_cast<int>(positions));
  lc::engine eng(m, *kv);
  const auto t0 = std::chrono::steady_clock::now();
  const std::vector<int> out = lc::generate_greedy(eng, in, static_cast<int>(steps));
  const double sec = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  // tokens fed and generated per second; 0 when nothing ran (--steps 0 feeds nothing)
  const double tps = steps > 0 && sec > 0 ? static_cast<double>(in.size() + out.size()) / sec : 0.0;
  const std::string continuation = tok.decode_all(out, in.back());
  bgtq::cli::progress("[generate] " + std::to_string(in.size()) + " prompt + " + std::to_string(out.size()) +
                      " generated tokens in " + std::to_string(sec) + " s (" + std::to_string(static_cast<long>(tps)) +
                      " tokens/s, kv " + spec.name + ", " + std::to_string(bytes) + " bytes/token/KV head)");

  if (json) {
    bgtq::json_writer w(std::cout);
    w.begin_object();
    w.key("model").value(model_path);
    w.key("kv").value(spec.name);
    w.key("kv_bytes_per_token_per_head").value(bytes);
    w.key("prompt").value(prompt);
    w.key("prompt_tokens").array(in);
    w.key("tokens").array(out);
    w.key("text").value(prompt + continuation);
    w.key("seconds").value(sec);
    w.key("tokens_per_s").value(tps);
    w.end_object();
    std::cout << "\n";
  } else {
    std::cout << prompt << continuation << "\n";
  }
  std::cout.flush();
  return 0;
}

bgtq::cli::registrar reg{{"generate", "greedy text generation with a llama2.c model through a (quantized) KV cache",
                          "--model MODEL.bin --tokenizer TOK.bin [--prompt TEXT] [--steps N (256)] [--kv SPEC (fp32)]\n"
                          "  [--calib-text FILE] [--json]\n"
                          "  SPEC: fp32, fp16, tqB, bgtqB, kiviB, kXvY, tq-/bgtq-/kivi-kXvY (Block-GTQ plans are calibrated\n"
                          "  on the prompt, or on --calib-text), or plan:FILE (a plan from bgtq calibrate, used as is).\n"
                          "  Encodes the prompt after BOS, decodes greedily (argmax) for up to N tokens, stopping at\n"
                          "  BOS/EOS or the context length, and prints prompt + continuation on stdout\n"
                          "  (--json: {model, kv, kv_bytes_per_token_per_head, prompt, prompt_tokens, tokens, text,\n"
                          "  seconds, tokens_per_s}; tokens_per_s counts prompt and generated tokens, 0 for --steps 0,\n"
                          "  which runs nothing).",
                          &run,
                          {"json"}}};

}  // namespace cmd_generate
}  // namespace
