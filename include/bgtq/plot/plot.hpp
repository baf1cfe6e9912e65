#pragma once
//! @file plot/plot.hpp
//! The plot family: a small self-contained SVG writer (svg.hpp), scales and ticks
//! (scale.hpp), chart furniture (chart.hpp), a strict JSON reader for result files
//! (json_read.hpp) and the figures of `bgtq plot` (figures.hpp). No dependency beyond
//! the standard library.
#include "svg.hpp"
#include "scale.hpp"
#include "chart.hpp"
#include "json_read.hpp"
#include "figures.hpp"
