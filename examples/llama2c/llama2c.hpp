#pragma once
//! @file llama2c.hpp
//! A small llama2.c-compatible inference engine (Llama architecture: RMSNorm, RoPE with
//! interleaved pairs, grouped-query attention, SwiGLU, optionally tied classifier) used to
//! exercise blockgtq on real activations. Single-threaded, CPU, float32.
//!
//! The attention side is pluggable (`kv_backend`), so the KV cache can be swapped for a
//! quantized one without touching the rest of the forward pass. A `capture_sink` sees the
//! post-RoPE q, k, v of every (layer, position) as they are produced.
//!
//! File formats (llama2.c run.c conventions, little-endian):
//! - checkpoint: 7 int32 {dim, hidden_dim, n_layers, n_heads, n_kv_heads, vocab_size,
//!   seq_len} (vocab_size < 0 means an untied classifier), then float32 tensors, each
//!   row-major [out][in]: token_embedding [vocab][dim], rms_att [L][dim],
//!   wq [L][n_heads*hd][dim], wk [L][n_kv_heads*hd][dim], wv [L][n_kv_heads*hd][dim],
//!   wo [L][dim][n_heads*hd], rms_ffn [L][dim], w1 [L][hidden][dim], w2 [L][dim][hidden],
//!   w3 [L][hidden][dim], rms_final [dim], legacy freq_cis_real and freq_cis_imag
//!   [seq_len][hd/2] each (read past, unused: RoPE is recomputed), then wcls [vocab][dim]
//!   only when the classifier is untied. The file must hold exactly these bytes.
//! - tokenizer: int32 max_token_length, then per token: float32 score, int32 length,
//!   `length` bytes (no terminator). Exactly `vocab_size` tokens, nothing after them.

#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>
#include <unordered_map>
#include <vector>

#include <bgtq/rope/layout.hpp>

namespace bgtq::llama2c {

//! Model hyper-parameters as stored in the checkpoint header.
struct config {
  int dim = 0;                     //!< model width (= n_heads * head_dim)
  int hidden_dim = 0;              //!< FFN width
  int n_layers = 0;                //!< transformer blocks
  int n_heads = 0;                 //!< query heads
  int n_kv_heads = 0;              //!< key/value heads (GQA when < n_heads)
  int vocab_size = 0;              //!< always positive here (the sign is decoded into shared_classifier)
  int seq_len = 0;                 //!< maximum context (positions 0 .. seq_len-1)
  bool shared_classifier = true;   //!< classifier tied to token_embedding

  //! Per-head dimension, dim / n_heads.
  int head_dim() const { return n_heads > 0 ? dim / n_heads : 0; }
  //! Width of one position's keys (or values): n_kv_heads * head_dim.
  int kv_dim() const { return n_kv_heads * head_dim(); }
  //! Query heads per KV head, n_heads / n_kv_heads.
  int group_size() const { return n_kv_heads > 0 ? n_heads / n_kv_heads : 0; }

  //! Checks every field is positive, sane (dim <= 65536, hidden_dim <= 2^20,
  //! n_layers <= 4096, vocab_size <= 2^22, seq_len <= 2^20), that n_heads divides dim
  //! with an even head_dim and that n_kv_heads divides n_heads.
  //! @throws bgtq::error(format_error) naming the offending field and value; `what`
  //!         prefixes the message (e.g. the file name).
  void validate(const std::string& what = "llama2c config") const;

  //! Number of float32 values a checkpoint with this config stores after its header,
  //! including the legacy freq_cis tables (and wcls when untied).
  std::size_t checkpoint_floats() const;
  //! Exact byte size of a checkpoint with this config: 28 + 4 * checkpoint_floats().
  std::size_t checkpoint_bytes() const { return 28 + 4 * checkpoint_floats(); }
};

//! The weights, each tensor one contiguous row-major array (layouts in the file comment).
//! Per-layer tensors are stacked: layer l of wq starts at wq.data() + l * (n_heads*hd) * dim.
struct model_weights {
  std::vector<float> token_embedding;  //!< [vocab][dim]
  std::vector<float> rms_att;          //!< [L][dim]
  std::vector<float> wq;               //!< [L][n_heads*hd][dim]
  std::vector<float> wk;               //!< [L][n_kv_heads*hd][dim]
  std::vector<float> wv;               //!< [L][n_kv_heads*hd][dim]
  std::vector<float> wo;               //!< [L][dim][n_heads*hd]
  std::vector<float> rms_ffn;          //!< [L][dim]
  std::vector<float> w1;               //!< [L][hidden][dim]
  std::vector<float> w2;               //!< [L][dim][hidden]
  std::vector<float> w3;               //!< [L][hidden][dim]
  std::vector<float> rms_final;        //!< [dim]
  std::vector<float> wcls;             //!< [vocab][dim]; empty when the classifier is tied
};

//! A loaded checkpoint: config plus owned weights. Copyable; an engine refers to it,
//! so keep it alive while the engine runs.
class model {
 public:
  //! Reads a llama2.c checkpoint file.
  //! @throws bgtq::error(io_error) if it cannot be read, (format_error) if the header is
  //!         short or absurd, the size differs from what the header implies (the message
  //!         gives expected and actual bytes) or a weight is not finite.
  static model load(const std::string& path);
  //! Parses a checkpoint held in memory (what `load` does after reading the file).
  //! `name` labels error messages. Never reads outside [data, data + size).
  static model from_bytes(const void* data, std::size_t size, const std::string& name = "<memory>");
  //! Builds a model from a config and weights with the documented sizes.
  //! @throws bgtq::error(shape_mismatch) naming the first tensor of the wrong size.
  static model from_weights(const config& c, model_weights w);

  //! The hyper-parameters.
  const config& cfg() const { return cfg_; }
  //! The weights.
  const model_weights& weights() const { return w_; }
  //! Classifier matrix [vocab][dim]: token_embedding when tied, else wcls.
  const float* classifier() const { return cfg_.shared_classifier ? w_.token_embedding.data() : w_.wcls.data(); }

 private:
  config cfg_;
  model_weights w_;
};

//! llama2.c's byte-level BPE tokenizer (sentencepiece-style vocabulary with <0xHH> byte
//! tokens at ids 3..258 and merge priority given by the score).
class tokenizer {
 public:
  //! Reads a tokenizer file holding exactly `vocab_size` tokens.
  //! @throws bgtq::error(io_error) if unreadable, (invalid_argument) for vocab_size <= 0
  //!         or > 2^22, (format_error) if truncated, a token length is negative or above
  //!         max_token_length (itself in 1..65536), a score is not finite, or bytes follow
  //!         the last token (vocab size mismatch).
  static tokenizer load(const std::string& path, int vocab_size);
  //! Parses a tokenizer held in memory; `name` labels error messages.
  static tokenizer from_bytes(const void* data, std::size_t size, int vocab_size, const std::string& name = "<memory>");

  //! Encodes UTF-8 text as run.c does: optional BOS; for non-empty text a dummy-prefix
  //! " " token; each UTF-8 code point (up to 4 bytes) becomes its token, or its bytes as
  //! byte tokens (byte + 3) if it has none; then the adjacent pair whose concatenation is
  //! in the vocabulary with the highest score (leftmost on ties, score > -1e10) is merged
  //! repeatedly until no pair merges; optional EOS. Runs in O(n log n).
  std::vector<int> encode(const std::string& text, bool bos, bool eos) const;
  //! The text of `token` following `prev_token` (run.c semantics): a leading space is
  //! dropped after BOS, and a "<0xHH>" piece is the raw byte HH.
  //! @throws bgtq::error(invalid_argument) if token is outside [0, vocab_size).
  std::string decode(int prev_token, int token) const;
  //! Decodes a whole token sequence (each token after its predecessor; the first after
  //! `prev_token`).
  std::string decode_all(const std::vector<int>& tokens, int prev_token = -1) const;

  //! Number of tokens.
  int vocab_size() const { return static_cast<int>(pieces_.size()); }
  //! The raw vocabulary string of `token` (e.g. "<0x0A>", " the").
  const std::string& piece(int token) const;
  //! The merge score of `token`.
  float score(int token) const;
  //! Token id of an exact vocabulary string, or -1 (the lowest id if it occurs twice).
  int lookup(const std::string& s) const;

 private:
  std::vector<std::string> pieces_;
  std::vector<std::string> decoded_;  // piece with <0xHH> replaced by the byte
  std::vector<float> scores_;
  std::unordered_map<std::string, int> index_;
  int max_token_length_ = 0;
};

//! Beginning- and end-of-sequence token ids (llama2.c / sentencepiece).
constexpr int bos_token = 1, eos_token = 2;

//! Storage and attention for the KV cache of one sequence. The engine calls, per layer
//! and position, append(k, v) then attend(q). Implementations may quantize.
class kv_backend {
 public:
  virtual ~kv_backend() = default;
  //! Forgets every stored position of every layer.
  virtual void reset() = 0;
  //! Stores position `pos` of `layer`: post-RoPE k and v, each [n_kv_heads * head_dim]
  //! (head-major). `pos` equals the number of positions already stored for this layer.
  virtual void append(int layer, int pos, const float* k, const float* v) = 0;
  //! out[h*hd .. (h+1)*hd) = sum_{t<=pos} softmax_t(q_h . k_t,g / sqrt(hd)) v_t,g for each
  //! query head h, where g = h / (n_heads / n_kv_heads). q and out: [n_heads * head_dim].
  virtual void attend(int layer, int pos, const float* q, float* out) = 0;
};

//! Exact float32 KV cache: [layer][pos][kv_dim] for keys and values, preallocated for
//! `positions()` positions (seq_len unless the constructor is given fewer).
//! attend() uses float32 dot products and a max-subtracted softmax.
class fp32_kv_backend : public kv_backend {
 public:
  //! Holds up to `max_positions` positions (0, or more than seq_len: seq_len), i.e.
  //! 2 x n_layers x positions x kv_dim floats, checked before allocating against
  //! `memory_limit` bytes (0: the machine's physical memory, or `ulimit -v` if lower).
  //! @throws bgtq::error(format_error) if the config is invalid, (invalid_argument) for
  //!         a negative max_positions, (capacity_exhausted) naming the size and its
  //!         factors if it exceeds the limit or cannot be allocated.
  explicit fp32_kv_backend(const config& c, int max_positions = 0, std::uint64_t memory_limit = 0);
  void reset() override;
  //! Positions it holds per layer.
  int positions() const { return cap_; }
  //! @throws bgtq::error(invalid_argument) if layer is out of range, pos is not the next
  //!         position of that layer or pos >= positions().
  void append(int layer, int pos, const float* k, const float* v) override;
  //! @throws bgtq::error(invalid_argument) if layer is out of range or pos is not stored.
  void attend(int layer, int pos, const float* q, float* out) override;
  //! Number of positions stored for `layer`.
  int size(int layer) const { return count_.at(static_cast<std::size_t>(layer)); }
  //! Stored key of (layer, pos, kv head), head_dim floats.
  const float* key(int layer, int pos, int kv_head) const;
  //! Stored value of (layer, pos, kv head), head_dim floats.
  const float* value(int layer, int pos, int kv_head) const;

 private:
  config cfg_;
  int cap_ = 0;               // positions held per layer
  std::vector<float> k_, v_;  // [layer][pos < cap_][n_kv_heads][head_dim]
  std::vector<int> count_;    // positions stored per layer
  std::vector<float> scores_; // scratch [seq_len]
};

//! Receives the post-RoPE activations of every (layer, position) during forward().
struct capture_sink {
  virtual ~capture_sink() = default;
  //! q: [n_heads*head_dim], k and v: [n_kv_heads*head_dim], valid only during the call.
  virtual void on_qkv(int layer, int pos, const float* q, const float* k, const float* v) = 0;
};

//! One sequence's forward pass over a model and a KV backend (both referenced, not owned:
//! keep them alive). Not thread-safe; forward() does not allocate.
class engine {
 public:
  //! @throws bgtq::error(format_error) if the model's config is invalid.
  engine(const model& m, kv_backend& kv);
  //! The engine keeps a reference to the model: a temporary would dangle.
  engine(model&&, kv_backend&) = delete;
  //! Feeds `token` at position `pos` and returns the logits [vocab_size] (valid until the
  //! next forward or reset). Per layer: RMSNorm, q/k/v projections, RoPE (interleaved,
  //! base 10000) on every head of q and k, capture, kv.append, kv.attend, output
  //! projection, residual, RMSNorm, SwiGLU FFN, residual; then final RMSNorm, classifier.
  //! @throws bgtq::error(invalid_argument) if pos differs from the number of tokens fed
  //!         since reset, pos >= seq_len, or token is outside [0, vocab_size). After any
  //!         exception (also one from the backend) call reset() before continuing.
  const float* forward(int token, int pos);
  //! Starts a new sequence: position 0 next; also resets the backend.
  void reset();
  //! Installs a capture sink (nullptr to stop). Not owned.
  void set_capture(capture_sink* sink) { capture_ = sink; }
  //! The model's config.
  const config& cfg() const { return cfg_; }
  //! Number of tokens fed since the last reset (the next valid pos).
  int position() const { return n_fed_; }
  //! The model.
  const model& get_model() const { return model_; }

 private:
  const model& model_;
  kv_backend& kv_;
  config cfg_;
  rope_layout rope_;
  capture_sink* capture_ = nullptr;
  int n_fed_ = 0;
  std::vector<float> x_, xb_, xb2_, q_, k_, v_, att_, hb_, hb2_, logits_;
};

//! Greedy (argmax, lowest id on ties) decoding: resets the engine, feeds `prompt` from
//! position 0, then appends the argmax token until `steps` tokens were generated, the
//! context (seq_len) is full, or BOS or EOS is produced (that token is not returned).
//! @return the generated tokens, prompt excluded.
//! @throws bgtq::error(invalid_argument) if prompt is empty, longer than seq_len, or steps < 0.
std::vector<int> generate_greedy(engine& e, const std::vector<int>& prompt, int steps);

//! The log-sum-exp of n logits, in double (max subtracted first). With `out`, also the
//! log-softmax row out[i] = logits[i] - lse, rounded to float (mean_nll's rows).
double log_softmax(const float* logits, int n, float* out = nullptr);

//! Teacher-forced mean negative log-likelihood in nats/token: resets the engine, feeds
//! tokens[0..T-2] and averages -log p(tokens[t] | tokens[<t]) over t = 1..T-1 (computed
//! in double). If `logprobs_out` is given it receives T-1 rows of vocab_size floats:
//! row t is log_softmax of the logits after tokens[0..t], i.e. the distribution that
//! scored tokens[t+1].
//! @throws bgtq::error(invalid_argument) if T < 2 or T > seq_len.
double mean_nll(engine& e, const std::vector<int>& tokens, std::vector<std::vector<float>>* logprobs_out = nullptr);

//! Post-RoPE activations of one sequence, float32, C order (the .npy layout):
//! q [n_layers][n_tokens][n_heads][head_dim], k and v [n_layers][n_tokens][n_kv_heads][head_dim].
struct activations {
  int n_layers = 0, n_tokens = 0, n_heads = 0, n_kv_heads = 0, head_dim = 0;
  std::vector<float> q, k, v;
};

//! Resets the engine and feeds `tokens` at positions 0..T-1, recording the post-RoPE q, k
//! and v of every layer and position. Replaces any installed capture sink and leaves none
//! installed. `progress(done, total)`, if given, is called after each token.
//! @throws bgtq::error(invalid_argument) if tokens is empty or longer than seq_len, or a
//!         token is outside the vocabulary; (capacity_exhausted) naming the size if the
//!         arrays exceed the memory limit (physical memory or `ulimit -v`) or cannot be
//!         allocated.
activations capture_activations(engine& e, const std::vector<int>& tokens,
                                const std::function<void(int, int)>& progress = {});

//! One document per line of a text file: a trailing '\r' (CRLF files) is removed and
//! empty lines are skipped.
//! @throws bgtq::error(io_error) if the file cannot be read.
std::vector<std::string> read_documents(const std::string& path);

//! Concatenates documents into one token sequence, each document encoded with a leading
//! BOS (no EOS), truncated to at most `max_tokens` tokens. Positions then run 0..T-1
//! across document boundaries, as in llama2.c's training batches.
std::vector<int> encode_documents(const tokenizer& tok, const std::vector<std::string>& docs, std::size_t max_tokens);

}  // namespace bgtq::llama2c
