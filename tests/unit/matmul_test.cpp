// matmul: forward values in both compute types against a triple loop written here (2-D, leading
// lhs dims, batched), sizes that are not multiples of the kernel's tiles, the promise that f32
// results equal the plain in-order loop bit for bit whatever the thread count, shape errors, and,
// for every op the registry lists in the matmul family, the OpDef parts, f32 against the oracle and
// the grad rules against finite differences.
#include "tensorgrad/ir/ops/ids/matmul.h"

#include <gtest/gtest.h>
#include <tbb/global_control.h>

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "support/library.h"
#include "support/op_family.h"
#include "support/test_values.h"

namespace {

using tg::ComputeType;
using tg::DType;
using tg::HostTensor;
using tg::OpId;
namespace op = tg::op;
using tg::Shape;
using tg::Tensor;

// Values in [-2, 2] (tests/support/test_values.h), this file's own stream.
std::vector<float> test_values(std::int64_t n, std::uint64_t seed) { return tg::testing::test_values(n, seed, 99); }

HostTensor run_matmul(const HostTensor& a, const HostTensor& b, ComputeType compute) {
  tg::GraphBuilder builder("g");
  tg::TracingScope scope(builder);
  builder.output("y", tg::matmul(builder.input("a", a.type), builder.input("b", b.type)));
  const tg::Graph g = builder.take();
  return tg::interpret(g, {{"a", a}, {"b", b}}, {.compute = compute, .check_coverage = true}).outputs.at("y");
}

// C = A B for `batches` pairs of row-major matrices (b_stride 0: one B shared by every batch),
// accumulating in ascending k in the type Acc.
template <class Acc>
std::vector<Acc> reference_matmul(const std::vector<float>& a, const std::vector<float>& b, std::int64_t batches,
                                  std::int64_t m, std::int64_t k, std::int64_t n, bool shared_b) {
  std::vector<Acc> c(static_cast<std::size_t>(batches * m * n), Acc(0));
  for (std::int64_t p = 0; p < batches; ++p) {
    const std::int64_t b_base = shared_b ? 0 : p * k * n;
    for (std::int64_t i = 0; i < m; ++i) {
      for (std::int64_t j = 0; j < n; ++j) {
        Acc acc(0);
        for (std::int64_t q = 0; q < k; ++q) {
          acc += Acc(a[static_cast<std::size_t>((p * m + i) * k + q)]) *
                 Acc(b[static_cast<std::size_t>(b_base + q * n + j)]);
        }
        c[static_cast<std::size_t>((p * m + i) * n + j)] = acc;
      }
    }
  }
  return c;
}

struct Case {
  Shape a, b, out;
  std::int64_t batches, m, k, n;
  bool shared_b;
};

void check_case(const Case& c) {
  SCOPED_TRACE(tg::shape_to_string(c.a) + " x " + tg::shape_to_string(c.b));
  const auto av = test_values(tg::num_elements(c.a), 1);
  const auto bv = test_values(tg::num_elements(c.b), 2);
  const HostTensor a = HostTensor::f32(c.a, av);
  const HostTensor b = HostTensor::f32(c.b, bv);
  const auto exact = reference_matmul<double>(av, bv, c.batches, c.m, c.k, c.n, c.shared_b);

  const HostTensor y64 = run_matmul(a, b, ComputeType::f64);
  ASSERT_EQ(y64.type, (tg::TensorType{DType::f32, c.out}));
  ASSERT_EQ(y64.values.size(), exact.size());
  for (std::size_t i = 0; i < exact.size(); ++i) {
    EXPECT_NEAR(y64.values[i], exact[i], 1e-12 * static_cast<double>(c.k)) << "element " << i;
  }

  // In f32 every element is the float sum in ascending k: the same bits as the plain loop.
  const auto in_order = reference_matmul<float>(av, bv, c.batches, c.m, c.k, c.n, c.shared_b);
  const HostTensor y32 = run_matmul(a, b, ComputeType::f32);
  ASSERT_EQ(y32.type, y64.type);
  for (std::size_t i = 0; i < in_order.size(); ++i) {
    ASSERT_EQ(y32.values[i], static_cast<double>(in_order[i])) << "element " << i;
  }
}

TEST(Matmul, TwoDimensional) {
  check_case({{2, 3}, {3, 4}, {2, 4}, 1, 2, 3, 4, true});
  check_case({{1, 1}, {1, 1}, {1, 1}, 1, 1, 1, 1, true});
  // Not multiples of any tile: rows cross a 64-row block, K a 128 block, N a 128 block and 16 lanes.
  check_case({{70, 133}, {133, 150}, {70, 150}, 1, 70, 133, 150, true});
  check_case({{5, 300}, {300, 3}, {5, 3}, 1, 5, 300, 3, true});
}

TEST(Matmul, LeadingLhsDimsShareTheRhs) {
  check_case({{3, 5, 7}, {7, 9}, {3, 5, 9}, 1, 15, 7, 9, true});
  check_case({{2, 3, 5, 19}, {19, 17}, {2, 3, 5, 17}, 1, 30, 19, 17, true});
}

TEST(Matmul, Batched) {
  check_case({{4, 5, 7}, {4, 7, 9}, {4, 5, 9}, 4, 5, 7, 9, false});
  check_case({{2, 3, 6, 11}, {2, 3, 11, 18}, {2, 3, 6, 18}, 6, 6, 11, 18, false});
  check_case({{2, 67, 130}, {2, 130, 20}, {2, 67, 20}, 2, 67, 130, 20, false});
}

TEST(Matmul, SameBitsForAnyThreadCount) {
  const HostTensor a = HostTensor::f32({3, 150, 90}, test_values(3 * 150 * 90, 5));
  const HostTensor b = HostTensor::f32({3, 90, 170}, test_values(3 * 90 * 170, 6));
  const HostTensor parallel = run_matmul(a, b, ComputeType::f32);
  HostTensor serial;
  {
    tbb::global_control one_thread(tbb::global_control::max_allowed_parallelism, 1);
    serial = run_matmul(a, b, ComputeType::f32);
  }
  EXPECT_EQ(parallel, serial);
}

std::string shape_error(const Shape& a, const Shape& b, DType b_dtype = DType::f32) {
  tg::GraphBuilder builder("g");
  tg::TracingScope scope(builder);
  const Tensor x = builder.input("a", {DType::f32, a});
  const Tensor y = builder.input("b", {b_dtype, b});
  try {
    tg::matmul(x, y);
  } catch (const tg::ShapeError& e) {
    EXPECT_EQ(e.op(), "matmul");
    return e.what();
  }
  ADD_FAILURE() << "matmul accepted " << tg::shape_to_string(a) << " x " << tg::shape_to_string(b);
  return "";
}

bool contains(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

TEST(Matmul, ShapeErrorsNameTheMismatch) {
  const std::string inner = shape_error({2, 5}, {4, 3});
  EXPECT_TRUE(contains(inner, "matmul")) << inner;
  EXPECT_TRUE(contains(inner, "inner dimensions differ")) << inner;
  EXPECT_TRUE(contains(inner, "[2,5]") && contains(inner, "[4,3]")) << inner;
  EXPECT_TRUE(contains(inner, "K=5") && contains(inner, "K=4")) << inner;

  const std::string batch = shape_error({2, 3, 4}, {3, 4, 5});
  EXPECT_TRUE(contains(batch, "batch dimensions differ: lhs [2] vs rhs [3]")) << batch;
  EXPECT_TRUE(contains(shape_error({2, 3, 4}, {1, 2, 4, 5}), "equal rank"));
  EXPECT_TRUE(contains(shape_error({2, 4}, {2, 4, 5}), "equal rank"));
  EXPECT_TRUE(contains(shape_error({4}, {4, 5}), "lhs must have rank >= 2"));
  EXPECT_TRUE(contains(shape_error({3, 4}, {4}), "rhs must have rank >= 2"));
  EXPECT_TRUE(contains(shape_error({3, 4}, {4, 2}, DType::i32), "f32"));
}

constexpr std::string_view kFamily = "matmul";

// Every op of the family (from the registry) has its parts and valid samples.
TEST(MatmulOpDef, EveryOpOfTheFamilyIsCompleteAndSamplesValid) {
  tg::test::expect_ops_in_family(std::vector<OpId>{op::Matmul}, kFamily);
  EXPECT_FALSE(tg::test::expect_family_defs(kFamily, 7, 100).empty());
}

TEST(MatmulOpDef, F32RunsMatchTheOracleWithinTheToleranceClass) {
  tg::test::expect_family_runs_match_oracle(kFamily, 7, 20);
}

// Facts pinned for matmul itself.
TEST(MatmulOpDef, CompleteAndSamplesValid) {
  const tg::OpDef& def = tg::op_def(op::Matmul);
  EXPECT_EQ(def.name, "matmul");
  EXPECT_EQ(def.arity, 2);
  EXPECT_TRUE(def.attrs.empty());
  EXPECT_NE(def.shape, nullptr);
  EXPECT_NE(def.grad, nullptr);
  EXPECT_TRUE(def.differentiable);
  EXPECT_NE(def.samples, nullptr);
  EXPECT_EQ(def.tolerance, tg::ToleranceClass::matmul);
  ASSERT_NE(def.reduction_length, nullptr);
  const tg::TensorType ab[] = {{DType::f32, {2, 3, 7}}, {DType::f32, {7, 5}}};
  EXPECT_EQ(def.reduction_length({}, std::span<const tg::TensorType>(ab)), 7);

  tg::SampleRng rng(7);
  int batched = 0;
  for (int i = 0; i < 300; ++i) {
    const auto sample = def.samples(rng, std::nullopt);
    ASSERT_TRUE(sample.has_value());
    ASSERT_EQ(sample->inputs.size(), 2u);
    ASSERT_EQ(sample->domains.size(), 2u);
    for (const auto& t : sample->inputs) EXPECT_LE(t.size(), 512);
    EXPECT_NO_THROW(tg::infer_type(op::Matmul, sample->attrs, sample->inputs));
    batched += sample->inputs[1].rank() > 2;
    const auto again = def.samples(rng, sample->inputs[0]);
    ASSERT_TRUE(again.has_value());
    EXPECT_EQ(again->inputs[0], sample->inputs[0]);
    EXPECT_NO_THROW(tg::infer_type(op::Matmul, again->attrs, again->inputs));
  }
  EXPECT_GT(batched, 0);
  EXPECT_FALSE(def.samples(rng, tg::TensorType{DType::f32, {3}}).has_value());
  EXPECT_FALSE(def.samples(rng, tg::TensorType{DType::i32, {3, 3}}).has_value());
}

// Every differentiable op of the family: the grad rule, run in f64, against central differences of
// sum(g * op(a, b)); each cotangent has its input's type.
TEST(MatmulGrad, MatchesFiniteDifferences) {
  tg::test::expect_family_grads_match_finite_differences(kFamily, 11, 12, std::nullopt,
                                                         {.probes = 10, .exact_cotangent_type = true});
}

}  // namespace
