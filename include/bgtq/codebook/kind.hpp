#pragma once
//! @file codebook/kind.hpp
//! Run-time names of the scalar codebook families (stored in plans and files).
#include <string>

#include "../core/error.hpp"

namespace bgtq {

//! Scalar codebook family. Values are stored in plan files: never renumber.
enum class codebook_kind : unsigned char {
  sphere = 0,    //!< Lloyd-Max for the exact law of one coordinate of a uniform unit vector in R^n
  gaussian = 1,  //!< Lloyd-Max for N(0, 1/n)
  uniform = 2,   //!< equally spaced levels
};

inline const char* to_string(codebook_kind k) noexcept {
  switch (k) {
    case codebook_kind::sphere: return "sphere";
    case codebook_kind::gaussian: return "gaussian";
    case codebook_kind::uniform: return "uniform";
  }
  return "?";
}

inline codebook_kind parse_codebook_kind(const std::string& s) {
  if (s == "sphere") return codebook_kind::sphere;
  if (s == "gaussian") return codebook_kind::gaussian;
  if (s == "uniform") return codebook_kind::uniform;
  fail(errc::invalid_argument, "unknown codebook kind '" + s + "' (expected sphere, gaussian or uniform)");
}

}  // namespace bgtq
