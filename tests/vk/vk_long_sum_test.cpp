// Long sums on the Vulkan executor: sum and mean of copies of 0.1f against the exact f64 sum of the
// f32 inputs, for lengths around the split (8192, 8193), past one workgroup's unsplit limit (65537)
// and 10^6, in one row and in several, along the contiguous last axis and a strided leading one,
// and in every row mode (one invocation, 32-lane segments, a workgroup, split chunks). The bound is
// 10x PyTorch's error on 10^6 x 0.1f (about 6e-8 relative). Under the validation layer when
// TG_VK_VALIDATION=1.
#include <gtest/gtest.h>

#include <cmath>
#include <iostream>
#include <string>
#include <vector>

#include "support/library.h"
#include "tensorgrad/vk/executor.h"
#include "vk_test_support.h"

namespace tg::vk {
namespace {

using testing::VkTest;

constexpr double kAllowedRelative = 6e-7;

struct LongSumCase {
  std::int64_t length;  // terms per output
  std::int64_t rows;    // outputs
  bool strided;         // reduce a leading axis ([length, rows]) rather than the last ([rows, length])
};

std::string describe(const LongSumCase& c) {
  return std::to_string(c.rows) + (c.rows == 1 ? " row" : " rows") + " of " + std::to_string(c.length) +
         (c.strided ? ", strided" : ", contiguous");
}

// The worst relative error of sum and of mean over the outputs of one case.
std::pair<double, double> long_sum_errors(const std::shared_ptr<Context>& ctx, const LongSumCase& c) {
  const Shape shape = c.strided ? Shape{c.length, c.rows} : Shape{c.rows, c.length};
  const std::int64_t axis = c.strided ? 0 : 1;
  GraphBuilder b("long_sum");
  TracingScope scope(b);
  Tensor x = b.input("x", {DType::f32, shape});
  b.output("sum", sum(x, axis));
  b.output("mean", mean(x, axis));
  Program program(ctx, b.take());
  const TensorMap got = program.run({{"x", HostTensor::filled({DType::f32, shape}, 0.1f)}});
  const double tenth = static_cast<double>(0.1f);
  const double exact_sum = static_cast<double>(c.length) * tenth;  // exact in f64
  const auto worst = [](const HostTensor& t, double exact) {
    double e = 0;
    for (double v : t.to_f64()) e = std::max(e, std::fabs(v - exact) / exact);
    return e;
  };
  return {worst(got.at("sum"), exact_sum), worst(got.at("mean"), tenth)};
}

TEST_F(VkTest, LongSumsWithinTenTimesPyTorch) {
  auto ctx = make_context();
  const std::vector<LongSumCase> cases = {
      // one row, and a few: split into 8192-term chunks past 8192
      {8192, 1, false},
      {8193, 1, false},
      {65537, 1, false},
      {1000000, 1, false},
      {8192, 3, false},
      {8193, 3, false},
      {65537, 3, false},
      {1000000, 3, false},
      {1000000, 2, true},
      {65537, 3, true},
      // the combine: serial up to 32 chunk partials, a workgroup tree past that
      {253953, 1, false},
      {262144, 1, false},
      {262145, 1, false},
      // many rows: one invocation (<= 32 terms), 32-lane segments (<= 1024), a workgroup each (up to
      // 65536 terms unsplit), split again past 65536
      {32, 300, false},
      {1024, 300, false},
      {8192, 300, false},
      {8193, 256, false},
      {65536, 256, false},
      {65537, 256, false},
      {1024, 300, true},
      {65536, 256, true},
  };
  for (const LongSumCase& c : cases) {
    SCOPED_TRACE(describe(c));
    const auto [sum_error, mean_error] = long_sum_errors(ctx, c);
    std::cout << "[ long sum ] " << describe(c) << ": sum " << sum_error << ", mean " << mean_error << "\n";
    EXPECT_LE(sum_error, kAllowedRelative);
    EXPECT_LE(mean_error, kAllowedRelative);
  }
  EXPECT_NO_VALIDATION_MESSAGES(ctx);
}

}  // namespace
}  // namespace tg::vk
