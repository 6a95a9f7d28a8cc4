#pragma once
// The text format: print and parse a graph losslessly, and export DOT for Graphviz.
//
//   graph mlp(%x: f32[256,1]) params(%l1.W: f32[1,64]) state(%m: f32[1,64]) {
//     %0 = matmul(%x, %l1.W) : f32[256,64] @"model.cpp":12:7
//     %1 = sum(%0) {axes=[0,1], keep_dims=false} : f32[]
//     return loss=%1
//   }
//
// Attributes print in name order; reals print with 17 significant digits so they read back to the
// same bits. The "@file:line:column" suffix is the node's call site and is optional when parsing.
#include <string>
#include <string_view>

#include "tensorgrad/ir/graph.h"

namespace tg {

struct PrintOptions {
  bool locations = true;  // print each node's call site
};

std::string print_graph(const Graph& graph, const PrintOptions& options = {});
// Throws ParseError (with line and column) on malformed text, unknown ops, unknown or mistyped
// attributes and shape-rule violations; the result passes verify().
Graph parse_graph(std::string_view text);
std::string to_dot(const Graph& graph);

}  // namespace tg
