// SPDX-License-Identifier: BSD-3-Clause
// Generated over the registry: every stage's example pipeline round-trips tensors of every dtype
// and several shapes, restoring dtype and shape; stages of the lossless kind and `raw` are
// bit-exact; every other stage stays within a loose error bound (its own tests are precise).
#include <catch2/catch.hpp>

#include <algorithm>

#include "support.hpp"

#include <cmath>

using namespace gradcodec;
using namespace gradcodec::test;

namespace {
Tensor as_dtype(const Tensor& f32, DType dt) {
  Tensor t = f32;
  t.info.dtype = dt;
  std::vector<uint8_t> bytes(f32.elements() * dtype_size(dt));
  auto v = values_of(f32);
  from_f32(v.data(), v.size(), dt, bytes.data());
  t.data = Buffer(std::move(bytes));
  return t;
}
}  // namespace

TEST_CASE("every registered stage round-trips through its example pipeline", "[registry]") {
  const std::vector<std::vector<uint64_t>> shapes = {{}, {0}, {1}, {7}, {64, 33}, {8, 4, 3, 3}};
  for (const auto& e : stage_table()) {
    for (DType dt : {DType::F16, DType::BF16, DType::F32, DType::F64}) {
      for (const auto& shape : shapes) {
        uint64_t n = shape_elements(shape);
        Tensor t = as_dtype(make_tensor("layer.weight", shape, gaussian(n, 42 + n)), dt);
        INFO("stage " << e.name << " example '" << e.example << "' dtype " << dtype_name(dt) << " shape "
                      << shape_string(shape));
        RoundTrip r = roundtrip(e.example, t, 7);
        REQUIRE(r.decoded.info.shape == t.info.shape);
        REQUIRE(r.decoded.dtype() == dt);
        REQUIRE(r.decoded.data.size() == t.data.size());
        auto in = values_of(t), out = values_of(r.decoded);
        double err = 0, norm = 0;
        for (size_t i = 0; i < in.size(); ++i) {
          REQUIRE(std::isfinite(out[i]));
          err += (double(in[i]) - out[i]) * (double(in[i]) - out[i]);
          norm += double(in[i]) * in[i];
        }
        const bool exact = e.kind == StageKind::Lossless || std::string(e.name) == "raw";
        if (exact) CHECK(std::equal(t.data.data(), t.data.data() + t.data.size(), r.decoded.data.data()));
        else CHECK(err <= 4.0 * norm + 1e-12);  // no stage may blow the tensor up
      }
    }
  }
}
