// bgtq capture: run a llama2.c model over text and dump its post-RoPE Q, K, V as .npy.
//
// The text holds one document per line (a trailing '\r' is dropped, empty lines are
// skipped). Documents are concatenated into ONE sequence, each started with BOS (no EOS),
// and cut at N tokens, so positions run 0..T-1 across document boundaries and keys of
// later documents attend to earlier ones, as in llama2.c's training batches. T <= seq_len.
#include <chrono>
#include <filesystem>
#include <iostream>
#include <string>
#include <vector>

#include <bgtq/core/error.hpp>
#include <bgtq/io/json.hpp>

#include "cli.hpp"
#include "llama2c.hpp"

#if __has_include(<bgtq/io/npy.hpp>)
#include <bgtq/io/npy.hpp>
#define BGTQ_CAPTURE_HAVE_NPY 1
#else
#define BGTQ_CAPTURE_HAVE_NPY 0
#endif

namespace {
namespace cmd_capture {  // cli.hpp: the CLI is one translation unit

namespace lc = bgtq::llama2c;

int run(bgtq::cli::args& a) {
  const std::string model_path = a.require("model");
  const std::string tok_path = a.require("tokenizer");
  const std::string text_path = a.require("text");
  const long want = a.get_int("tokens", 0, 1, 1L << 30);  // 0: not given
  const std::string out_dir = a.require("o");
  const bool json = a.flag("json");
  a.finish();
  if (out_dir.empty()) throw bgtq::cli::usage_error("-o: the output directory is empty");
#if !BGTQ_CAPTURE_HAVE_NPY
  (void)model_path, (void)tok_path, (void)text_path, (void)want, (void)out_dir, (void)json;
  bgtq::fail(bgtq::errc::unsupported, "this build has no .npy writer (bgtq/io/npy.hpp)");
#else
  // before the work: a file in the way of the output directory, q.npy, k.npy, v.npy naming
  // one file (symlinks) or an input, a directory in the way of one of them, a link into a
  // missing directory fail now, not after the forward pass (the directory itself is
  // created only when the arrays are written)
  bgtq::cli::check_output_dir_files(out_dir, "-o", {"q.npy", "k.npy", "v.npy"},
                                    {{"--model", model_path}, {"--tokenizer", tok_path}, {"--text", text_path}});
  const auto t0 = std::chrono::steady_clock::now();
  const lc::model m = lc::model::load(model_path);
  const lc::config& c = m.cfg();
  const lc::tokenizer tok = lc::tokenizer::load(tok_path, c.vocab_size);
  if (want > c.seq_len)
    bgtq::fail(bgtq::errc::invalid_argument, "--tokens " + std::to_string(want) + " exceeds the model's context seq_len = " +
                                                 std::to_string(c.seq_len));
  const std::vector<std::string> docs = lc::read_documents(text_path);
  const std::size_t limit = want > 0 ? static_cast<std::size_t>(want) : static_cast<std::size_t>(c.seq_len);
  const std::vector<int> tokens = lc::encode_documents(tok, docs, limit);
  if (tokens.empty()) bgtq::fail(bgtq::errc::invalid_argument, "'" + text_path + "' holds no text");
  if (want > 0 && tokens.size() < static_cast<std::size_t>(want))
    bgtq::cli::warn("capture", "the text gives only " + std::to_string(tokens.size()) + " tokens (asked for --tokens " +
                                   std::to_string(want) + "): the arrays hold " + std::to_string(tokens.size()));
  long n_docs = 0;
  for (const int t : tokens) n_docs += t == lc::bos_token;
  const int T = static_cast<int>(tokens.size());
  bgtq::cli::progress("[capture] " + std::to_string(T) + " tokens from " + std::to_string(n_docs) + " document(s); " +
                      std::to_string(c.n_layers) + " layers, " + std::to_string(c.n_heads) + " query / " +
                      std::to_string(c.n_kv_heads) + " KV heads, head_dim " + std::to_string(c.head_dim()));

  lc::fp32_kv_backend kv(c, T);
  lc::engine eng(m, kv);
  const int every = std::max(1, T / 8);
  const lc::activations act = lc::capture_activations(eng, tokens, [&](int done, int total) {
    if (done % every == 0 || done == total)
      bgtq::cli::progress("[capture] " + std::to_string(done) + "/" + std::to_string(total) + " tokens");
  });

  std::error_code ec;
  std::filesystem::create_directories(out_dir, ec);
  if (ec || !std::filesystem::is_directory(out_dir))
    bgtq::fail(bgtq::errc::io_error, "cannot create output directory '" + out_dir + "'" + (ec ? ": " + ec.message() : ""));
  const auto L = static_cast<std::size_t>(act.n_layers), Tz = static_cast<std::size_t>(act.n_tokens),
             Hq = static_cast<std::size_t>(act.n_heads), Hkv = static_cast<std::size_t>(act.n_kv_heads),
             D = static_cast<std::size_t>(act.head_dim);
  const std::vector<std::size_t> q_shape{L, Tz, Hq, D}, kv_shape{L, Tz, Hkv, D};
  const std::filesystem::path dir(out_dir);
  // all three or none (a failure on v.npy leaves no new q.npy / k.npy behind)
  bgtq::atomic_write_files({bgtq::npy_output((dir / "q.npy").string(), act.q.data(), q_shape),
                            bgtq::npy_output((dir / "k.npy").string(), act.k.data(), kv_shape),
                            bgtq::npy_output((dir / "v.npy").string(), act.v.data(), kv_shape)});
  const double sec = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  bgtq::cli::progress("[capture] wrote q.npy, k.npy, v.npy to " + out_dir + " in " + std::to_string(sec) + " s");

  if (json) {
    bgtq::json_writer w(std::cout);
    w.begin_object();
    w.key("model").value(model_path);
    w.key("text").value(text_path);
    w.key("tokens").value(T);
    w.key("documents").value(n_docs);
    w.key("rope").value("interleaved");
    w.key("q_shape").array(q_shape);
    w.key("k_shape").array(kv_shape);
    w.key("v_shape").array(kv_shape);
    w.key("dir").value(out_dir);
    w.key("files").begin_array().value("q.npy").value("k.npy").value("v.npy").end_array();
    w.key("seconds").value(sec);
    w.end_object();
    std::cout << "\n";
    std::cout.flush();
  }
  return 0;
#endif
}

bgtq::cli::registrar reg{
    {"capture", "run a llama2.c model over text and write its post-RoPE Q, K, V as .npy",
     "--model MODEL.bin --tokenizer TOK.bin --text FILE [--tokens N] -o DIR [--json]\n"
     "  FILE holds one document per line. Documents are concatenated into one sequence, each\n"
     "  started with BOS, and cut at N tokens (default: min(seq_len, all)), so positions run\n"
     "  0..T-1 across documents; N > seq_len is an error. Writes DIR/q.npy [L,T,Hq,D],\n"
     "  DIR/k.npy and DIR/v.npy [L,T,Hkv,D] (float32, post-RoPE; RoPE pairing interleaved),\n"
     "  creating DIR. --json: {model, text, tokens, documents, rope, q_shape, k_shape, v_shape,\n"
     "  dir, files, seconds}.",
     &run,
     {"json"}}};

}  // namespace cmd_capture
}  // namespace
