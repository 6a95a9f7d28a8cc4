// The registry completeness test: every op in ops.def has every part of the op contract, and every
// family of ops.def has the files docs/adding-an-op.md says it lives in.
#include <gtest/gtest.h>

#include <array>
#include <filesystem>
#include <set>
#include <string>

#include "ir/ops/family_tables.h"
#include "support/library.h"
#include "tensorgrad/ir/ops/ids/elementwise_binary.h"
#include "tensorgrad/vk/executor.h"

namespace tg {
namespace {

TEST(Registry, EveryOpHasEveryPart) {
  std::set<std::string_view> names;
  for (OpId op : all_ops()) {
    const OpDef& def = op_def(op);
    SCOPED_TRACE(std::string(op_name(op)));
    EXPECT_EQ(def.name, op_name(op)) << "OpDef name differs from its ops.def line";
    EXPECT_TRUE(names.insert(def.name).second) << "duplicate op name";
    EXPECT_NE(def.shape, nullptr) << "missing shape rule";
    if (def.differentiable) {
      EXPECT_NE(def.grad, nullptr) << "missing gradient rule (or mark the op .differentiable = false)";
    } else {
      EXPECT_EQ(def.grad, nullptr) << "marked not differentiable but has a gradient rule";
    }
    EXPECT_NE(def.samples, nullptr) << "missing sample generator";
    EXPECT_TRUE(interp_has_kernel(op)) << "missing interpreter kernel";
    EXPECT_TRUE(vk::has_kernel(op)) << "missing Vulkan kernel (src/vk/kernels/<family>.cpp and its shader)";
    EXPECT_EQ(find_op(def.name), op);
  }
}

TEST(Registry, SamplesSatisfyTheirOwnShapeRules) {
  for (OpId op : all_ops()) {
    const OpDef& def = op_def(op);
    if (!def.samples) continue;
    SCOPED_TRACE(std::string(op_name(op)));
    for (std::uint64_t seed = 0; seed < 50; ++seed) {
      SampleRng rng(seed);
      const auto sample = def.samples(rng, std::nullopt);
      ASSERT_TRUE(sample.has_value());
      ASSERT_EQ(sample->domains.size(), sample->inputs.size());
      try {
        infer_type(op, sample->attrs, sample->inputs);
      } catch (const RuleBroken& broken) {
        FAIL() << "sample refused by the shape rule: " << broken.rule;
      }
      // A sample built around a given first input must keep that input.
      if (!sample->inputs.empty()) {
        const auto again = def.samples(rng, sample->inputs[0]);
        if (again) {
          EXPECT_EQ(again->inputs.at(0), sample->inputs[0]);
        }
      }
    }
  }
}

// The files of a family are found by name (both backends register a family from its file, the
// tests of a family live in its test file): a family added to ops.def without them fails here.
TEST(Registry, EveryFamilyHasItsSourceAndTestFiles) {
  const std::filesystem::path root = TG_SOURCE_DIR;
  ASSERT_FALSE(op_families().empty());
  for (std::string_view family : op_families()) {
    SCOPED_TRACE(std::string(family));
    const std::string name(family);
    for (const std::string& file : {"src/ir/ops/" + name + ".cpp", "src/interp/kernels/" + name + ".cpp",
                                    "src/vk/kernels/" + name + ".cpp", "tests/unit/" + name + "_test.cpp"}) {
      EXPECT_TRUE(std::filesystem::is_regular_file(root / file)) << "missing " << file;
    }
  }
}

TEST(Registry, EveryOpBelongsToAListedFamilyAndEveryFamilyHasOps) {
  const std::set<std::string_view> families(op_families().begin(), op_families().end());
  EXPECT_EQ(families.size(), op_families().size()) << "a family is listed twice";
  std::set<std::string_view> with_ops;
  for (OpId op : all_ops()) {
    EXPECT_TRUE(families.contains(op_family(op))) << op_name(op) << " has family '" << op_family(op) << "'";
    with_ops.insert(op_family(op));
  }
  for (std::string_view family : op_families()) EXPECT_TRUE(with_ops.contains(family)) << family << " has no ops";
}

// The backends' tables (src/ir/ops/family_tables.h): a family may fill only its own ops' slots.
using SlotTable = std::array<int, kOpIdSpace>;
void register_add(SlotTable& table) { table[static_cast<std::size_t>(op::Add)] = 1; }

TEST(Registry, AFamilyRegistersOnlyItsOwnOps) {
  SlotTable table{};
  register_family_kernels(table, "elementwise_binary", register_add, "test kernels", "tests/unit");
  EXPECT_EQ(table[static_cast<std::size_t>(op::Add)], 1);
  SlotTable other{};
  try {
    register_family_kernels(other, "reduce", register_add, "test kernels", "tests/unit");
    FAIL() << "reduce's registration set add's slot and was accepted";
  } catch (const Error& e) {
    EXPECT_STREQ(e.what(),
                 "test kernels: register_reduce_kernels (tests/unit/reduce.cpp) registers a kernel for op 'add' of "
                 "family 'elementwise_binary'");
  }
}

TEST(Registry, UnknownOpNamesAreNotFound) {
  EXPECT_FALSE(find_op("no_such_op").has_value());
  EXPECT_THROW(op_def(static_cast<OpId>(kOpIdSpace)), Error);
  EXPECT_THROW(op_def(static_cast<OpId>(0x7f)), Error);  // family 0 has fewer than 128 ops
  EXPECT_FALSE(is_registered_op(static_cast<OpId>(0xffff)));
  EXPECT_EQ(op_name(static_cast<OpId>(0xffff)), "<invalid op>");
}

}  // namespace
}  // namespace tg
