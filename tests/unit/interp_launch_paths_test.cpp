// The interpreter's launch paths (tensorgrad/ir/launch_paths.h): given sizes take the named paths,
// every op's kernel marks at least one path on every call, and every declared interpreter path is
// reached by some graph with at most 2^17 elements per tensor.
#include <gtest/gtest.h>

#include <functional>
#include <set>
#include <string>
#include <vector>

#include "support/library.h"
#include "tensorgrad/ir/launch_paths.h"

namespace tg {
namespace {

// The interpreter paths with hits, without parallel_chunks' (every kernel may take those).
std::set<std::string> kernel_paths_hit() {
  std::set<std::string> hit;
  for (const LaunchPathCount& p : launch_path_counts())
    if (p.hits > 0 && p.backend == "interp" && p.kernel != "parallel_chunks") hit.insert(p.name());
  return hit;
}

std::vector<double> values_for(const TensorType& type, double lo, double hi, std::uint64_t seed) {
  SampleRng rng(seed);
  std::vector<double> v(static_cast<std::size_t>(type.size()));
  for (double& x : v) x = is_float(type.dtype) ? rng.uniform(lo, hi) : static_cast<double>(rng.uniform_int(0, 1));
  return v;
}

struct Case {
  std::string name;
  std::vector<TensorType> inputs;
  std::function<Tensor(const std::vector<Tensor>&)> build;
  std::vector<std::string> expected;  // interp paths the call must take ("kernel/path")
  ComputeType compute = ComputeType::f32;
};

TensorType f32(Shape s) { return {DType::f32, std::move(s)}; }
TensorType i32(Shape s) { return {DType::i32, std::move(s)}; }

// Runs the case from zeroed counters; index inputs are 0 or 1 (valid for every index input here).
std::set<std::string> run_case(const Case& c) {
  GraphBuilder b(c.name);
  TracingScope scope(b);
  std::vector<Tensor> xs;
  TensorMap inputs;
  for (std::size_t i = 0; i < c.inputs.size(); ++i) {
    const std::string name = "x" + std::to_string(i);
    xs.push_back(b.input(name, c.inputs[i]));
    inputs.emplace(name, HostTensor::of(c.inputs[i], values_for(c.inputs[i], 0.5, 2.0, i + 1)));
  }
  b.output("y", c.build(xs));
  const Graph g = b.take();
  reset_launch_path_counts();
  interpret(g, inputs, {.compute = c.compute});
  return kernel_paths_hit();
}

std::vector<Case> targeted_cases() {
  using V = std::vector<Tensor>;
  const ComputeType f64 = ComputeType::f64;
  return {
      // reduce: few long contiguous slices split in blocks; other contiguous slices one per output;
      // tiles of outputs along the inner axis, one per outer position up to 256 wide, else several.
      {"sum_blocked", {f32({3, 32768})}, [](const V& x) { return sum(x[0], 1); }, {"sum/blocked_slices"}},
      {"sum_rows_many", {f32({9, 32768})}, [](const V& x) { return sum(x[0], 1); }, {"sum/contiguous_rows"}},
      {"sum_rows_short", {f32({3, 32767})}, [](const V& x) { return sum(x[0], 1); }, {"sum/contiguous_rows"}},
      {"sum_strided", {f32({300, 256})}, [](const V& x) { return sum(x[0], 0); }, {"sum/one_tile"}},
      {"sum_wide", {f32({30, 257})}, [](const V& x) { return sum(x[0], 0); }, {"sum/several_tiles"}},
      {"sum_two_axes",
       {f32({4, 5, 6})},
       [](const V& x) {
         return sum(x[0], {0, 2});
       },
       {"sum/one_tile"}},
      {"mean_blocked", {f32({32768})}, [](const V& x) { return mean(x[0]); }, {"mean/blocked_slices"}},
      {"mean_rows", {f32({5, 7})}, [](const V& x) { return mean(x[0], 1); }, {"mean/contiguous_rows"}},
      {"mean_strided", {f32({5, 7})}, [](const V& x) { return mean(x[0], 0); }, {"mean/one_tile"}},
      {"mean_wide", {f32({2, 300})}, [](const V& x) { return mean(x[0], 0); }, {"mean/several_tiles"}},
      {"max_blocked", {f32({2, 40000})}, [](const V& x) { return max(x[0], 1); }, {"max/blocked_slices"}},
      {"max_rows", {f32({5, 7})}, [](const V& x) { return max(x[0], 1); }, {"max/contiguous_rows"}},
      {"max_strided", {f32({5, 7})}, [](const V& x) { return max(x[0], 0); }, {"max/one_tile"}},
      {"max_wide", {f32({2, 257})}, [](const V& x) { return max(x[0], 0); }, {"max/several_tiles"}},
      {"min_blocked", {f32({32769})}, [](const V& x) { return min(x[0]); }, {"min/blocked_slices"}},
      {"min_rows", {f32({5, 7})}, [](const V& x) { return min(x[0], 1); }, {"min/contiguous_rows"}},
      {"min_strided", {f32({5, 7})}, [](const V& x) { return min(x[0], 0); }, {"min/one_tile"}},
      {"min_wide", {f32({2, 257})}, [](const V& x) { return min(x[0], 0); }, {"min/several_tiles"}},
      {"argmax_tile", {f32({3, 256})}, [](const V& x) { return argmax(x[0], 0); }, {"argmax/one_tile"}},
      {"argmax_wide", {f32({3, 257})}, [](const V& x) { return argmax(x[0], 0); }, {"argmax/several_tiles"}},
      {"argmin_tile", {f32({3, 4})}, [](const V& x) { return argmin(x[0], 1); }, {"argmin/one_tile"}},
      {"argmin_wide", {f32({3, 257})}, [](const V& x) { return argmin(x[0], 0); }, {"argmin/several_tiles"}},
      // softmax: the same tiles
      {"softmax_last", {f32({4, 300})}, [](const V& x) { return softmax(x[0], 1); }, {"softmax/rows_f32"}},
      {"log_softmax_last", {f32({4, 7})}, [](const V& x) { return log_softmax(x[0], 1); }, {"log_softmax/rows_f32"}},
      {"softmax_last_f64",
       {f32({4, 300})},
       [](const V& x) { return softmax(x[0], 1); },
       {"softmax/one_tile"},
       ComputeType::f64},
      {"softmax_inner", {f32({4, 256})}, [](const V& x) { return softmax(x[0], 0); }, {"softmax/one_tile"}},
      {"softmax_wide", {f32({4, 257})}, [](const V& x) { return softmax(x[0], 0); }, {"softmax/several_tiles"}},
      {"log_softmax", {f32({4, 256})}, [](const V& x) { return log_softmax(x[0], 0); }, {"log_softmax/one_tile"}},
      {"log_softmax_wide",
       {f32({4, 257})},
       [](const V& x) { return log_softmax(x[0], 0); },
       {"log_softmax/several_tiles"}},
      // matmul: f32 micro tiles are 4 x 16, f64 ones 4 x 8; K blocks of 128
      {"matmul_small",
       {f32({3, 5}), f32({5, 7})},
       [](const V& x) { return matmul(x[0], x[1]); },
       {"matmul/folded_rows", "matmul/edge_rows"}},
      {"matmul_micro",
       {f32({2, 4, 5}), f32({5, 16})},
       [](const V& x) { return matmul(x[0], x[1]); },
       {"matmul/folded_rows", "matmul/micro_tiles"}},
      {"matmul_micro_f64",
       {f32({4, 5}), f32({5, 8})},
       [](const V& x) { return matmul(x[0], x[1]); },
       {"matmul/folded_rows", "matmul/micro_tiles"},
       f64},
      {"matmul_ragged",
       {f32({5, 129}), f32({129, 17})},
       [](const V& x) { return matmul(x[0], x[1]); },
       {"matmul/folded_rows", "matmul/micro_tiles", "matmul/edge_columns", "matmul/edge_rows", "matmul/depth_blocks"}},
      {"matmul_batched",
       {f32({2, 3, 4}), f32({2, 4, 5})},
       [](const V& x) { return matmul(x[0], x[1]); },
       {"matmul/batched", "matmul/edge_rows"}},
      // elementwise
      {"add_same",
       {f32({3, 4}), f32({3, 4})},
       [](const V& x) { return x[0] + x[1]; },
       {"elementwise_binary/same_shape"}},
      {"less_broadcast",
       {f32({3, 4}), f32({4})},
       [](const V& x) { return less(x[0], x[1]); },
       {"elementwise_binary/broadcast"}},
      // Runs of at least 8 broadcast elements (a bias over planes of 8) are read run by run;
      // planes of 7 keep the per-element index.
      {"add_bias_runs",
       {f32({2, 3, 2, 4}), f32({3, 1, 1})},
       [](const V& x) { return x[0] + x[1]; },
       {"elementwise_binary/broadcast_runs"}},
      {"add_bias_short_runs",
       {f32({2, 3, 7}), f32({3, 1})},
       [](const V& x) { return x[0] + x[1]; },
       {"elementwise_binary/broadcast"}},
      {"where",
       {f32({3, 4}), f32({3, 4})},
       [](const V& x) { return where(less(x[0], x[1]), x[0], x[1]); },
       {"elementwise_binary/same_shape", "where/runs"}},
      {"where_short_runs",
       {f32({3, 1}), f32({7})},
       [](const V& x) { return where(less(x[0], x[1]), x[0], x[1]); },
       {"elementwise_binary/broadcast", "where/kernel"}},
      {"exp", {f32({3})}, [](const V& x) { return exp(x[0]); }, {"exp/kernel"}},
      // layout
      {"sum_to_shape_one_block",
       {f32({256, 3})},
       [](const V& x) {
         return sum_to_shape(x[0], {1, 3});
       },
       {"sum_to_shape/one_block"}},
      {"sum_to_shape_blocks",
       {f32({257, 3})},
       [](const V& x) { return sum_to_shape(x[0], {3}); },
       {"sum_to_shape/blocks"}},
      {"permute",
       {f32({2, 3, 4})},
       [](const V& x) {
         return permute(x[0], {2, 0, 1});
       },
       {"permute/kernel"}},
      // indexing
      {"scatter_add_tile",
       {f32({3, 256}), i32({3, 256})},
       [](const V& x) { return scatter_add(x[0], x[1], 0, 2); },
       {"scatter_add/one_tile"}},
      {"scatter_add_wide",
       {f32({3, 257}), i32({3, 257})},
       [](const V& x) { return scatter_add(x[0], x[1], 0, 2); },
       {"scatter_add/several_tiles"}},
      // losses
      {"nll_none",
       {f32({4, 3}), i32({4})},
       [](const V& x) { return nll_loss(x[0], x[1], {.reduction = Reduction::none}); },
       {"nll_loss/per_position"}},
      {"cross_entropy_mean",
       {f32({4, 3}), i32({4})},
       [](const V& x) { return cross_entropy(x[0], x[1]); },
       {"cross_entropy/reduced"}},
      // image
      {"conv2d_padded_strided",
       {f32({1, 2, 6, 6}), f32({3, 2, 3, 3})},
       [](const V& x) { return conv2d(x[0], x[1], {.stride = 2, .padding = 1}); },
       {"conv2d/padded", "conv2d/strided"}},
      {"conv2d_plain",
       {f32({1, 2, 5, 5}), f32({3, 2, 3, 3})},
       [](const V& x) { return conv2d(x[0], x[1]); },
       {"conv2d/unpadded", "conv2d/stride_1"}},
      // conv2d on interp_f32 (conv_gemm.cpp): one image of 144 positions runs in pieces of 64; a
      // strided input gradient whose [taps, P] dcols pass the 2^17-float budget runs in pieces; a
      // weight gradient of 1600 positions sums pieces of 240 in 7 ordered slots.
      {"conv2d_image_pieces",
       {f32({1, 2, 12, 12}), f32({3, 2, 3, 3})},
       [](const V& x) { return conv2d(x[0], x[1], {.padding = 1}); },
       {"conv2d/gemm_image_pieces"}},
      {"conv2d_input_grad_pieces",
       {f32({1, 1, 73, 73}), f32({1, 1, 5, 5})},
       [](const V& x) { return conv2d_input_grad(x[0], x[1], 145, 145, {.stride = 2, .padding = 2}); },
       {"conv2d_input_grad/col2im_image_pieces"}},
      {"conv2d_weight_grad_slots",
       {f32({1, 1, 40, 40}), f32({1, 2, 40, 40})},
       [](const V& x) { return conv2d_weight_grad(x[0], x[1], 3, 3, {.padding = 1}); },
       {"conv2d_weight_grad/gemm_image_pieces", "conv2d_weight_grad/ordered_slots"}},
      {"max_pool_overlapping",
       {f32({1, 2, 6, 6})},
       [](const V& x) { return max_pool2d(x[0], 3, {.stride = 1, .padding = 1}); },
       {"max_pool2d/padded", "max_pool2d/overlapping_windows"}},
      {"max_pool_disjoint",
       {f32({1, 2, 6, 6})},
       [](const V& x) { return max_pool2d(x[0], 2); },
       {"max_pool2d/unpadded", "max_pool2d/disjoint_windows"}},
  };
}

TEST(InterpLaunchPaths, GivenSizesTakeTheNamedPaths) {
  for (const Case& c : targeted_cases()) {
    SCOPED_TRACE(c.name);
    const std::set<std::string> hit = run_case(c);
    for (const std::string& want : c.expected) EXPECT_TRUE(hit.count("interp/" + want)) << want << " not taken";
  }
}

TEST(InterpLaunchPaths, ParallelChunksSplitsOnlyPastItsGrain) {
  const auto chunk_paths = [](std::int64_t n) {
    GraphBuilder b("neg");
    TracingScope scope(b);
    const TensorType t = f32({n});
    b.output("y", neg(b.input("x", t)));
    const Graph g = b.take();
    reset_launch_path_counts();
    interpret(g, {{"x", HostTensor::filled(t, 1.0)}});
    std::set<std::string> hit;
    for (const LaunchPathCount& p : launch_path_counts())
      if (p.hits > 0 && p.kernel == "parallel_chunks") hit.insert(p.path);
    return hit;
  };
  EXPECT_EQ(chunk_paths(4096), std::set<std::string>{"one_chunk"});
  EXPECT_EQ(chunk_paths(4097), std::set<std::string>{"parallel_for"});
}

// A one-node graph of `op` on its own sample (fresh inputs drawn from the sample's domains).
std::set<std::string> run_sample(OpId op, std::uint64_t seed, ComputeType compute) {
  SampleRng rng(seed);
  const auto sample = op_def(op).samples(rng, std::nullopt);
  if (!sample) return {};
  GraphBuilder b(std::string(op_name(op)));
  std::vector<Tensor> operands;
  TensorMap inputs;
  for (std::size_t i = 0; i < sample->inputs.size(); ++i) {
    const std::string name = "x" + std::to_string(i);
    operands.push_back(b.input(name, sample->inputs[i]));
    inputs.emplace(name, HostTensor::of(sample->inputs[i], sample->domains[i].draw(rng, sample->inputs[i].size())));
  }
  b.output("y", b.emit(op, operands, sample->attrs, SourceLoc{"interp_launch_paths_test", 1, 0}));
  const Graph g = b.take();
  reset_launch_path_counts();
  interpret(g, inputs, {.compute = compute});
  return kernel_paths_hit();
}

TEST(InterpLaunchPaths, EveryOpsKernelMarksAPathOnEveryCall) {
  for (OpId op : all_ops()) {
    SCOPED_TRACE(std::string(op_name(op)));
    for (std::uint64_t seed = 0; seed < 4; ++seed) {
      for (ComputeType compute : {ComputeType::f32, ComputeType::f64}) {
        EXPECT_FALSE(run_sample(op, seed, compute).empty()) << "seed " << seed;
      }
    }
  }
}

// Every declared interpreter path is taken by one of the graphs above or by some op's samples,
// all far below 2^17 elements per tensor: none is dead code the property suites cannot reach.
TEST(InterpLaunchPaths, EveryDeclaredPathIsReachable) {
  std::set<std::string> reached;
  for (const Case& c : targeted_cases()) {
    const auto hit = run_case(c);
    reached.insert(hit.begin(), hit.end());
  }
  for (OpId op : all_ops()) {
    for (std::uint64_t seed = 0; seed < 40; ++seed) {
      const auto hit = run_sample(op, seed, ComputeType::f32);
      reached.insert(hit.begin(), hit.end());
    }
  }
  for (const LaunchPathCount& p : launch_path_counts()) {
    if (p.backend != "interp" || p.kernel == "parallel_chunks") continue;
    EXPECT_TRUE(reached.count(p.name())) << p.name() << " reached by no graph here";
  }
}

TEST(InterpLaunchPaths, ThresholdsAreDeclared) {
  std::set<std::string> declared;
  for (const SizeThresholdInfo& t : size_thresholds())
    if (t.backend == "interp") declared.insert(t.kernel + "/" + t.what + "=" + std::to_string(t.value));
  for (const char* want : {"reduce/split slice length=32768", "reduce/inner tile=256", "reduce/work grain=16384",
                           "reduce/split block terms=4096", "reduce/sum tree leaf=8", "softmax/inner tile=256",
                           "matmul/depth block=128", "sum_to_shape/block=256", "elementwise_binary/grain=4096"}) {
    EXPECT_TRUE(declared.count(want)) << want;
  }
}

}  // namespace
}  // namespace tg
