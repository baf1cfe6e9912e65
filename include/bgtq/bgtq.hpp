#pragma once
//! @file bgtq.hpp
//! Umbrella header: everything a host program needs (no CUDA headers).
#include "config.hpp"
#include "core/error.hpp"
#include "core/half.hpp"
#include "core/rng.hpp"
#include "pack/pack.hpp"
