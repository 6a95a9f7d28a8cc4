// Every user mistake in compile / attach / replace_model (and in building a Session) throws a typed
// tg::Error subclass whose message names what is wrong: never a bare std::out_of_range or another
// std::exception from a lookup deep inside. Each case names the exact type it expects.
#include <gtest/gtest.h>

#include <functional>
#include <string>
#include <typeinfo>
#include <vector>

#include "support/library.h"
#include "tensorgrad/train/training.h"

namespace tg {
namespace {

// Runs `fn`, expects an exception of exactly type E (or a subclass) holding every one of `words`.
// Any other exception fails the test, naming its type: a bare std::exception is the bug this file
// guards against.
template <class E>
void expect_error(const std::function<void()>& fn, const std::vector<std::string>& words) {
  try {
    fn();
    ADD_FAILURE() << "expected " << typeid(E).name() << ", nothing was thrown";
  } catch (const std::exception& e) {
    if (dynamic_cast<const E*>(&e) == nullptr) {
      ADD_FAILURE() << "expected " << typeid(E).name() << ", got " << typeid(e).name()
                    << (dynamic_cast<const Error*>(&e) ? " (a tg::Error)" : " (untyped: not a tg::Error)") << ": "
                    << e.what();
      return;
    }
    for (const std::string& word : words) EXPECT_NE(std::string(e.what()).find(word), std::string::npos) << e.what();
  }
}

struct Net : Module {
  Linear l1{*this, "l1", 2, 3};
  Linear l2{*this, "l2", 3, 1};
};
struct Blocks : Module {
  ModuleList<Linear> layers{*this, "layers", 2, 2, 2};
};
struct Empty : Module {};
struct OtherNet : Module {
  Linear l{*this, "l", 2, 1};
};

Tensor predict(const Net& m, const Inputs& in) { return m.l2(relu(m.l1(in.at("x")))); }
Tensor net_loss(const Net& m, const Inputs& in) {
  Tensor r = predict(m, in) - in.at("y");
  return mean(r * r);
}

TrainingSpec<Net> spec(const Net& model) {
  return {.model = model,
          .loss = net_loss,
          .inputs = {{"x", {{4, 2}}}, {"y", {{4, 1}}}},
          .optimizer = {.kind = AdamConfig{}},
          .lr = 0.01,
          .seed = 3};
}

TEST(CompileErrors, LossReadingAnUndeclaredInputNamesIt) {
  Net model;
  TrainingSpec<Net> s = spec(model);
  s.loss = [](const Net& m, const Inputs& in) { return mean(predict(m, in) - in.at("target")); };
  expect_error<CompileError>([&] { compile(s); }, {"input 'target'", "not declared", "x, y"});
}

TEST(CompileErrors, ForwardReadingAnUndeclaredInputNamesIt) {
  Net model;
  Training train = compile(spec(model));
  const auto reads_z = [](const Net& m, const Inputs& in) { return m.l1(in.at("z")); };
  // Static shapes compile at attach ...
  expect_error<CompileError>(
      [&] {
        train.attach(ForwardSpec<Net>{.forward = reads_z, .inputs = {{"x", {{4, 2}}}}});
      },
      {"input 'z'", "not declared", "x"});
  // ... a wildcard batch compiles at the run, which fails with kind "compile" instead of throwing.
  Forward f = train.attach(ForwardSpec<Net>{.forward = reads_z, .inputs = {{"x", {{-1, 2}}}}});
  const ForwardResult r = f.run({{"x", HostTensor::f32({1, 2}, {1.f, 2.f})}});
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.failure().kind, "compile");
  EXPECT_NE(r.failure().message.find("input 'z'"), std::string::npos) << r.failure().message;
  expect_error<CompileError>([&] { f.graph_for({{"x", HostTensor::f32({1, 2}, {1.f, 2.f})}}); }, {"input 'z'"});
}

TEST(CompileErrors, ParamsTheModelDoesNotHaveAreNamed) {
  Net model, stranger;
  TrainingSpec<Net> s = spec(model);
  // A param of another model instance: not bound while tracing this one.
  s.loss = [&stranger](const Net& m, const Inputs& in) {
    return mean(predict(m, in) * stranger.l1.W);  // NOLINT: deliberately the wrong model
  };
  expect_error<CompileError>([&] { compile(s); }, {"param 'l1.W'", "not bound", "another model instance"});

  Blocks blocks;
  const auto past_the_end = [](const Blocks& m, const Inputs& in) { return mean(m.layers[2](in.at("x"))); };
  expect_error<CompileError>(
      [&] {
        compile(TrainingSpec<Blocks>{.model = blocks, .loss = past_the_end, .inputs = {{"x", {{4, 2}}}}});
      },
      {"ModuleList 'layers' has 2 elements", "index 2"});
}

TEST(CompileErrors, ContainerMistakesInTheLossAreCompileErrors) {
  Net model;
  TrainingSpec<Net> s = spec(model);
  const std::vector<std::int64_t> sizes = {4};
  s.loss = [&sizes](const Net& m, const Inputs& in) {
    return mean(predict(m, in) * static_cast<float>(sizes.at(3)));  // out of range
  };
  expect_error<CompileError>([&] { compile(s); }, {"graph 'training'", "std::logic_error"});
}

TEST(CompileErrors, LossMustBeAScalarFloatTracedFromTheGraph) {
  Net model;
  TrainingSpec<Net> s = spec(model);
  s.loss = [](const Net& m, const Inputs& in) { return predict(m, in); };
  expect_error<CompileError>([&] { compile(s); }, {"0-d float", "f32[4,1]"});
  s.loss = [](const Net&, const Inputs&) { return Tensor(); };
  expect_error<CompileError>([&] { compile(s); }, {"graph 'training'", "must return a tensor"});
  s.loss = nullptr;
  expect_error<CompileError>([&] { compile(s); }, {"no loss function"});
}

TEST(CompileErrors, InputSpecsAreChecked) {
  Net model;
  const auto with_input = [&](const std::string& name, Shape shape) {
    TrainingSpec<Net> s = spec(model);
    s.inputs.insert_or_assign(name, InputSpec{std::move(shape)});
    return s;
  };
  expect_error<CompileError>([&] { compile(with_input("x", {-1, 2})); }, {"input 'x'", "[-1,2]", "static"});
  expect_error<CompileError>([&] { compile(with_input("x", {4, -2})); }, {"input 'x'", "[4,-2]"});
  // Names the step graph uses itself.
  for (const std::string name : {"l1.W", "l2.b.adam.m", "l1.W.last_grad", "optim.lr", "step_seed", ""}) {
    expect_error<CompileError>([&] { compile(with_input(name, {1})); }, {"input '" + name + "'"});
  }
}

TEST(CompileErrors, ModelsWithoutParamsAndLossesWithoutThemAreRefused) {
  Empty empty;
  const auto data_only = [](const Module&, const Inputs& in) { return mean(in.at("x")); };
  expect_error<CompileError>(
      [&] {
        compile(TrainingSpec<Empty>{.model = empty, .loss = data_only, .inputs = {{"x", {{4, 2}}}}});
      },
      {"no params"});
  Net model;
  TrainingSpec<Net> s = spec(model);
  s.loss = [](const Net&, const Inputs& in) { return mean(in.at("x")); };
  expect_error<CompileError>([&] { compile(s); }, {"does not depend on any param"});
}

TEST(CompileErrors, AttachAndReplaceModelMistakes) {
  Net model;
  Training train = compile(spec(model));
  expect_error<CompileError>([&] { train.attach(ForwardSpec<Net>{.forward = nullptr, .inputs = {}}); },
                             {"no forward function"});
  expect_error<CompileError>(
      [&] {
        train.attach(ForwardSpec<Net>{.forward = predict, .inputs = {{"x", {{4, 2}}}}, .max_cached_shapes = 0});
      },
      {"max_cached_shapes"});
  expect_error<CompileError>(
      [&] {
        train.attach(ForwardSpec<Net>{.forward = predict, .inputs = {{"x", {{4, -1}}}}});
      },
      {"input 'x'", "only dim 0"});
  OtherNet other;
  expect_error<CompileError>(
      [&] {
        train.attach(
            ForwardSpec<OtherNet>{.forward = [](const OtherNet& m, const Inputs& in) { return m.l(in.at("x")); },
                                  .inputs = {{"x", {{4, 2}}}}});
      },
      {"model type"});
  expect_error<CompileError>([&] { train.replace_model(other); }, {"type"});
  EXPECT_EQ(train.steps(), 0);
}

TEST(CompileErrors, SessionSpecMistakesAreNamed) {
  GraphBuilder b("g");
  Graph graph;
  {
    TracingScope scope(b);
    const Tensor w = b.param("w", {DType::f32, {2}});
    const Tensor x = b.input("x", {DType::f32, {2}});
    b.output("y", w * x);
    graph = b.take();
  }
  expect_error<Error>([&] { Session s(graph, {.writebacks = {{"nope", "w"}}}); }, {"'nope'"});
  expect_error<Error>([&] { Session s(graph, {.writebacks = {{"y", "nope"}}}); }, {"'nope'"});
  expect_error<Error>([&] { Session s(graph, {.writebacks = {{"y", "x"}}}); }, {"not resident"});
  expect_error<Error>([&] { Session s(graph, {.commit_if_finite = "nope"}); }, {"'nope'"});
  Session session(graph, {});
  expect_error<RuntimeError>([&] { session.set_param("nope", HostTensor::f32({2}, {1.f, 2.f})); }, {"'nope'"});
  expect_error<RuntimeError>([&] { session.set_param("w", HostTensor::f32({3}, {1.f, 2.f, 3.f})); }, {"'w'"});
}

}  // namespace
}  // namespace tg
