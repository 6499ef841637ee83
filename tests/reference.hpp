#pragma once
// PyTorch reference fixtures: loading tests/fixtures/<set>/<case>/<file>.npy (written by
// the tests/make_*_fixtures.py scripts) and comparing results with them.
#include <algorithm>
#include <cmath>
#include <string>

#include <catch2/catch.hpp>
#include <xtensor/xnpy.hpp>

#include "ops/embedding.hpp"  // Indices
#include "tapegrad.hpp"
#include "test_paths.hpp"

namespace tapegrad::test {

inline std::string fixture_path(const std::string& set, const std::string& name,
                                const std::string& file) {
  return std::string(TAPEGRAD_FIXTURES_DIR) + "/" + set + "/" + name + "/" + file + ".npy";
}
inline Array<double> load_fixture(const std::string& set, const std::string& name,
                                  const std::string& file) {
  return Array<double>(xt::load_npy<double>(fixture_path(set, name, file)));
}
inline Indices load_fixture_ids(const std::string& set, const std::string& name,
                                const std::string& file) {
  return Indices(xt::load_npy<std::int64_t>(fixture_path(set, name, file)));
}

// max |got - want| / max |want|: relative to the array's scale, as gradcheck's rel error
inline double rel_error(const Array<double>& got, const Array<double>& want) {
  REQUIRE(shape_str(Shape(got.shape().begin(), got.shape().end())) ==
          shape_str(Shape(want.shape().begin(), want.shape().end())));
  double err = 0.0, scale = 0.0;
  for (std::size_t i = 0; i < want.size(); ++i) {
    err = std::max(err, std::abs(got.data()[i] - want.data()[i]));
    scale = std::max(scale, std::abs(want.data()[i]));
  }
  return scale > 0 ? err / scale : err;
}

// Agreement with a reference; the error is printed with -s (for reports) and on failure.
inline void check_close(const std::string& what, const Array<double>& got,
                        const Array<double>& want, double tol) {
  const double err = rel_error(got, want);
  INFO(fmt::format("{}: max rel error {:.2e}", what, err));
  CHECK(err < tol);
}

}  // namespace tapegrad::test
