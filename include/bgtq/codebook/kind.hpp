#pragma once
//! @file codebook/kind.hpp
//! Run-time names of the scalar codebook families (stored in plans and files). The
//! families themselves (policies, codebook type, get_codebook) are in codebook.hpp.
#include <string>

#include "../core/error.hpp"

namespace bgtq {

//! Scalar codebook family. Values are stored in plan files: never renumber.
enum class codebook_kind : unsigned char {
  sphere = 0,    //!< Lloyd-Max for the exact law of one coordinate of a uniform unit vector in R^n (MSE-optimal)
  gaussian = 1,  //!< Lloyd-Max for N(0, 1/n) truncated to [-1, 1] (the Gaussian approximation)
  uniform = 2,   //!< equally spaced levels, step chosen to minimise the MSE under the exact law
};

//! Stable name of a kind ("sphere", "gaussian", "uniform"); "?" for a value outside the enum.
inline const char* to_string(codebook_kind k) noexcept {
  switch (k) {
    case codebook_kind::sphere: return "sphere";
    case codebook_kind::gaussian: return "gaussian";
    case codebook_kind::uniform: return "uniform";
  }
  return "?";
}

//! Inverse of to_string. @throws bgtq::error(invalid_argument) naming the unknown string.
inline codebook_kind parse_codebook_kind(const std::string& s) {
  if (s == "sphere") return codebook_kind::sphere;
  if (s == "gaussian") return codebook_kind::gaussian;
  if (s == "uniform") return codebook_kind::uniform;
  fail(errc::invalid_argument, "unknown codebook kind '" + s + "' (expected sphere, gaussian or uniform)");
}

}  // namespace bgtq
