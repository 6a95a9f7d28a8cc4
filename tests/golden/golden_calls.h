#pragma once
// What a golden case's `call` traces. A call that names a registry op is that op in its IR form:
// one node with the case's inputs and the case's attributes (converted to the op's attribute kinds:
// an integer where a real is declared, a dtype string where a dtype is), derived from the registry
// with nothing to write here. Only calls whose front-end differs from the IR (scalar operands,
// negative axes and axis lists, composites such as layer_norm) have explicit entries: each
// tests/golden/calls_<module>.cpp registers those of tools/goldens/<module>.py through a static
// CallRegistration, so the table follows the files and has no list of its own.
#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "golden_file.h"
#include "support/library.h"

namespace tg::golden {

// An explicit entry: receives the inputs in the case's order (traced inside a TracingScope).
using GoldenCall = std::function<Tensor(const std::vector<Tensor>& inputs, const Attrs& attrs)>;

struct ExplicitCall {
  GoldenCall fn;
  std::string module;  // the tools/goldens module whose cases use it
};
using CallTable = std::map<std::string, ExplicitCall, std::less<>>;

// One per calls_<module>.cpp, at namespace scope: `const CallRegistration kCalls("reduce", add_calls);`.
// `add` puts the module's entries into the map it receives; a name two modules register makes
// call_table() throw naming both.
using CallEntries = std::map<std::string, GoldenCall, std::less<>>;
class CallRegistration {
 public:
  using AddFn = void (*)(CallEntries& entries);
  CallRegistration(std::string module, AddFn add);
};

// Every explicit entry, built on first use from the registrations. Throws tg::Error naming the call
// and both modules when two modules register one name.
const CallTable& call_table();

// Traces `call` on `inputs`: its explicit entry, else the registry op of that name (emit_op).
// Throws tg::Error naming the call when it is neither.
Tensor trace_call(std::string_view call, const std::vector<Tensor>& inputs, const Attrs& attrs);

// Emits `op` with `inputs` and `attrs` converted to the op's attribute kinds, as a front-end would.
// Throws tg::Error naming the op and the attribute when an attribute is not one of the op's.
Tensor emit_op(OpId op, const std::vector<Tensor>& inputs, const Attrs& attrs);

// The forward graph of a case (its inputs, output "y") and, when the file holds gradients, the graph
// of the gradients of loss = sum(y * golden.proj) with respect to the inputs that have grad lines
// (outputs y, loss, grad.<input>). The loss nodes and their gradient nodes carry harness_site().
struct Traced {
  Graph forward;
  std::optional<Graph> gradient;
};
inline constexpr const char* kProjInput = "golden.proj";  // not a valid golden input name: no clash
Traced trace_case(const GoldenCase& c);
const CallSite& harness_site();

// Attribute helpers for explicit entries. Golden files write 2 for an integer and 2.0 for a real;
// number() takes either.
double number(const Attrs& attrs, std::string_view name);
std::optional<double> optional_number(const Attrs& attrs, std::string_view name);
std::optional<std::int64_t> optional_integer(const Attrs& attrs, std::string_view name);
bool boolean_or(const Attrs& attrs, std::string_view name, bool fallback);
// Throws tg::Error naming the call unless there are exactly `count` inputs.
void require_inputs(const std::vector<Tensor>& inputs, std::size_t count, std::string_view call);

}  // namespace tg::golden
