// The golden-file parser: what it reads, and the file:line of every error it reports.
#include "golden_file.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "golden_compare.h"

namespace tg::golden {
namespace {

constexpr const char* kGood = R"(# a comment
case add_broadcast
call add
attr axes = [0, 2]
attr empty = []
attr keep_dims = true
attr p = 0.5
attr n = -3
attr tiny = 1e-05
attr reduction = "m\"ean"
input a f32 [2,3]
  0.5 -1.25 3
  4.0 5e-1 -0.0
input i i32 [2] -4 7
input m bool [2] 1 false

output f32 [2,3] 1 2 3 4 5 6
proj f32 [2,3] 1 1 1 1 1 1
grad a f32 [2,3] 0.5 0.5 0.5 0.5 0.5 0.5
end
case creation
call zeros
attr shape = []
output f32 [] 0.0
end
)";

TEST(GoldenFile, ReadsEveryLineKind) {
  const auto cases = parse_golden(kGood, "good.golden");
  ASSERT_EQ(cases.size(), 2u);
  const GoldenCase& c = cases[0];
  EXPECT_EQ(c.name, "add_broadcast");
  EXPECT_EQ(c.call, "add");
  EXPECT_EQ(c.where(), "good.golden:2");
  EXPECT_EQ(c.attrs.ints("axes"), (std::vector<std::int64_t>{0, 2}));
  EXPECT_TRUE(c.attrs.ints("empty").empty());
  EXPECT_TRUE(c.attrs.boolean("keep_dims"));
  EXPECT_EQ(c.attrs.real("p"), 0.5);
  EXPECT_EQ(c.attrs.integer("n"), -3);
  EXPECT_EQ(c.attrs.real("tiny"), 1e-05);
  EXPECT_EQ(c.attrs.string("reduction"), "m\"ean");
  ASSERT_EQ(c.inputs.size(), 3u);
  EXPECT_EQ(c.inputs[0].name, "a");
  EXPECT_EQ(c.inputs[0].value, HostTensor::of({DType::f32, {2, 3}}, {0.5, -1.25, 3, 4, 0.5, -0.0}));
  EXPECT_EQ(c.inputs[1].value, HostTensor::of({DType::i32, {2}}, {-4, 7}));
  EXPECT_EQ(c.inputs[2].value, HostTensor::of({DType::boolean, {2}}, {1, 0}));
  EXPECT_EQ(c.output.value.type, (TensorType{DType::f32, {2, 3}}));
  ASSERT_TRUE(c.proj.has_value());
  ASSERT_EQ(c.grads.size(), 1u);
  EXPECT_EQ(c.grads[0].name, "a");
  EXPECT_EQ(cases[1].output.value, HostTensor::of({DType::f32, {}}, {0.0}));
  EXPECT_FALSE(cases[1].proj.has_value());
}

// The message of the FormatError that parsing `text` throws.
std::string error_of(const std::string& text) {
  try {
    parse_golden(text, "bad.golden");
  } catch (const FormatError& e) {
    return e.what();
  }
  return "(no error)";
}

TEST(GoldenFile, ErrorsNameFileLineAndProblem) {
  const std::string head = "case c\ncall f\n";
  const struct {
    std::string text;
    std::string expected;
  } bad[] = {
      {"  0.5\n", "bad.golden:1: an indented line continues nothing"},
      {"call f\n", "bad.golden:1: `call` outside a case"},
      {head + "output f32 [2] 1\nend\n", "bad.golden:3: output f32[2] needs 2 values, got 1"},
      {head + "output f32 [2] 1 x\nend\n", "bad.golden:3: f32 value 'x' is not a number"},
      {head + "output f64 [1] 1\nend\n", "bad.golden:3: unknown dtype 'f64'"},
      {head + "output i32 [1] 1.5\nend\n", "bad.golden:3: i32 value '1.5'"},
      {head + "output i32 [1] 3000000000\nend\n", "bad.golden:3: i32 value '3000000000'"},
      {head + "output bool [1] 2\nend\n", "bad.golden:3: bool value '2'"},
      {head + "output f32 [2,-1]\nend\n", "bad.golden:3: shape [2,-1] has a negative dimension"},
      {head + "output f32 [2,x] 1 2\nend\n", "bad.golden:3: 'x' in [2,x] is not an integer"},
      {head + "output f32 [2 1 2\nend\n", "bad.golden:3: '[' without a closing ']'"},
      {head + "attr s = \"open\noutput f32 [] 1\nend\n", "bad.golden:3: unterminated string"},
      {head + "attr a 3\noutput f32 [] 1\nend\n", "bad.golden:3: expected `attr NAME = VALUE`"},
      {head + "attr a = 1\nattr a = 2\noutput f32 [] 1\nend\n", "bad.golden:4: attribute 'a' given twice"},
      {head + "attr a = 1x\noutput f32 [] 1\nend\n", "bad.golden:3: attribute value '1x'"},
      {head + "frobnicate\nend\n", "bad.golden:3: unknown keyword 'frobnicate'"},
      {head + "output f32 [] 1\n", "bad.golden:1: case c has no `end`"},
      {head + "output f32 [] 1\ncase d\n", "bad.golden:4: `case` inside case c"},
      {"case c\noutput f32 [] 1\nend\n", "bad.golden:1: case c: no `call` line"},
      {head + "end\n", "bad.golden:1: case c: no `output` line"},
      {head + "output f32 [] 1\noutput f32 [] 1\nend\n", "bad.golden:4: a second `output` line"},
      {head + "output f32 [] 1\ninput x f32 [] 1\nend\n", "bad.golden:4: `input` after `output`"},
      {head + "input x f32 [] 1\ninput x f32 [] 2\noutput f32 [] 1\nend\n", "bad.golden:4: input 'x' given twice"},
      {head + "input x f32 [] 1\noutput f32 [] 1\ngrad x f32 [] 1\nend\n",
       "bad.golden:1: case c: `grad` lines need a `proj` line"},
      {head + "input x f32 [] 1\noutput f32 [2] 1 1\nproj f32 [] 1\ngrad x f32 [] 1\nend\n",
       "bad.golden:1: case c: proj is f32[] but the output is f32[2]"},
      {head + "input x f32 [] 1\noutput f32 [] 1\nproj f32 [] 1\ngrad y f32 [] 1\nend\n",
       "bad.golden:1: case c: grad of 'y', which is not an input"},
      {head + "input x i32 [] 1\noutput f32 [] 1\nproj f32 [] 1\ngrad x f32 [] 1\nend\n",
       "bad.golden:1: case c: grad x is f32[] for input i32[]"},
  };
  for (const auto& b : bad) {
    const std::string message = error_of(b.text);
    EXPECT_TRUE(message.starts_with(b.expected)) << "text:\n" << b.text << "\nmessage: " << message;
  }
}

TEST(GoldenCompare, ReportsTheWorstElementWithItsIndex) {
  const HostTensor want = HostTensor::of({DType::f32, {2, 2}}, {1, 2, 3, 4});
  EXPECT_FALSE(compare_tensors(want, HostTensor::of(want.type, {1, 2, 3, 4.0005}), 1e-3));
  const auto why = compare_tensors(want, HostTensor::of(want.type, {1.5, 2, 3, 6}), 1e-3);
  ASSERT_TRUE(why);
  EXPECT_NE(why->find("2 of 4 elements differ"), std::string::npos) << *why;
  EXPECT_NE(why->find("index [1,1]: expected 4, got 6"), std::string::npos) << *why;
  // Integers are exact, types must agree, NaN matches NaN but not a number.
  const HostTensor ints = HostTensor::of({DType::i32, {2}}, {1, 2});
  EXPECT_TRUE(compare_tensors(ints, HostTensor::of(ints.type, {1, 3}), 100));
  EXPECT_TRUE(compare_tensors(want, ints, 100));
  const HostTensor nan = HostTensor::of({DType::f32, {1}}, {std::numeric_limits<double>::quiet_NaN()});
  EXPECT_FALSE(compare_tensors(nan, nan, 0));
  EXPECT_TRUE(compare_tensors(nan, HostTensor::of(nan.type, {1}), 1e9));
}

// One ulp of the 16-bit dtypes: 2^(e - 10) for f16 and 2^(e - 7) for bf16 in the binade [2^e,
// 2^(e+1)), the fixed subnormal spacing below the smallest normal.
TEST(GoldenCompare, UlpOfTheSixteenBitDtypes) {
  EXPECT_EQ(ulp_of(DType::f16, 1.0), std::ldexp(1.0, -10));
  EXPECT_EQ(ulp_of(DType::f16, -1.999), std::ldexp(1.0, -10));
  EXPECT_EQ(ulp_of(DType::f16, 0.999), std::ldexp(1.0, -11));
  EXPECT_EQ(ulp_of(DType::f16, 65504.0), 32.0);
  EXPECT_EQ(ulp_of(DType::f16, std::ldexp(1.0, -14)), std::ldexp(1.0, -24));  // the smallest normal
  EXPECT_EQ(ulp_of(DType::f16, std::ldexp(1.0, -20)), std::ldexp(1.0, -24));  // a subnormal
  EXPECT_EQ(ulp_of(DType::f16, 0.0), std::ldexp(1.0, -24));
  EXPECT_EQ(ulp_of(DType::bf16, 1.0), std::ldexp(1.0, -7));
  EXPECT_EQ(ulp_of(DType::bf16, 300.0), 2.0);
  EXPECT_EQ(ulp_of(DType::bf16, std::ldexp(1.0, -130)), std::ldexp(1.0, -133));
}

// A 16-bit output may differ by one ulp of its dtype (a rounding flip) plus the arithmetic part,
// not more; casts compare bit for bit, where -0 is not +0 and NaN matches NaN.
TEST(GoldenCompare, SixteenBitBoundIsOneUlpPlusTheArithmeticPart) {
  const HostTensor want = HostTensor::of({DType::bf16, {2}}, {1.0, -0.5});
  EXPECT_FALSE(compare_16bit(want, HostTensor::of(want.type, {1.0078125, -0.50390625}), 0.0));  // 1 ulp each
  const auto why = compare_16bit(want, HostTensor::of(want.type, {1.015625, -0.5}), 0.0);       // 2 ulps
  ASSERT_TRUE(why);
  EXPECT_NE(why->find("1 of 2 elements differ"), std::string::npos) << *why;
  EXPECT_NE(why->find("tolerance 0.0078125"), std::string::npos) << *why;
  EXPECT_FALSE(compare_16bit(want, HostTensor::of(want.type, {1.015625, -0.5}), 0.0078125));
  const HostTensor zeros = HostTensor::of({DType::f16, {2}}, {-0.0, std::numeric_limits<double>::quiet_NaN()});
  EXPECT_FALSE(compare_bits(zeros, zeros));
  const auto sign = compare_bits(zeros, HostTensor::of(zeros.type, {0.0, std::numeric_limits<double>::quiet_NaN()}));
  ASSERT_TRUE(sign);
  EXPECT_NE(sign->find("tolerance exact"), std::string::npos) << *sign;
  EXPECT_TRUE(compare_bits(zeros, HostTensor::of(zeros.type, {-0.0, 1.0})));
}

}  // namespace
}  // namespace tg::golden
