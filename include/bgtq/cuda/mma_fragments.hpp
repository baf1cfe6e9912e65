#pragma once
//! @file cuda/mma_fragments.hpp
//! Bit-plane codes -> tensor-core fragments, for the tensor-core decode path
//! (kernels/decode_mma.cu, docs/gpu.md "Tensor-core decode"). Plain C++: the functions
//! are `BGTQ_HOST_DEVICE`, with the device instruction (PTX `prmt`, `shf`, `cvt`) under
//! `__CUDA_ARCH__` and an exact portable equivalent otherwise, so the host tests check
//! the very arithmetic the kernel runs.
//!
//! The decode kernel multiplies on `mma.sync.m16n8k16.row.col.f32.f16.f16.f32`. Its
//! fragments (lane = 4 * gid + tq, gid = lane / 4, tq = lane % 4; a register holds two
//! fp16 values, the lower index in the low half):
//! `// A 16x16 (row-major): reg0 = A[gid][2tq, 2tq+1]   reg1 = A[gid+8][2tq, 2tq+1]`
//! `//                      reg2 = A[gid][2tq+8, +9]    reg3 = A[gid+8][2tq+8, +9]`
//! `// B 16x8  (col-major): reg0 = B[2tq, 2tq+1][gid]   reg1 = B[2tq+8, 2tq+9][gid]`
//! `// C/D 16x8 (fp32):     c0, c1 = D[gid][2tq, 2tq+1]   c2, c3 = D[gid+8][2tq, 2tq+1]`
//!
//! Keys (scores = codes x q_rot): M = tokens, K = coordinates, N = query heads. A lane
//! needs the codes of 4 tokens of a 32-token chunk (positions gid + 8i, i = 0..3: rows
//! gid and gid+8 of the chunk's two 16-row m-tiles) at pairs of adjacent coordinates.
//! `key_selector` rotates each bit-plane word so those bits land in nibbles: nibble 2i
//! holds the code of token gid + 8i at coordinate j, nibble 2i+1 at coordinate j+1 (the
//! wide path); `key_selector_pair`, which the kernel's 1..4-bit keys use, does the same
//! for both chunks at once with multiplies instead of rotates, in a byte order rotated
//! across the chunks (its comment).
//!
//! Values (acc = codes^T x weights): M = coordinates, K = tokens, N = heads. A lane needs
//! one coordinate's codes of the 8 tokens tq + 4i of a chunk: `value_selector` puts the
//! code of token tq + 4i in nibble i. The k-columns of the two 16-token k-tiles of a
//! chunk then map to tokens as `value_token`: k-column 2tq + e + 8h of k-tile kap holds
//! chunk token tq + 16 kap + 8e + 4h (so the B pair of a lane, tokens t and t + 8, is
//! held by one score lane; see docs/gpu.md).
//!
//! Codes of up to 4 bits become fp16 centroids by byte permutes from a 16-entry byte
//! table (`lut16`): two `prmt` give the low and high bytes of four centroids, two more
//! interleave them into the two A registers (`key_pairs`, `value_pairs`).

#include <cstdint>

#include "../config.hpp"
#include "../core/half.hpp"

namespace bgtq::cuda::mma {

//! Query heads a decode CTA serves (the mma's N).
inline constexpr int heads = 8;
//! Tokens one warp handles per step (two 32-token chunks, one page at P = 64).
inline constexpr int unit_tokens = 64;
//! Warps of a tensor-core decode CTA.
inline constexpr int warps = 4;
//! Largest value m-tile count (value coordinates, padded to 16): head_dim <= 128.
inline constexpr int max_value_mtiles = 8;
//! Widest code the byte-permute lookups handle; wider codes read a shared fp16 table.
inline constexpr int max_lut_bits = 4;

//! x rotated right by s (mod 32) bits (SHF.R.W on the device).
BGTQ_HOST_DEVICE std::uint32_t rotr(std::uint32_t x, int s) {
#if defined(__CUDA_ARCH__)
  return __funnelshift_r(x, x, static_cast<unsigned>(s));
#else
  const unsigned r = static_cast<unsigned>(s) & 31u;
  return r == 0 ? x : ((x >> r) | (x << (32u - r)));
#endif
}

//! PTX `prmt.b32 d, a, b, c` (generic mode): byte n of the result is byte
//! (c >> 4n) & 7 of the 8-byte value {b, a} (a = bytes 0..3), or, when bit 3 of that
//! selector nibble is set, that byte's top bit replicated over all 8 bits. Bits 16..31
//! of c are ignored.
BGTQ_HOST_DEVICE std::uint32_t prmt(std::uint32_t a, std::uint32_t b, std::uint32_t c) {
#if defined(__CUDA_ARCH__)
  std::uint32_t d;
  asm("prmt.b32 %0, %1, %2, %3;" : "=r"(d) : "r"(a), "r"(b), "r"(c));
  return d;
#else
  const std::uint64_t src = (static_cast<std::uint64_t>(b) << 32) | a;
  std::uint32_t d = 0;
  for (int n = 0; n < 4; ++n) {
    const unsigned sel = (c >> (4 * n)) & 15u;
    std::uint32_t byte = static_cast<std::uint32_t>((src >> (8 * (sel & 7u))) & 0xFFu);
    if (sel & 8u) byte = (byte & 0x80u) ? 0xFFu : 0x00u;
    d |= byte << (8 * n);
  }
  return d;
#endif
}

//! High word of a * b (IMAD.HI on the device, an FMA-pipe instruction).
BGTQ_HOST_DEVICE std::uint32_t mulhi32(std::uint32_t a, std::uint32_t b) {
#if defined(__CUDA_ARCH__)
  return __umulhi(a, b);
#else
  return static_cast<std::uint32_t>((static_cast<std::uint64_t>(a) * b) >> 32);
#endif
}

//! x >> 16 (a selector's upper four nibbles), as the high word of x * 2^16: an IMAD.HI on
//! the device, which issues to the FMA pipe. The shift would be one more instruction for
//! the integer ALU pipe, which the permutes, rotates and merges of the lookups already
//! keep busy, at half the issue rate of the FMA pipe on sm_80/sm_90 (docs/gpu.md,
//! "Which pipe binds").
BGTQ_HOST_DEVICE std::uint32_t upper16(std::uint32_t x) { return mulhi32(x, 0x10000u); }

//! Two floats as an fp16 pair (round to nearest even): `lo` in bits 0..15.
BGTQ_HOST_DEVICE std::uint32_t half2_bits(float lo, float hi) {
#if defined(__CUDA_ARCH__)
  std::uint32_t d;
  asm("cvt.rn.f16x2.f32 %0, %1, %2;" : "=r"(d) : "f"(hi), "f"(lo));  // the first source fills the upper half
  return d;
#else
  return static_cast<std::uint32_t>(float_to_half_bits(lo)) | (static_cast<std::uint32_t>(float_to_half_bits(hi)) << 16);
#endif
}

//! Byte tables of up to 16 fp16 centroids for the byte-permute lookups:
//! `// lo[m] byte n = low byte of centroid 4m + n;  hi[m] byte n = its high byte`
//! Entries past 2^bits are zero.
struct lut16 {
  std::uint32_t lo[4];
  std::uint32_t hi[4];
};

//! The table of the fp16 centroids h[0 .. 2^bits) (bits <= 4).
BGTQ_HOST_DEVICE lut16 make_lut(const std::uint16_t* h, int bits) {
  lut16 t{{0u, 0u, 0u, 0u}, {0u, 0u, 0u, 0u}};
  const int n = 1 << bits;
  for (int v = 0; v < n && v < 16; ++v) {
    t.lo[v >> 2] |= static_cast<std::uint32_t>(h[v] & 0xFFu) << (8 * (v & 3));
    t.hi[v >> 2] |= static_cast<std::uint32_t>(h[v] >> 8) << (8 * (v & 3));
  }
  return t;
}

//! Key selector (B <= 4 bits): nibble 2i = code of chunk token g + 8i at the
//! coordinate whose bit planes are wj[0..B), nibble 2i + 1 = its code at the coordinate
//! of wj2[0..B) (i = 0..3). Plane word k holds bit k of the 32 tokens' codes, token t
//! in bit t. Two rotates and two masked merges per plane.
template <int B>
BGTQ_HOST_DEVICE std::uint32_t key_selector(const std::uint32_t* wj, const std::uint32_t* wj2, int g) {
  static_assert(B >= 1 && B <= max_lut_bits, "key_selector: 1..4 bits");
  std::uint32_t sel = 0;
#if defined(__CUDACC__)
#pragma unroll
#endif
  for (int k = 0; k < B; ++k) {
    sel |= rotr(wj[k], g - k) & (0x01010101u << k);
    sel |= rotr(wj2[k], g - k - 4) & (0x10101010u << k);
  }
  return sel;
}

//! Lane g's key multiplier base, 2^(8 - g) (g = 0..7). The kernel reads it from shared
//! memory: known to be a power of two, the compiler would turn the multiplies of
//! key_selector_pair back into shifts on the ALU pipe.
BGTQ_HOST_DEVICE constexpr std::uint32_t key_multiplier(int g) { return 1u << (8 - g); }

//! The key selectors of both 32-token chunks at once (B <= 4 bits), from the 64-bit plane
//! rows ra[0..B) (coordinate j) and rb[0..B) (coordinate j + 1), chunk 0 in the low words;
//! m0 = key_multiplier(g), lane g's multiplier base.
//! `sa` holds chunk 1's token g + 24 in byte 0 and chunk 0's tokens g, g + 8, g + 16 in
//! bytes 1..3; `sb` chunk 0's token g + 24 in byte 0 and chunk 1's tokens g, g + 8, g + 16
//! in bytes 1..3; in each byte the low nibble is the code at j, the high one at j + 1.
//! key_selector's rotates become multiplies: the row (w1:w0) shifted left by t = 8 - g + k
//! as a pair puts token g + 8i of each chunk at bit 8(i + 1) + k, the chunk's last token
//! carried into the other chunk's byte 0 (w0 << t and the bits w1 shifts out are disjoint,
//! so adding them merges them). Four FMA-pipe instructions per row (two IMAD.HI, two
//! IMAD) where key_selector took two rotates on the integer ALU pipe, which issues at half
//! the FMA pipe's rate (docs/gpu.md, "Which pipe binds"); the merges are as before.
template <int B>
BGTQ_HOST_DEVICE void key_selector_pair(const unsigned long long* ra, const unsigned long long* rb, std::uint32_t m0,
                                        std::uint32_t& sa, std::uint32_t& sb) {
  static_assert(B >= 1 && B <= max_lut_bits, "key_selector_pair: 1..4 bits");
  sa = 0u;
  sb = 0u;
#if defined(__CUDACC__)
#pragma unroll
#endif
  for (int h = 0; h < 2; ++h) {  // h = 0: coordinate j (low nibbles), 1: j + 1 (high nibbles)
    const unsigned long long* rows = h == 0 ? ra : rb;
#if defined(__CUDACC__)
#pragma unroll
#endif
    for (int k = 0; k < B; ++k) {
      const std::uint32_t m = m0 << (k + 4 * h);  // 2^t, t = 8 - g + k (+ 4 for coordinate j + 1)
      const std::uint32_t w0 = static_cast<std::uint32_t>(rows[k]), w1 = static_cast<std::uint32_t>(rows[k] >> 32);
      // (w1:w0) << t as a pair, each chunk's shifted-out top bits added into the other's
      // low bits (they are below t, where the other word's shift left zeros)
      const std::uint32_t vb = w1 * m + mulhi32(w0, m);
      const std::uint32_t va = w0 * m + mulhi32(w1, m);
      const std::uint32_t mask = (h == 0 ? 0x01010101u : 0x10101010u) << k;
      sa |= va & mask;
      sb |= vb & mask;
    }
  }
}

//! Value selector (B <= 4 bits): nibble i = code of chunk token tq + 4i (i = 0..7).
template <int B>
BGTQ_HOST_DEVICE std::uint32_t value_selector(const std::uint32_t* w, int tq) {
  static_assert(B >= 1 && B <= max_lut_bits, "value_selector: 1..4 bits");
  std::uint32_t sel = 0;
#if defined(__CUDACC__)
#pragma unroll
#endif
  for (int k = 0; k < B; ++k) sel |= rotr(w[k], tq - k) & (0x11111111u << k);
  return sel;
}

//! Codes of 5..8 bits (B): `lo` = the selector of planes 0..3, `hi` = the selector of
//! planes 4..B-1 in the same nibbles (nibble n of hi holds bits 4.. of nibble n's code).
//! Key layout as key_selector: wj, wj2 are the two coordinates' B plane words.
template <int B>
BGTQ_HOST_DEVICE void key_selectors_wide(const std::uint32_t* wj, const std::uint32_t* wj2, int g, std::uint32_t& lo,
                                         std::uint32_t& hi) {
  static_assert(B > max_lut_bits && B <= 2 * max_lut_bits, "key_selectors_wide: 5..8 bits");
  lo = key_selector<max_lut_bits>(wj, wj2, g);
  hi = key_selector<B - max_lut_bits>(wj + max_lut_bits, wj2 + max_lut_bits, g);
}

//! Value layout as value_selector (nibble i: chunk token tq + 4i), codes of 5..8 bits.
template <int B>
BGTQ_HOST_DEVICE void value_selectors_wide(const std::uint32_t* w, int tq, std::uint32_t& lo, std::uint32_t& hi) {
  static_assert(B > max_lut_bits && B <= 2 * max_lut_bits, "value_selectors_wide: 5..8 bits");
  lo = value_selector<max_lut_bits>(w, tq);
  hi = value_selector<B - max_lut_bits>(w + max_lut_bits, tq);
}

//! Whole codes from a wide selector pair: byte m of `even` = the code of nibble 2m,
//! byte m of `odd` = the code of nibble 2m + 1 (indices into the fp16 centroid table).
BGTQ_HOST_DEVICE void wide_code_bytes(std::uint32_t lo, std::uint32_t hi, std::uint32_t& even, std::uint32_t& odd) {
  even = (lo & 0x0F0F0F0Fu) | ((hi & 0x0F0F0F0Fu) << 4);
  odd = ((lo >> 4) & 0x0F0F0F0Fu) | (hi & 0xF0F0F0F0u);
}

//! Byte m (0..3) of x.
BGTQ_HOST_DEVICE constexpr unsigned byte_of(std::uint32_t x, int m) { return (x >> (8 * m)) & 0xFFu; }

//! Low and high bytes of the centroids of the codes in nibbles 0..3 of sel (byte n of
//! lo / hi belongs to nibble n). B <= 3: one permute each from an 8-entry table; B = 4:
//! both 8-entry halves, chosen per byte by bit 3 of the code (a sign-replicating
//! permute builds the byte mask).
template <int B>
BGTQ_HOST_DEVICE void lookup_bytes(std::uint32_t sel, const lut16& t, std::uint32_t& lo, std::uint32_t& hi) {
  static_assert(B >= 1 && B <= max_lut_bits, "lookup_bytes: 1..4 bits");
  if constexpr (B <= 3) {
    lo = prmt(t.lo[0], t.lo[1], sel);
    hi = prmt(t.hi[0], t.hi[1], sel);
  } else {
    const std::uint32_t s7 = sel & 0x7777u;
    const std::uint32_t m = prmt(sel << 4, sel, 0xD9C8u);  // byte n = 0xFF iff bit 3 of nibble n
    lo = (prmt(t.lo[0], t.lo[1], s7) & ~m) | (prmt(t.lo[2], t.lo[3], s7) & m);
    hi = (prmt(t.hi[0], t.hi[1], s7) & ~m) | (prmt(t.hi[2], t.hi[3], s7) & m);
  }
}

//! Key A registers from lookup_bytes' output: r0 = {c(nibble 0), c(nibble 1)},
//! r1 = {c(nibble 2), c(nibble 3)} (fp16 pairs: one token, two coordinates).
BGTQ_HOST_DEVICE void key_pairs(std::uint32_t lo, std::uint32_t hi, std::uint32_t& r0, std::uint32_t& r1) {
  r0 = prmt(lo, hi, 0x5140u);
  r1 = prmt(lo, hi, 0x7362u);
}

//! Value A registers: r0 = {c(nibble 0), c(nibble 2)}, r1 = {c(nibble 1), c(nibble 3)}
//! (one coordinate, the token pairs (t, t + 8) of value_token).
BGTQ_HOST_DEVICE void value_pairs(std::uint32_t lo, std::uint32_t hi, std::uint32_t& r0, std::uint32_t& r1) {
  r0 = prmt(lo, hi, 0x6240u);
  r1 = prmt(lo, hi, 0x7351u);
}

//! Chunk token of k-column kc (0..15) of value k-tile kap (0, 1) for lane tq.
BGTQ_HOST_DEVICE constexpr int value_token(int kap, int kc) {
  const int tq = (kc & 7) >> 1, e = kc & 1, h = kc >> 3;
  return tq + 16 * kap + 8 * e + 4 * h;
}

//! Unit token (0..63) of row r (0..15) of key m-tile mt (0..3): natural order.
BGTQ_HOST_DEVICE constexpr int key_token(int mt, int r) { return 16 * mt + r; }

//! 32-bit word index of the B operand of the value product in a warp's weight buffer:
//! `// wbuf[head][chunk c][k-tile kap][slot h][tq] = {w(token t), w(token t + 8)},
//! //  t = tq + 16 kap + 4h; rows of 36 words (32 + 4: conflict-free lane reads)`
BGTQ_HOST_DEVICE constexpr int wbuf_word(int head, int c, int kap, int h, int tq) {
  return head * 36 + ((c * 2 + kap) * 2 + h) * 4 + tq;
}
//! Words of one warp's weight buffer.
inline constexpr int wbuf_words = heads * 36;

}  // namespace bgtq::cuda::mma
