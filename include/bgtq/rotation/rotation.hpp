#pragma once
//! @file rotation/rotation.hpp
//! The rotation family: the `rotation` concept, `dense_matrix`, the four policies
//! (identity, dense Haar, randomized Hadamard, structured) and the run-time
//! `any_rotation`. See each header for the construction and complexity.
#include "any_rotation.hpp"
#include "concepts.hpp"
#include "haar.hpp"
#include "hadamard.hpp"
#include "identity.hpp"
#include "kind.hpp"
#include "structured.hpp"
