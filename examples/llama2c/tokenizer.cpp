// llama2.c byte-level BPE tokenizer: loading, encoding (priority-queue merges) and decoding.
#include <cmath>
#include <cstdint>
#include <cstring>
#include <queue>

#include <bgtq/core/error.hpp>

#include "io_util.hpp"
#include "llama2c.hpp"

namespace bgtq::llama2c {

namespace {

// "<0xHH>" (upper- or lower-case hex) -> the byte value, else -1.
int parse_byte_piece(const std::string& s) {
  if (s.size() != 6 || s[0] != '<' || s[1] != '0' || s[2] != 'x' || s[5] != '>') return -1;
  auto hex = [](char ch) -> int {
    if (ch >= '0' && ch <= '9') return ch - '0';
    if (ch >= 'A' && ch <= 'F') return ch - 'A' + 10;
    if (ch >= 'a' && ch <= 'f') return ch - 'a' + 10;
    return -1;
  };
  const int hi = hex(s[3]), lo = hex(s[4]);
  if (hi < 0 || lo < 0) return -1;
  return hi * 16 + lo;
}

}  // namespace

tokenizer tokenizer::from_bytes(const void* data, std::size_t size, int vocab_size, const std::string& name) {
  if (vocab_size <= 0 || vocab_size > (1 << 22))
    fail(errc::invalid_argument, name + ": vocab_size = " + std::to_string(vocab_size) + " is outside [1, 4194304]");
  if (data == nullptr && size != 0) fail(errc::invalid_argument, name + ": null data pointer with size " + std::to_string(size));
  const auto* bytes = static_cast<const unsigned char*>(data);
  if (size < 4)
    fail(errc::format_error, name + ": " + std::to_string(size) + " bytes is too short for the tokenizer header (4 bytes)");
  std::int32_t max_len;
  std::memcpy(&max_len, bytes, 4);
  if (max_len < 1 || max_len > 65536)
    fail(errc::format_error, name + ": max_token_length = " + std::to_string(max_len) + " is outside [1, 65536]");
  tokenizer t;
  t.max_token_length_ = max_len;
  // Reserve only what the file can actually hold (>= 8 bytes per token), so a huge
  // vocab_size with a tiny file cannot make us allocate much before failing.
  const std::size_t plausible = std::min<std::size_t>(static_cast<std::size_t>(vocab_size), (size - 4) / 8);
  t.pieces_.reserve(plausible);
  t.scores_.reserve(plausible);
  std::size_t off = 4;
  for (int i = 0; i < vocab_size; ++i) {
    if (size - off < 8)
      fail(errc::format_error, name + ": truncated at token " + std::to_string(i) + " of " + std::to_string(vocab_size) +
                                   " (byte offset " + std::to_string(off) + ", file has " + std::to_string(size) +
                                   " bytes; is vocab_size right?)");
    float score;
    std::int32_t len;
    std::memcpy(&score, bytes + off, 4);
    std::memcpy(&len, bytes + off + 4, 4);
    if (!std::isfinite(score))
      fail(errc::format_error, name + ": token " + std::to_string(i) + " has a non-finite score (byte offset " +
                                   std::to_string(off) + ")");
    if (len < 0 || len > max_len)
      fail(errc::format_error, name + ": token " + std::to_string(i) + " has length " + std::to_string(len) +
                                   ", outside [0, max_token_length = " + std::to_string(max_len) + "] (byte offset " +
                                   std::to_string(off + 4) + ")");
    off += 8;
    if (size - off < static_cast<std::size_t>(len))
      fail(errc::format_error, name + ": truncated inside token " + std::to_string(i) + " (needs " + std::to_string(len) +
                                   " bytes at offset " + std::to_string(off) + ", file has " + std::to_string(size) + ")");
    t.pieces_.emplace_back(reinterpret_cast<const char*>(bytes + off), static_cast<std::size_t>(len));
    t.scores_.push_back(score);
    off += static_cast<std::size_t>(len);
  }
  if (off != size)
    fail(errc::format_error, name + ": vocab size mismatch: " + std::to_string(size - off) + " bytes follow token " +
                                 std::to_string(vocab_size - 1) + " (the file holds more than vocab_size = " +
                                 std::to_string(vocab_size) + " tokens)");
  t.decoded_.resize(t.pieces_.size());
  t.index_.reserve(t.pieces_.size());
  for (std::size_t i = 0; i < t.pieces_.size(); ++i) {
    const int b = parse_byte_piece(t.pieces_[i]);
    t.decoded_[i] = b >= 0 ? std::string(1, static_cast<char>(b)) : t.pieces_[i];
    t.index_.emplace(t.pieces_[i], static_cast<int>(i));  // keeps the lowest id of duplicates
  }
  return t;
}

tokenizer tokenizer::load(const std::string& path, int vocab_size) {
  // At most what vocab_size tokens of max_token_length bytes take (and a byte more, which
  // from_bytes reports as trailing): a stream that never ends is refused on its first bytes.
  detail::bounded_reader r(path, "tokenizer");
  std::size_t want = 4;
  if (r.fill_to(4) && vocab_size > 0) {
    std::int32_t max_len = 0;
    std::memcpy(&max_len, r.bytes().data(), 4);
    if (max_len >= 1 && max_len <= 65536)
      want = 4 + static_cast<std::size_t>(vocab_size) * (8 + static_cast<std::size_t>(max_len));
  }
  r.fill_to(want + 1);
  try {
    return from_bytes(r.bytes().data(), r.bytes().size(), vocab_size, path);
  } catch (const std::bad_alloc&) {
    fail(errc::capacity_exhausted, path + ": cannot allocate the vocabulary (" + std::to_string(vocab_size) + " tokens)");
  }
}

const std::string& tokenizer::piece(int token) const {
  if (token < 0 || token >= vocab_size())
    fail(errc::invalid_argument, "token id " + std::to_string(token) + " is outside [0, " + std::to_string(vocab_size()) + ")");
  return pieces_[static_cast<std::size_t>(token)];
}

float tokenizer::score(int token) const {
  (void)piece(token);
  return scores_[static_cast<std::size_t>(token)];
}

int tokenizer::lookup(const std::string& s) const {
  const auto it = index_.find(s);
  return it == index_.end() ? -1 : it->second;
}

std::string tokenizer::decode(int prev_token, int token) const {
  (void)piece(token);
  const std::string& s = decoded_[static_cast<std::size_t>(token)];
  if (prev_token == bos_token && !s.empty() && s[0] == ' ' && pieces_[static_cast<std::size_t>(token)][0] == ' ')
    return s.substr(1);
  return s;
}

std::string tokenizer::decode_all(const std::vector<int>& tokens, int prev_token) const {
  std::string out;
  for (const int t : tokens) {
    out += decode(prev_token, t);
    prev_token = t;
  }
  return out;
}

std::vector<int> tokenizer::encode(const std::string& text, bool bos, bool eos) const {
  std::vector<int> out;
  if (bos) out.push_back(bos_token);

  // 1. Initial symbols: dummy prefix, then one token per UTF-8 code point (or its bytes).
  std::vector<int> ids;
  ids.reserve(text.size() + 1);
  auto push_bytes = [&](const char* p, std::size_t n) {
    for (std::size_t i = 0; i < n; ++i) ids.push_back(static_cast<unsigned char>(p[i]) + 3);
  };
  if (!text.empty()) {
    const int sp = lookup(" ");
    if (sp >= 0) ids.push_back(sp);
    else push_bytes(" ", 1);
  }
  const auto is_cont = [](unsigned char ch) { return (ch & 0xC0) == 0x80; };
  std::size_t i = 0;
  while (i < text.size()) {
    // A code point: this byte plus following continuation bytes, at most 4 bytes in all.
    std::size_t n = 1;
    while (n < 4 && i + n < text.size() && is_cont(static_cast<unsigned char>(text[i + n]))) ++n;
    const int id = lookup(text.substr(i, n));
    if (id >= 0) ids.push_back(id);
    else push_bytes(text.data() + i, n);
    i += n;
  }
  for (const int id : ids)
    if (id >= vocab_size())
      fail(errc::invalid_argument, "tokenizer: byte fallback token " + std::to_string(id) + " is outside the vocabulary of " +
                                       std::to_string(vocab_size()) + " (no <0xHH> byte tokens?)");

  // 2. Merges. run.c repeatedly merges the adjacent pair with the highest score (leftmost
  // on ties, only scores > -1e10). Equivalent here: a max-heap of candidate pairs keyed
  // by (score, -left index), with stale entries skipped. Merging keeps the left node, so
  // a node's index orders nodes by position and the tie-break matches run.c exactly.
  const int n = static_cast<int>(ids.size());
  std::vector<int> next(static_cast<std::size_t>(n)), prev(static_cast<std::size_t>(n));
  for (int k = 0; k < n; ++k) {
    next[static_cast<std::size_t>(k)] = k + 1 < n ? k + 1 : -1;
    prev[static_cast<std::size_t>(k)] = k - 1;
  }
  struct cand {
    float score;
    int left, left_id, right_id, merged;
  };
  const auto worse = [](const cand& a, const cand& b) {
    if (a.score != b.score) return a.score < b.score;
    return a.left > b.left;
  };
  std::priority_queue<cand, std::vector<cand>, decltype(worse)> heap(worse);
  std::string buf;
  auto consider = [&](int left) {
    if (left < 0) return;
    const int right = next[static_cast<std::size_t>(left)];
    if (right < 0) return;
    const int a = ids[static_cast<std::size_t>(left)], b = ids[static_cast<std::size_t>(right)];
    buf = pieces_[static_cast<std::size_t>(a)];
    buf += pieces_[static_cast<std::size_t>(b)];
    const int m = lookup(buf);
    if (m < 0) return;
    const float s = scores_[static_cast<std::size_t>(m)];
    if (!(s > -1e10f)) return;
    heap.push(cand{s, left, a, b, m});
  };
  for (int k = 0; k + 1 < n; ++k) consider(k);
  while (!heap.empty()) {
    const cand c = heap.top();
    heap.pop();
    const auto L = static_cast<std::size_t>(c.left);
    if (ids[L] != c.left_id) continue;  // left node merged away or changed
    const int right = next[L];
    if (right < 0 || ids[static_cast<std::size_t>(right)] != c.right_id) continue;
    const auto R = static_cast<std::size_t>(right);
    ids[L] = c.merged;
    ids[R] = -1;
    next[L] = next[R];
    if (next[R] >= 0) prev[static_cast<std::size_t>(next[R])] = c.left;
    consider(prev[L]);
    consider(c.left);
  }
  for (int k = n > 0 ? 0 : -1; k >= 0; k = next[static_cast<std::size_t>(k)]) out.push_back(ids[static_cast<std::size_t>(k)]);
  if (eos) out.push_back(eos_token);
  return out;
}

}  // namespace bgtq::llama2c
