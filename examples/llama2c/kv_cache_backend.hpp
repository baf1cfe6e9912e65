#pragma once
//! @file kv_cache_backend.hpp
//! Plugs any bgtq::kv_cache into the llama2.c engine: append() stores one position of
//! one layer, attend() runs bgtq::decode_attention over the packed pages. This is the
//! whole integration an engine needs (see docs/integration.md).

#include <bgtq/attention/decode.hpp>
#include <bgtq/cache/kv_cache.hpp>

#include <string>

#include "llama2c.hpp"

namespace bgtq::llama2c {

//! kv_backend over a bgtq cache holding one sequence.
//! @tparam Cache a bgtq::kv_cache instantiation
template <class Cache>
class cache_kv_backend : public kv_backend {
 public:
  //! Takes ownership of an empty cache whose shape matches the model.
  cache_kv_backend(Cache cache, const config& c) : cache_(std::move(cache)), ws_(cache_) {
    const auto& cc = cache_.config();
    BGTQ_REQUIRE(cc.layers == c.n_layers && cc.kv_heads == c.n_kv_heads && cc.q_heads == c.n_heads &&
                     cc.head_dim == c.head_dim(),
                 errc::shape_mismatch, "cache_kv_backend: the cache shape does not match the model");
    seq_ = cache_.add_sequence();
  }
  void reset() override {
    cache_.free_sequence(seq_);
    seq_ = cache_.add_sequence();
  }
  void append(int layer, int pos, const float* k, const float* v) override {
    BGTQ_REQUIRE(pos == cache_.length(seq_, layer), errc::invalid_argument,
                 "cache_kv_backend: position " + std::to_string(pos) + " is not the next one of layer " + std::to_string(layer));
    cache_.append(seq_, layer, k, v, 1);
  }
  void attend(int layer, int pos, const float* q, float* out) override {
    BGTQ_REQUIRE(pos + 1 == cache_.length(seq_, layer), errc::invalid_argument,
                 "cache_kv_backend: attend at position " + std::to_string(pos) + " but the layer holds " +
                     std::to_string(cache_.length(seq_, layer)) + " tokens");
    const int seqs[1] = {seq_};
    decode_attention(cache_, layer, std::span<const int>(seqs, 1), q, out, ws_);
  }
  //! The cache (for memory figures).
  const Cache& cache() const noexcept { return cache_; }

 private:
  Cache cache_;
  attention_workspace ws_;
  int seq_ = -1;
};

}  // namespace bgtq::llama2c
