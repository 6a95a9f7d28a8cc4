// docs/ops.md documents exactly the registry: one "### `name`" section per op (composite
// functions are headed "### `name` (composite)" and not counted), each with the six fields
// (the PyTorch line names the op's PyTorch counterpart and where it differs) and a "Dtypes" line
// that names the op's DTypeRule and says what the registry does with 16-bit inputs.
#include <gtest/gtest.h>

#include <fstream>
#include <map>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "support/library.h"
#include "tensorgrad/ir/ops/sample.h"

namespace tg {
namespace {

struct Section {
  std::string name;
  std::size_t line = 0;
  std::string body;
};

// The "### `name`" sections of op headings, with the text up to the next heading.
std::vector<Section> op_sections(const std::string& text) {
  std::vector<Section> sections;
  std::istringstream in(text);
  std::string line;
  std::size_t line_no = 0;
  bool in_op_section = false;
  while (std::getline(in, line)) {
    ++line_no;
    if (line.starts_with("#")) in_op_section = false;
    const std::string prefix = "### `";
    if (line.starts_with(prefix)) {
      const auto close = line.find('`', prefix.size());
      if (close == std::string::npos) continue;
      if (line.compare(close + 1, 12, " (composite)") == 0) continue;
      sections.push_back({line.substr(prefix.size(), close - prefix.size()), line_no, ""});
      in_op_section = true;
      continue;
    }
    if (in_op_section) sections.back().body += line + "\n";
  }
  return sections;
}

std::string read_ops_md() {
  std::ifstream in(std::string(TG_SOURCE_DIR) + "/docs/ops.md");
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

TEST(OpsDoc, HeadingsAreExactlyTheRegistryOps) {
  const std::string text = read_ops_md();
  ASSERT_FALSE(text.empty()) << "cannot read " << TG_SOURCE_DIR << "/docs/ops.md";
  std::map<std::string, std::size_t> documented;
  for (const auto& s : op_sections(text)) {
    const auto [it, fresh] = documented.emplace(s.name, s.line);
    EXPECT_TRUE(fresh) << "docs/ops.md:" << s.line << ": `" << s.name << "` is documented twice (also line "
                       << it->second << ")";
  }
  std::set<std::string> registry;
  for (OpId op : all_ops()) registry.emplace(op_name(op));

  std::string undocumented;
  for (const auto& name : registry) {
    if (!documented.contains(name)) undocumented += " " + name;
  }
  std::string unknown;
  for (const auto& [name, line] : documented) {
    if (!registry.contains(name)) unknown += " " + name + " (line " + std::to_string(line) + ")";
  }
  EXPECT_TRUE(undocumented.empty()) << "registry ops without a \"### `name`\" section in docs/ops.md:" << undocumented;
  EXPECT_TRUE(unknown.empty()) << "docs/ops.md sections that name no registry op (mark composites \"(composite)\"):"
                               << unknown;
}

TEST(OpsDoc, EveryOpSectionHasTheSixFields) {
  for (const auto& s : op_sections(read_ops_md())) {
    for (const char* field : {"Seed name:", "Signature:", "Semantics:", "Gradient:", "PyTorch:", "Bad input:"}) {
      EXPECT_NE(s.body.find(field), std::string::npos)
          << "docs/ops.md:" << s.line << ": the section of `" << s.name << "` has no \"" << field << "\" line";
    }
  }
}

// What the registry does with an op's float_generic samples drawn in f16: whether a sample with an
// f16 input gives an f16, bool or i32 result, and whether one with no float input at all gives f32.
struct DtypeBehaviour {
  bool result_takes_the_float_dtype = false;
  bool bool_result = false;
  bool i32_result = false;
  bool f32_result_without_float_inputs = false;
};

DtypeBehaviour probe_dtypes(OpId op) {
  DtypeBehaviour seen;
  for (std::uint64_t seed = 0; seed < 40; ++seed) {
    SampleRng rng(seed);
    const auto sample = sample_in_dtype(op, rng, std::nullopt, DType::f16);
    if (!sample) continue;
    const DType out = infer_type(op, sample->attrs, sample->inputs).dtype;
    bool any_f16 = false;
    bool any_float = false;
    for (const TensorType& t : sample->inputs) {
      any_f16 = any_f16 || t.dtype == DType::f16;
      any_float = any_float || is_float(t.dtype);
    }
    if (any_f16) {
      seen.result_takes_the_float_dtype |= out == DType::f16;
      seen.bool_result |= out == DType::boolean;
      seen.i32_result |= out == DType::i32;
    } else if (!any_float) {
      seen.f32_result_without_float_inputs |= out == DType::f32;
    }
  }
  return seen;
}

// Each op section has one "Dtypes (<rule>): ..." line naming its OpDef's DTypeRule, and the line
// says what the registry does: "the result takes" the inputs' float dtype, a "bool result", an
// "i32 result", an "f32 result" when no input is a float, the "`dtype` attribute" for an
// explicit_dtypes op that has one.
TEST(OpsDoc, EveryOpSectionStatesTheDtypesItsRuleGives) {
  for (const auto& s : op_sections(read_ops_md())) {
    const auto op = find_op(s.name);
    if (!op) continue;  // HeadingsAreExactlyTheRegistryOps reports it
    SCOPED_TRACE("docs/ops.md:" + std::to_string(s.line) + ": `" + s.name + "`");
    const OpDef& def = op_def(*op);
    const std::string want = "Dtypes (" + std::string(dtype_rule_name(def.dtypes)) + "): ";
    std::istringstream body(s.body);
    std::string line;
    std::vector<std::string> dtype_lines;
    while (std::getline(body, line)) {
      if (line.starts_with("Dtypes")) dtype_lines.push_back(line);
    }
    EXPECT_EQ(dtype_lines.size(), 1U) << "want exactly one line starting \"" << want << "\"";
    if (dtype_lines.size() != 1) continue;
    const std::string& text = dtype_lines[0];
    EXPECT_TRUE(text.starts_with(want)) << "the line should start \"" << want << "\": " << text;
    const auto says = [&](std::string_view phrase, std::string_view why) {
      EXPECT_NE(text.find(phrase), std::string::npos)
          << why << ", so the line should say \"" << phrase << "\": " << text;
    };
    if (def.dtypes == DTypeRule::explicit_dtypes) {
      bool has_dtype_attr = false;
      for (const AttrSpec& spec : def.attrs) has_dtype_attr = has_dtype_attr || spec.name == "dtype";
      if (has_dtype_attr) says("`dtype` attribute", "the result's dtype is its dtype attribute");
      continue;
    }
    const DtypeBehaviour seen = probe_dtypes(*op);
    if (seen.result_takes_the_float_dtype) says("the result takes", "an f16 input gives an f16 result");
    if (seen.bool_result) says("bool result", "an f16 input gives a bool result");
    if (seen.i32_result) says("i32 result", "an f16 input gives an i32 result");
    if (seen.f32_result_without_float_inputs) says("f32 result", "with no float input the result is f32");
  }
}

}  // namespace
}  // namespace tg
