// llama2.c checkpoint loading and validation.
#include <bit>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>

#include <bgtq/core/error.hpp>

#include "io_util.hpp"
#include "llama2c.hpp"

namespace bgtq::llama2c {

static_assert(std::endian::native == std::endian::little, "llama2c files are little-endian; add byte swapping for this host");

namespace {

void check_range(const std::string& what, const char* field, long long v, long long lo, long long hi) {
  if (v < lo || v > hi)
    fail(errc::format_error, what + ": " + field + " = " + std::to_string(v) + " is outside the sane range [" +
                                 std::to_string(lo) + ", " + std::to_string(hi) + "]");
}

}  // namespace

void config::validate(const std::string& what) const {
  check_range(what, "dim", dim, 2, 65536);
  check_range(what, "hidden_dim", hidden_dim, 1, 1 << 20);
  check_range(what, "n_layers", n_layers, 1, 4096);
  check_range(what, "n_heads", n_heads, 1, dim);
  check_range(what, "n_kv_heads", n_kv_heads, 1, n_heads);
  check_range(what, "vocab_size", vocab_size, 1, 1 << 22);
  check_range(what, "seq_len", seq_len, 1, 1 << 20);
  if (dim % n_heads != 0)
    fail(errc::format_error, what + ": n_heads = " + std::to_string(n_heads) + " does not divide dim = " + std::to_string(dim));
  if (head_dim() % 2 != 0)
    fail(errc::format_error, what + ": head_dim = dim / n_heads = " + std::to_string(head_dim()) +
                                 " is odd (RoPE needs pairs)");
  if (n_heads % n_kv_heads != 0)
    fail(errc::format_error, what + ": n_kv_heads = " + std::to_string(n_kv_heads) + " does not divide n_heads = " +
                                 std::to_string(n_heads));
}

std::size_t config::checkpoint_floats() const {
  // All factors are bounded by validate(), so no product overflows 64 bits.
  const std::size_t d = static_cast<std::size_t>(dim), h = static_cast<std::size_t>(hidden_dim),
                    L = static_cast<std::size_t>(n_layers), V = static_cast<std::size_t>(vocab_size),
                    hd = static_cast<std::size_t>(head_dim()), qd = static_cast<std::size_t>(n_heads) * hd,
                    kvd = static_cast<std::size_t>(kv_dim()), S = static_cast<std::size_t>(seq_len);
  std::size_t n = V * d;            // token_embedding
  n += L * d;                       // rms_att
  n += L * qd * d;                  // wq
  n += 2 * L * kvd * d;             // wk, wv
  n += L * d * qd;                  // wo
  n += L * d;                       // rms_ffn
  n += 3 * L * h * d;               // w1, w2, w3
  n += d;                           // rms_final
  n += S * hd;                      // freq_cis_real + freq_cis_imag, [seq_len][hd/2] each
  if (!shared_classifier) n += V * d;  // wcls
  return n;
}

namespace {
// The config of the 7-int header (dim, hidden_dim, n_layers, n_heads, n_kv_heads,
// vocab_size whose sign says whether the classifier is shared, seq_len), unvalidated;
// a vocab_size of INT_MIN, which has no magnitude, gives 0.
config config_from_header(const std::int32_t (&h)[7]) {
  config c;
  c.dim = h[0];
  c.hidden_dim = h[1];
  c.n_layers = h[2];
  c.n_heads = h[3];
  c.n_kv_heads = h[4];
  c.shared_classifier = h[5] > 0;
  c.vocab_size = h[5] > 0 ? h[5] : h[5] == std::numeric_limits<std::int32_t>::min() ? 0 : -h[5];
  c.seq_len = h[6];
  return c;
}
}  // namespace

model model::from_bytes(const void* data, std::size_t size, const std::string& name) {
  if (data == nullptr && size != 0) fail(errc::invalid_argument, name + ": null data pointer with size " + std::to_string(size));
  const auto* bytes = static_cast<const unsigned char*>(data);
  constexpr std::size_t header_bytes = 7 * sizeof(std::int32_t);
  if (size < header_bytes)
    fail(errc::format_error, name + ": " + std::to_string(size) + " bytes is too short for the llama2.c header (" +
                                 std::to_string(header_bytes) + " bytes)");
  std::int32_t h[7];
  std::memcpy(h, bytes, header_bytes);
  if (h[5] == 0 || h[5] == std::numeric_limits<std::int32_t>::min())
    fail(errc::format_error, name + ": vocab_size = " + std::to_string(h[5]) + " is invalid");
  config c = config_from_header(h);
  c.validate(name);

  const std::size_t expected = c.checkpoint_bytes();
  if (size != expected)
    fail(errc::format_error,
         name + ": size " + std::to_string(size) + " bytes does not match the header (dim " + std::to_string(c.dim) +
             ", hidden " + std::to_string(c.hidden_dim) + ", layers " + std::to_string(c.n_layers) + ", heads " +
             std::to_string(c.n_heads) + "/" + std::to_string(c.n_kv_heads) + ", vocab " + std::to_string(c.vocab_size) +
             (c.shared_classifier ? " tied" : " untied") + ", seq_len " + std::to_string(c.seq_len) + "): expected " +
             std::to_string(expected) + " bytes, actual " + std::to_string(size));

  const std::size_t d = static_cast<std::size_t>(c.dim), hid = static_cast<std::size_t>(c.hidden_dim),
                    L = static_cast<std::size_t>(c.n_layers), V = static_cast<std::size_t>(c.vocab_size),
                    hd = static_cast<std::size_t>(c.head_dim()), qd = static_cast<std::size_t>(c.n_heads) * hd,
                    kvd = static_cast<std::size_t>(c.kv_dim()), S = static_cast<std::size_t>(c.seq_len);
  std::size_t off = header_bytes;
  auto take = [&](std::vector<float>& dst, std::size_t n, const char* tensor) {
    dst.resize(n);
    if (n) std::memcpy(dst.data(), bytes + off, n * sizeof(float));
    for (std::size_t i = 0; i < n; ++i) {
      if (!std::isfinite(dst[i]))
        fail(errc::format_error, name + ": non-finite weight in " + tensor + " (element " + std::to_string(i) +
                                     ", byte offset " + std::to_string(off + i * sizeof(float)) + ")");
    }
    off += n * sizeof(float);
  };
  model m;
  m.cfg_ = c;
  model_weights& w = m.w_;
  take(w.token_embedding, V * d, "token_embedding");
  take(w.rms_att, L * d, "rms_att");
  take(w.wq, L * qd * d, "wq");
  take(w.wk, L * kvd * d, "wk");
  take(w.wv, L * kvd * d, "wv");
  take(w.wo, L * d * qd, "wo");
  take(w.rms_ffn, L * d, "rms_ffn");
  take(w.w1, L * hid * d, "w1");
  take(w.w2, L * d * hid, "w2");
  take(w.w3, L * hid * d, "w3");
  take(w.rms_final, d, "rms_final");
  off += S * hd * sizeof(float);  // legacy freq_cis_real / freq_cis_imag: RoPE is recomputed
  if (!c.shared_classifier) take(w.wcls, V * d, "wcls");
  BGTQ_REQUIRE(off == size, errc::format_error, name + ": internal size bookkeeping mismatch");
  return m;
}

model model::from_weights(const config& c, model_weights w) {
  c.validate("model::from_weights");
  const std::size_t d = static_cast<std::size_t>(c.dim), hid = static_cast<std::size_t>(c.hidden_dim),
                    L = static_cast<std::size_t>(c.n_layers), V = static_cast<std::size_t>(c.vocab_size),
                    qd = static_cast<std::size_t>(c.n_heads) * static_cast<std::size_t>(c.head_dim()),
                    kvd = static_cast<std::size_t>(c.kv_dim());
  auto want = [](const std::vector<float>& t, std::size_t n, const char* tensor) {
    if (t.size() != n)
      fail(errc::shape_mismatch, std::string("model::from_weights: ") + tensor + " has " + std::to_string(t.size()) +
                                     " floats, expected " + std::to_string(n));
  };
  want(w.token_embedding, V * d, "token_embedding");
  want(w.rms_att, L * d, "rms_att");
  want(w.wq, L * qd * d, "wq");
  want(w.wk, L * kvd * d, "wk");
  want(w.wv, L * kvd * d, "wv");
  want(w.wo, L * d * qd, "wo");
  want(w.rms_ffn, L * d, "rms_ffn");
  want(w.w1, L * hid * d, "w1");
  want(w.w2, L * d * hid, "w2");
  want(w.w3, L * hid * d, "w3");
  want(w.rms_final, d, "rms_final");
  want(w.wcls, c.shared_classifier ? 0 : V * d, "wcls");
  model m;
  m.cfg_ = c;
  m.w_ = std::move(w);
  return m;
}

model model::load(const std::string& path) {
  // Read the header first, then at most the size it implies and one byte more (which
  // from_bytes reports as a size mismatch): a stream that never ends (/dev/zero) or a
  // huge file is refused on its first bytes, not read until memory runs out.
  detail::bounded_reader r(path, "checkpoint");
  constexpr std::size_t header_bytes = 7 * sizeof(std::int32_t);
  std::size_t want = header_bytes;
  if (r.fill_to(header_bytes)) {
    std::int32_t h[7];
    std::memcpy(h, r.bytes().data(), header_bytes);
    const config c = config_from_header(h);
    try {
      c.validate(path);
      want = c.checkpoint_bytes();
    } catch (const error&) {
      // from_bytes reports the bad header
    }
  }
  r.fill_to(want + 1);
  const std::vector<unsigned char>& bytes = r.bytes();
  if (bytes.size() > want && want > header_bytes) {
    std::error_code ec;
    const auto actual = std::filesystem::is_regular_file(path, ec) ? std::filesystem::file_size(path, ec) : 0;
    fail(errc::format_error, path + ": the file holds more bytes than its header implies: expected " + std::to_string(want) +
                                 " bytes, actual " + (actual > want ? std::to_string(actual) : "more") +
                                 " (trailing bytes, or not a llama2.c checkpoint)");
  }
  try {
    return from_bytes(bytes.data(), bytes.size(), path);
  } catch (const std::bad_alloc&) {
    fail(errc::capacity_exhausted, path + ": cannot allocate the weights (" + detail::bytes_text(bytes.size()) + ")");
  }
}

}  // namespace bgtq::llama2c
