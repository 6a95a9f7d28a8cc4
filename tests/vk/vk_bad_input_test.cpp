// Bad-input catalogue, Vulkan (tests/support/bad_input.h): sizes and launches beyond what the device
// or one buffer binding allows (refused when the Program is built, before anything is allocated),
// a device selector that matches nothing, program misuse, and the runtime and training failures
// whose state lives on the device (params, optimizer state), which must come back bit for bit.
// Skips with the reason when the machine has no usable Vulkan device (VkTest).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <memory>
#include <string>
#include <vector>

#include "support/bad_input.h"
#include "support/library.h"
#include "tensorgrad/vk/executor.h"
#include "vk/kernels/kernels.h"
#include "vk_test_support.h"

namespace tg::vk {
namespace {

using testing::VkTest;
using tg::testing::BadCall;
using tg::testing::BadInputCase;
using tg::testing::reports;
using tg::testing::throw_if_failed;
using tg::testing::throws;

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

// The cases are built when the binary starts, before any device exists; the test body hands each
// case's setup the fixture's context factory (contexts that report validation messages into the
// test) through this.
std::function<std::shared_ptr<Context>(ContextOptions)> g_make_context;
std::shared_ptr<Context> context(ContextOptions options = {}) { return g_make_context(std::move(options)); }

// Building a Program refuses the graph: LimitError for what the device cannot hold or run,
// CompileError for what the backend has no kernel for.
template <typename Expected = LimitError>
BadInputCase program_refused(std::string name, std::function<Graph(const DeviceInfo&)> graph,
                             std::vector<std::string> fragments, ContextOptions options = {}) {
  return {.name = std::move(name),
          .setup =
              [graph, options] {
                auto ctx = context(options);
                return BadCall{[ctx, graph] { Program program(ctx, graph(ctx->info())); }, {}};
              },
          .expected = throws<Expected>(),
          .fragments = std::move(fragments)};
}

Graph one_input_graph(const std::string& name, std::int64_t elements) {
  GraphBuilder b(name);
  TracingScope scope(b);
  b.output("y", neg(b.input("x", {DType::f32, {elements}})));
  return b.take();
}

std::vector<BadInputCase> limit_cases() {
  return {
      program_refused("value_above_max_storage_buffer_range",
                      [](const DeviceInfo& info) {
                        return one_input_graph("huge",
                                               static_cast<std::int64_t>(info.max_storage_buffer_range / 4 + 1));
                      },
                      {"Vulkan buffer plan: value %0", "of graph 'huge'", "above maxStorageBufferRange"}),
      program_refused(
          "plan_above_the_device_heap",
          [](const DeviceInfo& info) {
            const std::int64_t elements =
                static_cast<std::int64_t>(std::min<std::uint64_t>(info.max_storage_buffer_range, 1u << 30) / 4);
            const std::uint64_t count = info.device_heap_bytes / (4 * static_cast<std::uint64_t>(elements)) + 1;
            GraphBuilder b("too_big");
            TracingScope scope(b);
            Tensor total = b.input("x0", {DType::f32, {elements}});
            for (std::uint64_t i = 1; i < count; ++i)
              total = total + b.input("x" + std::to_string(i), {DType::f32, {elements}});
            b.output("y", total);
            return b.take();
          },
          {"Vulkan buffer plan: graph 'too_big' needs", "of device memory", "use a smaller batch or a larger device"}),
      program_refused("launch_above_the_storage_buffer_limit",
                      [](const DeviceInfo&) {
                        GraphBuilder b("wide_concat");
                        TracingScope scope(b);
                        std::vector<Tensor> parts;
                        for (int k = 0; k < 8; ++k)
                          parts.push_back(b.input("p" + std::to_string(k), {DType::f32, {2, 3}}));
                        b.output("all", concat(parts, 0));
                        return b.take();
                      },
                      {"'concat'", "graph 'wide_concat'", "binds 9 storage buffers", "allows 4 per dispatch"},
                      {.max_storage_buffers_per_dispatch = 4}),
      program_refused<CompileError>(
          "permute_with_seven_strided_axes",
          [](const DeviceInfo&) {
            GraphBuilder b("rank7");
            TracingScope scope(b);
            const Tensor x = b.input("x", {DType::f32, {2, 3, 2, 3, 2, 3, 2}});
            b.output("y", permute(x, {6, 4, 2, 0, 5, 3, 1}));
            return b.take();
          },
          {"Vulkan kernel for 'permute'", "strided axes after collapsing, above the 6 the shader supports"}),
      {.name = "launch_past_the_loop_limit",
       .setup =
           [] {
             auto ctx = context();
             GraphBuilder b("long_rows");
             TracingScope scope(b);
             b.output("s", sum(b.input("x", {DType::f32, {4, 5000}}), 1));
             return BadCall{[ctx, g = b.take()] {
                              const ScopedLoopLimitForTesting limit(10);
                              Program program(ctx, g);
                            },
                            {}};
           },
       .expected = throws<LimitError>(),
       .fragments = {"Vulkan kernel 'reduce' for 'sum'", "f32[4,5000]", "graph 'long_rows'", "loop limit"}},
      {.name = "device_selector_matches_nothing",
       .setup =
           [] {
             return BadCall{[] { (void)context({.device = "no-such-gpu-xyz"}); }, {}};
           },
       .expected = throws<NoDeviceError>(),
       .fragments = {"no-such-gpu-xyz"}},
  };
}

// A Vulkan session with a resident param w and writeback w <- w - 0.5 * w, committed only when
// the loss is finite; its param is the state.
struct VkSession {
  std::shared_ptr<Session> session;
  VkSession() {
    GraphBuilder b("vk_net");
    TracingScope scope(b);
    const Tensor x = b.input("x", {DType::f32, {2, 3}});
    const Tensor w = b.param("w", {DType::f32, {3, 2}});
    b.output("loss", sum(matmul(x, w)));
    b.output("w.new", w - w * 0.5);
    session = std::make_shared<Session>(b.take(), SessionOptions{.backend = Backend::vulkan,
                                                                 .vk_context = context(),
                                                                 .writebacks = {{"w.new", "w"}},
                                                                 .commit_if_finite = "loss"});
    session->set_param("w", HostTensor::of({DType::f32, {3, 2}}, {0.1, 0.2, -0.3, 0.4, 0.5, -0.6}));
    if (!session->run({{"x", x_value()}}).ok()) throw Error("the setup run failed");
  }
  static HostTensor x_value() { return HostTensor::of({DType::f32, {2, 3}}, {1, 2, 3, -1, 0.5, 2}); }
  BadCall with(std::function<void(Session&)> call) const {
    return BadCall{[s = session, call] { call(*s); }, [s = session] { return tg::testing::bits(s->param("w")); }};
  }
};

struct Net : Module {
  Linear l1{*this, "l1", 2, 1};
};
Tensor net_loss(const Net& m, const Inputs& in) {
  const Tensor r = m.l1(in.at("x")) - in.at("y");
  return mean(r * r);
}

Training vk_training(const Net& net) {
  std::shared_ptr<Context> ctx = context();  // not inside the aggregate: GCC 12 warns on its cleanup path
  return compile(TrainingSpec<Net>{.model = net,
                                   .loss = net_loss,
                                   .inputs = {{"x", {{4, 2}}}, {"y", {{4, 1}}}},
                                   .optimizer = {.kind = AdamConfig{}},
                                   .lr = 0.1,
                                   .backend = Backend::vulkan,
                                   .seed = 5,
                                   .vk_context = std::move(ctx)});
}

std::vector<BadInputCase> device_state_cases() {
  return {
      {.name = "session_run_misshapen_input",
       .setup =
           [] {
             return VkSession().with([](Session& s) {
               throw_if_failed(s.run({{"x", HostTensor::of({DType::f32, {3, 2}}, std::vector<double>(6, 1))}}));
             });
           },
       .expected = reports("input"),
       .fragments = {"input 'x' expects f32[2,3], got f32[3,2]"}},
      {.name = "session_set_param_wrong_shape",
       .setup =
           [] {
             return VkSession().with([](Session& s) { s.set_param("w", HostTensor::of({DType::f32, {2}}, {1, 2})); });
           },
       .expected = throws<RuntimeError>(),
       .fragments = {"param 'w' of graph 'vk_net': expected f32[3,2], got f32[2]"}},
      {.name = "session_nan_loss",
       .setup =
           [] {
             return VkSession().with([](Session& s) {
               HostTensor x = VkSession::x_value();
               x.set(4, kNaN);
               throw_if_failed(s.run({{"x", x}}));
             });
           },
       .expected = reports("nonfinite"),
       .fragments = {"output 'loss' is nan", "params and state are as they were before it"}},
      {.name = "program_read_input_not_resident",
       .setup =
           [] {
             auto ctx = context();
             auto program = std::make_shared<Program>(ctx, one_input_graph("plain", 4));
             return BadCall{[program] { (void)program->read_input("x"); }, {}};
           },
       .expected = throws<RuntimeError>(),
       .fragments = {"Vulkan program 'plain': 'x' is not a resident input"}},
      {.name = "program_device_output_unknown",
       .setup =
           [] {
             auto ctx = context();
             return BadCall{[ctx] { Program p(ctx, one_input_graph("plain", 4), {.device_outputs = {"z"}}); }, {}};
           },
       .expected = throws<CompileError>(),
       .fragments = {"'z'", "no output has that name"}},
      {.name = "training_nan_batch",
       .setup =
           [] {
             auto net = std::make_shared<Net>();
             auto train = std::make_shared<Training>(vk_training(*net));
             TensorMap batch{{"x", HostTensor::of({DType::f32, {4, 2}}, {1, 2, 3, 4, 5, 6, 7, 8})},
                             {"y", HostTensor::of({DType::f32, {4, 1}}, {1, 0, 1, 0})}};
             if (!train->step(batch).ok()) throw Error("the setup step failed");
             batch["y"].set(2, kNaN);
             return BadCall{[net, train, batch] { throw_if_failed(train->step(batch)); },
                            [train] {
                              return tg::testing::bits(train->download_param_tensors()) +
                                     tg::testing::bits(train->download_optimizer_state()) +
                                     std::to_string(train->steps());
                            }};
           },
       .expected = reports("nonfinite"),
       .fragments = {"output 'loss' is nan"}},
  };
}

std::vector<BadInputCase> vk_table() {
  std::vector<BadInputCase> all;
  for (auto part : {limit_cases(), device_state_cases()}) {
    for (BadInputCase& c : part) all.push_back(std::move(c));
  }
  return all;
}

class VkBadInput : public VkTest, public ::testing::WithParamInterface<BadInputCase> {};

TEST_P(VkBadInput, IsRefused) {
  g_make_context = [this](ContextOptions options) { return make_context(std::move(options)); };
  tg::testing::run_bad_input(GetParam());
  g_make_context = nullptr;
}

INSTANTIATE_TEST_SUITE_P(BadInput, VkBadInput, ::testing::ValuesIn(tg::testing::checked_table(vk_table())),
                         tg::testing::case_name);

}  // namespace
}  // namespace tg::vk
