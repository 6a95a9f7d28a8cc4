#pragma once
// Random valid graphs driven by the op registry. A graph is built from a recipe: a list of steps,
// each naming an op and a seed. Building never fails: a step whose op cannot apply (its sample
// refuses the chosen value, or its result would be non-finite or huge) is skipped. So any sub-list of
// a recipe, which is what RapidCheck tries while shrinking, still builds a valid, smaller graph.
#include <rapidcheck.h>

#include <cstdint>
#include <ostream>
#include <set>
#include <span>
#include <string>
#include <vector>

#include "support/library.h"

namespace tg::testing {

struct Step {
  std::uint32_t op_pick = 0;
  std::uint64_t seed = 0;
};
// How RapidCheck prints a step in a counterexample (found by argument-dependent lookup).
void showValue(const Step& step, std::ostream& os);

struct GraphCase {
  Graph graph;
  TensorMap inputs;
  // f32 inputs holding discrete values (operands of equal()): moving them by a finite-difference step
  // would change a comparison, so gradient checks hold them fixed.
  std::set<std::string> frozen;
};

// How large a generated graph may get. The default profile draws dims 1-8 (samples of at most 512
// elements). A boundary profile draws dims from the kernels' boundary sets (SizeProfile); each
// step is then skipped when one of its tensors would exceed size.max_elements, when its work
// (output elements times the op's reduction length) would exceed max_step_work, or when the graph's
// values together would exceed max_graph_elements: the bounds that keep a CI run's time.
//
// float_dtypes: the float dtypes a graph's values may have. Each step draws one for the float
// inputs its sample leaves free (sample_in_dtype); a step reading a pooled float value sometimes
// casts it to another of these dtypes first (a cast node: where dtypes meet, the graph says so);
// a step whose inputs or result would have another float dtype (a creation op's or a cast's own
// draw) is skipped. Finite-difference checks draw f32 only: rounding to 16 bits makes a
// difference quotient of a step function.
struct GenOptions {
  SizeProfile size;
  std::vector<DType> float_dtypes{DType::f32, DType::f16, DType::bf16};
  std::int64_t max_graph_elements = std::int64_t{1} << 19;
  std::int64_t max_step_work = std::int64_t{1} << 24;
};
// The boundary profile the property suites draw a share of their graphs with.
GenOptions boundary_options();

// What running a graph on the f64 oracle costs at most: `value_bytes` holds every value at once at
// 8 bytes an element (the oracle's wide storage; it frees dead values, so this bounds its peak),
// `work` sums every node's output elements times its op's reduction length (as max_step_work
// counts a step). Both saturate at INT64_MAX. The property suites check a case's derived graphs
// (its gradient graph, the graph with its loss) against a budget with this before running them.
struct GraphCost {
  std::int64_t value_bytes = 0;
  std::int64_t work = 0;
  GraphCost& operator+=(const GraphCost& other);
};
GraphCost graph_cost(const Graph& g);

// Every op that has a sample generator.
std::vector<OpId> sampled_ops();
GraphCase build_graph(const std::vector<Step>& steps, std::span<const OpId> ops, const GenOptions& options = {});
// A graph with one node of `op` on a sample (fresh inputs for every operand).
GraphCase build_single_op(OpId op, const OpSample& sample, SampleRng& rng);
// Whether some value of the case's graph has `dtype` (a 16-bit instance of an op whose sample drew
// only integer inputs tests nothing of that dtype).
bool holds_dtype(const GraphCase& c, DType dtype);
// The most elements any value of `g` holds.
std::int64_t largest_value(const Graph& g);
// The graph in the text format followed by every input's values, for failure messages.
std::string describe(const GraphCase& c);
std::string describe_tensor(const std::string& name, const HostTensor& t);

// Recipes of 1..max_steps steps over `ops`. Shrinking removes steps; a removed step's tensors
// leave the graph with it, so a boundary-sized graph shrinks to the one step that needs its sizes.
rc::Gen<std::vector<Step>> gen_recipe(std::size_t op_count, int max_steps);

}  // namespace tg::testing
