#pragma once
// Loading Q/K/V activation dumps (.npy, [L,T,H,D] or [T,H,D]) for calibrate and eval,
// with the shape checks every command needs.
#include <bgtq/io/npy.hpp>
#include <bgtq/plan/plan.hpp>

#include <string>

#include "cli.hpp"

namespace bgtq::cli {

//! One activation array viewed as [layers][tokens][heads][dim].
struct activation_file {
  std::string path;
  npy_array a;
  int layers = 0, tokens = 0, heads = 0, dim = 0;
  const float* layer(int l) const {
    return a.data.data() + static_cast<std::size_t>(l) * tokens * heads * dim;
  }
};

//! Reads a 3-D or 4-D array, checks it is finite, and names the file in every error.
inline activation_file load_activations(const std::string& path, const char* what) {
  activation_file f;
  f.path = path;
  f.a = read_npy(path);
  const auto& s = f.a.shape;
  if (s.size() == 3) {
    f.layers = 1;
    f.tokens = static_cast<int>(s[0]);
    f.heads = static_cast<int>(s[1]);
    f.dim = static_cast<int>(s[2]);
  } else if (s.size() == 4) {
    f.layers = static_cast<int>(s[0]);
    f.tokens = static_cast<int>(s[1]);
    f.heads = static_cast<int>(s[2]);
    f.dim = static_cast<int>(s[3]);
  } else {
    fail(errc::shape_mismatch, path + ": " + what + " must be [L,T,H,D] or [T,H,D], got a " + std::to_string(s.size()) +
                                   "-D array");
  }
  static const char* const names4[] = {"L (layers)", "T (tokens)", "H (heads)", "D (head_dim)"};
  for (std::size_t i = 0; i < s.size(); ++i)
    BGTQ_REQUIRE(s[i] >= 1 && s[i] <= (1u << 24), errc::shape_mismatch,
                 path + ": " + what + " dimension " + names4[i + 4 - s.size()] + " of shape " + detail::shape_repr(s) + " is " +
                     (s[i] == 0 ? "0" : std::to_string(s[i]) + ", above 2^24"));
  BGTQ_REQUIRE(f.dim >= 2 && f.dim % 2 == 0, errc::shape_mismatch,
               path + ": head_dim " + std::to_string(f.dim) + " is not even (RoPE pairs dims)");
  BGTQ_REQUIRE(f.dim <= 1024, errc::shape_mismatch,
               path + ": head_dim " + std::to_string(f.dim) + " is above 1024, the largest a plan supports");
  require_finite(f.a, path);
  return f;
}

//! Checks that K (and V) match Q: layers, tokens, dim, and Hq a multiple of Hkv.
inline void check_qkv(const activation_file& q, const activation_file& k, const activation_file* v) {
  auto same = [&](const activation_file& x, const char* what) {
    BGTQ_REQUIRE(x.layers == q.layers && x.tokens == q.tokens && x.dim == q.dim, errc::shape_mismatch,
                 x.path + ": " + what + " has shape [L=" + std::to_string(x.layers) + ",T=" + std::to_string(x.tokens) +
                     ",H=" + std::to_string(x.heads) + ",D=" + std::to_string(x.dim) + "] but " + q.path + " has [L=" +
                     std::to_string(q.layers) + ",T=" + std::to_string(q.tokens) + ",H=" + std::to_string(q.heads) +
                     ",D=" + std::to_string(q.dim) + "]");
  };
  same(k, "K");
  // the largest plan (plan/plan.hpp): checked here, before the energy pass, naming the file
  BGTQ_REQUIRE(q.layers <= max_plan_layers, errc::shape_mismatch,
               q.path + ": Q has " + std::to_string(q.layers) + " layers; a plan holds at most " + std::to_string(max_plan_layers));
  BGTQ_REQUIRE(k.heads <= max_plan_kv_heads, errc::shape_mismatch,
               k.path + ": K has " + std::to_string(k.heads) + " heads; a plan holds at most " + std::to_string(max_plan_kv_heads) +
                   " KV heads");
  BGTQ_REQUIRE(q.heads <= max_plan_q_heads, errc::shape_mismatch,
               q.path + ": Q has " + std::to_string(q.heads) + " heads; a plan holds at most " + std::to_string(max_plan_q_heads) +
                   " query heads");
  BGTQ_REQUIRE(q.heads % k.heads == 0, errc::shape_mismatch,
               "query heads " + std::to_string(q.heads) + " (" + q.path + ") are not a multiple of KV heads " +
                   std::to_string(k.heads) + " (" + k.path + ")");
  if (v) {
    same(*v, "V");
    BGTQ_REQUIRE(v->heads == k.heads, errc::shape_mismatch,
                 v->path + ": V has " + std::to_string(v->heads) + " heads but K has " + std::to_string(k.heads));
  }
}

}  // namespace bgtq::cli
