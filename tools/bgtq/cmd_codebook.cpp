// bgtq codebook: print the scalar codebook for (bits, dim, kind) and its n*MSE.
//   --json: {"bits":B,"dim":N,"kind":"sphere","centroids":[...],"thresholds":[...],"mse":X}
//   else:   a table (index, centroid, upper threshold) and the MSE next to references.
#include <cstdio>
#include <iostream>
#include <string>

#include <bgtq/codebook/codebook.hpp>
#include <bgtq/io/json.hpp>

#include "cli.hpp"

namespace {
namespace cmd_codebook {  // cli.hpp: the CLI is one translation unit

// Max (1960) Lloyd-Max MSE for N(0, 1): the n -> infinity limit of the sphere n*MSE.
double max_gaussian_mse(int bits) {
  switch (bits) {
    case 1: return 0.3634;
    case 2: return 0.1175;
    case 3: return 0.03455;
    case 4: return 0.009497;
    default: return -1.0;
  }
}

int run(bgtq::cli::args& a) {
  const int bits = static_cast<int>(a.require_int("bits", bgtq::codebook_min_bits, bgtq::codebook_max_bits));
  const int dim = static_cast<int>(a.require_int("dim", bgtq::codebook_min_dim, bgtq::codebook_max_dim));
  const std::string kind_name = a.get_or("kind", "sphere");
  const bool json = a.flag("json");
  a.finish();
  bgtq::codebook_kind kind;
  try {
    kind = bgtq::parse_codebook_kind(kind_name);
  } catch (const bgtq::error& e) {
    throw bgtq::cli::usage_error(std::string("--kind: ") + e.what());
  }

  const bgtq::codebook& cb = bgtq::get_codebook(kind, dim, bits);
  const auto c = cb.centroids();
  const auto t = cb.thresholds();
  if (json) {
    bgtq::json_writer w(std::cout);
    w.begin_object();
    w.key("bits").value(bits).key("dim").value(dim).key("kind").value(bgtq::to_string(kind));
    w.key("centroids").array(c.data(), c.size());
    w.key("thresholds").array(t.data(), t.size());
    w.key("mse").value(cb.mse());
    w.end_object();
    std::cout << '\n';
    return 0;
  }
  std::printf("%s codebook, %d bits (%d levels), dim %d\n", bgtq::to_string(kind), bits, cb.size(), dim);
  std::printf("%6s %16s %16s\n", "index", "centroid", "threshold");
  for (int k = 0; k < cb.size(); ++k) {
    if (k + 1 < cb.size())
      std::printf("%6d %16.9g %16.9g\n", k, c[k], t[k]);
    else
      std::printf("%6d %16.9g %16s\n", k, c[k], "-");
  }
  std::printf("n*MSE                    %.6g   (dim * E[(y - Q(y))^2] under the exact sphere law)\n", cb.mse());
  if (kind != bgtq::codebook_kind::sphere)
    std::printf("sphere Lloyd-Max n*MSE   %.6g   (optimal)\n", bgtq::get_codebook(bgtq::codebook_kind::sphere, dim, bits).mse());
  std::printf("high-resolution approx.  %.6g   ((n/12) (int f_n^(1/3))^3 4^-b, Panter-Dite)\n",
              bgtq::high_resolution_mse(dim, bits));
  if (max_gaussian_mse(bits) > 0)
    std::printf("n -> infinity (Max 1960) %.6g\n", max_gaussian_mse(bits));
  return 0;
}

bgtq::cli::registrar reg{{"codebook", "print the scalar codebook (centroids, thresholds, n*MSE) for b bits at dimension n",
                          "--bits B (1..8) --dim N (2..65536) [--kind sphere|gaussian|uniform] [--json]", &run, {"json"}}};

}  // namespace cmd_codebook
}  // namespace
