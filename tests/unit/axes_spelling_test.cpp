// One spelling for "every axis" and one for "no axes" across the reductions that take tg::Axes
// (sum, mean, max, min): leaving the argument out or Axes::all() reduces every axis; an empty list,
// however written ({}, Axes{}, std::vector<std::int64_t>{}), reduces none and keeps x's shape, as
// NumPy's axis=(). argmax/argmin take one axis or none and refuse braces at compile time.
#include <gtest/gtest.h>

#include <algorithm>
#include <functional>
#include <numeric>
#include <string>
#include <vector>

#include "support/library.h"
#include "tensorgrad/ir/ops/ids/reduce.h"

namespace {

using tg::Axes;
using tg::ComputeType;
using tg::DType;
using tg::HostTensor;
using tg::ReduceOptions;
using tg::Shape;
using tg::Tensor;

// The index reductions take one axis: braces (an empty or a listed set of axes) must not compile.
template <class T>
concept ArgmaxTakesBraces = requires(const T& t) {
  tg::argmax(t, {});
};
template <class T>
concept ArgminTakesBraces = requires(const T& t) {
  tg::argmin(t, {}, {.keep_dims = true});
};
template <class T>
concept ArgmaxTakesAList = requires(const T& t) {
  tg::argmax(t, {0, 1});
};
template <class T>
concept ArgmaxTakesOneAxisOrNone = requires(const T& t) {
  tg::argmax(t);
  tg::argmax(t, 1);
  tg::argmin(t, std::nullopt, {.keep_dims = true});
};
static_assert(!ArgmaxTakesBraces<Tensor>);
static_assert(!ArgminTakesBraces<Tensor>);
static_assert(!ArgmaxTakesAList<Tensor>);
static_assert(ArgmaxTakesOneAxisOrNone<Tensor>);

using ReduceFn = Tensor (*)(const Tensor&, Axes, ReduceOptions, tg::CallSite);

struct Reduction {
  std::string name;
  ReduceFn fn;
  std::function<double(const std::vector<double>&)> fold;  // the whole tensor's result, by a loop
};

std::vector<Reduction> reductions() {
  return {
      {"sum", tg::sum, [](const std::vector<double>& v) { return std::accumulate(v.begin(), v.end(), 0.0); }},
      {"mean", tg::mean,
       [](const std::vector<double>& v) {
         return std::accumulate(v.begin(), v.end(), 0.0) / static_cast<double>(v.size());
       }},
      {"max", tg::max, [](const std::vector<double>& v) { return *std::max_element(v.begin(), v.end()); }},
      {"min", tg::min, [](const std::vector<double>& v) { return *std::min_element(v.begin(), v.end()); }},
  };
}

const Shape kShape = {2, 3, 4};

// Distinct values (no ties), some negative.
HostTensor input() {
  std::vector<float> v(24);
  for (std::size_t i = 0; i < v.size(); ++i) v[i] = static_cast<float>((static_cast<int>(i) * 7) % 24) * 0.25f - 2.f;
  return HostTensor::f32(kShape, v);
}

struct Traced {
  tg::Graph graph;
  std::vector<std::int64_t> axes_attr;  // the reduction node's normalized `axes`
};

Traced trace(const std::function<Tensor(const Tensor&)>& build) {
  tg::GraphBuilder b("axes");
  tg::TracingScope scope(b);
  b.output("y", build(b.input("x", {DType::f32, kShape})));
  tg::Graph g = b.take();
  std::vector<std::int64_t> axes;
  for (const auto& node : g.nodes()) {
    if (node.attrs.has("axes")) axes = node.attrs.ints("axes");
  }
  return {std::move(g), axes};
}

HostTensor run(const tg::Graph& g, ComputeType compute) {
  return tg::interpret(g, {{"x", input()}}, {.compute = compute}).outputs.at("y");
}

// Every spelling that must mean "every axis", with and without keep_dims.
TEST(AxesSpelling, OmittedOrAllReducesEveryAxis) {
  const std::vector<double> x = input().to_f64();
  for (const Reduction& r : reductions()) {
    SCOPED_TRACE(r.name);
    const double want = r.fold(x);
    for (bool keep : {false, true}) {
      SCOPED_TRACE(keep ? "keep_dims" : "dropped");
      std::vector<std::pair<std::string, Traced>> spellings;
      if (!keep) {
        // Leaving the argument out (the declared default) is only possible without options.
        if (r.name == "sum") spellings.emplace_back("sum(x)", trace([](const Tensor& t) { return tg::sum(t); }));
        if (r.name == "mean") spellings.emplace_back("mean(x)", trace([](const Tensor& t) { return tg::mean(t); }));
        if (r.name == "max") spellings.emplace_back("max(x)", trace([](const Tensor& t) { return tg::max(t); }));
        if (r.name == "min") spellings.emplace_back("min(x)", trace([](const Tensor& t) { return tg::min(t); }));
      }
      spellings.emplace_back("Axes::all()", trace([&](const Tensor& t) {
                               return r.fn(t, Axes::all(), {.keep_dims = keep}, tg::CallSite::current());
                             }));
      for (const auto& [spelling, traced] : spellings) {
        SCOPED_TRACE(spelling);
        EXPECT_EQ(traced.axes_attr, (std::vector<std::int64_t>{0, 1, 2}));
        for (ComputeType compute : {ComputeType::f64, ComputeType::f32}) {
          const HostTensor y = run(traced.graph, compute);
          EXPECT_EQ(y.type.shape, keep ? Shape({1, 1, 1}) : Shape{});
          ASSERT_EQ(y.size(), 1);
          EXPECT_NEAR(y.at(0), want, 1e-5);
        }
      }
    }
  }
}

// Every spelling of an empty list must reduce nothing: the result is x, shape and values.
TEST(AxesSpelling, AnEmptyListReducesNoAxis) {
  const std::vector<double> x = input().to_f64();
  for (const Reduction& r : reductions()) {
    SCOPED_TRACE(r.name);
    for (bool keep : {false, true}) {
      SCOPED_TRACE(keep ? "keep_dims" : "dropped");
      const ReduceOptions options{.keep_dims = keep};
      const std::vector<std::pair<std::string, Traced>> spellings = {
          {"{}", trace([&](const Tensor& t) { return r.fn(t, {}, options, tg::CallSite::current()); })},
          {"Axes{}", trace([&](const Tensor& t) { return r.fn(t, Axes{}, options, tg::CallSite::current()); })},
          {"std::vector{}", trace([&](const Tensor& t) {
             return r.fn(t, std::vector<std::int64_t>{}, options, tg::CallSite::current());
           })},
      };
      for (const auto& [spelling, traced] : spellings) {
        SCOPED_TRACE(spelling);
        EXPECT_TRUE(traced.axes_attr.empty());
        for (ComputeType compute : {ComputeType::f64, ComputeType::f32}) {
          const HostTensor y = run(traced.graph, compute);
          EXPECT_EQ(y.type.shape, kShape);
          EXPECT_EQ(y.to_f64(), x);
        }
      }
    }
  }
}

// The direct calls, not through a function pointer: what a user writes.
TEST(AxesSpelling, DirectCallsAgree) {
  tg::GraphBuilder b("direct");
  tg::TracingScope scope(b);
  const Tensor x = b.input("x", {DType::f32, kShape});
  EXPECT_EQ(tg::sum(x).shape(), Shape{});
  EXPECT_EQ(tg::mean(x, Axes::all(), {.keep_dims = true}).shape(), Shape({1, 1, 1}));
  EXPECT_EQ(tg::max(x, {}).shape(), kShape);
  EXPECT_EQ(tg::min(x, {}, {.keep_dims = true}).shape(), kShape);
  EXPECT_EQ(tg::sum(x, std::vector<std::int64_t>{}).shape(), kShape);
  EXPECT_EQ(tg::sum(x, {0, -1}).shape(), Shape({3}));
  EXPECT_EQ(tg::sum(x, 1, {.keep_dims = true}).shape(), Shape({2, 1, 4}));
}

TEST(AxesSpelling, AxesValueSaysWhichItIs) {
  EXPECT_TRUE(Axes::all().is_all());
  EXPECT_FALSE(Axes::all().list().has_value());
  const Axes braces = {};
  EXPECT_FALSE(braces.is_all());
  ASSERT_TRUE(braces.list().has_value());
  EXPECT_TRUE(braces.list()->empty());
  EXPECT_FALSE(Axes(std::vector<std::int64_t>{}).is_all());
  EXPECT_EQ(*Axes({2, 0}).list(), (std::vector<std::int64_t>{2, 0}));
  EXPECT_EQ(*Axes(-1).list(), (std::vector<std::int64_t>{-1}));
}

// Reducing no axes is the identity for the gradient too: d(sum(f(x, {})))/dx is d(sum(x))/dx = 1
// for sum, mean, max and min alike (each element is its own slice, so no ties to share).
TEST(AxesSpelling, NoAxesGradientIsTheIdentity) {
  for (const Reduction& r : reductions()) {
    SCOPED_TRACE(r.name);
    tg::GraphBuilder b("grad");
    tg::TracingScope scope(b);
    const Tensor x = b.param("x", {DType::f32, kShape});
    b.output("loss", tg::sum(r.fn(x, {}, {}, tg::CallSite::current())));
    const tg::Graph g = tg::differentiate(b.take());
    const HostTensor grad = tg::interpret(g, {{"x", input()}}).outputs.at("grad.x");
    EXPECT_EQ(grad.type.shape, kShape);
    EXPECT_EQ(grad.to_f64(), std::vector<double>(24, 1.0));
  }
}

}  // namespace
