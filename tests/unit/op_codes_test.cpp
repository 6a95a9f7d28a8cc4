// What cannot be generated from ops.def, checked against it: the GLSL math of every TG_EW op (a
// `case EW_<NAME>:` in shaders/elementwise_math.glsl, in its family's function), the op params the
// elementwise shaders can carry, and that elementwise fusion takes exactly the TG_EW ops. The TG_EW
// set is read from the generated op list (ops.def's lines), not from the Vulkan layer's tables, so
// these tests compare the layer against the list (docs/adding-an-op.md, "When a part is missing").
#include <gtest/gtest.h>

#include <cctype>
#include <fstream>
#include <map>
#include <optional>
#include <regex>
#include <set>
#include <sstream>
#include <string>
#include <string_view>
#include <vector>

#include "support/library.h"
#include "support/op_seed.h"
#include "tensorgrad/ir/ops/ids/layout.h"
#include "tensorgrad/ir/ops/ids/precision.h"
#include "vk/fusion.h"
#include "vk/kernels/kernels.h"

namespace tg {
namespace {

// ops.def's ops as the generator lists them: name, family and whether the line is TG_EW.
struct ListedOp {
  std::string_view name;
  std::string_view family;
  bool ew;
};
constexpr ListedOp kListedOps[] = {
#define TG_OP(id, name, family, ew) {name, #family, (ew) != 0},
#include "tensorgrad/ir/ops/op_list.inc"
#undef TG_OP
};

const ListedOp& listed(OpId op) {
  for (const ListedOp& l : kListedOps) {
    if (l.name == op_name(op)) return l;
  }
  throw Error("op '" + std::string(op_name(op)) + "' is not in the generated op list");
}

std::vector<OpId> ew_ops(std::string_view family) {
  std::vector<OpId> ops;
  for (const OpId op : all_ops()) {
    if (listed(op).ew && listed(op).family == family) ops.push_back(op);
  }
  return ops;
}

// The GLSL name of an op's code (cmake/generate_ops.cmake): EW_ and the upper-case name.
std::string code_name(OpId op) {
  std::string name = "EW_";
  for (const char c : op_name(op)) name += static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  return name;
}

std::string read_source(const std::string& relative) {
  const std::string path = std::string(TG_SOURCE_DIR) + "/" + relative;
  std::ifstream in(path);
  if (!in) throw Error("cannot read " + path);
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

// The text of a GLSL function's body: from the `{` after `signature` (e.g. "float ew_unary(") to
// its matching `}`; empty when the function is missing.
std::string function_body(const std::string& text, const std::string& signature) {
  const std::size_t at = text.find(signature);
  if (at == std::string::npos) return "";
  std::size_t open = text.find('{', at);
  int depth = 0;
  for (std::size_t i = open; i < text.size(); ++i) {
    if (text[i] == '{') ++depth;
    if (text[i] == '}' && --depth == 0) return text.substr(open, i - open + 1);
  }
  return "";
}

// Every token of the form EW_<NAME> in `text` (after removing // comments), with the labels of
// `case EW_<NAME>:` separately.
std::set<std::string> tokens(const std::string& text, const char* pattern) {
  std::set<std::string> found;
  std::string code;
  std::istringstream lines(text);
  for (std::string line; std::getline(lines, line);) code += line.substr(0, line.find("//")) + "\n";
  const std::regex re(pattern);
  for (auto it = std::sregex_iterator(code.begin(), code.end(), re); it != std::sregex_iterator(); ++it) {
    found.insert((*it)[1].str());
  }
  return found;
}
std::set<std::string> case_labels(const std::string& body) { return tokens(body, R"(case\s+(EW_[A-Z0-9_]+)\s*:)"); }

// How the shaders handle a binary-family op, from its OpDef: three inputs (where) is a word select
// in the family shader and the fused kernel, a bool result a comparison (ew_compare), else f32 math
// (ew_binary).
enum class BinaryKind { f32, comparison, select };
BinaryKind binary_kind(OpId op) {
  const OpDef& def = op_def(op);
  if (def.arity == 3) return BinaryKind::select;
  SampleRng rng(1);
  const std::optional<OpSample> sample = def.samples(rng, std::nullopt);
  if (!sample) throw Error("op '" + std::string(def.name) + "' has no sample");
  return infer_type(op, sample->attrs, sample->inputs).dtype == DType::boolean ? BinaryKind::comparison
                                                                               : BinaryKind::f32;
}

TEST(OpCodes, EveryElementwiseOpHasItsShaderCase) {
  const std::string math = read_source("shaders/elementwise_math.glsl");
  const std::map<std::string, std::set<std::string>> cases = {
      {"ew_unary", case_labels(function_body(math, "float ew_unary("))},
      {"ew_binary", case_labels(function_body(math, "float ew_binary("))},
      {"ew_compare", case_labels(function_body(math, "uint ew_compare("))}};
  for (const auto& [function, labels] : cases) {
    ASSERT_FALSE(labels.empty()) << "shaders/elementwise_math.glsl: no cases found in " << function;
  }

  // Per function, the codes it must handle, and may (the codes of other families overlap).
  std::map<std::string, std::set<std::string>> wanted;
  wanted["ew_unary"].insert("EW_COPY");  // fusion's broadcast copy
  // fusion's casts of a register to f16 / bf16 (src/vk/fusion.cpp, fusable_cast)
  wanted["ew_unary"].insert("EW_ROUND_F16");
  wanted["ew_unary"].insert("EW_ROUND_BF16");
  for (const OpId op : ew_ops("elementwise_unary")) wanted["ew_unary"].insert(code_name(op));
  std::set<std::string> selects;
  for (const OpId op : ew_ops("elementwise_binary")) {
    switch (binary_kind(op)) {
      case BinaryKind::f32:
        wanted["ew_binary"].insert(code_name(op));
        break;
      case BinaryKind::comparison:
        wanted["ew_compare"].insert(code_name(op));
        break;
      case BinaryKind::select:
        selects.insert(code_name(op));
        break;
    }
  }
  for (const auto& [function, codes] : wanted) {
    const std::set<std::string>& labels = cases.at(function);
    for (const std::string& code : codes) {
      EXPECT_TRUE(labels.contains(code)) << "shaders/elementwise_math.glsl: " << function << " has no 'case " << code
                                         << ":' (its op is a TG_EW line of ops.def)";
    }
    for (const std::string& label : labels) {
      EXPECT_TRUE(codes.contains(label)) << "shaders/elementwise_math.glsl: " << function << " has 'case " << label
                                         << ":', which is no code of its ops (a removed op, or another family's "
                                            "code: the families' codes overlap)";
    }
  }
  // where picks words: the family shader and the fused kernel branch on its code themselves.
  ASSERT_FALSE(selects.empty());
  for (const char* shader : {"shaders/elementwise_binary.comp", "shaders/fused_elementwise.comp"}) {
    const std::set<std::string> used = tokens(read_source(shader), R"(\b(EW_[A-Z0-9_]+)\b)");
    for (const std::string& code : selects) EXPECT_TRUE(used.contains(code)) << shader << " does not handle " << code;
  }
}

// The codes come from ew_codes.glsl only: the hand-written shaders define none and name no code
// that the op list does not generate.
TEST(OpCodes, ShadersNameOnlyGeneratedCodes) {
  std::set<std::string> generated = {"EW_COPY", "EW_ROUND_F16", "EW_ROUND_BF16", "EW_UNARY_CODES", "EW_BINARY_CODES"};
  for (const OpId op : all_ops()) {
    if (listed(op).ew) generated.insert(code_name(op));
  }
  for (const char* shader : {"shaders/elementwise_math.glsl", "shaders/elementwise_unary.comp",
                             "shaders/elementwise_binary.comp", "shaders/fused_elementwise.comp"}) {
    const std::string text = read_source(shader);
    const std::set<std::string> defined = tokens(text, R"(const\s+uint\s+(EW_[A-Z0-9_]+))");
    for (const std::string& name : defined) {
      EXPECT_EQ(name, "EW_NOT_A_COMPARISON")
          << shader << " defines " << name << " by hand (ew_codes.glsl has the codes)";
    }
    for (const std::string& name : tokens(text, R"(\b(EW_[A-Z0-9_]+)\b)")) {
      EXPECT_TRUE(generated.contains(name) || defined.contains(name) || name == "EW_NOT_A_COMPARISON")
          << shader << " names " << name << ", which ew_codes.glsl does not define";
    }
  }
}

// An op's real attributes travel as the float params p0, p1 (vk::ew_params): a unary TG_EW op may
// have at most two, all real; a binary one none (its shaders take no params).
TEST(OpCodes, ElementwiseOpParamsFitTheShaders) {
  for (const OpId op : ew_ops("elementwise_binary")) {
    EXPECT_TRUE(op_def(op).attrs.empty()) << op_name(op) << ": elementwise_binary's shaders take no params";
  }
  std::size_t with_params = 0;
  for (const OpId op : ew_ops("elementwise_unary")) {
    const OpDef& def = op_def(op);
    ASSERT_LE(def.attrs.size(), vk::kMaxEwParams) << def.name;
    for (const AttrSpec& attr : def.attrs) EXPECT_EQ(attr.kind, AttrKind::real) << def.name << " " << attr.name;
    EXPECT_EQ(vk::ew_param_count(op), def.attrs.size()) << def.name;
    // A node of the op gets its attributes' values in OpDef order, as floats.
    SampleRng rng(7);
    const std::optional<OpSample> sample = def.samples(rng, std::nullopt);
    ASSERT_TRUE(sample.has_value()) << def.name;
    const Node node{.op = op, .inputs = {0}, .attrs = sample->attrs, .output = 1, .loc = {}};
    const vk::EwParams params = vk::ew_params(node);
    ASSERT_EQ(params.count, def.attrs.size()) << def.name;
    for (std::size_t k = 0; k < vk::kMaxEwParams; ++k) {
      const float want = k < def.attrs.size() ? static_cast<float>(sample->attrs.real(def.attrs[k].name)) : 0.f;
      EXPECT_EQ(params.values[k], want) << def.name << " param " << k;
    }
    if (!def.attrs.empty()) ++with_params;
  }
  EXPECT_GE(with_params, 1u) << "clamp has two params; the check above should have seen it";
}

// Whether fusion takes the node of `op` built from `sample` (its inputs replaced by `types`): the
// graph feeds it graph inputs (a bool input of the node's shape computed by less, the way a fused
// where's condition must be), and follows it with an elementwise op on its value (neg of an f32,
// where of a bool), so an op that may fuse is inside a run. nullopt: the op's rules or the Vulkan
// planner refuse this form.
std::optional<bool> fused(OpId op, const OpSample& sample, const std::vector<TensorType>& types) {
  const std::optional<OpId> less = find_op("less"), neg = find_op("neg"), where = find_op("where");
  Graph g("fusion_eligibility");
  TensorType out;
  try {
    out = infer_type(op, sample.attrs, types);
  } catch (const Error&) {
    return std::nullopt;
  }
  if (out.size() <= 0) return std::nullopt;
  int fresh = 0;
  const auto input = [&](const TensorType& type) {
    return g.add_input("in" + std::to_string(fresh++), InputKind::data, type);
  };
  std::vector<ValueId> operands;
  for (const TensorType& type : types) {
    if (type.dtype == DType::boolean && type.shape == out.shape) {
      const TensorType f32{DType::f32, type.shape};
      operands.push_back(g.add_node(*less, {input(f32), input(f32)}, {}, type, {}));
    } else {
      operands.push_back(input(type));
    }
  }
  const ValueId value = g.add_node(op, operands, sample.attrs, out, {});
  const NodeId node = g.value(value).producer;
  ValueId result = value;
  if (out.dtype == DType::f32) result = g.add_node(*neg, {value}, {}, out, {});
  if (out.dtype == DType::boolean) {
    const TensorType f32{DType::f32, out.shape};
    const ValueId other = input(f32);
    result = g.add_node(*where, {value, other, other}, {}, f32, {});
  }
  g.add_output("y", result);

  std::vector<vk::KernelLaunch> launches;
  try {
    for (const Node& n : g.nodes()) {
      const vk::KernelPlanFn plan = vk::kernel_plan_table()[static_cast<std::size_t>(n.op)];
      if (!plan) return std::nullopt;
      launches.push_back(plan(g, n));
    }
  } catch (const Error&) {
    return std::nullopt;
  }
  const vk::KernelLaunch& launch = vk::fuse_elementwise(g, launches)[static_cast<std::size_t>(node)];
  return launch.items == 0 || launch.shader == "fused_elementwise";
}

// Every TG_EW op fuses (in some form: all operands of the output's shape), nothing else does,
// except broadcast_to of one element (a copy step) and cast where its 16-bit side stays in the
// run's registers (a rounding or copy step). Each op is tried on its own samples, the same
// with every input of the output's shape, and with input 0 of one element.
TEST(OpCodes, FusionTakesExactlyTheElementwiseOps) {
  std::size_t ew_seen = 0;
  for (const OpId op : all_ops()) {
    const OpDef& def = op_def(op);
    ASSERT_NE(def.samples, nullptr) << def.name;
    bool fuses = false;
    int forms = 0;  // forms the rules and the planner accepted
    for (std::uint64_t seed = 1; seed <= 20 && !fuses; ++seed) {
      SampleRng rng(seed * 7919 + tg::testing::op_seed(op));
      const std::optional<OpSample> sample = def.samples(rng, std::nullopt);
      if (!sample) continue;
      std::vector<std::vector<TensorType>> variants = {sample->inputs};
      try {
        const Shape out = infer_type(op, sample->attrs, sample->inputs).shape;
        std::vector<TensorType> same = sample->inputs;
        for (TensorType& t : same) t.shape = out;
        variants.push_back(same);
        if (!same.empty()) {
          same[0].shape = Shape(out.size(), 1);
          variants.push_back(same);
        }
      } catch (const Error&) {
      }
      for (const std::vector<TensorType>& types : variants) {
        const std::optional<bool> result = fused(op, *sample, types);
        if (!result) continue;
        ++forms;
        fuses = fuses || *result;
      }
    }
    // Every op has a form the planner takes (a Vulkan kernel for its own samples), so the verdict
    // below rests on real launches.
    EXPECT_GT(forms, 0) << def.name << ": no form of its samples could be planned";
    const bool ew = listed(op).ew;
    ew_seen += ew ? 1 : 0;
    if (ew) {
      EXPECT_TRUE(fuses) << def.name << " is a TG_EW op, but fusion never took it (" << forms << " forms tried)";
    } else if (op == op::BroadcastTo) {
      EXPECT_TRUE(fuses) << "broadcast_to of one element should fuse as a copy step";
    } else if (op == op::Cast) {
      EXPECT_TRUE(fuses) << "a cast whose 16-bit side stays in the run's registers should fuse (fusable_cast)";
    } else {
      EXPECT_FALSE(fuses) << def.name << " is no TG_EW op, yet fusion took it";
    }
  }
  EXPECT_GE(ew_seen, 20u) << "the generated list should mark the elementwise ops TG_EW";
}

}  // namespace
}  // namespace tg
