#pragma once
//! @file rope/layout.hpp
//! Which head dimensions form RoPE block i. This is the only place that knows; every
//! other component asks `rope_layout::block_dims`.
//!
//! - interleaved (Meta, GPT-J, llama2.c): block i = dims (2i, 2i+1)
//! - half (Hugging Face rotate_half, GPT-NeoX, Qwen): block i = dims (i, i + R/2)
//! - partial rotary (rotary_dim R < D, e.g. GLM): blocks 0..R/2-1 pair the rotary dims
//!   [0, R) by the convention above; the remaining dims [R, D) are paired in order,
//!   block R/2 + j = dims (R + 2j, R + 2j + 1), and are ordinary (non-rotating) blocks.

#include <array>
#include <cmath>
#include <string>

#include "../core/error.hpp"

namespace bgtq {

//! RoPE pairing convention.
enum class rope_pairing : unsigned char { interleaved = 0, half = 1 };

inline const char* to_string(rope_pairing p) noexcept { return p == rope_pairing::half ? "half" : "interleaved"; }

//! Parses "interleaved" or "half" (also "neox"/"hf" for half, "gptj"/"meta" for interleaved).
inline rope_pairing parse_rope_pairing(const std::string& s) {
  if (s == "interleaved" || s == "gptj" || s == "meta") return rope_pairing::interleaved;
  if (s == "half" || s == "neox" || s == "hf") return rope_pairing::half;
  fail(errc::invalid_argument, "unknown RoPE pairing '" + s + "' (expected interleaved or half)");
}

//! RoPE geometry of one head: head_dim D, pairing convention and rotary_dim R.
struct rope_layout {
  int head_dim = 0;                                  //!< D, even, >= 2
  rope_pairing pairing = rope_pairing::interleaved;  //!< convention of the rotary dims
  int rotary_dim = 0;                                //!< R, even, 0 <= R <= D (0: no block rotates)
  double base = 10000.0;                             //!< RoPE base (theta_i = base^(-2i/R))

  rope_layout() = default;
  //! Full rotary (R = D) unless `r` is given; r = 0 means no block rotates.
  //! @throws bgtq::error(invalid_argument) unless D is even and >= 2 and R is even in [0, D].
  rope_layout(int d, rope_pairing p, int r = -1, double b = 10000.0)
      : head_dim(d), pairing(p), rotary_dim(r < 0 ? d : r), base(b) {
    validate();
  }

  //! Checks the invariants; throws naming the offending value.
  void validate() const {
    BGTQ_REQUIRE(head_dim >= 2 && head_dim % 2 == 0, errc::invalid_argument,
                 "head_dim must be even and >= 2, got " + std::to_string(head_dim));
    BGTQ_REQUIRE(rotary_dim >= 0 && rotary_dim <= head_dim && rotary_dim % 2 == 0, errc::invalid_argument,
                 "rotary_dim must be even and in [0, head_dim=" + std::to_string(head_dim) + "], got " +
                     std::to_string(rotary_dim));
    BGTQ_REQUIRE(std::isfinite(base) && base > 1.0, errc::invalid_argument, "RoPE base must be finite and > 1");
  }

  //! Number of 2-D blocks, L = D/2.
  int num_blocks() const noexcept { return head_dim / 2; }
  //! Number of rotating blocks, R/2.
  int num_rotary_blocks() const noexcept { return rotary_dim / 2; }
  //! True if block i rotates with position.
  bool is_rotary(int i) const noexcept { return i < rotary_dim / 2; }

  //! The two head dimensions that form block i (0 <= i < L).
  std::array<int, 2> block_dims(int i) const noexcept {
    const int rb = rotary_dim / 2;
    if (i < rb) {
      if (pairing == rope_pairing::interleaved) return {2 * i, 2 * i + 1};
      return {i, i + rb};
    }
    const int j = i - rb;
    return {rotary_dim + 2 * j, rotary_dim + 2 * j + 1};
  }

  //! Angular frequency of rotary block i: base^(-2i/R). Zero for non-rotary blocks.
  double theta(int i) const noexcept {
    if (!is_rotary(i)) return 0.0;
    return std::pow(base, -2.0 * i / static_cast<double>(rotary_dim));
  }

  friend bool operator==(const rope_layout&, const rope_layout&) = default;
};

//! Applies RoPE at position `pos` to one head vector x[D] in place (float64 angles).
//! Block i rotates by pos * theta_i: (x_a, x_b) -> (x_a cos - x_b sin, x_a sin + x_b cos).
inline void apply_rope(const rope_layout& r, float* x, long pos) {
  for (int i = 0; i < r.num_rotary_blocks(); ++i) {
    const auto d = r.block_dims(i);
    const double ang = static_cast<double>(pos) * r.theta(i);
    const double c = std::cos(ang), s = std::sin(ang);
    const double a = x[d[0]], b = x[d[1]];
    x[d[0]] = static_cast<float>(a * c - b * s);
    x[d[1]] = static_cast<float>(a * s + b * c);
  }
}

}  // namespace bgtq
