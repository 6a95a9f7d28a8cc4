// InterpSchedule::parallel: independent nodes run at the same time. Its results must be the
// sequential schedule's bits under any thread count, its error the first failing node's in program
// order, its buffers released after their last reader, and on_node_done called once per node,
// never twice at once. The random-graph version of the bit property is in
// tests/property/parallel_schedule_props.cpp.
#include <gtest/gtest.h>
#include <tbb/global_control.h>

#include <atomic>
#include <cstring>
#include <string>
#include <vector>

#include "support/library.h"

namespace tg {
namespace {

constexpr int kThreadCounts[] = {1, 2, 4};

std::vector<float> pseudo_random(std::int64_t n, std::uint64_t seed) {
  SampleRng rng(seed);
  std::vector<float> v(static_cast<std::size_t>(n));
  for (auto& x : v) x = static_cast<float>(rng.uniform(-1, 1));
  return v;
}

// `branches` independent heads, each `depth` rounds of softmax(h @ w_b) on its own [rows, rows]
// input, one output per head.
struct WideCase {
  Graph graph;
  TensorMap inputs;
};

WideCase wide_graph(int branches, int depth, std::int64_t rows) {
  GraphBuilder b("wide");
  TracingScope scope(b);
  WideCase c;
  for (int i = 0; i < branches; ++i) {
    const std::string x = "x" + std::to_string(i);
    const std::string w = "w" + std::to_string(i);
    Tensor h = b.input(x, {DType::f32, {rows, rows}});
    const Tensor weight = b.input(w, {DType::f32, {rows, rows}});
    for (int d = 0; d < depth; ++d) h = softmax(matmul(h, weight), -1);
    b.output("y" + std::to_string(i), h);
    c.inputs.emplace(x, HostTensor::f32({rows, rows}, pseudo_random(rows * rows, 2 * static_cast<std::uint64_t>(i))));
    c.inputs.emplace(w,
                     HostTensor::f32({rows, rows}, pseudo_random(rows * rows, 2 * static_cast<std::uint64_t>(i) + 1)));
  }
  c.graph = b.take();
  return c;
}

void expect_same_bits(const TensorMap& want, const TensorMap& got, const std::string& where) {
  ASSERT_EQ(want.size(), got.size()) << where;
  for (const auto& [name, tensor] : want) {
    const HostTensor& other = got.at(name);
    ASSERT_EQ(tensor.type, other.type) << name << " " << where;
    ASSERT_EQ(tensor.storage(), other.storage()) << name << " " << where;
    const std::size_t width = tensor.storage() == HostStorage::f64 ? 8 : 4;
    EXPECT_EQ(std::memcmp(tensor.raw_data(), other.raw_data(), static_cast<std::size_t>(tensor.size()) * width), 0)
        << name << " differs " << where;
  }
}

TEST(ParallelInterpreter, WideGraphGivesTheSequentialBitsUnderEveryThreadCount) {
  const WideCase c = wide_graph(16, 4, 48);
  for (ComputeType compute : {ComputeType::f32, ComputeType::f64}) {
    const auto sequential = interpret(c.graph, c.inputs, {.compute = compute}).outputs;
    for (int threads : kThreadCounts) {
      const tbb::global_control limit(tbb::global_control::max_allowed_parallelism, static_cast<std::size_t>(threads));
      for (int repeat = 0; repeat < 3; ++repeat) {
        const auto parallel =
            interpret(c.graph, c.inputs, {.compute = compute, .schedule = InterpSchedule::parallel}).outputs;
        expect_same_bits(sequential, parallel, "with " + std::to_string(threads) + " threads");
      }
    }
  }
}

TEST(ParallelInterpreter, GraphWithoutNodesReturnsItsInputs) {
  GraphBuilder b("identity");
  TracingScope scope(b);
  b.output("y", b.input("x", {DType::f32, {3}}));
  const Graph g = b.take();
  const TensorMap inputs = {{"x", HostTensor::f32({3}, {1.f, -2.f, 3.5f})}};
  const auto out = interpret(g, inputs, {.schedule = InterpSchedule::parallel}).outputs;
  EXPECT_EQ(out.at("y").to_f64(), (std::vector<double>{1.0, -2.0, 3.5}));
}

// Two failing one_hot nodes: node A (earlier in program order) waits behind a chain of matmuls,
// node B (later) reads a graph input and can fail at once. Every run must report A, as a sequential
// run does, however the threads interleave.
TEST(ParallelInterpreter, ReportsTheFirstFailingNodeInProgramOrder) {
  constexpr std::int64_t n = 128;
  GraphBuilder b("two_failures");
  TracingScope scope(b);
  const Tensor x = b.input("x", {DType::f32, {n, n}});
  const Tensor bias = b.input("bias", {DType::f32, {n}});
  const Tensor bad = b.input("bad", {DType::i32, {3}});
  Tensor h = x;
  for (int i = 0; i < 6; ++i) h = tanh(matmul(h, x));
  const Tensor late_index = argmax(h + bias, 1);  // n - 1 everywhere: bias holds 1e6 there
  b.output("a", one_hot(late_index, 8));          // node A: index n - 1 is outside [0, 8)
  b.output("b", one_hot(bad, 4));                 // node B: index 9 is outside [0, 4)
  const Graph g = b.take();
  std::vector<float> bias_values(n, 0.f);
  bias_values.back() = 1e6f;
  const TensorMap inputs = {{"x", HostTensor::f32({n, n}, pseudo_random(n * n, 7))},
                            {"bias", HostTensor::f32({n}, bias_values)},
                            {"bad", HostTensor::i32({3}, {0, 9, 1})}};
  const std::size_t node_a = g.nodes().size() - 2;

  for (ComputeType compute : {ComputeType::f32, ComputeType::f64}) {
    std::string sequential_message;
    try {
      interpret(g, inputs, {.compute = compute});
      ADD_FAILURE() << "expected a RuntimeError";
    } catch (const RuntimeError& e) {
      sequential_message = e.what();
    }
    EXPECT_NE(sequential_message.find("index " + std::to_string(n - 1)), std::string::npos) << sequential_message;
    EXPECT_NE(sequential_message.find("node %" + std::to_string(node_a) + " one_hot"), std::string::npos)
        << sequential_message;
    for (int threads : kThreadCounts) {
      const tbb::global_control limit(tbb::global_control::max_allowed_parallelism, static_cast<std::size_t>(threads));
      for (int repeat = 0; repeat < 5; ++repeat) {
        try {
          interpret(g, inputs, {.compute = compute, .schedule = InterpSchedule::parallel});
          ADD_FAILURE() << "expected a RuntimeError";
        } catch (const RuntimeError& e) {
          EXPECT_EQ(std::string(e.what()), sequential_message) << threads << " threads";
        }
      }
    }
  }
}

// Each head is a chain: at any time it holds at most its current value and the one being written
// (then only its output), so with buffers released after their last reader the peak stays near
// 2 * heads buffers, while keeping every value holds all of them.
TEST(ParallelInterpreter, ReleasesBuffersAfterTheirLastReader) {
  constexpr int kHeads = 8;
  constexpr int kDepth = 12;
  constexpr std::int64_t kRows = 32;
  const WideCase c = wide_graph(kHeads, kDepth, kRows);
  const std::size_t buffer_bytes = kRows * kRows * sizeof(float);
  const std::size_t all_values = c.graph.nodes().size() * buffer_bytes;  // f32 inputs are read in place
  for (InterpSchedule schedule : {InterpSchedule::sequential, InterpSchedule::parallel}) {
    for (int threads : kThreadCounts) {
      const tbb::global_control limit(tbb::global_control::max_allowed_parallelism, static_cast<std::size_t>(threads));
      const InterpResult kept =
          interpret(c.graph, c.inputs, {.compute = ComputeType::f32, .keep_all_values = true, .schedule = schedule});
      EXPECT_EQ(kept.peak_buffer_bytes, all_values);
      const InterpResult released = interpret(c.graph, c.inputs, {.compute = ComputeType::f32, .schedule = schedule});
      EXPECT_GT(released.peak_buffer_bytes, 0u);
      EXPECT_LE(released.peak_buffer_bytes, 2 * kHeads * buffer_bytes) << threads << " threads";
    }
  }
  // The f64 oracle converts each f32 input to double: those buffers are counted and released too.
  const InterpResult oracle = interpret(c.graph, c.inputs, {.schedule = InterpSchedule::parallel});
  EXPECT_LE(oracle.peak_buffer_bytes, 4 * kHeads * kRows * kRows * sizeof(double));
}

TEST(ParallelInterpreter, CallsOnNodeDoneOncePerNodeAndNeverTwiceAtOnce) {
  const WideCase c = wide_graph(12, 3, 24);
  const std::size_t nodes = c.graph.nodes().size();
  for (int threads : kThreadCounts) {
    const tbb::global_control limit(tbb::global_control::max_allowed_parallelism, static_cast<std::size_t>(threads));
    std::vector<int> calls(nodes, 0);
    std::atomic<bool> inside{false};
    std::atomic<int> overlaps{0};
    InterpOptions options{.compute = ComputeType::f32, .schedule = InterpSchedule::parallel};
    options.on_node_done = [&](std::size_t node, double seconds) {
      if (inside.exchange(true)) ++overlaps;
      ASSERT_LT(node, nodes);
      EXPECT_GE(seconds, 0.0);
      ++calls[node];
      inside.store(false);
    };
    interpret(c.graph, c.inputs, options);
    EXPECT_EQ(overlaps.load(), 0);
    for (std::size_t n = 0; n < nodes; ++n) EXPECT_EQ(calls[n], 1) << "node " << n << ", " << threads << " threads";
  }
  // Sequential: in program order on the calling thread.
  std::vector<std::size_t> order;
  InterpOptions sequential{.compute = ComputeType::f32};
  sequential.on_node_done = [&](std::size_t node, double) { order.push_back(node); };
  interpret(c.graph, c.inputs, sequential);
  ASSERT_EQ(order.size(), nodes);
  for (std::size_t n = 0; n < nodes; ++n) EXPECT_EQ(order[n], n);
}

// Node `late` reads only node 0 but comes after hundreds of roots in program order: node 0 is done
// long before the scheduler has looked at every root, and `late` must still run once, started by
// node 0's task alone.
TEST(ParallelInterpreter, NodeMadeReadyWhileRootsAreSpawnedRunsOnce) {
  constexpr int kRoots = 400;
  GraphBuilder b("late_node");
  TracingScope scope(b);
  const Tensor x = b.input("x", {DType::f32, {4}});
  const Tensor y = b.input("y", {DType::f32, {4}});
  const Tensor first = tanh(x);
  for (int i = 0; i < kRoots; ++i) b.output("r" + std::to_string(i), sin(y));
  b.output("late", exp(first));
  const Graph g = b.take();
  const TensorMap inputs = {{"x", HostTensor::f32({4}, {0.5f, -1.f, 2.f, 0.f})},
                            {"y", HostTensor::f32({4}, {1.f, 2.f, 3.f, 4.f})}};
  const auto expected = interpret(g, inputs, {.compute = ComputeType::f32}).outputs.at("late");
  for (int threads : {2, 4}) {
    const tbb::global_control limit(tbb::global_control::max_allowed_parallelism, static_cast<std::size_t>(threads));
    for (int repeat = 0; repeat < 50; ++repeat) {
      std::vector<int> calls(g.nodes().size(), 0);
      InterpOptions options{.compute = ComputeType::f32, .schedule = InterpSchedule::parallel};
      options.on_node_done = [&](std::size_t node, double) { ++calls[node]; };
      const auto out = interpret(g, inputs, options).outputs;
      EXPECT_EQ(out.at("late").f32_data()[0], expected.f32_data()[0]);
      for (std::size_t n = 0; n < calls.size(); ++n)
        ASSERT_EQ(calls[n], 1) << "node " << n << ", " << threads << " threads";
    }
  }
}

TEST(ParallelInterpreter, CheckCoverageAndKeepAllValuesMatchTheSequentialRun) {
  const WideCase c = wide_graph(6, 2, 16);
  const InterpResult sequential = interpret(c.graph, c.inputs, {.keep_all_values = true, .check_coverage = true});
  const InterpResult parallel = interpret(
      c.graph, c.inputs, {.keep_all_values = true, .check_coverage = true, .schedule = InterpSchedule::parallel});
  ASSERT_EQ(parallel.values.size(), c.graph.values().size());
  for (std::size_t v = 0; v < sequential.values.size(); ++v) {
    EXPECT_EQ(parallel.values[v].to_f64(), sequential.values[v].to_f64()) << "value %" << v;
  }
}

}  // namespace
}  // namespace tg
