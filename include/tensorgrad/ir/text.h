#pragma once
// The text format: print and parse a graph losslessly, and export DOT for Graphviz.
//
//   graph mlp(%x: f32[256,1], %y: f32[256,1], param %l1.W: f32[1,64], state %m: f32[1,64]) {
//     %0 = matmul(%x, %l1.W) : f32[256,64] @"model.cpp":12:7
//     %1 = sum(%0) {axes=[0,1], keep_dims=false} : f32[]
//     return loss=%1, grad.l1.W=%0
//   }
//
// Header: the graph's inputs in their original order; a `param` or `state` prefix gives the kind
// (no prefix: data). The parser also reads the grouped form `graph g(%x: ...) params(%w: ...)
// state(%m: ...)`. An input added to the graph after some nodes carries `after %k` (it follows node
// k's output in value order), so print -> parse gives back an equal Graph. Headers wider than 100
// columns print one input per line.
// Names: %N (bare digits) is node N's output; inputs and outputs print bare when made of letters,
// digits, '_', '.', '/', '-' (and not all digits), otherwise quoted: %"my name". Quoted strings
// escape '"' and '\' with a backslash and control bytes as \xHH.
// Nodes: numbered %0, %1, ... in order; attributes print in name order ({} omitted when none);
// integers 3/-1, reals in the shortest form (always with '.', 'e', nan or inf) so they read
// back to the same bits, booleans true/false, integer lists [1,2], dtypes f32/i32/bool. The parser
// settles literal kinds with the op's attribute schema (value=1 for a real attribute is 1.0). The
// type after ':' is the node's output type; the parser checks it against the shape rule. A
// suffix `checkpoint N` after the type puts the node in gradient-checkpoint segment N (tg::checkpoint;
// absent: none). The "@"file":line:column" suffix is the node's call site, optional when parsing (absent: empty
// SourceLoc) and left out by PrintOptions{.locations = false}.
// Comments run from '#' or '//' (where a token may start) to the end of the line.
#include <string>
#include <string_view>

#include "tensorgrad/ir/graph.h"

namespace tg {

struct PrintOptions {
  bool locations = true;  // print each node's call site
};

std::string print_graph(const Graph& graph, const PrintOptions& options = {});
// Throws ParseError (with the line and column of the offending token) on malformed text, unknown
// ops or values, redefined values, unknown, missing or mistyped attributes, wrong arity, a shape
// rule refusing its inputs (reported at the op name) or a declared type that differs from the rule's
// answer (reported at the ':' before the type), and trailing text. Never throws anything but
// tg::Error. The result passes verify().
Graph parse_graph(std::string_view text);
// Graphviz DOT: one box per graph input (name, type), one ellipse per node (op, attributes, type),
// one sink per output, edges along data flow.
std::string to_dot(const Graph& graph);

}  // namespace tg
