// Linear-time graph building (issue 15, item 4): a graph with 100k inputs and 100k outputs is built
// through the API, verified, printed and parsed back. Each lookup by name or by value was a scan,
// which made these steps quadratic (over 300 s to parse); now they take well under a second each in
// the release build. The test asserts structure, not time: a regression shows as a slow suite.
#include <gtest/gtest.h>

#include <cstdint>
#include <string>

#include "support/library.h"
#include "tensorgrad/ir/ops/ids/elementwise_unary.h"

namespace {

constexpr int kCount = 100'000;

std::string input_name(int i) { return "x" + std::to_string(i); }
std::string output_name(int i) { return "y" + std::to_string(i); }

// kCount data inputs, a neg node on each, and kCount outputs: the odd ones name an input directly,
// the even ones a node. Every fourth input is a param, and the last tenth of the inputs are added
// after the nodes, so the printer needs `after %k` on them.
tg::Graph build_wide_graph() {
  tg::GraphBuilder b("wide");
  tg::TracingScope scope(b);
  const int late = kCount - kCount / 10;
  std::vector<tg::Tensor> inputs;
  inputs.reserve(kCount);
  for (int i = 0; i < late; ++i) {
    const auto kind = i % 4 == 0 ? tg::InputKind::param : tg::InputKind::data;
    inputs.push_back(b.input(input_name(i), {tg::DType::f32, {2}}, kind));
  }
  std::vector<tg::Tensor> negated;
  negated.reserve(kCount);
  for (int i = 0; i < late; ++i) negated.push_back(tg::neg(inputs[static_cast<std::size_t>(i)]));
  for (int i = late; i < kCount; ++i) {
    inputs.push_back(b.input(input_name(i), {tg::DType::f32, {2}}));
    negated.push_back(tg::neg(inputs.back()));
  }
  for (int i = 0; i < kCount; ++i) {
    const auto index = static_cast<std::size_t>(i);
    b.output(output_name(i), i % 2 ? inputs[index] : negated[index]);
  }
  return b.take();
}

// The structure the builder produced, checked through the lookups this issue made O(1).
void expect_wide_structure(const tg::Graph& g) {
  ASSERT_EQ(g.inputs().size(), static_cast<std::size_t>(kCount));
  ASSERT_EQ(g.outputs().size(), static_cast<std::size_t>(kCount));
  ASSERT_EQ(g.nodes().size(), static_cast<std::size_t>(kCount));
  ASSERT_EQ(g.values().size(), static_cast<std::size_t>(2 * kCount));
  for (int i = 0; i < kCount; ++i) {
    const auto in = g.find_input(input_name(i));
    ASSERT_TRUE(in.has_value()) << input_name(i);
    const tg::GraphInput* info = g.input_of_value(*in);
    ASSERT_NE(info, nullptr) << input_name(i);
    EXPECT_EQ(info->name, input_name(i));
    EXPECT_EQ(info->kind, i % 4 == 0 && i < kCount - kCount / 10 ? tg::InputKind::param : tg::InputKind::data);
    const auto out = g.find_output(output_name(i));
    ASSERT_TRUE(out.has_value()) << output_name(i);
    if (i % 2) {
      EXPECT_EQ(*out, *in) << output_name(i);
    } else {
      const tg::NodeId producer = g.value(*out).producer;
      ASSERT_NE(producer, tg::kNoNode) << output_name(i);
      EXPECT_EQ(g.node(producer).op, tg::op::Neg);
      EXPECT_EQ(g.node(producer).inputs.at(0), *in) << output_name(i);
      EXPECT_EQ(g.input_of_value(*out), nullptr);
    }
  }
  EXPECT_FALSE(g.find_input("x" + std::to_string(kCount)));
  EXPECT_FALSE(g.find_output("x0"));
  EXPECT_EQ(g.input_of_value(-1), nullptr);
  EXPECT_EQ(g.input_of_value(2 * kCount), nullptr);
}

TEST(GraphScale, HundredThousandInputsAndOutputsThroughTheApi) {
  const tg::Graph g = build_wide_graph();
  expect_wide_structure(g);
  EXPECT_NO_THROW(tg::verify(g));
}

TEST(GraphScale, HundredThousandInputsAndOutputsThroughTheText) {
  const tg::Graph g = build_wide_graph();
  const std::string text = tg::print_graph(g);
  EXPECT_NE(text.find(" after %"), std::string::npos);  // the late inputs keep their place
  const tg::Graph parsed = tg::parse_graph(text);       // verifies too
  expect_wide_structure(parsed);
  EXPECT_EQ(parsed, g);
  EXPECT_EQ(tg::print_graph(parsed), text);
}

TEST(GraphScale, DuplicateNamesStillRefused) {
  tg::Graph g("g");
  const tg::ValueId x = g.add_input("x", tg::InputKind::data, {tg::DType::f32, {2}});
  EXPECT_THROW((void)g.add_input("x", tg::InputKind::param, {tg::DType::f32, {2}}), tg::Error);
  g.add_output("y", x);
  EXPECT_THROW(g.add_output("y", x), tg::Error);
  EXPECT_EQ(g.inputs().size(), 1u);
  EXPECT_EQ(g.outputs().size(), 1u);
  EXPECT_EQ(g.find_input("x"), x);
  EXPECT_EQ(g.find_output("y"), x);
}

TEST(GraphScale, EqualityComparesContentNotIndexes) {
  // The same inputs added in another order make another graph.
  tg::Graph a("g"), b("g");
  a.add_input("p", tg::InputKind::data, {tg::DType::f32, {1}});
  a.add_input("q", tg::InputKind::data, {tg::DType::f32, {1}});
  b.add_input("q", tg::InputKind::data, {tg::DType::f32, {1}});
  b.add_input("p", tg::InputKind::data, {tg::DType::f32, {1}});
  EXPECT_NE(a, b);
  tg::Graph c("g");
  c.add_input("p", tg::InputKind::data, {tg::DType::f32, {1}});
  c.add_input("q", tg::InputKind::data, {tg::DType::f32, {1}});
  EXPECT_EQ(a, c);
  tg::Graph copy = a;  // the indexes travel with a copy
  EXPECT_EQ(copy.find_input("q"), 1);
  EXPECT_EQ(copy.input_of_value(1)->name, "q");
}

}  // namespace
