// Call sites in printed graphs: nodes the library emits (the optimizer's update, the autodiff's
// backward) name their file relative to the source tree, "src/passes/optimizer.cpp", not the
// builder's absolute path (the library is compiled with -fmacro-prefix-map, CMakeLists.txt), while
// the user's own call sites keep the full path their compiler gave; and the text format reads back
// what it prints.
#include <gtest/gtest.h>

#include <set>
#include <string>
#include <string_view>

#include "support/library.h"
#include "tensorgrad/ir/text.h"
#include "tensorgrad/train/training.h"

namespace tg {
namespace {

struct Line : Module {
  Linear l{*this, "l", 2, 1};
};

Tensor squared_error(const Line& m, const Inputs& in) {
  Tensor r = m.l(in.at("x")) - in.at("y");
  return mean(r * r);
}

Training compile_line(const Line& model) {
  return compile(TrainingSpec<Line>{.model = model,
                                    .loss = squared_error,
                                    .inputs = {{"x", {{4, 2}}}, {"y", {{4, 1}}}},
                                    .optimizer = {.kind = AdamConfig{}},
                                    .lr = 0.05,
                                    .backend = Backend::interp_f64});
}

std::size_t count(std::string_view text, std::string_view what) {
  std::size_t n = 0;
  for (std::size_t at = text.find(what); at != std::string_view::npos; at = text.find(what, at + 1)) ++n;
  return n;
}

TEST(SourceLocPrefix, LibraryCallSitesAreRelativeToTheSourceTreeAndUserOnesKeepTheirPath) {
  Line model;
  const Training train = compile_line(model);
  const Graph& graph = train.graph();
  const std::string root = std::string(TG_SOURCE_DIR) + "/";
  const std::string this_file = __FILE__;  // the test's own build: no prefix map
  ASSERT_EQ(this_file.rfind(root, 0), 0U) << "this test expects to be compiled by its absolute path";

  std::set<std::string> library_files;
  std::size_t user_nodes = 0;
  for (const Node& node : graph.nodes()) {
    const std::string& file = node.loc.file;
    if (file == this_file) {
      ++user_nodes;
      continue;
    }
    EXPECT_NE(file.rfind(root, 0), 0U) << "node " << op_name(node.op) << " names the build tree: " << file;
    if (file.rfind("src/", 0) == 0) library_files.insert(file);
  }
  EXPECT_GT(user_nodes, 0U) << "the loss's nodes carry this file's full path";
  EXPECT_TRUE(library_files.contains("src/passes/optimizer.cpp"))
      << "the Adam update's nodes name the optimizer pass relative to the source tree";

  // The printed text names the build tree only in the user's call sites, and parses back equal.
  const std::string text = print_graph(graph);
  EXPECT_EQ(count(text, root), count(text, this_file)) << text;
  EXPECT_NE(text.find("@\"src/passes/optimizer.cpp\":"), std::string::npos) << text;
  EXPECT_EQ(parse_graph(text), graph);
}

}  // namespace
}  // namespace tg
