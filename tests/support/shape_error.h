#pragma once
// The family unit tests' check of a front-end's ShapeError.
#include <gtest/gtest.h>

#include <functional>
#include <string>
#include <string_view>

#include "support/library.h"

namespace tg::test {

// Expects `trace` to throw a ShapeError naming `op`, containing `rule_part` and the call site in
// `test_file` (the file that calls this).
inline void expect_shape_error_at(const std::function<void()>& trace, std::string_view op, std::string_view rule_part,
                                  std::string_view test_file) {
  try {
    trace();
    ADD_FAILURE() << "expected a ShapeError from " << op;
  } catch (const tg::ShapeError& e) {
    EXPECT_EQ(e.op(), op);
    EXPECT_NE(std::string(e.what()).find(rule_part), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find(test_file), std::string::npos) << e.what();
  }
}

}  // namespace tg::test
