// The interpreter's other fixed-order sums, pinned to their documented order at 1, 2 and all
// threads (src/interp/parallel.h, docs/architecture.md "deterministic_sum", docs/vulkan.md
// sum_to_shape "256-term blocks, block partials added in order", which the Vulkan kernels match
// bit for bit):
//   - deterministic_sum: terms added in index order inside fixed blocks, block partials added in
//     block order;
//   - sum_to_shape: each output's preimage in 256-term blocks that way (one block inline);
//   - nll_loss's sum and mean: the positions' losses in 4096-term blocks that way.
// The references are computed here, sequentially, from the description.
#include <gtest/gtest.h>
#include <tbb/global_control.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "interp/parallel.h"
#include "support/library.h"

namespace tg {
namespace {

template <class T>
T reference_blocked_sum(const std::vector<T>& x, std::int64_t block) {
  T total(0);
  for (std::size_t first = 0; first < x.size(); first += static_cast<std::size_t>(block)) {
    T partial(0);
    for (std::size_t i = first; i < std::min(x.size(), first + static_cast<std::size_t>(block)); ++i) partial += x[i];
    total += partial;
  }
  return total;
}

std::vector<float> random_floats(std::int64_t n, std::uint64_t seed) {
  SampleRng rng(seed);
  std::vector<float> v(static_cast<std::size_t>(n));
  for (float& x : v) x = static_cast<float>(std::ldexp(rng.uniform(-1, 3), static_cast<int>(rng.uniform_int(-6, 6))));
  return v;
}

// Calls check() at 1 thread, 2 threads and all threads.
void at_every_thread_count(const std::function<void()>& check) {
  for (const int threads : {1, 2, 0}) {
    SCOPED_TRACE(threads == 0 ? std::string("all threads") : std::to_string(threads) + " thread(s)");
    std::optional<tbb::global_control> limit;
    if (threads > 0) limit.emplace(tbb::global_control::max_allowed_parallelism, static_cast<std::size_t>(threads));
    check();
  }
}

TEST(PromiseBlockSums, DeterministicSumAddsBlocksInOrder) {
  for (const std::int64_t n : {1, 255, 256, 257, 4095, 4096, 4097, 3 * 4096 + 5, 100003}) {
    SCOPED_TRACE("n = " + std::to_string(n));
    const std::vector<float> x = random_floats(n, static_cast<std::uint64_t>(n));
    const std::vector<double> wide(x.begin(), x.end());
    const auto term = [&](std::int64_t i) { return x[static_cast<std::size_t>(i)]; };
    const auto wide_term = [&](std::int64_t i) { return wide[static_cast<std::size_t>(i)] / 3; };
    std::vector<double> thirds(wide.size());
    for (std::size_t i = 0; i < wide.size(); ++i) thirds[i] = wide[i] / 3;  // 53-bit terms that round
    at_every_thread_count([&] {
      EXPECT_EQ(std::bit_cast<std::uint32_t>(interp::deterministic_sum<float>(n, term)),
                std::bit_cast<std::uint32_t>(reference_blocked_sum(x, 4096)));
      EXPECT_EQ(std::bit_cast<std::uint32_t>(interp::deterministic_sum<float, 256>(n, term)),
                std::bit_cast<std::uint32_t>(reference_blocked_sum(x, 256)));
      EXPECT_EQ(std::bit_cast<std::uint64_t>(interp::deterministic_sum<double>(n, wide_term)),
                std::bit_cast<std::uint64_t>(reference_blocked_sum(thirds, 4096)));
    });
  }
}

HostTensor run(const TensorMap& inputs, const std::function<Tensor(GraphBuilder&)>& build) {
  GraphBuilder b("promise_block_sums");
  TracingScope scope(b);
  b.output("y", build(b));
  return interpret(b.take(), inputs, {.compute = ComputeType::f32}).outputs.at("y");
}

// sum_to_shape over a contiguous preimage ([n] -> [1]) and a strided one ([n, 3] -> [1, 3]).
TEST(PromiseBlockSums, SumToShapeAddsTwoHundredFiftySixTermBlocksInOrder) {
  for (const std::int64_t n : {1, 255, 256, 257, 4097, 70001}) {
    SCOPED_TRACE("n = " + std::to_string(n));
    const std::vector<float> x = random_floats(n, static_cast<std::uint64_t>(n) + 3);
    std::vector<float> columns(static_cast<std::size_t>(3 * n));
    for (std::size_t i = 0; i < columns.size(); ++i) columns[i] = x[i / 3];
    const std::uint32_t expected = std::bit_cast<std::uint32_t>(reference_blocked_sum(x, 256));
    at_every_thread_count([&] {
      const HostTensor alone = run({{"x", HostTensor::f32({n}, x)}}, [&](GraphBuilder& b) {
        return sum_to_shape(b.input("x", {DType::f32, {n}}), {1});
      });
      EXPECT_EQ(std::bit_cast<std::uint32_t>(alone.f32_data()[0]), expected);
      const HostTensor strided = run({{"x", HostTensor::f32({n, 3}, columns)}}, [&](GraphBuilder& b) {
        return sum_to_shape(b.input("x", {DType::f32, {n, 3}}), {1, 3});
      });
      for (const float v : strided.f32_data()) EXPECT_EQ(std::bit_cast<std::uint32_t>(v), expected);
    });
  }
}

// nll_loss's per-position loss is -log_probs[n, target]: exact, so the reduction's order alone
// decides the bits.
TEST(PromiseBlockSums, NllLossSumsPositionsInFourThousandNinetySixTermBlocks) {
  constexpr std::int64_t kClasses = 3;
  for (const std::int64_t positions : {4095, 4096, 4097, 3 * 4096 + 5}) {
    SCOPED_TRACE("positions = " + std::to_string(positions));
    const std::vector<float> log_probs = random_floats(positions * kClasses, static_cast<std::uint64_t>(positions));
    std::vector<std::int32_t> targets(static_cast<std::size_t>(positions));
    std::vector<float> losses(targets.size());
    for (std::size_t n = 0; n < targets.size(); ++n) {
      targets[n] = static_cast<std::int32_t>((n * 7) % kClasses);
      losses[n] = -log_probs[n * kClasses + static_cast<std::size_t>(targets[n])];
    }
    const float total = reference_blocked_sum(losses, 4096);
    const TensorMap inputs = {{"p", HostTensor::f32({positions, kClasses}, log_probs)},
                              {"t", HostTensor::i32({positions}, targets)}};
    for (const Reduction reduction : {Reduction::sum, Reduction::mean}) {
      const float expected = reduction == Reduction::sum ? total : total / static_cast<float>(positions);
      at_every_thread_count([&] {
        const HostTensor y = run(inputs, [&](GraphBuilder& b) {
          return nll_loss(b.input("p", {DType::f32, {positions, kClasses}}), b.input("t", {DType::i32, {positions}}),
                          {.reduction = reduction});
        });
        EXPECT_EQ(std::bit_cast<std::uint32_t>(y.f32_data()[0]), std::bit_cast<std::uint32_t>(expected))
            << (reduction == Reduction::sum ? "sum" : "mean") << ": got " << y.f32_data()[0] << ", expected "
            << expected;
      });
    }
  }
}

}  // namespace
}  // namespace tg
