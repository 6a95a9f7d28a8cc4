// docs/ops.md documents exactly the registry: one "### `name`" section per op (composite
// functions are headed "### `name` (composite)" and not counted), each with the six fields
// (the PyTorch line names the op's PyTorch counterpart and where it differs).
#include <gtest/gtest.h>

#include <fstream>
#include <map>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "support/library.h"

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

}  // namespace
}  // namespace tg
