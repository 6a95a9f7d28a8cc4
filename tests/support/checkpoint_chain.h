#pragma once
// Random chains for the gradient-checkpointing tests (tests/unit/checkpoint_test.cpp,
// tests/vk/vk_checkpoint_test.cpp): blocks of matmul, elementwise, softmax, dropout and randn ops
// on a [4, 8] activation, with random runs of blocks checkpointed.
#include <algorithm>
#include <cstdint>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "support/library.h"
#include "tensorgrad/ir/checkpoint.h"

namespace tg::testing {

inline constexpr std::int64_t kRows = 4;
inline constexpr std::int64_t kWidth = 8;

// One block of a random chain: 2-4 ops drawn from `rng` on a [kRows, kWidth] activation, reading
// the block's param (and, for the residual, the block's input).
inline Tensor random_block(const Tensor& x, const Tensor& w, std::mt19937& rng) {
  std::uniform_int_distribution<int> pick(0, 8);
  std::uniform_int_distribution<int> length(2, 4);
  Tensor h = matmul(x, w);
  for (int i = 0, n = length(rng); i < n; ++i) {
    switch (pick(rng)) {
      case 0:
        h = tanh(h);
        break;
      case 1:
        h = relu(h) + 0.25 * h;
        break;
      case 2:
        h = softmax(h) * 4.0;
        break;
      case 3:
        h = h + x;
        break;
      case 4:
        h = dropout(h, 0.25);
        break;
      case 5:
        h = h + 0.1 * randn({kRows, kWidth});
        break;
      case 6:
        h = sigmoid(h) * h;
        break;
      case 7:
        h = matmul(tanh(h), w);
        break;
      default:
        h = h * x;
        break;
    }
  }
  return tanh(h);
}

struct Chain {
  Graph forward;
  std::set<std::int32_t> segments;
};

// A chain of `blocks` random blocks from param x0; with `mark`, random runs of 1-3 blocks are
// checkpoint segments (each run with probability 0.6). The same `seed` draws the same ops, salts and
// runs, so the marked and unmarked chains differ only in the marks.
inline Chain random_chain(std::uint32_t seed, int blocks, bool mark) {
  std::mt19937 rng(seed);
  std::mt19937 marks(seed ^ 0x5bd1e995u);
  GraphBuilder b("chain");
  TracingScope scope(b);
  Tensor h = b.param("x0", {DType::f32, {kRows, kWidth}});
  std::vector<Tensor> weights;
  for (int i = 0; i < blocks; ++i) weights.push_back(b.param("w" + std::to_string(i), {DType::f32, {kWidth, kWidth}}));
  for (int i = 0; i < blocks;) {
    const int span = std::uniform_int_distribution<int>(1, 3)(marks);
    const bool checkpointed = std::bernoulli_distribution(0.6)(marks);
    const int end = std::min(blocks, i + span);
    const auto segment = [&](const Tensor& in) {
      Tensor out = in;
      for (int j = i; j < end; ++j) out = random_block(out, weights[static_cast<std::size_t>(j)], rng);
      return out;
    };
    h = mark && checkpointed ? checkpoint(segment, h) : segment(h);
    i = end;
  }
  b.output("loss", mean(h * h));
  Chain chain{b.take(), {}};
  for (const Node& node : chain.forward.nodes())
    if (node.checkpoint != kNoCheckpoint) chain.segments.insert(node.checkpoint);
  return chain;
}

inline TensorMap chain_inputs(const Graph& g, std::uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> normal(0.f, 0.5f);
  TensorMap inputs;
  for (const GraphInput& in : g.inputs()) {
    if (in.name == kStepSeedInput) {
      inputs[in.name] = HostTensor::i32({}, {static_cast<std::int32_t>(seed % 1000)});
      continue;
    }
    std::vector<float> data(static_cast<std::size_t>(g.type(in.value).size()));
    for (float& v : data) v = normal(rng);
    inputs[in.name] = HostTensor::f32(g.type(in.value).shape, std::move(data));
  }
  return inputs;
}

}  // namespace tg::testing
