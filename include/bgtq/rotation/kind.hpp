#pragma once
//! @file rotation/kind.hpp
//! Run-time names of the rotation policies (stored in plans and files). The policies
//! themselves live in rotation/{identity,haar,hadamard,structured,any_rotation}.hpp;
//! each kind's matrix is a fixed function of (n, seed), so a plan stores kind and seed.
#include <string>

#include "../core/error.hpp"

namespace bgtq {

//! Which orthogonal map a group uses. Values are stored in plan files: never renumber.
enum class rotation_kind : unsigned char {
  identity = 0,    //!< P = I
  haar = 1,        //!< dense Haar-random orthogonal matrix (seeded Gaussian + QR), any n
  hadamard = 2,    //!< randomized Hadamard, two rounds of (signs, normalised Walsh-Hadamard), n a power of two
  structured = 3,  //!< fast structured rotation for any n >= 1 (permutations, signs, overlapping Hadamard windows)
};

inline const char* to_string(rotation_kind k) noexcept {
  switch (k) {
    case rotation_kind::identity: return "identity";
    case rotation_kind::haar: return "haar";
    case rotation_kind::hadamard: return "hadamard";
    case rotation_kind::structured: return "structured";
  }
  return "?";
}

inline rotation_kind parse_rotation_kind(const std::string& s) {
  if (s == "identity") return rotation_kind::identity;
  if (s == "haar") return rotation_kind::haar;
  if (s == "hadamard") return rotation_kind::hadamard;
  if (s == "structured" || s == "fast") return rotation_kind::structured;
  fail(errc::invalid_argument, "unknown rotation '" + s + "' (expected identity, haar, hadamard or structured)");
}

}  // namespace bgtq
