#pragma once
// The verifier: checks that a graph is well formed (SSA order, value ids in range, unique names,
// attributes matching each op's schema, every node's type equal to its shape rule's answer).
#include "tensorgrad/ir/graph.h"

namespace tg {

// Throws VerifyError naming the node (index, op, call site) and what is wrong.
void verify(const Graph& graph);

}  // namespace tg
