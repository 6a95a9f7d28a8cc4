// interp_f32 runs a 16-bit program as defined (docs/dtypes.md): each op in f32, each stored value
// rounded once to its dtype. A chain of elementwise ops shows whether every intermediate value was
// rounded: leaving one in f32 changes the later results by an ulp or more of the dtype, which the
// oracle comparisons' one-ulp allowance would pass, but this bit-for-bit check does not.
#include <gtest/gtest.h>

#include <vector>

#include "support/library.h"
#include "tensorgrad/ir/low_precision.h"

namespace {

using tg::ComputeType;
using tg::DType;
using tg::HostTensor;

TEST(PrecisionStoreRounding, InterpF32RoundsEveryIntermediateValueOnce) {
  // Values with more significant bits than either 16-bit dtype holds, so every product and sum
  // needs rounding.
  std::vector<float> xs, ys, zs;
  for (int i = 0; i < 64; ++i) {
    xs.push_back(1.0f + 0.0137f * static_cast<float>(i));
    ys.push_back(-0.731f + 0.0291f * static_cast<float>(i));
    zs.push_back(0.417f - 0.0173f * static_cast<float>(i));
  }
  for (DType dtype : {DType::f16, DType::bf16}) {
    SCOPED_TRACE(std::string(tg::dtype_name(dtype)));
    tg::GraphBuilder b("chain");
    tg::TracingScope scope(b);
    const tg::Shape shape{64};
    const tg::Tensor x = b.input("x", {dtype, shape}), y = b.input("y", {dtype, shape}),
                     z = b.input("z", {dtype, shape});
    b.output("out", (x * y + z) * x - y);
    const HostTensor hx = HostTensor::low_precision(dtype, shape, xs), hy = HostTensor::low_precision(dtype, shape, ys),
                     hz = HostTensor::low_precision(dtype, shape, zs);
    const HostTensor got =
        tg::interpret(b.take(), {{"x", hx}, {"y", hy}, {"z", hz}}, {.compute = ComputeType::f32}).outputs.at("out");
    ASSERT_EQ(got.type.dtype, dtype);
    int differs_from_unrounded = 0;
    for (std::size_t i = 0; i < xs.size(); ++i) {
      const auto r = [dtype](float v) { return tg::round_to_dtype(v, dtype); };
      const auto x16 = static_cast<float>(hx.at(i)), y16 = static_cast<float>(hy.at(i)),
                 z16 = static_cast<float>(hz.at(i));
      const float expected = r(r(r(r(x16 * y16) + z16) * x16) - y16);
      EXPECT_EQ(static_cast<float>(got.at(i)), expected) << "element " << i;
      const float unrounded = r((x16 * y16 + z16) * x16 - y16);
      differs_from_unrounded += expected != unrounded ? 1 : 0;
    }
    // The check means something only if the intermediate roundings change some results.
    EXPECT_GT(differs_from_unrounded, 4);
  }
}

}  // namespace
