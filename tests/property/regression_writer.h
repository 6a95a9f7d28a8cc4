#pragma once
// Turns a failing random-graph case into a regression file (tests/golden/regressions format: the
// graph's text, `---`, its inputs and the f64 oracle's outputs) that tg_golden_tests runs from then
// on. Off unless the environment variable TG_WRITE_REGRESSIONS names a directory.
#include "graph_gen.h"

namespace tg::testing {

// Writes <dir>/<test name>-<hash of the text>.graph. While RapidCheck shrinks, each smaller failing
// case of the same test replaces the file written before it, so the shrunk case is what remains.
void maybe_write_regression(const GraphCase& c);

}  // namespace tg::testing
