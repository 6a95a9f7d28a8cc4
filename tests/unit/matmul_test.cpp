// matmul: forward values in both compute types against a triple loop written here (2-D, leading
// lhs dims, batched, batch dims that broadcast, 1-D operands), sizes that are not multiples of the
// kernel's tiles, the promise that f32 results equal the plain in-order loop bit for bit whatever
// the thread count, the shape rule against torch.matmul's and its errors, the kernels' layout, and,
// for every op the registry lists in the matmul family, the OpDef parts, f32 against the oracle and
// the grad rules against finite differences (also on chosen broadcasting shapes).
#include "tensorgrad/ir/ops/ids/matmul.h"

#include <gtest/gtest.h>
#include <tbb/global_control.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <string>
#include <vector>

#include "ir/ops/matmul_layout.h"
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

// C = A B with torch.matmul's semantics written from its definition (independently of
// src/ir/ops/matmul_layout.h): a 1-D lhs is a row, a 1-D rhs a column; the batch dims are padded
// with leading 1s and every output batch index reads each operand at that index, at 0 along the
// operand's dims of size 1. Sums in ascending k in the type Acc. `out` is the broadcast shape.
template <class Acc>
std::vector<Acc> reference_matmul(const std::vector<float>& a, Shape as, const std::vector<float>& b, Shape bs) {
  if (as.size() == 1) as.insert(as.begin(), 1);
  if (bs.size() == 1) bs.push_back(1);
  const std::int64_t m = as[as.size() - 2];
  const std::int64_t k = as.back();
  const std::int64_t n = bs.back();
  Shape a_batch(as.begin(), as.end() - 2);
  Shape b_batch(bs.begin(), bs.end() - 2);
  const std::size_t rank = std::max(a_batch.size(), b_batch.size());
  a_batch.insert(a_batch.begin(), rank - a_batch.size(), 1);
  b_batch.insert(b_batch.begin(), rank - b_batch.size(), 1);
  Shape batch(rank);
  for (std::size_t d = 0; d < rank; ++d) batch[d] = a_batch[d] == 1 ? b_batch[d] : a_batch[d];
  const std::int64_t batches = tg::num_elements(batch);
  std::vector<Acc> c(static_cast<std::size_t>(batches * m * n), Acc(0));
  for (std::int64_t p = 0; p < batches; ++p) {
    // p's multi-index, then each operand's batch number in its own (row-major) batch dims.
    std::int64_t rest = p;
    std::vector<std::int64_t> index(rank);
    for (std::size_t d = rank; d-- > 0;) {
      index[d] = rest % batch[d];
      rest /= batch[d];
    }
    std::int64_t pa = 0;
    std::int64_t pb = 0;
    for (std::size_t d = 0; d < rank; ++d) {
      pa = pa * a_batch[d] + (a_batch[d] == 1 ? 0 : index[d]);
      pb = pb * b_batch[d] + (b_batch[d] == 1 ? 0 : index[d]);
    }
    for (std::int64_t i = 0; i < m; ++i) {
      for (std::int64_t j = 0; j < n; ++j) {
        Acc acc(0);
        for (std::int64_t q = 0; q < k; ++q) {
          acc += Acc(a[static_cast<std::size_t>((pa * m + i) * k + q)]) *
                 Acc(b[static_cast<std::size_t>((pb * k + q) * n + j)]);
        }
        c[static_cast<std::size_t>((p * m + i) * n + j)] = acc;
      }
    }
  }
  return c;
}

struct Case {
  Shape a, b, out;
};

void check_case(const Case& c) {
  SCOPED_TRACE(tg::shape_to_string(c.a) + " x " + tg::shape_to_string(c.b));
  const auto av = test_values(tg::num_elements(c.a), 1);
  const auto bv = test_values(tg::num_elements(c.b), 2);
  const HostTensor a = HostTensor::f32(c.a, av);
  const HostTensor b = HostTensor::f32(c.b, bv);
  const auto exact = reference_matmul<double>(av, c.a, bv, c.b);
  const double k = static_cast<double>(c.a.back());

  const HostTensor y64 = run_matmul(a, b, ComputeType::f64);
  ASSERT_EQ(y64.type, (tg::TensorType{DType::f32, c.out}));
  ASSERT_EQ(static_cast<std::size_t>(y64.size()), exact.size());
  for (std::size_t i = 0; i < exact.size(); ++i) {
    EXPECT_NEAR(y64.at(static_cast<std::int64_t>(i)), exact[i], 1e-12 * k) << "element " << i;
  }

  // In f32 every element is the float sum in ascending k: the same bits as the plain loop.
  const auto in_order = reference_matmul<float>(av, c.a, bv, c.b);
  const HostTensor y32 = run_matmul(a, b, ComputeType::f32);
  ASSERT_EQ(y32.type, y64.type);
  for (std::size_t i = 0; i < in_order.size(); ++i) {
    ASSERT_EQ(y32.at(static_cast<std::int64_t>(i)), static_cast<double>(in_order[i])) << "element " << i;
  }
}

TEST(Matmul, TwoDimensional) {
  check_case({{2, 3}, {3, 4}, {2, 4}});
  check_case({{1, 1}, {1, 1}, {1, 1}});
  // Not multiples of any tile: rows cross a 64-row block, K a 128 block, N a 128 block and 16 lanes.
  check_case({{70, 133}, {133, 150}, {70, 150}});
  check_case({{5, 300}, {300, 3}, {5, 3}});
}

TEST(Matmul, LeadingLhsDimsShareTheRhs) {
  check_case({{3, 5, 7}, {7, 9}, {3, 5, 9}});
  check_case({{2, 3, 5, 19}, {19, 17}, {2, 3, 5, 17}});
  check_case({{3, 5, 7}, {1, 1, 7, 9}, {1, 3, 5, 9}});  // an rhs batch of 1s: still one shared rhs
}

TEST(Matmul, Batched) {
  check_case({{4, 5, 7}, {4, 7, 9}, {4, 5, 9}});
  check_case({{2, 3, 6, 11}, {2, 3, 11, 18}, {2, 3, 6, 18}});
  check_case({{2, 67, 130}, {2, 130, 20}, {2, 67, 20}});
}

TEST(Matmul, BatchDimsBroadcastLikeNumPy) {
  check_case({{2, 1, 3, 4}, {5, 4, 6}, {2, 5, 3, 6}});  // torch's example: both sides repeat
  check_case({{3, 4}, {2, 4, 5}, {2, 3, 5}});           // a 2-D lhs shared by every rhs batch
  check_case({{1, 3, 4}, {2, 4, 5}, {2, 3, 5}});        // a batch dim of 1 on the lhs
  check_case({{2, 3, 4}, {2, 1, 4, 5}, {2, 2, 3, 5}});  // a missing lhs dim and an rhs 1
  check_case({{3, 1, 2, 5, 4}, {2, 1, 4, 3}, {3, 2, 2, 5, 3}});
  check_case({{2, 70, 133}, {3, 1, 133, 150}, {3, 2, 70, 150}});  // several tiles per product
  check_case({{0, 3, 4}, {1, 4, 5}, {0, 3, 5}});                  // 1 broadcasts to 0
  check_case({{2, 3, 0}, {1, 0, 5}, {2, 3, 5}});                  // an empty contraction: zeros
}

TEST(Matmul, VectorOperandsArePromotedAndDropped) {
  check_case({{7}, {7}, {}});              // dot product
  check_case({{7}, {7, 5}, {5}});          // vector x matrix
  check_case({{4, 7}, {7}, {4}});          // matrix x vector
  check_case({{2, 3, 7}, {7}, {2, 3}});    // batched matrix x vector
  check_case({{7}, {2, 7, 5}, {2, 5}});    // vector x batched matrix
  check_case({{300}, {300, 130}, {130}});  // past the depth and column blocks
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
  // And with batch dims that broadcast.
  const HostTensor c = HostTensor::f32({2, 1, 150, 90}, test_values(2 * 150 * 90, 7));
  const HostTensor d = HostTensor::f32({3, 90, 170}, test_values(3 * 90 * 170, 8));
  const HostTensor broadcast_parallel = run_matmul(c, d, ComputeType::f32);
  HostTensor broadcast_serial;
  {
    tbb::global_control one_thread(tbb::global_control::max_allowed_parallelism, 1);
    broadcast_serial = run_matmul(c, d, ComputeType::f32);
  }
  EXPECT_EQ(broadcast_parallel, broadcast_serial);
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
  EXPECT_TRUE(contains(inner, "K=5 (dim 1)") && contains(inner, "K=4 (dim 0)")) << inner;
  const std::string vector = shape_error({3, 4}, {5});
  EXPECT_TRUE(contains(vector, "rhs [5] has K=5 (dim 0)")) << vector;

  // Batch dims that do not broadcast: both shapes, and each operand's dim and size.
  const std::string batch = shape_error({2, 3, 4}, {3, 4, 5});
  EXPECT_TRUE(contains(batch, "batch dimensions do not broadcast")) << batch;
  EXPECT_TRUE(contains(batch, "lhs [2,3,4] dim 0 has size 2 but rhs [3,4,5] dim 0 has size 3")) << batch;
  const std::string right_aligned = shape_error({4, 2, 3, 4}, {3, 4, 5});
  EXPECT_TRUE(contains(right_aligned, "lhs [4,2,3,4] dim 1 has size 2 but rhs [3,4,5] dim 0 has size 3"))
      << right_aligned;
  const std::string inner_batch = shape_error({2, 3, 3, 4}, {2, 2, 4, 5});
  EXPECT_TRUE(contains(inner_batch, "lhs [2,3,3,4] dim 1 has size 3 but rhs [2,2,4,5] dim 1 has size 2"))
      << inner_batch;
  EXPECT_TRUE(contains(shape_error({0, 3, 4}, {2, 4, 5}), "dim 0 has size 0"));

  EXPECT_TRUE(contains(shape_error({}, {4, 5}), "lhs must have rank >= 1"));
  EXPECT_TRUE(contains(shape_error({3, 4}, {}), "rhs must have rank >= 1"));
  EXPECT_TRUE(contains(shape_error({3, 4}, {4, 2}, DType::i32), "f32"));
}

// The shape rule against torch.matmul's documented results.
TEST(Matmul, ShapeRuleFollowsTorchMatmul) {
  const std::vector<Case> cases = {
      {{3}, {3}, {}},
      {{3}, {3, 5}, {5}},
      {{4, 3}, {3}, {4}},
      {{2, 4, 3}, {3}, {2, 4}},
      {{3}, {6, 3, 5}, {6, 5}},
      {{4, 3}, {3, 5}, {4, 5}},
      {{2, 4, 3}, {3, 5}, {2, 4, 5}},
      {{4, 3}, {2, 3, 5}, {2, 4, 5}},
      {{2, 1, 4, 3}, {5, 3, 6}, {2, 5, 4, 6}},
      {{1, 7, 4, 3}, {2, 1, 3, 6}, {2, 7, 4, 6}},
      {{2, 4, 3}, {1, 1, 3, 6}, {1, 2, 4, 6}},
      {{0, 4, 3}, {1, 3, 6}, {0, 4, 6}},
      {{4, 0}, {2, 0, 6}, {2, 4, 6}},
  };
  for (const Case& c : cases) {
    const tg::TensorType in[] = {{DType::f32, c.a}, {DType::f32, c.b}};
    EXPECT_EQ(tg::infer_type(op::Matmul, {}, in), (tg::TensorType{DType::f32, c.out}))
        << tg::shape_to_string(c.a) << " x " << tg::shape_to_string(c.b);
  }
}

// The kernels' view of a product: folded rows, merged batch groups with 0 strides where an operand
// repeats.
TEST(Matmul, LayoutMergesBatchDimsThatBroadcastAlike) {
  using Group = tg::MatmulLayout::Group;
  const auto groups_of = [](const tg::MatmulLayout& l) {
    std::vector<std::array<std::int64_t, 3>> out;
    for (const Group& g : l.groups) out.push_back({g.extent, g.lhs_stride, g.rhs_stride});
    return out;
  };
  using Groups = std::vector<std::array<std::int64_t, 3>>;

  const tg::MatmulLayout torch_example = tg::matmul_layout({2, 1, 3, 4}, {5, 4, 6});
  EXPECT_FALSE(torch_example.folded);
  EXPECT_TRUE(torch_example.broadcast);
  EXPECT_EQ(torch_example.batches, 10);
  EXPECT_EQ(groups_of(torch_example), (Groups{{2, 12, 0}, {5, 0, 24}}));

  const tg::MatmulLayout equal = tg::matmul_layout({2, 3, 5, 4}, {2, 3, 4, 6});
  EXPECT_FALSE(equal.broadcast);
  EXPECT_EQ(groups_of(equal), (Groups{{6, 20, 24}}));  // two dims, one group

  const tg::MatmulLayout shared_lhs = tg::matmul_layout({5, 4}, {2, 3, 4, 6});
  EXPECT_TRUE(shared_lhs.broadcast);
  EXPECT_EQ(groups_of(shared_lhs), (Groups{{6, 0, 24}}));

  const tg::MatmulLayout folded = tg::matmul_layout({2, 3, 5, 4}, {1, 4, 6});
  EXPECT_TRUE(folded.folded);
  EXPECT_EQ(folded.m, 30);
  EXPECT_EQ(folded.batches, 1);
  EXPECT_TRUE(folded.groups.empty());

  const tg::MatmulLayout dot = tg::matmul_layout({7}, {7});
  EXPECT_EQ(dot.out, Shape{});
  EXPECT_EQ(dot.m * dot.n * dot.k, 7);
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
  int broadcast = 0;
  int vectors = 0;
  for (int i = 0; i < 300; ++i) {
    const auto sample = def.samples(rng, std::nullopt);
    ASSERT_TRUE(sample.has_value());
    ASSERT_EQ(sample->inputs.size(), 2u);
    ASSERT_EQ(sample->domains.size(), 2u);
    for (const auto& t : sample->inputs) EXPECT_LE(t.size(), 512);
    EXPECT_NO_THROW(tg::infer_type(op::Matmul, sample->attrs, sample->inputs));
    batched += sample->inputs[1].rank() > 2;
    const tg::MatmulLayout layout = tg::matmul_layout(sample->inputs[0].shape, sample->inputs[1].shape);
    broadcast += layout.broadcast;
    vectors += sample->inputs[0].rank() == 1 || sample->inputs[1].rank() == 1;
    const auto again = def.samples(rng, sample->inputs[0]);
    ASSERT_TRUE(again.has_value());
    EXPECT_EQ(again->inputs[0], sample->inputs[0]);
    EXPECT_NO_THROW(tg::infer_type(op::Matmul, again->attrs, again->inputs));
  }
  EXPECT_GT(batched, 0);
  EXPECT_GT(broadcast, 0);
  EXPECT_GT(vectors, 0);
  const auto from_vector = def.samples(rng, tg::TensorType{DType::f32, {3}});
  ASSERT_TRUE(from_vector.has_value());
  EXPECT_NO_THROW(tg::infer_type(op::Matmul, from_vector->attrs, from_vector->inputs));
  EXPECT_FALSE(def.samples(rng, tg::TensorType{DType::f32, {}}).has_value());
  EXPECT_FALSE(def.samples(rng, tg::TensorType{DType::i32, {3, 3}}).has_value());
}

// Every differentiable op of the family: the grad rule, run in f64, against central differences of
// sum(g * op(a, b)); each cotangent has its input's type.
TEST(MatmulGrad, MatchesFiniteDifferences) {
  tg::test::expect_family_grads_match_finite_differences(kFamily, 11, 12, std::nullopt,
                                                         {.probes = 10, .exact_cotangent_type = true});
}

// The grad rule on shapes that broadcast or promote: each cotangent has its operand's shape (summed
// over the batch dims the operand repeated along) and matches central differences.
TEST(MatmulGrad, BroadcastAndVectorOperandsMatchFiniteDifferences) {
  const std::vector<std::pair<Shape, Shape>> cases = {
      {{2, 1, 3, 4}, {5, 4, 2}}, {{3, 4}, {2, 4, 5}}, {{1, 3, 4}, {2, 4, 5}},
      {{2, 3, 4}, {1, 1, 4, 2}}, {{4}, {4}},          {{4}, {2, 4, 3}},
      {{2, 3, 4}, {4}},          {{4}, {4, 3}},       {{3, 4}, {4}},
      {{2, 1, 2, 4}, {2, 4, 3}},
  };
  const auto domain = tg::ValueDomain::real_range(-2, 2);
  tg::SampleRng rng(23);
  for (const auto& [a, b] : cases) {
    SCOPED_TRACE(tg::shape_to_string(a) + " x " + tg::shape_to_string(b));
    const tg::OpSample sample{{}, {{DType::f32, a}, {DType::f32, b}}, {domain, domain}};
    const std::size_t compared = tg::test::expect_grad_matches_finite_differences(
        op::Matmul, sample, rng, {.probes = 8, .exact_cotangent_type = true});
    EXPECT_GE(compared, 2u);
  }
}

}  // namespace
