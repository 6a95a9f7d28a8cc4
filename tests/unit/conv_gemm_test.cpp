// interp_f32's convolutions as matrix products (src/interp/kernels/conv_gemm.cpp) against the f64
// oracle's plain loops, over geometries that cross each of its thresholds (the im2col budget, the
// task split, column pieces, weight-gradient chunks and slots) and every attribute conv_geometry
// allows; results independent of the thread count; and the shared GEMM (src/interp/kernels/gemm.h)
// with leading dimensions and accumulation against the plain ascending-k loop, bit for bit.
#include <gtest/gtest.h>
#include <tbb/global_control.h>

#include <array>
#include <cfloat>
#include <cmath>
#include <cstring>
#include <set>
#include <string>
#include <vector>

#include "interp/kernels/gemm.h"
#include "support/library.h"
#include "support/test_values.h"
#include "tensorgrad/ir/ops/ids/image.h"

namespace tg {
namespace {

using testing::test_values;

struct Geo {
  std::string name;
  std::int64_t n, c, h, w, o, kh, kw;
  std::int64_t sh = 1, sw = 1, ph = 0, pw = 0, dh = 1, dw = 1, groups = 1;

  std::int64_t oh() const { return (h + 2 * ph - dh * (kh - 1) - 1) / sh + 1; }
  std::int64_t ow() const { return (w + 2 * pw - dw * (kw - 1) - 1) / sw + 1; }
  Shape x() const { return {n, c, h, w}; }
  Shape weight() const { return {o, c / groups, kh, kw}; }
  Shape y() const { return {n, o, oh(), ow()}; }
  Attrs attrs() const {
    using V = std::vector<std::int64_t>;
    return {{"dilation", V{dh, dw}}, {"groups", groups}, {"padding", V{ph, pw}}, {"stride", V{sh, sw}}};
  }
};

// Every case names what it crosses; together they take every conv_gemm launch path (checked below).
const std::vector<Geo>& cases() {
  static const std::vector<Geo> all = {
      {"channels_not_a_multiple_of_8", 2, 5, 9, 7, 7, 3, 3, 1, 1, 1, 1},
      {"kernel_larger_than_the_image", 2, 3, 3, 4, 4, 5, 6, 1, 1, 2, 3},
      {"stride_above_the_kernel", 2, 4, 11, 13, 6, 2, 2, 3, 4, 0, 1},
      {"dilation_2_and_3", 2, 3, 12, 10, 5, 3, 3, 1, 2, 2, 1, 2, 3},
      {"depthwise", 3, 6, 9, 9, 6, 3, 3, 1, 1, 1, 1, 1, 1, 6},
      {"depthwise_multiplier_2_strided", 2, 4, 7, 7, 8, 3, 3, 2, 2, 1, 1, 1, 1, 4},
      {"groups_2", 2, 6, 8, 8, 4, 3, 3, 1, 1, 1, 1, 1, 1, 2},
      {"groups_3_uneven", 2, 9, 7, 9, 6, 3, 2, 2, 1, 1, 0, 1, 1, 3},
      // One image: forward pieces of 64 positions, channel blocks in both gradients (the input
      // gradient's by col2im: Cg < Og), also strided.
      {"batch_1", 1, 16, 12, 12, 32, 3, 3, 1, 1, 1, 1},
      {"batch_1_strided", 1, 16, 13, 13, 32, 3, 3, 2, 2, 1, 1},
      {"one_by_one", 4, 20, 6, 6, 24, 1, 1},
      {"one_by_one_strided", 3, 8, 9, 9, 16, 1, 1, 2, 2},
      // Padding past the dilated kernel: the input gradient's forward (stride 1, Cg >= Og) crops
      // (negative padding).
      {"padding_past_the_kernel", 2, 3, 5, 6, 3, 1, 2, 1, 1, 1, 3, 1, 2},
      {"non_square_kernel_and_stride", 2, 3, 10, 14, 5, 2, 5, 2, 3, 1, 2},
      // K * P = 144 * 1600 past the im2col budget (2^17): image pieces everywhere; O = 70 past the
      // GEMM's 64-row block, K = 144 past its 128-deep block.
      {"past_the_im2col_budget", 2, 16, 40, 40, 70, 3, 3, 1, 1, 1, 1},
      // 64 images of 256 positions: 64 weight-gradient chunks in 32 slots of two.
      {"more_chunks_than_slots", 64, 3, 16, 16, 8, 3, 3, 1, 1, 1, 1},
      // Strided (dcols and col2im), 64 >= 32 tasks without the input gradient's channel blocks.
      {"strided_many_images", 64, 3, 9, 9, 4, 3, 3, 2, 2, 1, 1},
      // 16 channels of 5x5 taps in one block: the input gradient's dcols in pieces of 320 positions.
      {"input_grad_pieces", 64, 16, 40, 40, 2, 5, 5, 2, 2, 2, 2},
  };
  return all;
}

HostTensor values(const Shape& shape, std::uint64_t seed) {
  std::int64_t size = 1;
  for (std::int64_t d : shape) size *= d;
  return HostTensor::f32(shape, test_values(size, seed));
}

HostTensor abs_of(const HostTensor& t) {
  std::vector<double> v = t.to_f64();
  for (double& e : v) e = std::fabs(e);
  return HostTensor::of(t.type, std::move(v));
}

struct OpRun {
  OpId op;
  Attrs attrs;
  std::vector<HostTensor> inputs;
};

// The forward and both gradients of `geo` on seeded values.
std::vector<OpRun> op_runs(const Geo& geo, std::uint64_t seed) {
  const HostTensor x = values(geo.x(), seed), w = values(geo.weight(), seed + 1), g = values(geo.y(), seed + 2);
  Attrs input_grad = geo.attrs();
  input_grad.set("height", geo.h);
  input_grad.set("width", geo.w);
  Attrs weight_grad = geo.attrs();
  weight_grad.set("kernel_h", geo.kh);
  weight_grad.set("kernel_w", geo.kw);
  return {{op::Conv2d, geo.attrs(), {x, w}},
          {op::Conv2dInputGrad, std::move(input_grad), {g, w}},
          {op::Conv2dWeightGrad, std::move(weight_grad), {x, g}}};
}

HostTensor run(const OpRun& r, ComputeType compute, bool absolute = false) {
  GraphBuilder b(std::string(op_name(r.op)));
  std::vector<Tensor> xs;
  TensorMap feed;
  for (std::size_t i = 0; i < r.inputs.size(); ++i) {
    const std::string name = "x" + std::to_string(i);
    xs.push_back(b.input(name, r.inputs[i].type));
    feed.emplace(name, absolute ? abs_of(r.inputs[i]) : r.inputs[i]);
  }
  b.output("y", b.emit(r.op, xs, r.attrs, SourceLoc{"conv_gemm_test", 1, 0}));
  return interpret(b.take(), feed, {.compute = compute, .check_coverage = true}).outputs.at("y");
}

// f32 within the op's tolerance class (matmul, at its reduction length) of the oracle, scaled per
// element by the sum of its terms' magnitudes (the oracle on |inputs|): stricter than the property
// suites' bound, which scales by the largest value of the whole tensor.
void expect_matches_oracle(const OpRun& r) {
  SCOPED_TRACE(std::string(op_name(r.op)));
  const OpDef& def = op_def(r.op);
  std::vector<TensorType> types;
  for (const HostTensor& t : r.inputs) types.push_back(t.type);
  const std::int64_t length = def.reduction_length(r.attrs, types);
  const double ulps = std::max(1.0, tolerance_ulps(def.tolerance, length));
  const HostTensor oracle = run(r, ComputeType::f64);
  const HostTensor magnitude = run(r, ComputeType::f64, true);
  const HostTensor got = run(r, ComputeType::f32);
  ASSERT_EQ(got.type, oracle.type);
  int failures = 0;
  for (std::size_t i = 0; i < oracle.size() && failures < 5; ++i) {
    const double bound = 4 * FLT_EPSILON * ulps * magnitude.at(i);
    if (std::fabs(got.at(i) - oracle.at(i)) > bound) {
      ADD_FAILURE() << "element " << i << ": f32 " << got.at(i) << ", oracle " << oracle.at(i) << ", bound " << bound;
      ++failures;
    }
  }
}

TEST(ConvGemm, F32MatchesTheOracleOnEveryGeometry) {
  std::uint64_t seed = 1;
  for (const Geo& geo : cases()) {
    SCOPED_TRACE(geo.name);
    for (const OpRun& r : op_runs(geo, seed += 3)) expect_matches_oracle(r);
  }
}

// The paths each named case is there for, and all of them over the cases.
TEST(ConvGemm, CasesTakeEveryPath) {
  const auto paths_of = [](const std::string& name) {
    for (const Geo& geo : cases()) {
      if (geo.name != name) continue;
      reset_launch_path_counts();
      for (const OpRun& r : op_runs(geo, 7)) run(r, ComputeType::f32);
      std::set<std::string> hit;
      for (const LaunchPathCount& p : launch_path_counts())
        if (p.hits > 0 && p.backend == "interp") hit.insert(p.kernel + "/" + p.path);
      return hit;
    }
    ADD_FAILURE() << "no case " << name;
    return std::set<std::string>{};
  };
  const auto expect_paths = [&](const std::string& name, const std::vector<std::string>& want) {
    const auto hit = paths_of(name);
    for (const std::string& path : want) EXPECT_TRUE(hit.count(path)) << name << " did not take " << path;
  };
  expect_paths("batch_1", {"conv2d/gemm_image_pieces", "conv2d_input_grad/gemm_channel_blocks",
                           "conv2d_input_grad/col2im_whole_images", "conv2d_weight_grad/gemm_whole_images",
                           "conv2d_weight_grad/gemm_channel_blocks", "conv2d_weight_grad/one_slot"});
  expect_paths("batch_1_strided", {"conv2d_input_grad/gemm_channel_blocks", "conv2d_input_grad/col2im_whole_images"});
  expect_paths("padding_past_the_kernel", {"conv2d_input_grad/stride_1_as_forward"});
  expect_paths("groups_2", {"conv2d_input_grad/stride_1_as_forward"});
  expect_paths("strided_many_images", {"conv2d_input_grad/gemm_all_channels"});
  expect_paths("past_the_im2col_budget", {"conv2d/gemm_image_pieces", "conv2d_weight_grad/gemm_image_pieces",
                                          "conv2d_weight_grad/ordered_slots"});
  expect_paths("more_chunks_than_slots", {"conv2d/gemm_whole_images", "conv2d_weight_grad/gemm_whole_images",
                                          "conv2d_weight_grad/ordered_slots"});
  expect_paths("input_grad_pieces", {"conv2d_input_grad/gemm_all_channels", "conv2d_input_grad/col2im_image_pieces"});
  expect_paths("depthwise",
               {"conv2d/grouped", "conv2d_input_grad/stride_1_as_forward", "conv2d_weight_grad/gemm_all_channels"});

  std::set<std::string> all;
  for (const Geo& geo : cases()) {
    reset_launch_path_counts();
    for (const OpRun& r : op_runs(geo, 7)) run(r, ComputeType::f32);
    for (const LaunchPathCount& p : launch_path_counts())
      if (p.hits > 0 && p.backend == "interp") all.insert(p.kernel + "/" + p.path);
  }
  for (const char* path :
       {"conv2d/gemm_whole_images", "conv2d/gemm_image_pieces", "conv2d_input_grad/stride_1_as_forward",
        "conv2d_input_grad/gemm_all_channels", "conv2d_input_grad/gemm_channel_blocks",
        "conv2d_input_grad/col2im_whole_images", "conv2d_input_grad/col2im_image_pieces",
        "conv2d_weight_grad/gemm_whole_images", "conv2d_weight_grad/gemm_image_pieces",
        "conv2d_weight_grad/gemm_all_channels", "conv2d_weight_grad/gemm_channel_blocks", "conv2d_weight_grad/one_slot",
        "conv2d_weight_grad/ordered_slots"}) {
    EXPECT_TRUE(all.count(path)) << path << " taken by no case";
  }
}

bool same_bits(const HostTensor& a, const HostTensor& b) {
  return a.type == b.type && a.storage() == b.storage() &&
         std::memcmp(a.raw_data(), b.raw_data(), static_cast<std::size_t>(a.size()) * 4) == 0;
}

TEST(ConvGemm, SameBitsForAnyThreadCount) {
  for (const char* name :
       {"past_the_im2col_budget", "more_chunks_than_slots", "batch_1", "batch_1_strided", "groups_3_uneven"}) {
    SCOPED_TRACE(name);
    for (const Geo& geo : cases()) {
      if (geo.name != name) continue;
      for (const OpRun& r : op_runs(geo, 11)) {
        SCOPED_TRACE(std::string(op_name(r.op)));
        const HostTensor all = run(r, ComputeType::f32);
        for (int threads : {1, 2, 3, 4}) {
          const tbb::global_control limit(tbb::global_control::max_allowed_parallelism,
                                          static_cast<std::size_t>(threads));
          EXPECT_TRUE(same_bits(run(r, ComputeType::f32), all)) << threads << " threads";
        }
      }
    }
  }
}

TEST(ConvGemm, ThresholdsAreDeclared) {
  std::set<std::string> declared;
  for (const SizeThresholdInfo& t : size_thresholds())
    if (t.backend == "interp") declared.insert(t.kernel + "/" + t.what + "=" + std::to_string(t.value));
  for (const char* want :
       {"conv2d/im2col budget (floats)=131072", "conv2d/target tasks=32", "conv2d/fewest columns per piece=64",
        "conv2d_weight_grad/fewest columns per chunk=256", "conv2d_weight_grad/partial slots=32"}) {
    EXPECT_TRUE(declared.count(want)) << want;
  }
}

// gemm.h on sub-matrices (leading dimensions past the extents) and in two accumulated halves of K:
// the bits of the plain loop `for k: c += a * b` in ascending k, and nothing outside C written.
TEST(Gemm, LeadingDimensionsAndAccumulationGiveThePlainLoopsBits) {
  for (const auto& [m, n, k] : std::vector<std::array<std::int64_t, 3>>{{3, 5, 7}, {70, 150, 300}, {4, 16, 129}}) {
    SCOPED_TRACE(std::to_string(m) + "x" + std::to_string(n) + "x" + std::to_string(k));
    const std::int64_t lda = k + 3, ldb = n + 5, ldc = n + 2;
    const std::vector<float> a = test_values(m * lda, 1), b = test_values(k * ldb, 2);
    std::vector<float> want(static_cast<std::size_t>(m * ldc), 7.0f);
    for (std::int64_t i = 0; i < m; ++i)
      for (std::int64_t j = 0; j < n; ++j) {
        float acc = 0.0f;
        for (std::int64_t q = 0; q < k; ++q) acc += a[i * lda + q] * b[q * ldb + j];
        want[i * ldc + j] = acc;
      }
    std::vector<float> whole(want.size(), 7.0f), halves(want.size(), 7.0f);
    interp::gemm_serial(interp::GemmView<float>{a.data(), b.data(), whole.data(), m, n, k, lda, ldb, ldc}, false);
    const std::int64_t half = k / 2;
    interp::gemm_serial(interp::GemmView<float>{a.data(), b.data(), halves.data(), m, n, half, lda, ldb, ldc}, false);
    interp::gemm_serial(
        interp::GemmView<float>{a.data() + half, b.data() + half * ldb, halves.data(), m, n, k - half, lda, ldb, ldc},
        true);
    EXPECT_EQ(std::memcmp(whole.data(), want.data(), want.size() * sizeof(float)), 0);
    EXPECT_EQ(std::memcmp(halves.data(), want.data(), want.size() * sizeof(float)), 0);
  }
}

}  // namespace
}  // namespace tg
