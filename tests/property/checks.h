#pragma once
// Numerical checks shared by the property suites: f32 vs f64 comparison under a tolerance class,
// bit-identity across thread counts, and autodiff vs central finite differences.
#include <cstdint>
#include <optional>
#include <string>

#include "graph_gen.h"
#include "support/tolerance.h"  // graph_tolerance

namespace tg::testing {

// Each returns nullopt when the check passes, or a message saying what disagreed and by how much.
std::optional<std::string> check_f32_matches_f64(const GraphCase& c);
std::optional<std::string> check_same_bits_any_thread_count(const GraphCase& c);
std::optional<std::string> check_coverage(const GraphCase& c);
std::optional<std::string> check_round_trip(const GraphCase& c);
// Directional derivative of loss = sum_k <out_k, w_k> along a random direction, vs central differences.
std::optional<std::string> check_directional_gradient(const GraphCase& c, std::uint64_t seed);
// What check_directional_gradient(c, seed) may hold and compute at most on the f64 oracle: the cost
// (graph_cost) of the graph with the projected loss, of its gradient graph and of the inputs'
// perturbed copies, summed. Built without running anything, so a case can be refused before it runs.
GraphCost directional_gradient_cost(const GraphCase& c, std::uint64_t seed);
// The memory bound of one property case (docs/testing.md, "Memory bound"): a case whose graphs
// could hold more than kMaxCaseBytes of oracle values, or take more than kMaxCaseWork element steps,
// is skipped (and tagged) before it runs.
inline constexpr std::int64_t kMaxCaseBytes = std::int64_t{1} << 29;  // 512 MiB
inline constexpr std::int64_t kMaxCaseWork = std::int64_t{1} << 28;
inline bool within_memory_bound(const GraphCost& cost) {
  return cost.value_bytes <= kMaxCaseBytes && cost.work <= kMaxCaseWork;
}
// `c` with the loss sum_k sum(out_k * proj.k) over its f32 outputs appended (proj.k data inputs
// with f32-rounded values in [-1, 1] drawn from `seed`) and differentiated against every f32 input
// of `c` (frozen ones too): one graph computing the outputs, the loss and grad.<input>. nullopt when
// `c` has no f32 output or no f32 input.
std::optional<GraphCase> projected_gradient_case(const GraphCase& c, std::uint64_t seed);
// The gradient graph of a case with outputs of the 16-bit `dtype`: loss = the sum over those
// outputs y_k of sum(cast(y_k, f32) * w.y_k) (f32 inputs in [-1, 1] drawn from `seed`),
// differentiated against the case's unfrozen inputs of that dtype, so every gradient rule runs in
// that dtype. nullopt when there is no such output or input. Compared with the oracle of the same graph, not with
// central differences: a function rounded to 16 bits is a step function.
std::optional<GraphCase> dtype_gradient_case(const GraphCase& c, DType dtype, std::uint64_t seed);
// The full Jacobian of a small single-op graph, column by column (finite differences) and row by
// row (autodiff with one-hot cotangents).
std::optional<std::string> check_full_jacobian(const GraphCase& c);

}  // namespace tg::testing
